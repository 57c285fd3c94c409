//! Guest sleeping mutexes (`kind = "mutex"`) and the guest's lazy TLB mode for
//! shootdown IPIs (`op = "ipi"` to `all`).

use vcpulab_core::api::{run, RunOptions};
use vcpulab_core::time::SimDuration;
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
base_ghz = 2.5
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
/// then a sleep longer than the run). It acknowledges vCPU 0's shootdowns while it
/// computes, then exactly one more once idle (which wakes it; it leaves the mm and halts
/// again), and none after that, however long the run.
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
    let run_for = |ms: u64| {
        let mut sc = sc.clone();
        sc.duration = SimDuration::from_ms(ms);
        run(&sc, None, &checked()).unwrap()
    };
    let (half, full) = (run_for(500), run_for(1000));
    let sent = full.event_counts.ipis_sent;
    let during_compute = 10_000 / 50; // about one per 50 us for 10 ms
    assert!(
        sent >= during_compute / 2 && sent <= during_compute + 10,
        "{sent} shootdowns sent to vCPU 1"
    );
    // Out of the mm after its one idle shootdown: the second half-second sends none.
    assert_eq!(half.event_counts.ipis_sent, sent);
    // Halted when its thread slept, woken once by that shootdown, halted again.
    for s in [&half, &full] {
        assert_eq!(s.vms[0].vcpus[1].halts, 2);
    }
}

/// Paravirtual spinlocks: two threads on two vCPUs (no overcommit) take one ticket
/// spinlock in the guest kernel and hold it 1 ms. Without pv spinlocks the waiter spins
/// the whole time (about half of all vCPU time is spin). With them it spins the
/// threshold (393,216 cycles at 2.5 GHz: ~157 us), halts in pv_wait, and the releaser's
/// kick wakes it: about one pv_wait and one kick per acquisition, spin ~157 us each.
#[test]
fn pv_spinlock_waiters_spin_the_threshold_then_halt_until_kicked() {
    let prog = |pv: &str| {
        scenario(&format!(
            r#"
[[vm]]
name = "vm"
vcpus = 2
{pv}
[[vm.workload]]
kind = "program"
threads = 2
ops = [
  {{ op = "lock", lock = "l", hold = "1ms" }},
]
"#
        ))
    };
    let spin = run(&prog(""), None, &checked()).unwrap();
    let pv = run(&prog("pv_spinlock = true"), None, &checked()).unwrap();
    let (a, b) = (&spin.vms[0], &pv.vms[0]);
    assert!(
        a.spin_time_s > 0.8,
        "plain: the waiter spins through every hold: {}",
        a.spin_time_s
    );
    let waits: u64 = b.vcpus.iter().map(|v| v.pv_waits).sum();
    let kicks: u64 = b.vcpus.iter().map(|v| v.pv_kicks).sum();
    let acquisitions = (b.throughput.unwrap() * 1.0) as u64; // loops/s over 1 s
    assert!(
        waits + 5 >= acquisitions && waits <= acquisitions + 5,
        "{waits} waits, {acquisitions} acquisitions"
    );
    assert!(
        kicks + 5 >= waits && kicks <= waits,
        "{kicks} kicks for {waits} waits"
    );
    let per_wait = b.spin_time_s / waits as f64;
    assert!(
        (140e-6..175e-6).contains(&per_wait),
        "spin per pv_wait {per_wait} s"
    );
    assert!(
        b.halted_time_s > 0.6,
        "the waiter's vCPU sleeps: {}",
        b.halted_time_s
    );
    let plain_waits: u64 = a.vcpus.iter().map(|v| v.pv_waits).sum();
    assert_eq!(plain_waits, 0);
}

/// pv_spin_threshold only with pv_spinlock, and the error names the field.
#[test]
fn pv_spin_threshold_needs_pv_spinlock() {
    let text = r#"
duration = "1s"
[host]
cores_per_socket = 1
[scheduler]
name = "cfs"
[[vm]]
name = "vm"
vcpus = 1
pv_spin_threshold = 1000
"#;
    let e = Scenario::from_toml_str(text, "x.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pv_spin_threshold") && e.contains("pv_spinlock"),
        "{e}"
    );
}

/// The distinction `vcpulab kvm compare`'s barrier rows depend on (issue 27): with more
/// vCPUs than pCPUs, the vCPUs that have not run yet are outside the mm. A shootdown
/// (`all`) skips them, so the two vCPUs that run first interrupt only each other. Both
/// are always running, so they acknowledge at once and loop freely until the first tick.
/// An IPI to every vCPU by index (smp_call_function to all CPUs, wait = 1) waits until
/// each target has run, so every loop waits for a tick.
#[test]
fn a_listed_ipi_waits_for_vcpus_that_have_not_run_a_shootdown_does_not() {
    let run_with = |targets: &str| {
        let text = format!(
            r#"
duration = "20ms"
seed = 1
[host]
cores_per_socket = 2
[scheduler]
name = "eevdf"
tick = "4ms"
[[vm]]
name = "guest"
vcpus = 4
[[vm.workload]]
kind = "program"
threads = 4
ops = [{{ op = "compute", duration = "30ns" }}, {{ op = "ipi", targets = {targets} }}]
"#
        );
        let sc = Scenario::from_toml_str(&text, "barrier.toml").unwrap_or_else(|e| panic!("{e}"));
        let s = run(&sc, None, &checked()).unwrap();
        s.vms[0].throughput.unwrap() * 0.020 // loops in the 20 ms run
    };
    let shootdown = run_with("\"all\"");
    assert!(
        shootdown > 100_000.0,
        "vCPUs 0 and 1 loop freely until 2 and 3 first run: {shootdown} loops"
    );
    let listed = run_with("[0, 1, 2, 3]");
    // Each thread completes at most one loop per tick (4 ms): 4 threads x 5 ticks.
    assert!(
        listed <= 20.0,
        "every loop waits for the descheduled vCPUs: {listed} loops"
    );
    assert!(listed >= 2.0, "rounds still complete: {listed} loops");
}
