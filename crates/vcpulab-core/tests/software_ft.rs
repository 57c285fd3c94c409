//! Host threads, pinning and isolcpus, and the Kemari + DRBD helpers (issue 5).

use vcpulab_core::api::run;
use vcpulab_core::engine::Sim;
use vcpulab_core::model::Model;
use vcpulab_core::sched::{CpuId, SchedCtx, Scheduler, TaskId};

mod common;
use common::{checked, quiet, run_checked, scenario, scenario_err as err, scheduler_names};

/// Pattern 4 of seed 003 with I/O load in the evaluation VM, 10 s.
fn pattern4(scheduler: &str) -> String {
    format!(
        r#"
duration = "10s"
[host]
sockets = 2
cores_per_socket = 6
threads_per_core = 2
numa_nodes = 2
isolcpus = "2,4"
[scheduler]
name = "{scheduler}"
[[vm]]
name = "eval"
vcpus = 1
affinity = "2"
[[vm.workload]]
kind = "timer-rt"
[[vm.workload]]
kind = "iozone"
[[vm]]
name = "load"
vcpus = 2
[[vm.workload]]
kind = "dhrystone"
threads = 2
[[host_thread]]
name = "kemari"
vm = "eval"
helper = "kemari"
affinity = "2"
[[host_thread]]
name = "drbd"
vm = "eval"
helper = "drbd"
affinity = "4"
[[host_thread]]
name = "iothread"
workload = {{ kind = "lookbusy", utilization = 30, adaptive = false }}
"#
    )
}

/// Pinned threads never run outside their mask, isolated pCPUs run only threads that name
/// them, and a stopped VM never executes guest code: the engine checks all three after
/// every event, under every registered scheduler.
#[test]
fn pinned_and_isolated_threads_and_kemari_stops_hold_under_every_scheduler() {
    for s in scheduler_names() {
        let sum = run(&scenario(&quiet(&pattern4(s))), None, &checked())
            .unwrap_or_else(|e| panic!("{s}: {e}"));
        let eval = &sum.vms[0];
        let ft = eval.ft.as_ref().expect("eval has Kemari");
        assert!(ft.syncs > 0, "{s}: no syncs");
        // The guest cannot run while stopped: its CPU time and its stopped time fit in
        // the run.
        assert!(
            eval.cpu_time_s + ft.paused_time_s <= sum.duration_s + 1e-6,
            "{s}: {eval:?}"
        );
        assert_eq!(sum.host_threads.len(), 3);
        // One Kemari job per sync; the last may still be under way when the run ends.
        let jobs = sum.host_threads[0].jobs.unwrap();
        assert!(
            jobs == ft.syncs || jobs + 1 == ft.syncs,
            "{s}: {jobs} jobs for {} syncs",
            ft.syncs
        );
        assert!(
            sum.host_threads[2].cpu_time_s > 0.0,
            "{s}: the workload host thread ran"
        );
    }
}

/// A Kemari sync stops the VM for the whole sync: with the helper's CPU work and transfer
/// stated, the stopped time equals the sum of the sync jobs' durations.
#[test]
fn kemari_sync_stops_the_guest_for_its_duration() {
    let sum = run_checked(&pattern4("cfs"));
    let ft = sum.vms[0].ft.as_ref().unwrap();
    let kemari = &sum.host_threads[0];
    let jobs = kemari.job_latency_ms.as_ref().unwrap();
    let total_job_s = jobs.mean * jobs.count as f64 / 1e3;
    // At most one sync per VM is in flight, so stopped time = sum of sync durations (the
    // last one may still run at the end).
    assert!(
        (ft.paused_time_s - total_job_s).abs() < 0.1,
        "paused {} vs jobs {}",
        ft.paused_time_s,
        total_job_s
    );
    // Timer responses wait for syncs: the worst is at least most of a sync.
    let lat = sum.vms[0].latency_ms.as_ref().unwrap();
    assert!(
        lat.max > 0.5 * jobs.max,
        "max response {} vs longest sync {}",
        lat.max,
        jobs.max
    );
}

/// The isolcpus check can fail: a scheduler that puts an unpinned vCPU on an isolated
/// pCPU is caught.
#[test]
fn a_scheduler_that_runs_an_unpinned_task_on_an_isolated_cpu_is_caught() {
    struct IgnoresIsolation;
    impl Scheduler for IgnoresIsolation {
        fn init(&mut self, _: &mut SchedCtx) {}
        fn wake(&mut self, ctx: &mut SchedCtx, _: TaskId) {
            ctx.resched(0);
        }
        fn block(&mut self, _: &mut SchedCtx, _: CpuId, _: TaskId) {}
        fn pick_next(
            &mut self,
            _: &mut SchedCtx,
            _: CpuId,
            prev: Option<TaskId>,
        ) -> Option<TaskId> {
            prev.or(Some(0))
        }
        fn timer(&mut self, _: &mut SchedCtx, _: CpuId) {}
        fn counters(&self) -> Vec<(&'static str, u64)> {
            vec![]
        }
    }
    let sc = scenario(
        r#"
duration = "1s"
[host]
cores_per_socket = 2
isolcpus = "0"
[scheduler]
name = "rr"
[[vm]]
name = "v"
vcpus = 1
[[vm.workload]]
kind = "stress-ng"
"#,
    );
    let e = Sim::new(&Model::compile(&sc), IgnoresIsolation, 1, checked())
        .run()
        .unwrap_err();
    assert!(
        e.message.contains("affinity") || e.message.contains("isolated"),
        "{e}"
    );
}

#[test]
fn cpu_list_errors_name_the_bad_token() {
    let base = |aff: &str| {
        format!("duration = \"1s\"\n[host]\ncores_per_socket = 4\n[scheduler]\nname = \"rr\"\n[[vm]]\nname = \"v\"\nvcpus = 1\naffinity = \"{aff}\"\n")
    };
    let e = err(&base("0-3,x"));
    assert!(
        e.contains("test.toml") && e.contains("vm[0].affinity") && e.contains("\"x\""),
        "{e}"
    );
    let e = err(&base("3-1"));
    assert!(e.contains("runs backwards"), "{e}");
    let e = err(&base("0-9"));
    assert!(e.contains("names pCPU 9"), "{e}");
    let e = err("duration = \"1s\"\n[host]\ncores_per_socket = 2\nisolcpus = \"0-1\"\n[scheduler]\nname = \"rr\"\n[[vm]]\nname = \"v\"\nvcpus = 1\n");
    assert!(
        e.contains("host.isolcpus") && e.contains("every pCPU"),
        "{e}"
    );
}

#[test]
fn bad_host_threads_are_refused_with_the_key_path() {
    let with = |ht: &str| {
        format!("duration = \"1s\"\n[host]\ncores_per_socket = 4\n[scheduler]\nname = \"rr\"\n[[vm]]\nname = \"v\"\nvcpus = 1\n[[host_thread]]\n{ht}\n")
    };
    let e = err(&with("name = \"k\"\nvm = \"nope\"\nhelper = \"kemari\""));
    assert!(
        e.contains("host_thread[0].vm") && e.contains("no VM named \"nope\""),
        "{e}"
    );
    let e = err(&with("name = \"k\"\nhelper = \"kemari\""));
    assert!(e.contains("host_thread[0].vm"), "{e}");
    let e = err(&with("name = \"k\"\nvm = \"v\"\nhelper = \"remus\""));
    assert!(
        e.contains("host_thread[0].helper") && e.contains("kemari"),
        "{e}"
    );
    let e = err(&with(
        "name = \"k\"\nvm = \"v\"\nhelper = \"drbd\"\nsync_cpu = \"1ms\"",
    ));
    assert!(
        e.contains("sync_cpu") && e.contains("not a parameter of the drbd helper"),
        "{e}"
    );
    let e = err(&with("name = \"k\""));
    assert!(e.contains("host_thread[0].workload"), "{e}");
    let e = err(&with("name = \"k\"\nworkload = { kind = \"program\", ops = [{ op = \"lock\", lock = \"a\", hold = \"1us\" }] }"));
    assert!(e.contains("compute, sleep, io and netback"), "{e}");
    let e = err(&with("name = \"k\"\nworkload = { kind = \"stress-ng\" }\n[[host_thread]]\nname = \"k\"\nworkload = { kind = \"stress-ng\" }"));
    assert!(
        e.contains("host_thread[1].name") && e.contains("duplicate"),
        "{e}"
    );
}

/// The software-ft reproduction: the relations that come out of the model's mechanisms
/// (see docs/models.md for the paper's relations that do not).
#[test]
fn software_ft_reproduction_rows_and_mechanism_relations() {
    let e = vcpulab_core::repro::find("software-ft").unwrap();
    let rows = vcpulab_core::repro::run_experiment(&e, None).unwrap();
    let get = |case: &str| {
        rows.iter()
            .find(|r| r.case == case && r.metric == "max_response_ms")
            .and_then(|r| r.sim)
            .unwrap_or_else(|| panic!("{case}"))
    };
    let paper = rows
        .iter()
        .filter(|r| r.metric == "max_response_ms" && r.paper.is_some())
        .count();
    assert_eq!(paper, 25, "every case carries the paper's value");
    for p in ["p1", "p2", "p3", "p4", "p5"] {
        // I/O load in the evaluation VM is the worst condition for every pattern, as in
        // the paper: IOzone's page-cache writes make the first sync of each writeback
        // carry tens of MiB.
        for c in ["none", "cpu-loadvm", "io-loadvm", "cpu-evalvm"] {
            assert!(
                get(&format!("{p}/io-evalvm")) > 2.0 * get(&format!("{p}/{c}")),
                "{p}/{c}"
            );
        }
        // Without load the worst response is a journal write's synchronous release
        // (Kemari's thread raises the timer only after it): the same order of magnitude
        // as the paper's 14-26 ms (the old model, without the release, gave 0.2-0.5 ms).
        let none = get(&format!("{p}/none"));
        let paper = rows
            .iter()
            .find(|r| r.case == format!("{p}/none") && r.metric == "max_response_ms")
            .and_then(|r| r.paper)
            .unwrap();
        assert!(
            none > paper / 10.0 && none < paper * 10.0,
            "{p}/none: {none}"
        );
    }
    // vCPU and Kemari on one CPU is the best placement under I/O load (the paper's p4):
    // the vCPU thread wins QEMU's global mutex at every release, so a timer waits for
    // one sync or flush. Apart (p1, p2, p5), it loses the mutex at every release while
    // the Kemari thread has writes queued, and a timer waits for the writeback requests
    // in flight: as many as the guest's CFQ lets out, up to the hundred of a whole
    // writeback. The paper has p1 at 6.1x p4; the issue asks for at least 3x.
    // p3 and p4 place the vCPU and Kemari alike (p4 only moves DRBD); with host noise
    // their CPUs draw different interruptions, so they agree within 2%, not exactly.
    let p4 = get("p4/io-evalvm");
    let p3 = get("p3/io-evalvm");
    assert!((p4 / p3 - 1.0).abs() < 0.02, "p4 {p4} ms, p3 {p3} ms");
    for p in ["p1", "p2", "p5"] {
        let apart = get(&format!("{p}/io-evalvm"));
        assert!(apart >= 3.0 * p4, "{p}: {apart} ms, p4 {p4} ms");
    }
    // Kemari's thread raises every timer interrupt; it crosses pCPUs exactly when the
    // pattern puts the vCPU and Kemari apart.
    let cross = |case: &str| {
        rows.iter()
            .find(|r| r.case == case && r.metric == "timer_irqs_cross_cpu")
            .and_then(|r| r.sim)
            .unwrap_or_else(|| panic!("{case}"))
    };
    for c in ["none", "io-evalvm"] {
        assert_eq!(cross(&format!("p3/{c}")), 0.0);
        assert_eq!(cross(&format!("p4/{c}")), 0.0);
        assert!(cross(&format!("p5/{c}")) > 9000.0, "p5/{c}");
    }
}

/// One 1-vCPU VM "eval" running `workloads` (TOML `[[vm.workload]]` tables) under
/// Kemari, on a 4-core host for 10 s: `kemari_keys` go into Kemari's `[[host_thread]]`;
/// with `drbd` a DRBD helper is added.
fn kemari_vm(workloads: &str, kemari_keys: &str, drbd: bool) -> String {
    let drbd = if drbd {
        "[[host_thread]]\nname = \"drbd\"\nvm = \"eval\"\nhelper = \"drbd\"\n"
    } else {
        ""
    };
    format!(
        r#"
duration = "10s"
[host]
sockets = 1
cores_per_socket = 4
[scheduler]
name = "cfs"
[[vm]]
name = "eval"
vcpus = 1
{workloads}
[[host_thread]]
name = "kemari"
vm = "eval"
helper = "kemari"
{kemari_keys}
{drbd}"#
    )
}

/// A 10 ms timer and a write of `latency` every second, under Kemari (and DRBD).
fn timer_and_writes(latency: &str, kemari_keys: &str, drbd: bool) -> String {
    kemari_vm(
        &format!(
            r#"[[vm.workload]]
kind = "timer-rt"
[[vm.workload]]
kind = "program"
ops = [{{ op = "sleep", duration = "1s" }}, {{ op = "io", latency = "{latency}", write_kib = 64 }}]"#
        ),
        kemari_keys,
        drbd,
    )
}

/// kemari-next releases each held write synchronously in QEMU's I/O thread, which (QEMU
/// 1.0, no in-kernel irqchip) also raises the guest's timer interrupts: a timer that
/// expires while a 20 ms write is in flight waits for it. Either switch off removes the
/// wait.
#[test]
fn kemari_raises_guest_timers_only_after_the_released_write_completes() {
    let sum = run_checked(&timer_and_writes("20ms", "", false));
    let ft = sum.vms[0].ft.as_ref().unwrap();
    let lat = sum.vms[0].workloads[0].latency_ms.as_ref().unwrap();
    assert!(ft.syncs >= 9 && ft.flushes == ft.syncs, "{ft:?}");
    // Each flush waits exactly for its write.
    assert!(
        (ft.flush_wait_s - 0.020 * ft.flushes as f64).abs() < 1e-3,
        "{ft:?}"
    );
    // Every timer went through the Kemari thread.
    assert_eq!(ft.timer_irqs, lat.count);
    assert!(ft.timer_irqs_queued >= ft.flushes, "{ft:?}");
    // Timers expire every 10 ms, so one falls in the first half of each 20 ms flush.
    assert!(lat.max >= 10.0, "max {}", lat.max);

    for extra in ["guest_timers = false", "sync_release = false"] {
        let sum = run_checked(&timer_and_writes("20ms", extra, false));
        let lat = sum.vms[0].workloads[0].latency_ms.as_ref().unwrap();
        assert!(lat.max < 2.0, "{extra}: max {}", lat.max);
        let raised = sum.vms[0].ft.as_ref().unwrap().timer_irqs;
        assert_eq!(
            raised == 0,
            extra == "guest_timers = false",
            "{extra}: {raised}"
        );
    }
}

/// DRBD's protocol C: a replicated write completes when the secondary's disk has it too,
/// so Kemari's synchronous release waits for the transfer and the remote write.
#[test]
fn drbd_protocol_c_write_completes_after_the_remote_write() {
    let sum = run_checked(&timer_and_writes("20ms", "", true));
    let ft = sum.vms[0].ft.as_ref().unwrap();
    let per_flush = ft.flush_wait_s / ft.flushes as f64;
    // 64 KiB: DRBD's CPU (20 us + 31 us), 52 us on 10 GbE, the remote 20 ms, a 100 us ack.
    assert!(per_flush > 0.0201 && per_flush < 0.0205, "{per_flush}");
    let drbd = &sum.host_threads[1];
    assert_eq!(drbd.jobs, Some(ft.flushes));
}

/// IOzone's writeback in `request_kib` requests: under Kemari each is an I/O event.
#[test]
fn iozone_writeback_requests_are_kemari_events() {
    let text = kemari_vm(
        "[[vm.workload]]\nkind = \"iozone\"\nflush_kib = 4096\nrequest_kib = 512",
        "",
        false,
    );
    let sum = run_checked(&text);
    let ft = sum.vms[0].ft.as_ref().unwrap();
    let loops = sum.vms[0].workloads[0].completed;
    assert!(loops > 10, "{loops}");
    // 8 requests per flush; the loop in progress at the end may have issued some.
    assert!(
        ft.syncs >= 8 * loops && ft.syncs < 8 * (loops + 1),
        "{} vs {loops}",
        ft.syncs
    );
    // The page-cache copy dirties the flush once, and its first sync carries it: 4 MiB
    // is 0.2 + 4 x 0.6 ms of CPU, 3.4 ms on 10 GbE and a 0.1 ms ack (~6.1 ms); counting
    // the request buffers again would double it.
    let longest = sum.host_threads[0].job_latency_ms.as_ref().unwrap().max;
    assert!((5.5..7.0).contains(&longest), "{longest}");
    // Reads are not I/O events for Kemari (the event-tap wraps writes and flushes only).
    let reads = text.replace("request_kib = 512", "test = \"read\"\nrecord_kib = 512");
    let sum = run_checked(&reads);
    assert!(sum.vms[0].workloads[0].completed > 100);
    assert_eq!(sum.vms[0].ft.as_ref().unwrap().syncs, 0);
    let e = err(&text.replace(
        "request_kib = 512",
        "request_kib = 512\ntest = \"read\"\nrecord_kib = 64",
    ));
    assert!(
        e.contains("request_kib") && e.contains("write test only"),
        "{e}"
    );
}

/// A timer-rt thread beside IOzone whose writeback (8 requests of 512 KiB per flush)
/// keeps `queue_depth` requests in flight, the vCPU on pCPU 1 and Kemari on
/// `kemari_cpu`, Kemari's extra keys `keys`.
fn timer_beside_queued_writes(queue_depth: u32, kemari_cpu: u32, keys: &str) -> String {
    kemari_vm(
        &format!(
            "affinity = \"1\"\n[[vm.workload]]\nkind = \"timer-rt\"\n[[vm.workload]]\nkind = \"iozone\"\n\
             flush_kib = 4096\nrequest_kib = 512\nqueue_depth = {queue_depth}"
        ),
        &format!("affinity = \"{kemari_cpu}\"\n{keys}"),
        false,
    )
}

/// IOzone's `queue_depth`: up to that many requests are in flight and the disk serves
/// them in turn, so without Kemari the flush rate does not change; under Kemari the
/// requests in flight queue as syncs (one waits for the three before it and their
/// flushes).
#[test]
fn iozone_queue_depth_submits_requests_together() {
    let plain = |qd: u32| {
        run_checked(&format!(
            "duration = \"10s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n\
             [[vm]]\nname = \"a\"\nvcpus = 1\n[[vm.workload]]\nkind = \"iozone\"\n\
             flush_kib = 4096\nrequest_kib = 512\nqueue_depth = {qd}"
        ))
        .vms[0]
            .workloads[0]
            .completed
    };
    let (one, four) = (plain(1), plain(4));
    assert!(one > 50 && one.abs_diff(four) <= 1, "{one} vs {four}");

    let longest = |qd: u32| {
        let sum = run_checked(&timer_beside_queued_writes(qd, 1, ""));
        sum.host_threads[0].job_latency_ms.as_ref().unwrap().max
    };
    // One sync of a 512 KiB request and its 5.2 ms flush take over 5 ms; with four in
    // flight, each waits for three of them.
    let (l1, l4) = (longest(1), longest(4));
    assert!(l4 > l1 + 15.0, "queue_depth 1: {l1} ms, 4: {l4} ms");

    let e = err(&timer_beside_queued_writes(4, 1, "").replace(
        "request_kib = 512\nqueue_depth = 4",
        "test = \"read\"\nrecord_kib = 64\nqueue_depth = 4",
    ));
    assert!(
        e.contains("queue_depth") && e.contains("write test only"),
        "{e}"
    );
}

/// The writer keeps up to `queue_depth` requests in flight and sends the next as one
/// completes (a sliding window), rather than waiting for a whole group: with 8 requests
/// per flush and 4 in flight it blocks once per completion of the first four and once
/// more for the rest (5 times a flush), where groups of 4 would block twice. Counted by
/// the halts of its vCPU, which has no other work.
#[test]
fn iozone_requests_in_flight_slide_with_each_completion() {
    let halts_per_flush = |qd: u32| {
        let sum = run_checked(&format!(
            "duration = \"10s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n\
             [[vm]]\nname = \"a\"\nvcpus = 1\n[[vm.workload]]\nkind = \"iozone\"\n\
             flush_kib = 4096\nrequest_kib = 512\nqueue_depth = {qd}"
        ));
        let flushes = sum.vms[0].workloads[0].completed as f64;
        assert!(flushes > 50.0, "{flushes}");
        sum.vms[0].vcpus[0].halts as f64 / flushes
    };
    for (qd, blocks) in [(1, 8.0), (2, 7.0), (4, 5.0), (8, 1.0)] {
        let h = halts_per_flush(qd);
        assert!(
            (h - blocks).abs() < 0.1,
            "queue_depth {qd}: {h} halts per flush"
        );
    }
}

/// A guest running CFQ (`elevator = "cfq"`) limits its writeback in flight after a
/// delayed synchronous write (one that took 125 ms or more): one request for the first
/// 200 ms, one more per 100 ms after that; and it sends none while a synchronous write is
/// in flight. Here IOzone's flushes are 8 requests of 5.2 ms, all in flight without CFQ
/// (one halt of its vCPU a flush), beside a journal-like thread that sleeps 1 s and then
/// writes 4 KiB synchronously.
#[test]
fn cfq_limits_writeback_after_a_delayed_sync_write() {
    let vm = |name: &str, elevator: &str, sync_ms: u32| {
        let journal = if sync_ms == 0 {
            String::new()
        } else {
            format!(
                "[[vm.workload]]\nkind = \"program\"\nops = [\
                 {{ op = \"sleep\", duration = \"1s\" }},\
                 {{ op = \"io\", latency = \"{sync_ms}ms\", write_kib = 4 }}]\n"
            )
        };
        format!(
            "[[vm]]\nname = \"{name}\"\nvcpus = 1\nelevator = \"{elevator}\"\n\
             [[vm.workload]]\nkind = \"iozone\"\nflush_kib = 4096\nrequest_kib = 512\nqueue_depth = 8\n\
             {journal}"
        )
    };
    let run = |vms: &str| {
        run_checked(&format!(
            "duration = \"10s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n{vms}"
        ))
    };
    // (halts of the vCPU, IOzone flushes) of VM `i`.
    let counts = |s: &vcpulab_core::summary::Summary, i: usize| {
        (s.vms[i].vcpus[0].halts, s.vms[i].workloads[0].completed)
    };
    let (plain_halts, plain_flushes) = counts(&run(&vm("a", "none", 200)), 0);
    assert!(plain_flushes > 200, "{plain_flushes}");
    assert!(
        plain_halts < plain_flushes + 20,
        "{plain_halts} {plain_flushes}"
    );

    // Writes of 200 ms are delayed: each cuts the writeback to one request in flight,
    // which then ramps back to 8 over 800 ms of the 1.2 s cycle, and the writeback also
    // stops during the write itself. Measured: 4.3 halts a flush (826 halts, 193
    // flushes). The band rejects no ramp (one in flight for good: 8 a flush) and a ramp
    // one step early or late (3.7 and 4.9).
    let (halts, flushes) = counts(&run(&vm("a", "cfq", 200)), 0);
    let per_flush = halts as f64 / flushes as f64;
    assert!(
        (4.0..4.6).contains(&per_flush),
        "{halts} halts, {flushes} flushes"
    );
    assert!(
        flushes < plain_flushes * 9 / 10,
        "{flushes} vs {plain_flushes}"
    );

    // Writes of 100 ms are not delayed, so the depth stays at 8, but the writeback waits
    // while each is in flight: ~0.9 s of the 10 s.
    let (plain100, _) = counts(&run(&vm("a", "none", 100)), 0);
    let (halts, flushes) = counts(&run(&vm("a", "cfq", 100)), 0);
    assert!(halts <= plain100, "{halts} vs {plain100}");
    assert!(
        (plain_flushes * 88 / 100..plain_flushes * 95 / 100).contains(&flushes),
        "{flushes} vs {plain_flushes}"
    );

    // The limit is per guest: a second CFQ guest without synchronous writes is not held
    // back by the first one's.
    let a = vm("a", "cfq", 200);
    let with_cfq = run(&format!("{a}{}", vm("b", "cfq", 0)));
    let without = run(&format!("{a}{}", vm("b", "none", 0)));
    assert_eq!(counts(&with_cfq, 1), counts(&without, 1));

    let e = err(
        "duration = \"1s\"\n[host]\ncores_per_socket = 2\n[scheduler]\nname = \"cfs\"\n\
         [[vm]]\nname = \"a\"\nvcpus = 1\nelevator = \"bfq\"",
    );
    assert!(e.contains("vm[0].elevator") && e.contains("\"cfq\""), "{e}");
}

/// A write issued while the Kemari thread is busy waits in the event-tap queue with the
/// VM running; the VM stops when its transaction starts. Stopping it at the issue (the
/// rule before session 10) kept it stopped through the flushes of the writes ahead.
#[test]
fn a_write_queued_behind_a_busy_kemari_does_not_stop_the_vm_early() {
    let paused = |qd: u32| {
        let sum = run_checked(&timer_beside_queued_writes(qd, 1, ""));
        let ft = sum.vms[0].ft.clone().unwrap();
        (ft.paused_time_s, ft.syncs)
    };
    let (one, syncs_one) = paused(1);
    for qd in [2, 4] {
        let (p, syncs) = paused(qd);
        // The same syncs stop the VM for the same copies: the paused time is theirs.
        assert!(
            syncs.abs_diff(syncs_one) < syncs_one / 50,
            "{syncs} vs {syncs_one}"
        );
        assert!(
            p < one * 1.1,
            "queue_depth {qd}: paused {p} s, one at a time {one} s"
        );
    }
}

/// QEMU's global mutex (`global_mutex`): the vCPU thread takes an interrupt from the
/// Kemari (I/O) thread only at a release of the mutex. On the same pCPU it wins every
/// release; on another pCPU it loses each release after which the thread has more syncs
/// queued, so its timer waits for the writes in flight. Switched off, the two
/// placements answer alike.
#[test]
fn a_vcpu_on_another_cpu_waits_for_the_kemari_threads_queued_syncs() {
    let run_depth = |depth: u32, cpu: u32, keys: &str| {
        let sum = run_checked(&timer_beside_queued_writes(depth, cpu, keys));
        let ft = sum.vms[0].ft.clone().unwrap();
        let max = sum.vms[0].workloads[0].latency_ms.as_ref().unwrap().max;
        (ft, max)
    };
    let run = |cpu: u32, keys: &str| run_depth(8, cpu, keys);
    let (same, same_max) = run(1, "");
    let (cross, cross_max) = run(2, "");
    assert!(
        same.mutex_handoffs_same_cpu > 100 && same.mutex_handoffs_lost == 0,
        "{same:?}"
    );
    assert!(
        cross.mutex_handoffs_lost > 100 && cross.mutex_handoffs_same_cpu == 0,
        "{cross:?}"
    );
    // A flush of 8 requests is 8 syncs and 8 flushes of over 5 ms each: the cross-CPU
    // vCPU waits for most of them, the same-CPU one for about one.
    assert!(
        cross_max > same_max + 25.0,
        "same {same_max} ms, cross {cross_max} ms"
    );
    // The writer sends a request as an earlier one completes, and that completion is an
    // interrupt that also waits for the mutex: across pCPUs the guest can refill the
    // window only when Kemari's queue runs dry, so the timer's wait grows with the
    // window (2, 4, 8 in flight: about 2, 4, 8 syncs and flushes of over 5 ms).
    let (_, cross2_max) = run_depth(2, 2, "");
    let (_, cross4_max) = run_depth(4, 2, "");
    assert!(
        cross2_max + 8.0 < cross4_max && cross4_max + 15.0 < cross_max,
        "cross: depth 2 {cross2_max} ms, 4 {cross4_max} ms, 8 {cross_max} ms"
    );

    let (off_same, off_same_max) = run(1, "global_mutex = false");
    let (off_cross, off_cross_max) = run(2, "global_mutex = false");
    for ft in [&off_same, &off_cross] {
        let handoffs = ft.mutex_handoffs_idle + ft.mutex_handoffs_same_cpu + ft.mutex_handoffs_lost;
        assert_eq!(handoffs, 0, "{ft:?}");
    }
    assert!(
        (off_cross_max - off_same_max).abs() < 10.0,
        "{off_same_max} vs {off_cross_max}"
    );
    assert!(
        off_cross_max < cross_max - 20.0,
        "{off_cross_max} vs {cross_max}"
    );
}
