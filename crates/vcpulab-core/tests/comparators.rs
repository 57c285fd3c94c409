//! The FLMS paper's comparators, each Xen Credit with a policy (`vslicer`, `vturbo`,
//! `io-bound`): their pools hold under the engine's invariant checks (which include each
//! scheduler's own `check`: no vCPU runs or waits outside its pool), each shortens the
//! ping latency of a latency VM next to CPU hogs against Credit on the same scenario, the
//! reserved pCPUs run only latency vCPUs, and bad parameters are refused by name.

use vcpulab_core::api::{run_full, RunOptions};
use vcpulab_core::summary::Summary;
use vcpulab_core::Scenario;

mod common;
use common::{checked, counter, run_checked, scenario, scenario_err};

const COMPARATORS: &[&str] = &["vslicer", "vturbo", "io-bound"];

/// A host of `pcpus` flat pCPUs under `scheduler` (with `params` lines), running `vms`.
/// No warmup: the policies count their set-up decisions at start, and counters are
/// reported as deltas from the end of the warmup.
fn host(pcpus: u32, scheduler: &str, params: &str, vms: &str) -> String {
    format!(
        "duration = \"10s\"\n[host]\ncores_per_socket = {pcpus}\n[scheduler]\nname = \"{scheduler}\"\n{params}\n{vms}"
    )
}

/// A one-vCPU latency VM (class "lsvm") receiving a netperf stream, so its vCPU is busy,
/// and pinged every 10 ms (`ping = false`: the stream only).
fn latency_vm(name: &str, ping: bool) -> String {
    let ping = if ping {
        "[[vm.workload]]\nkind = \"ping\"\ninterval = \"10ms\"\n"
    } else {
        ""
    };
    format!("[[vm]]\nname = \"{name}\"\nclass = \"lsvm\"\nvcpus = 1\n{ping}[[vm.workload]]\nkind = \"netperf\"\n")
}

/// `n` one-vCPU CPU hog VMs (no class: CPU-bound vCPUs).
fn hogs(n: u32) -> String {
    (0..n)
        .map(|i| format!("[[vm]]\nname = \"hog{i}\"\nvcpus = 1\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 1\n"))
        .collect()
}

fn ping_ms(s: &Summary, vm: &str) -> f64 {
    let v = s.vms.iter().find(|v| v.name == vm).unwrap();
    let w = v.workloads.iter().find(|w| w.kind == "ping").unwrap();
    w.latency_ms.as_ref().unwrap().mean
}

/// Every kind of vCPU on an SMT host of 6 pCPUs (3 cores): an LSVM, a MixVM with one
/// reserved vCPU taking its pings and a CPU-bound one, CPU hogs and a half-busy VM.
fn mixed(scheduler: &str, params: &str) -> String {
    format!(
        r#"duration = "4s"
[host]
cores_per_socket = 3
threads_per_core = 2
[scheduler]
name = "{scheduler}"
{params}
[[vm]]
name = "web"
class = "lsvm"
vcpus = 1
[[vm.workload]]
kind = "ping"
interval = "5ms"
[[vm.workload]]
kind = "netperf"
[[vm]]
name = "app"
class = "mixvm"
vcpus = 2
reserved_vcpus = 1
[[vm.workload]]
kind = "ping"
interval = "7ms"
vcpus = [0]
[[vm.workload]]
kind = "lookbusy"
utilization = 60
vcpus = [1]
[[vm]]
name = "batch"
class = "nlsvm"
vcpus = 3
[[vm.workload]]
kind = "stress-ng"
threads = 3
[[vm]]
name = "hogs"
vcpus = 4
[[vm.workload]]
kind = "stress-ng"
threads = 4
[[vm]]
name = "half"
vcpus = 2
[[vm.workload]]
kind = "lookbusy"
threads = 2
utilization = 50
"#
    )
}

/// The pCPUs the latency vCPUs ran on and those every other vCPU ran on, from a full
/// trace of the scenario.
fn pcpus_used(text: &str) -> (Vec<u64>, Vec<u64>, Summary) {
    let sc: Scenario = scenario(text);
    let opts = RunOptions {
        trace_window: Some((0, u64::MAX)),
        ..checked()
    };
    let out = run_full(&sc, None, &opts).unwrap_or_else(|e| panic!("{e}"));
    let trace: serde_json::Value = serde_json::from_str(&out.trace_json.unwrap()).unwrap();
    let (mut latency, mut other) = (Vec::new(), Vec::new());
    for e in trace["traceEvents"].as_array().unwrap() {
        if e["ph"] != "X" {
            continue;
        }
        let cpu = e["tid"].as_u64().unwrap();
        let vm = e["args"]["vm"].as_str().unwrap();
        let index = e["args"]["vcpu"].as_u64().unwrap() as u32;
        let spec = sc.vms.iter().find(|v| v.name == vm).unwrap();
        let list = if spec.is_latency_vcpu(index) {
            &mut latency
        } else {
            &mut other
        };
        if !list.contains(&cpu) {
            list.push(cpu);
        }
    }
    latency.sort();
    other.sort();
    (latency, other, out.summary)
}

/// Under invariant checking (each scheduler's `check` includes the pool invariant), every
/// comparator runs the mixed scenario, with its defaults and with two reserved pCPUs (a
/// whole SMT core), and a scenario with no latency vCPUs.
#[test]
fn pools_hold_under_invariant_checks() {
    for s in COMPARATORS {
        for params in ["", "io_pcpus = 2", "turbo_pcpus = 2", "slicing_factor = 10"] {
            let fits = params.is_empty()
                || (params.starts_with("io_") && *s == "io-bound")
                || (params.starts_with("turbo_") && *s == "vturbo")
                || (params.starts_with("slicing") && *s == "vslicer");
            if fits {
                run_checked(&mixed(s, params));
            }
        }
        run_checked(&host(2, s, "", &hogs(3)));
    }
}

/// vturbo: the turbo cores (the last `turbo_pcpus` pCPUs) run only the latency vCPUs, and
/// the latency vCPUs run only there; also on a whole SMT core.
#[test]
fn vturbo_turbo_cores_run_only_latency_vcpus() {
    for (params, turbo) in [("", vec![5]), ("turbo_pcpus = 2", vec![4, 5])] {
        let (latency, other, sum) = pcpus_used(&mixed("vturbo", params));
        assert_eq!(latency, turbo, "{params}");
        assert!(
            other.iter().all(|c| !turbo.contains(c)),
            "{params}: {other:?}"
        );
        assert_eq!(other.len(), 6 - turbo.len(), "{params}: {other:?}");
        assert_eq!(counter(&sum, "io_vcpu_on_turbo_cores"), 2);
        assert_eq!(counter(&sum, "other_vcpu_on_regular_cores"), 10);
        assert_eq!(counter(&sum, "no_latency_vcpus_plain_credit"), 0);
    }
}

/// io-bound: the reserved pCPUs run only the latency vCPUs, and the latency vCPUs run
/// only there.
#[test]
fn io_bound_reserved_pcpus_run_only_latency_vcpus() {
    for (params, reserved) in [("", vec![5]), ("io_pcpus = 2", vec![4, 5])] {
        let (latency, other, sum) = pcpus_used(&mixed("io-bound", params));
        assert_eq!(latency, reserved, "{params}");
        assert!(
            other.iter().all(|c| !reserved.contains(c)),
            "{params}: {other:?}"
        );
        assert_eq!(counter(&sum, "latency_vcpu_bound_to_reserved"), 2);
        assert_eq!(counter(&sum, "other_vcpu_kept_off_reserved"), 10);
    }
    // vslicer binds nothing: latency vCPUs and the rest share the pCPUs.
    let (latency, other, sum) = pcpus_used(&mixed("vslicer", ""));
    assert!(
        latency.len() > 1 && other.len() == 6,
        "{latency:?} {other:?}"
    );
    assert_eq!(counter(&sum, "micro_sliced_vcpus"), 2);
    assert_eq!(counter(&sum, "normal_slice_vcpus"), 10);
}

/// A latency VM pinged while busy receiving a stream, beside four CPU hogs on two pCPUs:
/// Credit makes a ping wait for the vCPU's next 30 ms slice (about 30 ms on average).
/// vSlicer's 5 ms micro slices give it its turn more often (about 16 ms); I/O bounding
/// and vTurbo move it onto a pCPU of its own (microseconds).
#[test]
fn each_comparator_cuts_the_ping_latency_of_a_busy_latency_vm_beside_hogs() {
    let vms = format!("{}{}", latency_vm("lat", true), hogs(4));
    let credit = ping_ms(&run_checked(&host(2, "credit", "", &vms)), "lat");
    assert!(credit > 20.0, "credit {credit} ms");
    let vslicer = ping_ms(&run_checked(&host(2, "vslicer", "", &vms)), "lat");
    assert!(
        vslicer < 0.7 * credit,
        "vslicer {vslicer} vs credit {credit}"
    );
    for s in ["io-bound", "vturbo"] {
        let ms = ping_ms(&run_checked(&host(2, s, "", &vms)), "lat");
        assert!(ms < 0.05 * credit, "{s} {ms} vs credit {credit}");
    }
}

/// Two busy latency VMs share the one reserved pCPU: with I/O bounding they take 30 ms
/// Credit slices there, so a ping still waits for the other's slice (about 5 ms on
/// average, against Credit's 43 ms); vTurbo's 0.1 ms turbo slice without the rate limit
/// makes the wait about 0.1 ms.
#[test]
fn vturbo_turbo_slice_matters_when_latency_vcpus_share_the_turbo_core() {
    let vms = format!(
        "{}{}{}",
        latency_vm("lat", true),
        latency_vm("lat2", false),
        hogs(4)
    );
    let credit = ping_ms(&run_checked(&host(2, "credit", "", &vms)), "lat");
    let io_bound = ping_ms(&run_checked(&host(2, "io-bound", "", &vms)), "lat");
    let vturbo = ping_ms(&run_checked(&host(2, "vturbo", "", &vms)), "lat");
    assert!(
        io_bound < 0.5 * credit,
        "io-bound {io_bound} vs credit {credit}"
    );
    // About 0.1 ms; Credit's 1 ms rate limit left on the turbo core would stretch the
    // turns and make it about 0.35 ms.
    assert!(vturbo < 0.2, "vturbo {vturbo} ms");
    assert!(
        vturbo < 0.1 * io_bound,
        "vturbo {vturbo} vs io-bound {io_bound}"
    );
    // A turbo slice as long as the regular one gives I/O bounding back.
    let long = ping_ms(
        &run_checked(&host(2, "vturbo", "turbo_slice_us = 30000", &vms)),
        "lat",
    );
    assert!(long > 0.5 * io_bound, "{long} vs io-bound {io_bound}");
}

/// With no latency vCPU in the scenario, nothing is reserved or sliced: each comparator
/// runs exactly as Credit (the same CPU times and ping latencies).
#[test]
fn without_latency_vcpus_each_comparator_is_credit() {
    let vms = format!(
        "[[vm]]\nname = \"lat\"\nvcpus = 1\n[[vm.workload]]\nkind = \"ping\"\ninterval = \"10ms\"\n[[vm.workload]]\nkind = \"netperf\"\n{}",
        hogs(4)
    );
    let credit = run_checked(&host(2, "credit", "", &vms));
    for s in COMPARATORS {
        let sum = run_checked(&host(2, s, "", &vms));
        assert_eq!(ping_ms(&sum, "lat"), ping_ms(&credit, "lat"), "{s}");
        for (a, b) in sum.vms.iter().zip(&credit.vms) {
            assert_eq!(a.cpu_time_s, b.cpu_time_s, "{s}: {}", a.name);
        }
        if *s != "vslicer" {
            assert_eq!(counter(&sum, "no_latency_vcpus_plain_credit"), 1, "{s}");
        }
    }
}

/// Bad parameters are refused with the parameter's path and the reason.
#[test]
fn bad_parameters_are_refused_by_name() {
    let vms = format!("{}{}", latency_vm("lat", true), hogs(1));
    let cases: &[(&str, u32, &str, &[&str])] = &[
        (
            "vturbo",
            2,
            "turbo_pcpus = 2",
            &["scheduler.turbo_pcpus", "all 2 pCPUs"],
        ),
        ("vturbo", 1, "", &["scheduler.turbo_pcpus", "all 1 pCPUs"]),
        ("vturbo", 4, "turbo_pcpus = 0", &["scheduler.turbo_pcpus"]),
        (
            "vturbo",
            2,
            "turbo_slice_us = 40000",
            &["scheduler.turbo_slice_us", "tslice_ms = 30"],
        ),
        (
            "vturbo",
            2,
            "turbo_cores = 1",
            &["turbo_cores", "scheduler vturbo"],
        ),
        (
            "vturbo",
            2,
            "ratelimit_us = 50",
            &["scheduler.ratelimit_us", "minimum of 100"],
        ),
        (
            "io-bound",
            3,
            "io_pcpus = 3",
            &["scheduler.io_pcpus", "all 3 pCPUs"],
        ),
        ("io-bound", 1, "", &["scheduler.io_pcpus", "all 1 pCPUs"]),
        ("io-bound", 2, "io_pcpus = 0", &["scheduler.io_pcpus"]),
        ("io-bound", 2, "tslice_ms = 0", &["scheduler.tslice_ms"]),
        (
            "vslicer",
            2,
            "slicing_factor = 60",
            &["scheduler.slicing_factor", "ratelimit_us = 1000"],
        ),
        (
            "vslicer",
            2,
            "slicing_factor = 0",
            &["scheduler.slicing_factor", "0.1 ms"],
        ),
        (
            "vslicer",
            2,
            "tslice_ms = 10\nslicing_factor = 101",
            &["scheduler.slicing_factor"],
        ),
    ];
    for (s, pcpus, params, want) in cases {
        let e = scenario_err(&host(*pcpus, s, params, &vms));
        for w in *want {
            assert!(e.contains(w), "{s} {params:?}: {e}");
        }
    }
    // Micro slices under the rate limit are fine once it is off.
    let sum = run_checked(&host(
        2,
        "vslicer",
        "slicing_factor = 60\nratelimit_us = 0",
        &vms,
    ));
    assert_eq!(counter(&sum, "micro_sliced_vcpus"), 1);
}
