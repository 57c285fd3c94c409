//! Every scenario file shipped in the repository validates and runs briefly, so examples
//! and benchmark scenarios never rot.

use std::path::{Path, PathBuf};
use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::time::SimDuration;
use vcpulab_core::Scenario;

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            // scenarios/kvm holds real-KVM harness scenarios (`vcpulab kvm run`), tested there.
            if p.file_name().unwrap() != "kvm" {
                toml_files(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "toml") && p.file_name().unwrap() != "experiment.toml" {
            out.push(p);
        }
    }
}

#[test]
fn every_shipped_scenario_validates_and_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for d in ["scenarios", "benches"] {
        toml_files(&root.join(d), &mut files);
    }
    files.sort();
    assert!(files.len() >= 5, "found only {files:?}");
    for f in files {
        // Sweep files (a `base` scenario plus axes) are checked by the sweep tests.
        let text = std::fs::read_to_string(&f).unwrap();
        if text.parse::<toml::Table>().is_ok_and(|t| t.contains_key("base")) {
            continue;
        }
        let mut sc = Scenario::from_file(f.to_str().unwrap()).unwrap_or_else(|e| panic!("{e}"));
        // A short run is enough to prove it runs; the full runs are benchmarks.
        sc.duration = SimDuration::from_ms(50);
        sc.warmup = SimDuration::ZERO;
        let opts = RunOptions { check_invariants: true, ..Default::default() };
        run(&sc, None, &opts).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
}
