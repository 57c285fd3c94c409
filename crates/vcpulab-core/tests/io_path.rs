//! The network I/O path (issue 4): requests from outside, the split driver's backend
//! (netback in a driver domain or a host thread) against direct assignment, bandwidth from
//! completed bytes, and finite workloads (sysbench-cpu with `events`).

use vcpulab_core::summary::Summary;

mod common;
use common::{run_checked as go, scenario_err as err};

/// A 2-pCPU host; VM "vm1" (1 vCPU) runs `workloads`; `path` is "direct" or "split" (then
/// a 1-vCPU driver domain "dom0" runs netback); `extra` is appended (more VMs).
fn host(scheduler: &str, path: &str, workloads: &str, extra: &str) -> String {
    host_vcpus(scheduler, path, 1, workloads, extra)
}

/// `host` with `vcpus` vCPUs for vm1.
fn host_vcpus(scheduler: &str, path: &str, vcpus: u32, workloads: &str, extra: &str) -> String {
    let (io, dom0) = if path == "split" {
        (
            "io_path = \"split\"\nio_driver = \"dom0\"",
            "[[vm]]\nname = \"dom0\"\nvcpus = 1\n[[vm.workload]]\nkind = \"netback\"\n",
        )
    } else {
        ("", "")
    };
    format!(
        "duration = \"10s\"\n[host]\ncores_per_socket = 2\n{io}\n[scheduler]\nname = \"{scheduler}\"\n{dom0}[[vm]]\nname = \"vm1\"\nvcpus = {vcpus}\n{workloads}\n{extra}"
    )
}

fn workload<'a>(
    s: &'a Summary,
    vm: &str,
    kind: &str,
) -> &'a vcpulab_core::summary::WorkloadSummary {
    let v = s.vms.iter().find(|v| v.name == vm).unwrap();
    v.workloads.iter().find(|w| w.kind == kind).unwrap()
}

#[test]
fn direct_path_latency_is_the_service_time_on_an_idle_host() {
    let s = go(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"ping\"\ninterval = \"10ms\"\nhandle = \"20us\"",
        "",
    ));
    let ping = workload(&s, "vm1", "ping");
    let lat = ping.latency_ms.as_ref().unwrap();
    assert_eq!(ping.completed, 999); // the 1,000th arrives at the end
                                     // Halted vCPU: the arrival wakes it, the handler runs 20 us; only switch costs add.
    assert!(lat.mean >= 0.020 && lat.mean < 0.030, "{lat:?}");
    assert!(s.event_counts.backend_packets == 0);
}

#[test]
fn split_path_passes_every_packet_through_the_driver_domain_twice() {
    let s = go(&host(
        "cfs",
        "split",
        "[[vm.workload]]\nkind = \"ping\"\ninterval = \"10ms\"\nhandle = \"20us\"",
        "",
    ));
    let ping = workload(&s, "vm1", "ping");
    assert_eq!(ping.completed, 999); // the 1,000th arrives at the end
                                     // Request in, reply out: two packets per echo (the last may still be in flight).
    assert!(
        (1997..=1999).contains(&s.event_counts.backend_packets),
        "{}",
        s.event_counts.backend_packets
    );
    let dom0 = s.vms.iter().find(|v| v.name == "dom0").unwrap();
    // 2,000 packets x (5 us + 0.5 us/KiB x 84 B): ~10 ms of driver-domain CPU.
    assert!(
        dom0.cpu_time_s > 0.010 && dom0.cpu_time_s < 0.012,
        "{}",
        dom0.cpu_time_s
    );
    let lat = ping.latency_ms.as_ref().unwrap();
    // Two backend passes (5 us each) and two extra wake-ups on top of the 20 us handler.
    assert!(lat.mean > 0.030 && lat.mean < 0.045, "{lat:?}");
}

#[test]
fn a_vhost_host_thread_can_be_the_backend() {
    let text = "duration = \"2s\"\n[host]\ncores_per_socket = 2\nio_path = \"split\"\nio_driver = \"vhost\"\n[scheduler]\nname = \"cfs\"\n[[vm]]\nname = \"vm1\"\nvcpus = 1\n[[vm.workload]]\nkind = \"ping\"\ninterval = \"10ms\"\n[[host_thread]]\nname = \"vhost\"\nvm = \"vm1\"\nworkload = { kind = \"netback\" }\n";
    let s = go(text);
    assert_eq!(workload(&s, "vm1", "ping").completed, 199);
    assert!(s.event_counts.backend_packets >= 397);
    assert!(s.host_threads[0].cpu_time_s > 0.0);
}

#[test]
fn netperf_bandwidth_follows_window_round_trip_and_receive_cost() {
    // One segment in flight: each takes rtt (50 us) + receive (64 KiB x 1 us/KiB = 64 us)
    // + a wake-up, so ~64 KiB per ~114 us = ~4.6 Gb/s.
    let s = go(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"netperf\"\nwindow = 1",
        "",
    ));
    let bw = workload(&s, "vm1", "netperf").bandwidth_mbps.unwrap();
    let ideal = 65536.0 * 8.0 / 114e-6 / 1e6;
    assert!(bw < ideal && bw > 0.95 * ideal, "{bw} vs {ideal}");
    // A window of 16 hides the round trip: the receiver's CPU (64 us/segment) bounds it.
    let s = go(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"netperf\"",
        "",
    ));
    let bw = workload(&s, "vm1", "netperf").bandwidth_mbps.unwrap();
    let cpu_bound = 65536.0 * 8.0 / 64e-6 / 1e6;
    assert!(
        bw < cpu_bound && bw > 0.95 * cpu_bound,
        "{bw} vs {cpu_bound}"
    );
}

#[test]
fn a_receiver_sharing_its_pcpu_with_hogs_loses_bandwidth_and_latency() {
    let hogs = "[[vm]]\nname = \"hog\"\nvcpus = 4\naffinity = \"1\"\n[[vm.workload]]\nkind = \"stress-ng\"\nthreads = 4";
    let alone = go(&host("cfs", "direct", "affinity = \"1\"\n[[vm.workload]]\nkind = \"netperf\"\n[[vm.workload]]\nkind = \"ping\"\ninterval = \"7ms\"", ""));
    let shared = go(&host("cfs", "direct", "affinity = \"1\"\n[[vm.workload]]\nkind = \"netperf\"\n[[vm.workload]]\nkind = \"ping\"\ninterval = \"7ms\"", hogs));
    let (a, b) = (
        workload(&alone, "vm1", "netperf").bandwidth_mbps.unwrap(),
        workload(&shared, "vm1", "netperf").bandwidth_mbps.unwrap(),
    );
    assert!(b < 0.5 * a, "alone {a} Mb/s, shared {b} Mb/s");
    let (a, b) = (
        workload(&alone, "vm1", "ping")
            .latency_ms
            .as_ref()
            .unwrap()
            .mean,
        workload(&shared, "vm1", "ping")
            .latency_ms
            .as_ref()
            .unwrap()
            .mean,
    );
    assert!(b > 2.0 * a, "alone {a} ms, shared {b} ms");
}

#[test]
fn finite_sysbench_reports_its_completion_time_and_then_stops() {
    // 1,000 events of 1 ms over 2 threads on 2 idle pCPUs: done at ~0.5 s.
    let s = go(&host("cfs", "direct", "vcpus = 2\n[[vm.workload]]\nkind = \"sysbench-cpu\"\nthreads = 2\nevents = 1000\nevent_cost = \"1ms\"", "").replace("vcpus = 1\nvcpus = 2", "vcpus = 2"));
    let w = workload(&s, "vm1", "sysbench-cpu");
    assert_eq!(w.completed, 1000);
    let done = w.completion_s.unwrap();
    assert!(done > 0.5 && done < 0.505, "{done}");
    let vm = s.vms.iter().find(|v| v.name == "vm1").unwrap();
    assert!(
        vm.cpu_time_s < 1.01,
        "the threads stopped: {}",
        vm.cpu_time_s
    );
    // Without `events` it runs to the end and reports no completion.
    let s = go(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"sysbench-cpu\"\nevent_cost = \"1ms\"",
        "",
    ));
    assert!(workload(&s, "vm1", "sysbench-cpu").completion_s.is_none());
}

#[test]
fn bad_io_paths_are_refused_with_the_key_path() {
    let base = host("cfs", "direct", "[[vm.workload]]\nkind = \"ping\"", "");
    let e = err(&base.replace(
        "cores_per_socket = 2\n",
        "cores_per_socket = 2\nio_path = \"split\"\n",
    ));
    assert!(e.contains("host.io_path") && e.contains("io_driver"), "{e}");
    let e = err(&base.replace(
        "cores_per_socket = 2\n",
        "cores_per_socket = 2\nio_path = \"sriov\"\n",
    ));
    assert!(
        e.contains("host.io_path") && e.contains("\"direct\", \"split\""),
        "{e}"
    );
    let e = err(&base.replace(
        "cores_per_socket = 2\n",
        "cores_per_socket = 2\nio_driver = \"vm1\"\n",
    ));
    assert!(
        e.contains("host.io_driver") && e.contains("io_path = \"split\""),
        "{e}"
    );
    let e = err(&base.replace(
        "cores_per_socket = 2\n",
        "cores_per_socket = 2\nio_path = \"split\"\nio_driver = \"nope\"\n",
    ));
    assert!(
        e.contains("host.io_driver") && e.contains("no VM or host thread named \"nope\""),
        "{e}"
    );
    let e = err(&base.replace(
        "cores_per_socket = 2\n",
        "cores_per_socket = 2\nio_path = \"split\"\nio_driver = \"vm1\"\n",
    ));
    assert!(
        e.contains("host.io_driver") && e.contains("runs no netback"),
        "{e}"
    );
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"netback\"",
        "",
    ));
    assert!(
        e.contains("vm[0].workload[0].kind") && e.contains("split-driver backend"),
        "{e}"
    );
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"netperf\"\nwindow = 0",
        "",
    ));
    assert!(e.contains("vm[0].workload[0].window"), "{e}");
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"stress-ng\"\nrequest_bytes = 10",
        "",
    ));
    assert!(e.contains("request_bytes"), "{e}");
}

#[test]
fn threads_of_short_user_operations_share_their_vcpu() {
    // Two never-blocking threads of 10 us user computes on one vCPU: the guest time slice
    // rotates them, so each gets half (netperf beside lookbusy in one guest relies on it).
    let w =
        "[[vm.workload]]\nkind = \"program\"\nops = [{ op = \"compute\", duration = \"10us\" }]\n";
    let s = go(&host("cfs", "direct", &format!("{w}{w}"), ""));
    let vm = &s.vms[0];
    let (a, b) = (
        vm.workloads[0].completed as f64,
        vm.workloads[1].completed as f64,
    );
    assert!(b > 0.0 && (a / b - 1.0).abs() < 0.02, "{a} vs {b}");
}

/// A 2-pCPU host; vm1 has 2 vCPUs and serves 10 ms periodic requests: the application
/// (30 us of user work) on vCPU 1, the receive path (10 us of kernel work) on vCPU 0.
fn rx_host(path: &str) -> String {
    host_vcpus(
        "cfs",
        path,
        2,
        "[[vm.workload]]\nkind = \"program\"\nvcpus = [1]\n\
         arrivals = { process = \"periodic\", interval = \"10ms\" }\n\
         rx = { vcpus = [0], per_packet = \"10us\", per_kib = \"0ns\" }\n\
         ops = [{ op = \"wait_request\" }, { op = \"compute\", duration = \"30us\" }, { op = \"respond\" }]",
        "",
    )
}

#[test]
fn an_rx_path_receives_on_its_vcpu_and_hands_the_request_to_the_application() {
    for path in ["direct", "split"] {
        let s = go(&rx_host(path));
        let vm1 = s.vms.iter().find(|v| v.name == "vm1").unwrap();
        let w = &vm1.workloads[0];
        // The 1,000th request arrives at the end.
        assert_eq!(w.completed, 999, "{path}");
        // 999 requests: 10 us of receive on vCPU 0, 30 us of application on vCPU 1 (less
        // switch and migration costs, which the split path adds: 3 vCPUs on 2 pCPUs).
        let work = |i: usize| vm1.vcpus[i].cpu_time_s - vm1.vcpus[i].overhead_time_s;
        let (rx, app) = (work(0), work(1));
        assert!(rx > 0.0099 && rx < 0.0105, "{path}: rx vCPU {rx}");
        assert!(
            app > 0.0299 && app < 0.0305,
            "{path}: application vCPU {app}"
        );
        // Both halted vCPUs are woken in turn: the latency is the two stages (40 us) plus
        // wake-ups; the split path adds two backend passes of 5 us and, with dom0 sharing
        // the pCPUs, a switch and migration cost (~7 us) at each of its three hand-offs.
        let lat = w.latency_ms.as_ref().unwrap();
        let (lo, hi) = if path == "direct" {
            (0.040, 0.050)
        } else {
            (0.050, 0.075)
        };
        assert!(lat.mean >= lo && lat.mean < hi, "{path}: {lat:?}");
        let packets = s.event_counts.backend_packets;
        assert_eq!(packets == 0, path == "direct", "{path}: {packets}");
    }
    // Without `rx` the same program does all its work on its own vCPU.
    let s = go(&rx_host("direct").replace(
        "rx = { vcpus = [0], per_packet = \"10us\", per_kib = \"0ns\" }\n",
        "",
    ));
    let vm1 = s.vms.iter().find(|v| v.name == "vm1").unwrap();
    assert!(
        vm1.vcpus[0].cpu_time_s < 1e-4,
        "{}",
        vm1.vcpus[0].cpu_time_s
    );
}

#[test]
fn bad_rx_paths_are_refused_with_the_key_path() {
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"lookbusy\"\nutilization = 50\nrx = { vcpus = [0] }",
        "",
    ));
    assert!(
        e.contains("vm[0].workload[0].rx") && e.contains("does not receive requests"),
        "{e}"
    );
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"ping\"\nrx = { vcpus = [1] }",
        "",
    ));
    assert!(e.contains("vm[0].workload[0].rx.vcpus[0]"), "{e}");
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"ping\"\nrx = { vcpus = [0], per_byte = \"1ns\" }",
        "",
    ));
    assert!(e.contains("per_byte"), "{e}");
    let e = err(&host(
        "cfs",
        "direct",
        "[[vm.workload]]\nkind = \"ping\"\nrx = { per_packet = \"1us\" }",
        "",
    ));
    assert!(e.contains("vm[0].workload[0].rx.vcpus"), "{e}");
}
