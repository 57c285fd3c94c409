//! Golden tests: a scenario plus seed and its expected summary, byte for byte.
//! After an intended change of results, regenerate with `VCPULAB_BLESS=1 cargo test`
//! and review the diff of `tests/golden/*.json` like any other change.

use std::path::Path;
use vcpulab_core::api::{run_file, summary_json, RunOptions};

fn check(name: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let scenario = dir.join(format!("{name}.toml"));
    let expected_path = dir.join(format!("{name}.json"));
    let opts = RunOptions {
        check_invariants: true,
        ..Default::default()
    };
    let got = summary_json(&run_file(scenario.to_str().unwrap(), None, &opts).unwrap()) + "\n";
    if std::env::var_os("VCPULAB_BLESS").is_some() {
        std::fs::write(&expected_path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&expected_path).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with VCPULAB_BLESS=1 to create it",
            expected_path.display()
        )
    });
    if got != want {
        let diff: Vec<String> = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(10)
            .map(|(i, (a, b))| format!("line {}: got {a:?}, want {b:?}", i + 1))
            .collect();
        panic!(
            "{name}: summary differs from the golden file:\n{}",
            diff.join("\n")
        );
    }
}

#[test]
fn golden_locks_ipi_rr() {
    check("locks-ipi-rr");
}

#[test]
fn golden_server_hyperv_smt() {
    check("server-hyperv-smt");
}
