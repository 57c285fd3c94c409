//! The `flms` scheduler (FLMS: Xen Credit with latency / CPU pCPU pools): pools that hold
//! under invariant checking while they resize, ping latency next to CPU hogs, weights,
//! parameter checks and determinism.

use vcpulab_core::Scenario;

mod common;
use common::{counter, run_checked, scenario};

/// An LSVM answering pings every 5 ms (and running lookbusy at `io_busy`%, the paper's
/// 50% background) next to three NLSVMs of two CPU hogs each, on four pCPUs, SR-IOV path.
fn ping_next_to_hogs(sched: &str, io_busy: u32) -> String {
    let mut t = format!(
        r#"duration = "12s"
warmup = "2s"
[host]
cores_per_socket = 4
io_path = "direct"
[scheduler]
name = "{sched}"
[[vm]]
name = "web"
vcpus = 1
class = "lsvm"
[[vm.workload]]
kind = "ping"
interval = "5ms"
[[vm.workload]]
kind = "lookbusy"
threads = 1
utilization = {io_busy}
"#
    );
    for i in 0..3 {
        t += &format!(
            "[[vm]]\nname = \"hog{i}\"\nvcpus = 2\nclass = \"nlsvm\"\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\n"
        );
    }
    t
}

fn ping_mean(s: &vcpulab_core::summary::Summary) -> f64 {
    s.vms[0].workloads[0].latency_ms.as_ref().unwrap().mean
}

/// The paper's headline (Table 1: ping 16.9 ms under Credit, 3.9 ms under FLMS): the
/// LSVM's vCPU gets a short-slice pCPU of its own, so a ping waits for no hog's 30 ms
/// slice. Under Credit the same vCPU shares queues with six hogs and, burning about its
/// fair share with lookbusy, often wakes OVER (no BOOST) behind them. With pools disabled
/// (everyone on every pCPU) FLMS would be Credit with short slices for the LSVM and wait
/// like Credit.
#[test]
fn a_latency_vm_answers_pings_much_faster_than_under_credit() {
    let credit = run_checked(&ping_next_to_hogs("credit", 50));
    let flms = run_checked(&ping_next_to_hogs("flms", 50));
    let (c, f) = (ping_mean(&credit), ping_mean(&flms));
    assert!(f * 3.0 < c, "flms {f} ms vs credit {c} ms");
    assert!(f < 1.0, "flms {f} ms");
    // The tail shows the hogs' slices: tens of ms under Credit (50 ms here), none under
    // FLMS (with pools disabled it is Credit's).
    let p99 =
        |s: &vcpulab_core::summary::Summary| s.vms[0].workloads[0].latency_ms.as_ref().unwrap().p99;
    assert!(
        p99(&credit) > 20.0 && p99(&flms) < 1.0,
        "{} {}",
        p99(&credit),
        p99(&flms)
    );
    // One SP for the LSVM (its ~50% of a pCPU rounds to one of four), three LPs.
    assert_eq!(counter(&flms, "flms_resize_grow_sp"), 0);
    assert!(counter(&flms, "flms_dispatch_short_slice") > 1000);
    // The hogs keep the host busy and still get their share of the three LPs.
    let hogs: f64 = flms.vms[1..].iter().map(|v| v.cpu_time_s).sum();
    assert!(hogs > 0.97 * 3.0 * 10.0, "{hogs}");
}

/// Pools resize with the load and vCPUs are rebound, while the engine's
/// invariant checks (with FLMS's own: pools complementary, no vCPU queued or running
/// outside its pool unless marked for migration) hold after every event, on an SMT,
/// two-socket host with all three classes and a MixVM whose I/O runs on its reserved vCPU.
/// The I/O side (an LSVM at 3 x 90%, netperf on the MixVM's reserved vCPU) wants about 3
/// pCPUs, the CPU side about 4 of 8; the I/O side starts on one SP and grows into the LPs
/// the CPU side leaves idle (eq. 3 with both pools saturated would stay put: see the
/// header).
#[test]
fn pools_resize_and_no_vcpu_runs_outside_its_pool() {
    let text = r#"duration = "6s"
[host]
sockets = 2
cores_per_socket = 2
threads_per_core = 2
io_path = "direct"
[scheduler]
name = "flms"
[[vm]]
name = "ls"
vcpus = 3
class = "lsvm"
[[vm.workload]]
kind = "lookbusy"
threads = 3
utilization = 90
[[vm.workload]]
kind = "ping"
interval = "3ms"
[[vm]]
name = "mix"
vcpus = 3
class = "mixvm"
[[vm.workload]]
kind = "netperf"
vcpus = [0]
[[vm.workload]]
kind = "stress-ng"
threads = 2
vcpus = [1, 2]
[[vm]]
name = "cpu"
vcpus = 4
class = "nlsvm"
[[vm.workload]]
kind = "lookbusy"
threads = 4
utilization = 25
[[vm]]
name = "plain"
vcpus = 1
[[vm.workload]]
kind = "stress-ng"
threads = 1
"#;
    let s = run_checked(text);
    assert!(counter(&s, "flms_resize_grow_sp") >= 1);
    assert!(counter(&s, "flms_rebind_moved") >= 1);
    assert!(counter(&s, "flms_dispatch_short_slice") > 1000);
    assert!(
        counter(&s, "flms_balance_sibling") + counter(&s, "flms_balance_same_socket_above_a") > 0
    );
    assert!(counter(&s, "flms_victim_sp_smallest_io_boost") > 0);
    assert!(counter(&s, "flms_victim_lp_equalising_load") > 0);
    assert_eq!(counter(&s, "flms_pool_outside_affinity"), 0);
}

/// FLMS hog VMs, all NLSVMs (see `common::hogs`).
fn hogs(host: &str, vms: &[(u32, u32)]) -> String {
    common::hogs("flms", host, vms, "class = \"nlsvm\"\n")
}

/// FLMS keeps Credit's credits: CPU hogs with weights 256 and 512 overcommitting the host
/// 2:1 get CPU 1:2 within 3%, on a flat host and on an SMT two-socket one.
#[test]
fn weights_one_to_two_give_cpu_shares_one_to_two_within_three_percent() {
    for (host, vcpus) in [
        ("cores_per_socket = 4", 4),
        ("sockets = 2\ncores_per_socket = 2\nthreads_per_core = 2", 8),
    ] {
        let s = run_checked(&hogs(host, &[(vcpus, 256), (vcpus, 512)]));
        let (light, heavy) = (s.vms[0].cpu_time_s, s.vms[1].cpu_time_s);
        assert!(
            (heavy / light / 2.0 - 1.0).abs() <= 0.03,
            "{host}: {light} vs {heavy}"
        );
        assert!(s.host.utilization > 0.99, "{host}: {}", s.host.utilization);
    }
}

/// Same scenario and seed: byte-identical summary JSON; another seed: another summary;
/// checking invariants does not change the run.
#[test]
fn same_seed_gives_byte_identical_summaries() {
    let text = ping_next_to_hogs("flms", 50).replace(
        "cores_per_socket = 4",
        "sockets = 2\ncores_per_socket = 2\nthreads_per_core = 2",
    );
    let text = text.replace("duration = \"12s\"", "duration = \"3s\"");
    common::assert_deterministic(&scenario(&text));
}

/// FLMS's parameters are checked: Credit's limits, a short slice of 100 us up to the long
/// slice, a rate limit no longer than the short slice, alpha and beta within 0..1.
#[test]
fn bad_parameters_are_refused_with_their_key() {
    let base = "duration = \"1s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"flms\"\n[[vm]]\nname = \"a\"\nvcpus = 2\n";
    let bad = |extra: &str| match Scenario::from_toml_str(
        &base.replace("[[vm]]", &format!("{extra}\n[[vm]]")),
        "bad.toml",
    ) {
        Ok(_) => panic!("accepted: {extra}"),
        Err(e) => e.to_string(),
    };
    let m = bad("short_slice_us = 50");
    assert!(m.contains("scheduler.short_slice_us"), "{m}");
    let m = bad("tslice_ms = 2\nshort_slice_us = 3000");
    assert!(
        m.contains("scheduler.short_slice_us") && m.contains("long slice"),
        "{m}"
    );
    let m = bad("short_slice_us = 500");
    assert!(
        m.contains("scheduler.short_slice_us") && m.contains("rate limit"),
        "{m}"
    );
    let m = bad("short_slice_us = 500\nratelimit_us = 600");
    assert!(
        m.contains("scheduler.ratelimit_us") && m.contains("short slice"),
        "{m}"
    );
    let m = bad("alpha = 1.5");
    assert!(m.contains("scheduler.alpha"), "{m}");
    let m = bad("beta = -0.1");
    assert!(m.contains("scheduler.beta"), "{m}");
    let m = bad("ratelimit_us = 50");
    assert!(m.contains("scheduler.ratelimit_us"), "{m}");
    for ok in [
        "short_slice_us = 100\nratelimit_us = 100",
        "short_slice_us = 500\nratelimit_us = 0\nalpha = 0.5\nbeta = 1.0\nbalance_a = 0",
    ] {
        let t = base.replace("[[vm]]", &format!("{ok}\n[[vm]]"));
        Scenario::from_toml_str(&t, "ok.toml").unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

/// A latency VM pinned away from the SPs (affinity 0-1 on four pCPUs; the SP is pCPU 3)
/// keeps its affinity rather than having nowhere to run; a CPU VM pinned inside the LPs is
/// bound to its affinity's share of them. Invariants hold.
#[test]
fn a_vcpu_whose_affinity_misses_its_pool_keeps_its_affinity() {
    let text = r#"duration = "2s"
[host]
cores_per_socket = 4
[scheduler]
name = "flms"
[[vm]]
name = "pinned-ls"
vcpus = 1
class = "lsvm"
affinity = "0-1"
[[vm.workload]]
kind = "ping"
interval = "5ms"
[[vm]]
name = "cpu"
vcpus = 2
class = "nlsvm"
affinity = "1-3"
[[vm.workload]]
kind = "stress-ng"
threads = 2
"#;
    let s = run_checked(text);
    assert!(counter(&s, "flms_pool_outside_affinity") >= 1);
    assert!(s.vms[0].workloads[0].latency_ms.as_ref().unwrap().count > 300);
    // The CPU VM runs on LPs 1-2 only: two pCPUs' worth.
    assert!(s.vms[1].cpu_time_s > 3.9, "{}", s.vms[1].cpu_time_s);
}

/// The SPs follow the I/O side's load both ways: an LSVM computing on three vCPUs (a
/// finite sysbench run) next to one CPU hog grows its pool into the idle LPs, and when the
/// run is over the SPs shrink back to one and the hog's VM gets the LPs again.
#[test]
fn short_slice_pool_grows_with_io_load_and_shrinks_when_it_ends() {
    let text = r#"duration = "6s"
[host]
cores_per_socket = 4
[scheduler]
name = "flms"
[[vm]]
name = "ls"
vcpus = 3
class = "lsvm"
[[vm.workload]]
kind = "sysbench-cpu"
threads = 3
event_cost = "1ms"
events = 4500
[[vm]]
name = "cpu"
vcpus = 1
class = "nlsvm"
[[vm.workload]]
kind = "stress-ng"
threads = 1
"#;
    let s = run_checked(text);
    assert!(counter(&s, "flms_resize_grow_sp") >= 1);
    assert!(counter(&s, "flms_resize_shrink_sp") >= 1);
    assert!(counter(&s, "flms_rebind_moved") + counter(&s, "flms_rebind_in_place") >= 2);
    // 4.5 s of work on three vCPUs: 1.55 s here, as the SPs grow to three; on the one SP
    // it starts with it would take 4.5 s.
    let done = s.vms[0].workloads[0]
        .completion_s
        .expect("the sysbench run completes");
    assert!(done < 2.5, "{done}");
}
