//! Scenario inputs added for the FLMS experiments (issue 4): VM classes and reserved
//! vCPUs, a workload's guest vCPU placement, IOzone read/write with record sizes, the
//! cross-socket share of migrations, and metrics measured in their own run of a case.

mod common;
use common::{run_checked as go, scenario_err as err};

fn vm(extra: &str, workloads: &str) -> String {
    format!(
        "duration = \"2s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"credit\"\n[[vm]]\nname = \"vm1\"\nvcpus = 2\n{extra}\n{workloads}"
    )
}

#[test]
fn bad_classes_and_reserved_vcpus_are_refused_naming_the_key() {
    let e = err(&vm("class = \"io\"", ""));
    assert!(e.contains("vm[0].class") && e.contains("\"mixvm\""), "{e}");
    let e = err(&vm("class = \"lsvm\"\nreserved_vcpus = 1", ""));
    assert!(
        e.contains("vm[0].reserved_vcpus") && e.contains("mixvm"),
        "{e}"
    );
    let e = err(&vm("class = \"mixvm\"\nreserved_vcpus = 2", ""));
    assert!(
        e.contains("vm[0].reserved_vcpus") && e.contains("allowed 1 to 1"),
        "{e}"
    );
    let e = err(&vm("", "").replace("vcpus = 2", "vcpus = 1\nclass = \"mixvm\""));
    assert!(
        e.contains("vm[0].class") && e.contains("at least 2 vCPUs"),
        "{e}"
    );
}

#[test]
fn latency_vcpus_follow_the_class() {
    let sc = common::scenario(&vm("class = \"mixvm\"", ""));
    let v = &sc.vms[0];
    assert!(v.is_latency_vcpu(0) && !v.is_latency_vcpu(1));
    let sc = common::scenario(&vm("class = \"lsvm\"", ""));
    assert!(sc.vms[0].is_latency_vcpu(0) && sc.vms[0].is_latency_vcpu(1));
    let sc = common::scenario(&vm("", ""));
    assert!(!sc.vms[0].is_latency_vcpu(0));
}

#[test]
fn a_workload_placed_on_one_vcpu_runs_only_there() {
    let s = go(&vm(
        "",
        "[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\nvcpus = [1]",
    ));
    let v = &s.vms[0].vcpus;
    assert_eq!(v[0].cpu_time_s, 0.0, "vCPU 0 has no thread");
    assert!(v[1].cpu_time_s > 1.9, "{}", v[1].cpu_time_s);
    // Default placement: one thread per vCPU.
    let s = go(&vm(
        "",
        "[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2",
    ));
    assert!(s.vms[0].vcpus.iter().all(|v| v.cpu_time_s > 1.9));
    let e = err(&vm(
        "",
        "[[vm.workload]]\nkind = \"stress-ng\"\nvcpus = [2]",
    ));
    assert!(e.contains("vm[0].workload[0].vcpus[0]"), "{e}");
    let e = err(&vm(
        "",
        "[[vm.workload]]\nkind = \"stress-ng\"\nvcpus = [1, 1]",
    ));
    assert!(e.contains("listed twice"), "{e}");
}

/// On an idle host IOzone's throughput is the record over (disk time + copy time).
#[test]
fn iozone_throughput_is_bytes_over_disk_and_copy_time() {
    let w = |test: &str| {
        format!("[[vm.workload]]\nkind = \"iozone\"\ntest = \"{test}\"\nrecord_kib = 1024\ndisk_mb_per_s = 100")
    };
    let s = go(&vm("", &w("read")));
    let got = s.vms[0].workloads[0].throughput_kbps.unwrap();
    let rec = 1024.0 * 1024.0;
    let per_record_s = rec / 100e6 + rec / 2e9;
    let want = 1024.0 / per_record_s;
    assert!(
        (got / want - 1.0).abs() < 0.02,
        "read {got} KB/s, want {want}"
    );
    // Writes: 51 records copied, then one writeback of them (0.56 s a loop: a longer run
    // so that the loops that complete measure the rate).
    let s = go(&vm("", &w("write")).replace("duration = \"2s\"", "duration = \"57s\""));
    let got = s.vms[0].workloads[0].throughput_kbps.unwrap();
    let flush = 51.0 * rec;
    let want = 51.0 * 1024.0 / (flush / 100e6 + flush / 2e9);
    assert!(
        (got / want - 1.0).abs() < 0.1,
        "write {got} KB/s, want {want}"
    );
    let e = err(&vm(
        "",
        "[[vm.workload]]\nkind = \"iozone\"\ntest = \"read\"",
    ));
    assert!(e.contains("record_kib"), "{e}");
    // Without record_kib: seed 003's flush model, no byte throughput.
    let s = go(&vm("", "[[vm.workload]]\nkind = \"iozone\""));
    assert!(s.vms[0].workloads[0].throughput_kbps.is_none());
}

#[test]
fn cross_socket_share_counts_moves_off_the_socket() {
    let s = go("duration = \"2s\"\n[host]\nsockets = 2\ncores_per_socket = 2\n[scheduler]\nname = \"credit\"\n[[vm]]\nname = \"vm1\"\nvcpus = 6\n[[vm.workload]]\nkind = \"lookbusy\"\nutilization = 60\nthreads = 6");
    let m = &s.host.migrations;
    assert!(m.total > 0 && m.other_socket > 0, "{m:?}");
    let share = m.cross_socket_share.unwrap();
    let want = (m.other_socket + m.other_numa) as f64 / m.total as f64;
    assert!((share - want).abs() < 1e-12);
}

/// flms-balance measures sysbench in its own run of each case: the metric's edits apply
/// on top of the case's.
#[test]
fn a_metric_with_edits_runs_its_own_scenario() {
    let e = vcpulab_core::repro::find("flms-balance").unwrap();
    let case = e.cases.iter().find(|c| c.id == "credit/numa").unwrap();
    let sysbench = e
        .metrics
        .iter()
        .find(|m| m.name == "sysbench_prime_s")
        .unwrap();
    let base = vcpulab_core::repro::case_scenario(&e, case).unwrap();
    let own = vcpulab_core::repro::metric_scenario(&e, case, sysbench).unwrap();
    assert_eq!(base.vms[0].workloads[0].kind, "lookbusy");
    assert_eq!(own.vms[0].workloads[0].kind, "sysbench-cpu");
    assert_eq!(own.host.numa_nodes, 2, "the case's edits still apply");
    let rows = vcpulab_core::repro::run_case(&e, "credit/numa", None).unwrap();
    let prime = rows
        .iter()
        .find(|r| r.metric == "sysbench_prime_s")
        .unwrap();
    assert!(prime.sim.is_some_and(|s| s > 1.0), "{prime:?}");
}
