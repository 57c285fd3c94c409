//! The proposed semantics-aware directed yield series end to end (eevdf `yield_series`,
//! `[kvm] ipi_aware_yield`): on a small overcommitted host each side acts and counts what
//! it does, "off" is byte-for-byte upstream, 1:1-pinned VMs leave the scheduler side
//! inert, a spinner waiting for a unicast IPI boosts its receiver, and bad keys are
//! refused with the key and the allowed values.

use vcpulab_core::api::{run, summary_json, RunOptions};
use vcpulab_core::summary::Summary;
use vcpulab_core::Scenario;

fn checked() -> RunOptions {
    RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

/// 2 pCPUs, two VMs of 4 vCPUs (EEVDF 6.19, a cgroup per VM, KVM PLE); each vCPU runs
/// `ops`. `sched` and `kvm` are extra lines of those tables, `vm` of each VM.
fn scenario(sched: &str, kvm: &str, vm: &str, ops: &str) -> Scenario {
    let one = |name: &str| {
        format!(
            r#"
[[vm]]
name = "{name}"
vcpus = 4
start_jitter = "1ms"
{vm}
[[vm.workload]]
kind = "program"
threads = 4
ops = [ {ops} ]
"#
        )
    };
    let text = format!(
        r#"
duration = "40ms"
seed = 1
[host]
cores_per_socket = 2
[scheduler]
name = "eevdf"
group_per_vm = true
buddy_rule = "6.19"
{sched}
[kvm]
version = "6.19"
{kvm}
{}{}"#,
        one("a"),
        one("b")
    );
    Scenario::from_toml_str(&text, "yield-series.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Kernel work under one ticket spinlock: lock holders get preempted, waiters PLE-exit.
const LOCKS: &str = r#"{ op = "compute", duration = "20us", mode = "kernel" },
    { op = "lock", lock = "l", hold = "10us" }"#;

fn counter(s: &Summary, name: &str) -> Option<u64> {
    s.scheduler_counters
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| *v)
}

#[test]
fn off_is_upstream_and_each_version_acts_and_counts() {
    let base = run(&scenario("", "", "", LOCKS), None, &checked()).unwrap();
    let off = run(
        &scenario(r#"yield_series = "off""#, "", "", LOCKS),
        None,
        &checked(),
    )
    .unwrap();
    assert_eq!(summary_json(&base), summary_json(&off));
    assert!(counter(&base, "deboost_applied").is_none());
    assert!(base.vms[0].ple.as_ref().unwrap().yield_successes > 0);

    let v2 = run(
        &scenario(r#"yield_series = "v2""#, "", "", LOCKS),
        None,
        &checked(),
    )
    .unwrap();
    assert!(counter(&v2, "deboost_applied").unwrap() > 0);
    assert!(counter(&v2, "deboost_rate_limited").unwrap() > 0);
    assert_eq!(counter(&v2, "deboost_debounced"), Some(0));
    assert_ne!(summary_json(&v2), summary_json(&base));

    let v3 = run(
        &scenario(r#"yield_series = "v3""#, "", "", LOCKS),
        None,
        &checked(),
    )
    .unwrap();
    assert!(counter(&v3, "lag_credit_levels").unwrap() > 0);
    assert!(counter(&v3, "forced_resched").unwrap() > 0);
    assert!(counter(&v3, "deboost_applied").is_none());
}

/// Pinned so that no two vCPUs of one VM share a pCPU (4 pCPUs, vCPU i of each VM on
/// pCPU i), the scheduler side never acts: every target is on another run queue.
#[test]
fn one_to_one_pinning_leaves_the_scheduler_side_inert() {
    let pinned = r#"affinity = ["0", "1", "2", "3"]"#;
    for (series, name) in [("v2", "deboost_applied"), ("v3", "lag_credit_levels")] {
        let line = format!("yield_series = \"{series}\"");
        // Unpinned on 2 pCPUs the series acts (see the test above); here each of 4
        // pCPUs holds vCPU i of both VMs.
        let sc = Scenario::from_toml_str(
            &format!(
                r#"
duration = "40ms"
seed = 1
[host]
cores_per_socket = 4
[scheduler]
name = "eevdf"
group_per_vm = true
buddy_rule = "6.19"
{line}
[kvm]
version = "6.19"
[[vm]]
name = "a"
vcpus = 4
start_jitter = "1ms"
{pinned}
[[vm.workload]]
kind = "program"
threads = 4
ops = [ {LOCKS} ]
[[vm]]
name = "b"
vcpus = 4
start_jitter = "1ms"
{pinned}
[[vm.workload]]
kind = "program"
threads = 4
ops = [ {LOCKS} ]
"#
            ),
            "pinned.toml",
        )
        .unwrap();
        let s = run(&sc, None, &checked()).unwrap();
        assert!(
            s.vms[0].ple.as_ref().unwrap().yield_successes > 0,
            "{series}"
        );
        assert_eq!(counter(&s, name), Some(0), "{series}");
        let other = if series == "v2" {
            "deboost_other_rq"
        } else {
            "lag_credit_other_rq"
        };
        assert!(counter(&s, other).unwrap() > 0, "{series}");
    }
}

/// vCPU 0 of each VM sends a unicast IPI to vCPU 1 and spins for the ack while busy
/// vCPUs keep vCPU 1 off its pCPU: the PLE handler boosts the confirmed receiver, and the
/// ack (EOI) clears the sender's pending IPI. Without the switch there is no such record.
#[test]
fn a_spinner_waiting_for_a_unicast_ipi_boosts_its_receiver() {
    let ops = r#"{ op = "compute", duration = "50us", mode = "kernel" },
        { op = "ipi", targets = [1] }"#;
    let s = run(
        &scenario("", "ipi_aware_yield = true", "", ops),
        None,
        &checked(),
    )
    .unwrap();
    let ia = s.vms[0]
        .ple
        .as_ref()
        .unwrap()
        .ipi_aware_yield
        .as_ref()
        .expect("ipi_aware_yield gives its counters");
    assert!(ia.ipis_tracked > 0);
    assert!(ia.eoi_cleared > 0);
    assert!(ia.boost_ipi_receiver > 0, "{ia:?}");
    let upstream = run(&scenario("", "", "", ops), None, &checked()).unwrap();
    assert!(upstream.vms[0]
        .ple
        .as_ref()
        .unwrap()
        .ipi_aware_yield
        .is_none());
    assert!(!summary_json(&upstream).contains("ipi_aware_yield"));
}

#[test]
fn bad_keys_are_refused_with_the_key_and_what_is_allowed() {
    let err = |sched: &str, kvm: &str| {
        let text = format!(
            "duration = \"1ms\"\n[host]\ncores_per_socket = 1\n[scheduler]\nname = \"eevdf\"\n{sched}\n[kvm]\n{kvm}\n[[vm]]\nname = \"a\"\nvcpus = 1\n"
        );
        Scenario::from_toml_str(&text, "bad.toml")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = err(r#"yield_series = "v4""#, "");
    assert!(
        e.contains("yield_series") && e.contains("\"v2\"") && e.contains("\"v3\""),
        "{e}"
    );
    let e = err("yield_series = \"v3\"\nbuddy_rule = \"6.6\"", "");
    assert!(e.contains("yield_series") && e.contains("6.6"), "{e}");
    assert!(err("yield_series = \"v2\"\nbuddy_rule = \"6.6\"", "").is_empty());
    let e = err("", "ipi_window = \"10ms\"");
    assert!(
        e.contains("ipi_window") && e.contains("ipi_aware_yield = true"),
        "{e}"
    );
    let e = err("", "version = \"4.15\"\nipi_aware_yield = true");
    assert!(e.contains("ipi_aware_yield"), "{e}");
    for e in [
        err(r#"yield_series = "v4""#, ""),
        err("", "ipi_window = \"10ms\""),
    ] {
        assert!(
            !e.contains("Some(") && !e.contains("Err("),
            "Debug text in {e}"
        );
    }
}
