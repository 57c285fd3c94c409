//! Every scenario file shipped in the repository validates and runs briefly, so examples
//! and benchmark scenarios never rot.

mod common;

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::time::SimDuration;
use vcpulab_core::Scenario;

#[test]
fn every_shipped_scenario_validates_and_runs() {
    let files = common::shipped_toml_files(false);
    assert!(files.len() >= 5, "found only {files:?}");
    for f in files {
        if common::is_sweep_file(&std::fs::read_to_string(&f).unwrap()) {
            continue;
        }
        let mut sc = Scenario::from_file(f.to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"));
        // A short run is enough to prove it runs; the full runs are benchmarks.
        sc.duration = SimDuration::from_ms(50);
        sc.warmup = SimDuration::ZERO;
        let opts = RunOptions {
            check_invariants: true,
            ..Default::default()
        };
        run(&sc, None, &opts).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}
