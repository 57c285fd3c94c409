//! Guest sleeping mutexes (`kind = "mutex"`) and the guest's lazy TLB mode for
//! shootdown IPIs (`op = "ipi"` to `all`).

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::Scenario;

fn checked() -> RunOptions {
    RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

fn scenario(body: &str) -> Scenario {
    let text = format!(
        r#"
duration = "1s"
seed = 5
[host]
cores_per_socket = 4
[scheduler]
name = "cfs"
[kvm]
version = "4.15"
{body}
"#
    );
    Scenario::from_toml_str(&text, "sync.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Four threads on four vCPUs (no overcommit) take one mutex, each holding it 100 us
/// between 10 us of other work: the lock is the bottleneck, so the loops complete at
/// most once per 100 us; a waiter sleeps (its vCPU halts) instead of spinning, so there
/// is no spin time and no PLE exit, and the sleepers are woken one per release.
#[test]
fn mutex_waiters_sleep_and_the_lock_serialises_the_holders() {
    let sc = scenario(
        r#"
[[vm]]
name = "vm"
vcpus = 4
[[vm.workload]]
kind = "program"
threads = 4
ops = [
  { op = "compute", duration = "10us" },
  { op = "lock", lock = "m", hold = "100us", kind = "mutex" },
]
"#,
    );
    let s = run(&sc, None, &checked()).unwrap();
    let vm = &s.vms[0];
    let loops = vm.throughput.unwrap();
    assert!(
        loops <= 10_000.0 * 1.001,
        "the mutex admits one holder at a time: {loops}/s"
    );
    assert!(
        loops >= 9_000.0,
        "the mutex is never left idle for long: {loops}/s"
    );
    assert_eq!(vm.spin_time_s, 0.0);
    assert_eq!(vm.ple.as_ref().map_or(0, |p| p.exits), 0);
    assert!(
        vm.halted_time_s > 1.0,
        "waiters' vCPUs halt: {}",
        vm.halted_time_s
    );
    assert!(s.event_counts.thread_wakeups > 5_000);
}

/// A shootdown (`all`) reaches only vCPUs that have run the process: a vCPU that never
/// ran a thread is not in the mm's cpumask. An explicit target list is sent as written.
#[test]
fn shootdowns_skip_vcpus_outside_the_mm() {
    let prog = |targets: &str| {
        scenario(&format!(
            r#"
[[vm]]
name = "vm"
vcpus = 2
[[vm.workload]]
kind = "program"
vcpus = [0]
ops = [
  {{ op = "compute", duration = "50us" }},
  {{ op = "ipi", targets = {targets} }},
]
"#
        ))
    };
    let all = run(&prog("\"all\""), None, &checked()).unwrap();
    assert_eq!(all.event_counts.ipis_sent, 0);
    let listed = run(&prog("[1]"), None, &checked()).unwrap();
    assert!(listed.event_counts.ipis_sent > 10_000);
    assert!(listed.vms[0].halted_time_s < all.vms[0].halted_time_s);
}

/// An idle vCPU in lazy TLB mode is interrupted by a shootdown, then leaves the mm
/// until it runs a thread again: vCPU 1 runs a thread once at the start (10 ms of work,
/// then a sleep longer than the run), so of vCPU 0's many shootdowns it gets exactly one.
#[test]
fn an_idle_vcpu_takes_one_shootdown_then_leaves_the_mm() {
    let sc = scenario(
        r#"
[[vm]]
name = "vm"
vcpus = 2
[[vm.workload]]
kind = "program"
vcpus = [0]
ops = [
  { op = "compute", duration = "50us" },
  { op = "ipi" },
]
[[vm.workload]]
kind = "program"
vcpus = [1]
ops = [
  { op = "compute", duration = "10ms" },
  { op = "sleep", duration = "10s" },
]
"#,
    );
    let s = run(&sc, None, &checked()).unwrap();
    // Shootdowns while vCPU 1 computes are acknowledged at once (it runs), plus one
    // while it is idle; none after.
    let sent = s.event_counts.ipis_sent;
    let during_compute = 10_000 / 50; // about one per 50 us for 10 ms
    assert!(
        sent >= during_compute / 2 && sent <= during_compute + 10,
        "{sent} shootdowns sent to vCPU 1"
    );
}
