//! Linux core scheduling (`[scheduler] core_sched`) through whole runs: "off" changes no
//! byte of a summary, cookies per VM and per vCPU force siblings idle where the shipped
//! experiment's VMs meet on a core (with the one-cookie-per-core invariant checked after
//! every event), a host without SMT leaves the key inert, and bad values or schedulers
//! are refused by name.

use vcpulab_core::api::{run, summary_json, RunOptions};
use vcpulab_core::Scenario;

const SHIPPED: &str = include_str!("../../../scenarios/reproductions/core-sched/scenario.toml");

fn checked() -> RunOptions {
    RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

/// The shipped scenario (svc beside hog on 4 x 2 threads), shortened, with `scheduler`
/// as its `[scheduler]` table body and `host` in place of its `threads_per_core` line.
fn shipped(scheduler: &str, host: &str) -> Scenario {
    let host = if host.is_empty() {
        "threads_per_core = 2"
    } else {
        host
    };
    let text = SHIPPED
        .replace("duration = \"1s\"", "duration = \"200ms\"")
        .replace("warmup = \"100ms\"", "warmup = \"20ms\"")
        .replace(
            "[scheduler]\nname = \"eevdf\"",
            &format!("[scheduler]\n{scheduler}"),
        )
        .replace("threads_per_core = 2", host);
    Scenario::from_toml_str(&text, "core-sched.toml").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn off_is_byte_identical_to_no_key() {
    for name in ["cfs", "eevdf"] {
        let plain = run(
            &shipped(&format!("name = \"{name}\""), ""),
            None,
            &checked(),
        )
        .unwrap();
        let off = shipped(&format!("name = \"{name}\"\ncore_sched = \"off\""), "");
        let off = run(&off, None, &checked()).unwrap();
        assert_eq!(summary_json(&plain), summary_json(&off), "{name}");
        assert!(!summary_json(&off).contains("core_sched"), "{name}");
    }
}

#[test]
fn cookies_force_siblings_idle_where_vms_meet() {
    for name in ["cfs", "eevdf"] {
        let mut fi = vec![];
        for mode in ["vm", "vcpu"] {
            let sc = shipped(&format!("name = \"{name}\"\ncore_sched = \"{mode}\""), "");
            let s = run(&sc, None, &checked()).unwrap_or_else(|e| panic!("{name}/{mode}: {e}"));
            let cs = s.host.core_sched.as_ref().expect("core_sched reported");
            assert_eq!(cs.forced_idle_pct_per_core.len(), 4);
            let mean = cs.forced_idle_pct_per_core.iter().sum::<f64>() / 4.0;
            assert!((mean - cs.forced_idle_pct).abs() < 1e-9, "{name}/{mode}");
            assert!(cs.forced_idle_pct > 0.0, "{name}/{mode}: no forced idle");
            let forced = s
                .scheduler_counters
                .iter()
                .find(|(k, _)| k == "core_forced_idle")
                .map_or(0, |c| c.1);
            assert!(forced > 0, "{name}/{mode}");
            fi.push(cs.forced_idle_pct);
        }
        // Per-vCPU cookies split even the hog VM's own vCPUs: more forced idle.
        assert!(fi[1] > fi[0], "{name}: vcpu {} <= vm {}", fi[1], fi[0]);
    }
}

#[test]
fn without_smt_the_key_is_inert() {
    let host = "threads_per_core = 1\nsmt_throughput = 1.0";
    let s = shipped("name = \"eevdf\"\ncore_sched = \"vcpu\"", host);
    let plain = shipped("name = \"eevdf\"", host);
    let (s, plain) = (
        run(&s, None, &checked()).unwrap(),
        run(&plain, None, &checked()).unwrap(),
    );
    assert_eq!(summary_json(&s), summary_json(&plain));
}

#[test]
fn the_key_is_refused_by_name() {
    let bad = |scheduler: &str| {
        let text = SHIPPED.replace("[scheduler]\nname = \"eevdf\"", scheduler);
        Scenario::from_toml_str(&text, "core-sched.toml")
            .unwrap_err()
            .to_string()
    };
    let e = bad("[scheduler]\nname = \"credit\"\ncore_sched = \"vm\"");
    assert!(e.contains("core_sched"), "{e}");
    assert!(e.contains("cfs or eevdf"), "{e}");
    assert!(e.contains("credit"), "{e}");
    let e = bad("[scheduler]\nname = \"eevdf\"\ncore_sched = \"smt\"");
    assert!(e.contains("core_sched") && e.contains("\"vcpu\""), "{e}");
}
