//! The scheduler registry (`sched/registry.rs`): every scheduler file is listed, what it
//! declares reaches `vcpulab schedulers --json` and the run-length estimate, and the files
//! the `schedulers!` list declares stay formatted (`cargo fmt` cannot see them).

use std::path::{Path, PathBuf};
use vcpulab_core::sched::REGISTRY;

mod common;

fn sched_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sched")
}

/// A file under `sched/` that declares a scheduler (`impl Registered`) but is missing from
/// `schedulers!` would compile (an undeclared file is not compiled at all) and never run:
/// every declaring file is listed, and every listed module has its file.
#[test]
fn every_file_that_declares_a_scheduler_is_in_the_schedulers_list() {
    let modules: Vec<&str> = REGISTRY.iter().map(|e| e.module).collect();
    let mut declaring = Vec::new();
    for f in std::fs::read_dir(sched_dir()).unwrap() {
        let path = f.unwrap().path();
        // A scheduler split over a folder (credit/, fair/) declares itself in its
        // `NAME.rs`; the folder holds its parts.
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("Registered for ") && !path.ends_with("registry.rs") {
            declaring.push(path.file_stem().unwrap().to_str().unwrap().to_string());
        }
    }
    declaring.sort();
    let mut listed: Vec<String> = modules.iter().map(|m| m.to_string()).collect();
    listed.sort();
    listed.dedup();
    assert_eq!(declaring, listed);
    for m in modules {
        assert!(sched_dir().join(format!("{m}.rs")).is_file(), "{m}");
    }
}

/// `vcpulab schedulers --json` lists the registry in order, with each scheduler's
/// properties, so Python tests can filter on them as the Rust tests do.
#[test]
fn the_schedulers_json_carries_every_entry_and_its_properties() {
    let list: Vec<serde_json::Value> =
        serde_json::from_str(&vcpulab_core::api::schedulers_json()).unwrap();
    assert_eq!(list.len(), REGISTRY.len());
    for (json, e) in list.iter().zip(REGISTRY) {
        assert_eq!(json["name"], e.name);
        assert_eq!(json["description"], e.description);
        assert_eq!(json["params"].as_array().unwrap().len(), e.params.len());
        let p = &json["properties"];
        assert_eq!(p["time_sharing"], e.properties.time_sharing, "{}", e.name);
        assert_eq!(
            p["credit_accounting"], e.properties.credit_accounting,
            "{}",
            e.name
        );
        assert_eq!(p["pools"], e.properties.pools.name(), "{}", e.name);
    }
}

/// A scheduler that time-shares has slice ends or ticks: its declaration gives the
/// run-length estimate their period. With Credit's accounting that includes the tick, a
/// third of `tslice_ms` (here 30 ms: 10 ms), whatever else the scheduler adds.
#[test]
fn the_run_length_estimate_counts_every_time_sharing_schedulers_events() {
    for e in REGISTRY {
        let text = format!(
            "duration = \"12s\"\n[host]\ncores_per_socket = 4\n[scheduler]\nname = \"{}\"\n\
             [[vm]]\nname = \"v\"\nvcpus = 2\n",
            e.name
        );
        let est = vcpulab_core::api::estimate_parts(&common::scenario(&text));
        if !e.properties.time_sharing {
            assert_eq!(est.scheduler, 0.0, "{}", e.name);
            continue;
        }
        assert!(est.scheduler > 0.0, "{}: no periodic events", e.name);
        if e.properties.credit_accounting {
            let ticks = 4.0 * 12.0 / 0.010;
            assert!(
                est.scheduler >= ticks - 1.0,
                "{}: {}",
                e.name,
                est.scheduler
            );
        }
    }
}

/// rustfmt finds a crate's files by following its `mod` declarations, and does not look
/// inside macros, so the modules `schedulers!` declares are invisible to `cargo fmt`:
/// they are checked here, file by file (skipped if rustfmt is not installed).
#[test]
fn the_scheduler_files_are_formatted() {
    let version = std::process::Command::new("rustfmt")
        .arg("--version")
        .output();
    if !version.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: rustfmt is not installed");
        return;
    }
    let files: Vec<PathBuf> = REGISTRY
        .iter()
        .map(|e| sched_dir().join(format!("{}.rs", e.module)))
        .collect();
    let out = std::process::Command::new("rustfmt")
        .args(["--check", "--edition", "2021"])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run rustfmt --edition 2021 on crates/vcpulab-core/src/sched/*.rs:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
