//! A guest whose idle loop spins (`[[vm]] idle = "poll"`: Linux's `idle=poll`, or a DPDK
//! poll-mode driver) and Credit with PvCC's microsecond slice (`tslice_us`), on
//! hand-built hosts of one pCPU where the answer follows from the rules.

mod common;
use common::{counter, run_checked, scenario_err};

/// One pCPU under `scheduler` (its table's other lines in `sched`): VM `svc` (1 vCPU,
/// idle behaviour `idle`) serves periodic requests every 1 ms, each taking `service`;
/// `hogs` single-vCPU stress-ng VMs beside it. No host noise: the answers are exact.
fn serving(scheduler: &str, sched: &str, idle: &str, service: &str, hogs: u32) -> String {
    let mut t = format!(
        r#"duration = "1s"
warmup = "100ms"
seed = 1
[host]
cores_per_socket = 1
[host.noise]
enabled = false
[scheduler]
name = "{scheduler}"
{sched}
[[vm]]
name = "svc"
vcpus = 1
idle = "{idle}"
[[vm.workload]]
kind = "program"
arrivals = {{ process = "periodic", interval = "1ms" }}
ops = [ {{ op = "serve", service = "{service}" }} ]
"#
    );
    for i in 0..hogs {
        t += &format!(
            "[[vm]]\nname = \"hog{i}\"\nvcpus = 1\n[[vm.workload]]\nkind = \"stress-ng\"\n"
        );
    }
    t
}

/// A polling VM alone never halts and spins for the whole run; a halting one runs only
/// its requests (900 of 10 us in the measured 0.9 s).
#[test]
fn an_idle_poll_vcpu_never_halts_and_burns_its_pcpu() {
    let poll = run_checked(&serving("rr", "", "poll", "10us", 0));
    let v = &poll.vms[0].vcpus[0];
    assert_eq!(v.halts, 0);
    assert!((v.cpu_time_s - 0.9).abs() < 1e-6, "{}", v.cpu_time_s);
    let halt = run_checked(&serving("rr", "", "halt", "10us", 0));
    let h = &halt.vms[0].vcpus[0];
    assert!(h.halts >= 899, "{}", h.halts);
    assert!((h.cpu_time_s - 0.009).abs() < 1e-4, "{}", h.cpu_time_s);
    // Served at once either way: the vCPU is on its own pCPU.
    for s in [&poll, &halt] {
        let l = s.vms[0].latency_ms.as_ref().unwrap();
        assert!((l.max - 0.010).abs() < 1e-6, "{}", l.max);
    }
}

/// Beside three hogs under Credit, a polling VM is always runnable and gets its fair
/// quarter of the pCPU, so a request waits for its turn (after the hogs' 1 ms slices); a
/// halting one wakes boosted and preempts the running hog once the rate limit (1 ms)
/// lets it, so it waits at most that.
#[test]
fn a_polling_vm_waits_for_its_turn_and_takes_its_share() {
    let sched = "tslice_ms = 1\nratelimit_us = 1000";
    let poll = run_checked(&serving("credit", sched, "poll", "10us", 3));
    let svc = &poll.vms[0];
    assert_eq!(svc.vcpus[0].halts, 0);
    assert!((svc.cpu_share - 0.25).abs() < 0.02, "{}", svc.cpu_share);
    let l = svc.latency_ms.as_ref().unwrap();
    // Its turn comes after the hogs' slices: at least one, a few at most (Credit's
    // priorities may let a hog run twice before it).
    assert!(l.max > 1.0 && l.max < 5.0, "{}", l.max);
    let halt = run_checked(&serving("credit", sched, "halt", "10us", 3));
    let h = halt.vms[0].latency_ms.as_ref().unwrap();
    // Plus the host's switch costs (a few us).
    assert!(h.max <= 1.0 + 0.010 + 0.005, "{}", h.max);
    assert!(l.max > h.max + 0.5, "{} vs {}", l.max, h.max);
}

/// A request longer than its VM's slice is preempted while served: with 150 us of service
/// and Credit's 100 us slices, at least one round of the three hogs' slices (300 us) comes
/// on top of its service. (This does not guard the settle before a polling vCPU runs a
/// woken thread: removing it shortens only the quarter of requests that arrive while
/// their vCPU runs, which the summary's percentiles do not show.)
#[test]
fn a_request_longer_than_the_slice_waits_for_the_other_vms() {
    let sched = "tslice_us = 100\nratelimit_us = 100";
    let s = run_checked(&serving("credit", sched, "poll", "150us", 3));
    let l = s.vms[0].latency_ms.as_ref().unwrap();
    assert!(l.count >= 899, "{}", l.count);
    assert!(l.p50 >= 0.15 + 0.3 - 1e-6, "{}", l.p50);
}

/// PvCC's microsecond slice: four always-runnable VMs on one pCPU see a slice end every
/// 100 us (ten times as often as with Xen's smallest slice, 1 ms), and each still gets a
/// quarter.
#[test]
fn pvcc_tslice_us_ends_a_slice_every_100us_at_the_same_shares() {
    let run = |sched: &str| run_checked(&serving("credit", sched, "poll", "10us", 3));
    let us = run("tslice_us = 100\nratelimit_us = 100");
    let ms = run("tslice_ms = 1\nratelimit_us = 1000");
    // 0.9 s measured: 9000 slices of 100 us, 900 of 1 ms.
    let (s_us, s_ms) = (counter(&us, "slice_end"), counter(&ms, "slice_end"));
    assert!(s_us.abs_diff(9000) <= 10, "{s_us}");
    assert!(s_ms.abs_diff(900) <= 10, "{s_ms}");
    for vm in &us.vms {
        assert!(
            (vm.cpu_share - 0.25).abs() < 0.02,
            "{}: {}",
            vm.name,
            vm.cpu_share
        );
    }
}

#[test]
fn idle_and_tslice_us_are_validated() {
    let base = serving("credit", "", "poll", "10us", 0);
    let e = scenario_err(&base.replace("idle = \"poll\"", "idle = \"spin\""));
    assert!(
        e.contains("idle") && e.contains("\"halt\"") && e.contains("\"poll\""),
        "{e}"
    );
    let governed = base.replace("idle = \"poll\"", "idle = \"poll\"\n[vm.haltpoll]");
    assert!(scenario_err(&governed).contains("has no effect with idle = \"poll\""));
    let both = serving(
        "credit",
        "tslice_ms = 1\ntslice_us = 100",
        "poll",
        "10us",
        0,
    );
    assert!(scenario_err(&both).contains("set only one"));
    let slow = serving(
        "credit",
        "tslice_us = 100\nratelimit_us = 200",
        "poll",
        "10us",
        0,
    );
    assert!(scenario_err(&slow).contains("longer than the time slice (tslice_us = 100)"));
    let steered = base.replace(
        "[[vm.workload]]\nkind = \"program\"",
        "[[vm.workload]]\nkind = \"lookbusy\"\nutilization = 50\n[[vm.workload]]\nkind = \"program\"",
    );
    assert!(scenario_err(&steered).contains("cannot be combined with a lookbusy workload"));
    let default_rate = serving("credit", "tslice_us = 100", "poll", "10us", 0);
    assert!(scenario_err(&default_rate).contains("shorter than the default rate limit"));
    // PvCC lowers the rate limit's minimum to 1 us; Xen's stays 100 us.
    run_checked(&serving(
        "credit",
        "tslice_us = 100\nratelimit_us = 50",
        "poll",
        "10us",
        0,
    ));
    let xen = serving("credit", "ratelimit_us = 50", "poll", "10us", 0);
    assert!(scenario_err(&xen).contains("below Xen's minimum of 100 us"));
}

/// A host thread that names a polling VM (an iothread of it) still blocks when it has
/// nothing to do: only the VM's vCPUs spin.
#[test]
fn a_host_thread_of_a_polling_vm_still_blocks() {
    let s = run_checked(
        "duration = \"1s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n\
         [[vm]]\nname = \"g\"\nvcpus = 1\nidle = \"poll\"\n\
         [[host_thread]]\nname = \"iothread\"\nvm = \"g\"\nworkload = { kind = \"program\", ops = [ { op = \"compute\", duration = \"1ms\" }, { op = \"sleep\", duration = \"4ms\" } ] }\n\
         [[host_thread]]\nname = \"housekeeping\"\nworkload = { kind = \"program\", ops = [ { op = \"compute\", duration = \"2ms\" }, { op = \"sleep\", duration = \"8ms\" } ] }\n",
    );
    // The vCPU spins all the time it is on a pCPU (CFS may put a host thread beside it).
    assert!(s.vms[0].cpu_time_s > 0.95, "{}", s.vms[0].cpu_time_s);
    for (h, share) in s.host_threads.iter().zip([0.2, 0.2]) {
        assert!(
            (h.cpu_time_s - share).abs() < 0.01,
            "{}: {}",
            h.name,
            h.cpu_time_s
        );
    }
}

/// A Kemari sync stops the protected VM (its vCPUs halt); at the resume a vCPU whose idle
/// loop spins goes back to spinning, so it runs all but the stops.
#[test]
fn a_polling_vcpu_spins_again_after_a_kemari_sync() {
    let s = run_checked(
        "duration = \"1s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n\
         [[vm]]\nname = \"eval\"\nvcpus = 1\nidle = \"poll\"\n\
         [[vm.workload]]\nkind = \"program\"\n\
         ops = [ { op = \"sleep\", duration = \"100ms\" }, { op = \"io\", latency = \"1ms\", write_kib = 4 } ]\n\
         [[host_thread]]\nname = \"kemari\"\nvm = \"eval\"\nhelper = \"kemari\"\n",
    );
    let ft = s.vms[0]
        .ft
        .as_ref()
        .expect("a Kemari-protected VM reports ft");
    assert!(ft.syncs >= 9, "{}", ft.syncs);
    let v = &s.vms[0].vcpus[0];
    assert!(v.cpu_time_s > 0.9, "{}", v.cpu_time_s);
}

/// A shootdown reaches a vCPU that ran the process's threads; one spinning in its idle
/// loop acknowledges it and leaves the mm (lazy TLB), so the next shootdown skips it.
#[test]
fn a_polling_vcpu_leaves_the_mm_after_one_shootdown() {
    let ipis = |idle: &str| {
        let s = run_checked(&format!(
            "duration = \"100ms\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"rr\"\n\
             [[vm]]\nname = \"g\"\nvcpus = 2\nidle = \"{idle}\"\n\
             [[vm.workload]]\nkind = \"program\"\nvcpus = [0]\n\
             ops = [ {{ op = \"compute\", duration = \"100us\" }}, {{ op = \"ipi\" }} ]\n\
             [[vm.workload]]\nkind = \"program\"\nvcpus = [1]\n\
             ops = [ {{ op = \"compute\", duration = \"1ms\" }}, {{ op = \"sleep\", duration = \"1s\" }} ]\n"
        ));
        s.event_counts.ipis_sent
    };
    // vCPU 1 runs its thread for 1 ms, then idles: only the shootdowns of that first
    // millisecond and the one it acknowledges idle reach it, polling or halting alike.
    let (poll, halt) = (ipis("poll"), ipis("halt"));
    assert_eq!(poll, halt);
    assert!(poll < 20, "{poll}");
}
