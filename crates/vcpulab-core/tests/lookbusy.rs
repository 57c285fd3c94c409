//! The `lookbusy` preset: lookbusy 1.4's 100 ms spin/sleep cycle and its controller, which
//! moves each spinner's busy phase by (target - the guest's measured utilisation).

mod common;
use common::{run_checked as go, scenario_err as err};

/// VM "load" (4 vCPUs, lookbusy at `util`% on 4 spinners) on `pcpus` pCPUs, with
/// `others` more copies of it; `extra` goes into each lookbusy table.
fn hosts(pcpus: u32, others: u32, util: u32, extra: &str) -> String {
    let mut s = format!(
        "duration = \"20s\"\nwarmup = \"10s\"\n[host]\ncores_per_socket = {pcpus}\n[scheduler]\nname = \"credit\"\n"
    );
    for i in 0..=others {
        s += &format!(
            "[[vm]]\nname = \"load{i}\"\nvcpus = 4\nstart_jitter = \"100ms\"\n[[vm.workload]]\nkind = \"lookbusy\"\nthreads = 4\nutilization = {util}\n{extra}\n"
        );
    }
    s
}

#[test]
fn an_uncontended_guest_settles_at_its_target_in_100_ms_cycles() {
    let s = go(&hosts(8, 0, 50, ""));
    let vm = &s.vms[0];
    // 4 vCPUs, each busy half the time: a share of 2 of 8 pCPUs.
    assert!((vm.cpu_share - 0.25).abs() < 0.01, "{}", vm.cpu_share);
    // 4 spinners x 10 cycles per second.
    let w = &vm.workloads[0];
    assert!((w.throughput - 40.0).abs() < 1.0, "{}", w.throughput);
}

#[test]
fn a_guest_that_cannot_reach_its_target_grows_its_busy_phases() {
    // Two guests at 50% on 4 vCPUs each, on 2 pCPUs: each vCPU can get 25%.
    let adaptive = go(&hosts(2, 1, 50, ""));
    let fixed = go(&hosts(2, 1, 50, "adaptive = false"));
    let halted = |s: &vcpulab_core::summary::Summary| {
        s.vms.iter().map(|v| v.halted_time_s).sum::<f64>() / (8.0 * 10.0)
    };
    let cycles = |s: &vcpulab_core::summary::Summary| {
        s.vms.iter().map(|v| v.workloads[0].throughput).sum::<f64>()
    };
    // With a fixed spin count a vCPU still sleeps 50 ms per cycle; lookbusy's controller
    // keeps lengthening the spin instead, so the vCPUs almost never halt and cycles grow.
    assert!(halted(&fixed) > 0.2, "fixed: halted {}", halted(&fixed));
    assert!(
        halted(&adaptive) < 0.05,
        "adaptive: halted {}",
        halted(&adaptive)
    );
    assert!(
        cycles(&adaptive) < 0.5 * cycles(&fixed),
        "cycles/s {} vs {}",
        cycles(&adaptive),
        cycles(&fixed)
    );
}

#[test]
fn the_controller_needs_a_guest() {
    let e = err("duration = \"1s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n[[vm]]\nname = \"g\"\nvcpus = 1\n[[host_thread]]\nname = \"bg\"\nworkload = { kind = \"lookbusy\", utilization = 30 }\n");
    assert!(
        e.contains("host_thread[0].workload") && e.contains("adaptive = false"),
        "{e}"
    );
    let e = err(&hosts(2, 0, 50, "adaptive = \"yes\""));
    assert!(e.contains("vm[0].workload[0].adaptive"), "{e}");
}

#[test]
fn a_guest_already_busier_than_the_target_shrinks_the_busy_phases() {
    // Two stress-ng threads already keep half of the guest's 4 vCPUs busy, so lookbusy
    // (which measures the whole guest) sees its 50% met and shrinks its spin towards its
    // floor: its cycles become the 50 ms sleep alone, twice as many per second.
    let with_stress = |extra: &str| {
        hosts(8, 0, 50, "").replace(
            "utilization = 50\n",
            &format!("utilization = 50\n{extra}\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\nvcpus = [0, 1]\n"),
        )
    };
    let adaptive = go(&with_stress(""));
    let fixed = go(&with_stress("adaptive = false"));
    let (a, f) = (
        adaptive.vms[0].workloads[0].throughput,
        fixed.vms[0].workloads[0].throughput,
    );
    // At most 40 with a fixed spin (4 spinners x 10 cycles/s; the two beside stress-ng
    // take longer); with the controller the spin shrinks to ~nothing: near 4 x 20.
    assert!(f <= 40.5, "fixed: {f} cycles/s");
    assert!(a > 1.8 * f, "adaptive: {a} cycles/s against fixed {f}");
}

#[test]
fn busy_phases_dirty_memory_for_kemari_like_any_compute() {
    // A Kemari-protected guest: lookbusy dirtying 50 MiB per CPU-second, and a disk write
    // every 100 ms (each a sync that copies what was dirtied since the last one).
    let guest = |extra: &str| {
        format!(
            "duration = \"5s\"\n[host]\ncores_per_socket = 4\n[scheduler]\nname = \"cfs\"\n\
             [[vm]]\nname = \"g\"\nvcpus = 2\n[[vm.workload]]\nkind = \"lookbusy\"\nthreads = 1\n\
             utilization = 50\nvcpus = [0]\n{extra}\n[[vm.workload]]\nkind = \"program\"\nvcpus = [1]\n\
             ops = [{{ op = \"sleep\", duration = \"100ms\" }}, {{ op = \"io\", latency = \"1ms\", write_kib = 4 }}]\n\
             [[host_thread]]\nname = \"kemari\"\nvm = \"g\"\nhelper = \"kemari\"\n"
        )
    };
    let paused = |extra: &str| go(&guest(extra)).vms[0].ft.as_ref().unwrap().paused_time_s;
    let (adaptive, fixed) = (
        paused("dirty_mib_per_s = 50"),
        paused("dirty_mib_per_s = 50\nadaptive = false"),
    );
    let clean = paused("");
    // ~25 MiB dirtied per second either way (the guest reaches its 50%): syncs copy it.
    assert!(
        adaptive > 4.0 * clean,
        "adaptive {adaptive} s vs clean {clean} s"
    );
    assert!(
        (adaptive / fixed - 1.0).abs() < 0.25,
        "adaptive {adaptive} s vs fixed {fixed} s"
    );
}
