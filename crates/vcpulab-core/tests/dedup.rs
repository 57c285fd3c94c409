//! The `dedup` preset (PARSEC dedup's pipeline as a finite run): it processes all of its
//! input and reports when it finished, the same scenario and seed give the same bytes,
//! and its locks are contended more when its vCPUs share pCPUs with other VMs.

use vcpulab_core::api::{run, summary_json, RunOptions};
use vcpulab_core::summary::Summary;
use vcpulab_core::Scenario;

fn checked() -> RunOptions {
    RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

/// `vms` VMs of 8 vCPUs, each running dedup over `input_mib`, on 8 pCPUs (CFS with a
/// cgroup per VM, KVM 5.6 rules), without host noise: a host interrupt or kernel thread
/// that lands in a serial stage's mutex makes the other threads sleep on it too (the
/// default noise adds ~40 wake-ups to the one VM's 3 at seed 1), which would blur what
/// overcommit adds.
fn scenario(vms: u32, input_mib: u32, seed: u64) -> Scenario {
    let mut text = format!(
        r#"
duration = "4s"
seed = {seed}
[host]
cores_per_socket = 8
base_ghz = 2.67
[host.noise]
enabled = false
[scheduler]
name = "cfs"
group_per_vm = true
[kvm]
version = "5.6"
"#
    );
    for i in 0..vms {
        text.push_str(&format!(
            r#"
[[vm]]
name = "d{i}"
vcpus = 8
start_jitter = "20ms"
[[vm.workload]]
kind = "dedup"
input_mib = {input_mib}
"#
        ));
    }
    Scenario::from_toml_str(&text, "dedup.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// Batches of 20 chunks of 4 KiB in `input_mib`, as the preset counts them.
fn batches(input_mib: u64) -> u64 {
    (input_mib * 1024).div_ceil(80)
}

/// Every batch is processed once and the run reports when the last one was. With 8
/// threads that all start at the fragment mutex, a thread that slept on it used to take
/// a second batch when it retried, and the workload never finished.
#[test]
fn dedup_processes_all_its_input_once_and_reports_its_completion() {
    let s = run(&scenario(1, 8, 1), None, &checked()).unwrap();
    let w = &s.vms[0].workloads[0];
    assert_eq!(w.kind, "dedup");
    assert_eq!(w.threads, 8, "one thread per vCPU by default (PARSEC's -t)");
    assert_eq!(w.completed, batches(8));
    let done = w.completion_s.expect("a finite run reports its completion");
    // 103 batches of ~2.8 ms of work on 8 vCPUs of their own: ~36 ms, and never less
    // than the work divided over the vCPUs.
    assert!(done > 0.030 && done < 0.060, "completion {done} s");
}

#[test]
fn dedup_is_deterministic() {
    let a = run(&scenario(2, 4, 7), None, &RunOptions::default()).unwrap();
    let b = run(&scenario(2, 4, 7), None, &RunOptions::default()).unwrap();
    assert_eq!(summary_json(&a), summary_json(&b));
}

/// Sleeping-mutex contention: every wake-up in these runs is a mutex release waking a
/// sleeper (the preset has no timers or I/O), counted per batch processed.
fn contention(s: &Summary) -> f64 {
    let done: u64 = s.vms.iter().map(|v| v.workloads[0].completed).sum();
    s.event_counts.thread_wakeups as f64 / done as f64
}

/// One 8-vCPU VM alone on 8 pCPUs, then four of them: with 4 vCPUs per pCPU a thread
/// holding the serial stages' mutexes is often preempted with its vCPU, and the others
/// sleep on the mutex meanwhile. Over three seeds, contention per batch is several times
/// the uncontended run's, and the run takes about four times as long.
#[test]
fn dedup_lock_contention_grows_when_its_vcpus_are_overcommitted() {
    let (mut alone, mut shared) = (0.0, 0.0);
    for seed in 1..=3 {
        let a = run(&scenario(1, 64, seed), None, &checked()).unwrap();
        let b = run(&scenario(4, 64, seed), None, &checked()).unwrap();
        alone += contention(&a);
        shared += contention(&b);
        let t_alone = a.vms[0].workloads[0].completion_s.unwrap();
        for v in &b.vms {
            let t = v.workloads[0].completion_s.unwrap();
            assert!(
                t > 3.0 * t_alone && t < 5.0 * t_alone,
                "seed {seed}: {t} s shared, {t_alone} s alone"
            );
        }
    }
    assert!(
        shared > 4.0 * alone && shared > 0.01,
        "mutex wake-ups per batch: {shared} overcommitted, {alone} alone (sums over 3 seeds)"
    );
}
