//! Halt polling on hand-built states: KVM's host-side window (`kvm_vcpu_halt`) grows
//! until wake-ups land inside it and resets after a long block, polling stops for a
//! neighbour at once (the neighbour runs exactly as without polling), CPU time spent
//! polling is accounted, the guest haltpoll governor polls in the guest and turns host
//! polling off, and the keys are validated.

use vcpulab_core::api::{run, summary_json, RunOptions};
use vcpulab_core::summary::{HaltPollSummary, Summary};
use vcpulab_core::Scenario;

fn checked() -> RunOptions {
    RunOptions {
        check_invariants: true,
        ..Default::default()
    }
}

/// One pCPU; VM `svc` (1 vCPU) loops over `ops`; `rest` is appended (more VMs).
fn scenario(kvm: &str, svc_extra: &str, ops: &str, rest: &str) -> Scenario {
    let text = format!(
        r#"
duration = "20ms"
seed = 1
[host]
cores_per_socket = 1
[scheduler]
name = "cfs"
{kvm}
[[vm]]
name = "svc"
vcpus = 1
{svc_extra}
[[vm.workload]]
kind = "program"
ops = [ {ops} ]
{rest}
"#
    );
    Scenario::from_toml_str(&text, "halt-poll.toml").unwrap_or_else(|e| panic!("{e}"))
}

const SHORT_SLEEPS: &str =
    r#"{ op = "compute", duration = "10us" }, { op = "sleep", duration = "30us" }"#;

fn vm_poll(s: &Summary, vm: usize) -> &HaltPollSummary {
    s.vms[vm].halt_poll.as_ref().expect("[kvm] gives halt_poll")
}

fn ns(secs: f64) -> i64 {
    (secs * 1e9).round() as i64
}

/// Halts of 30 us: the window starts at 0 (no poll), grows to 10 us (poll fails), 20 us
/// (fails), 40 us (a wake inside it: success), and stays there: every later halt is a
/// successful poll of exactly 30 us.
#[test]
fn window_grows_until_the_wake_lands_inside_it() {
    let s = run(&scenario("[kvm]", "", SHORT_SLEEPS, ""), None, &checked()).unwrap();
    let p = vm_poll(&s, 0);
    let v = s.vms[0].vcpus[0].halt_poll.as_ref().unwrap();
    assert_eq!(v.polls, p.polls);
    assert!(p.successful_polls > 100, "{p:?}");
    assert_eq!(p.polls, p.successful_polls + 2, "{p:?}");
    // 10 + 20 us of failed polls, 30 us per success, and the run may end inside one
    // more poll (its time counted, the poll not yet).
    let expected = 30_000 + 30_000 * p.successful_polls as i64;
    let got = ns(p.poll_time_s);
    assert!(
        got >= expected && got - expected < 30_000,
        "{got} vs {expected}"
    );
    // Polled time is idle time to the host scheduler, within the vCPU's halted time.
    assert!(p.poll_time_s <= s.vms[0].halted_time_s + 1e-9);
    // A caught wake-up resumes at once; with no halt_wakeup_cost neither pays anything
    // (only the first start pays a context switch).
    let lat = p.wakeup_latency_ms.as_ref().unwrap();
    assert_eq!(lat.p99, 0.0, "{lat:?}");
}

/// Four short halts then one of 500 us, past the 200 us ceiling: the long block resets
/// the window (shrink 0), so each loop grows it again from 0: 10 (fails), 20 (fails),
/// 40 (caught), then the long halt's 40 us poll fails: 4 polls, 1 success per loop.
/// halt_poll_ns_shrink = 2 halves instead (40 -> 20 us, then below grow_start: 0 too).
#[test]
fn a_block_past_the_ceiling_resets_the_window() {
    let ops = format!(
        "{SHORT_SLEEPS}, {SHORT_SLEEPS}, {SHORT_SLEEPS}, {SHORT_SLEEPS}, \
         {{ op = \"compute\", duration = \"10us\" }}, {{ op = \"sleep\", duration = \"500us\" }}"
    );
    let s = run(&scenario("[kvm]", "", &ops, ""), None, &checked()).unwrap();
    let p = vm_poll(&s, 0);
    let loops = p.successful_polls;
    assert!(loops > 20, "{p:?}");
    assert!(p.polls >= 4 * loops && p.polls <= 4 * loops + 4, "{p:?}");
    // Per loop: 10 + 20 + 30 + 40 us polled.
    let per_loop = 100_000;
    let got = ns(p.poll_time_s);
    assert!((got - per_loop * loops as i64).abs() <= per_loop, "{got}");
    // halt_poll_ns = 0: no polling at all.
    let off = run(
        &scenario("[kvm]\nhalt_poll_ns = 0", "", &ops, ""),
        None,
        &checked(),
    )
    .unwrap();
    let p = vm_poll(&off, 0);
    assert_eq!((p.polls, p.poll_time_s), (0, 0.0));
}

/// A neighbour VM on the same pCPU wakes while `svc` polls: the poll stops at once, so
/// the neighbour completes exactly the same work as with polling off, and some polls
/// fail to it. The engine checks after every event that a polling pCPU runs nothing
/// else (`--check-invariants`).
#[test]
fn polling_stops_at_once_when_a_task_becomes_runnable() {
    let neighbour = r#"
[[vm]]
name = "nb"
vcpus = 1
[[vm.workload]]
kind = "program"
ops = [ { op = "compute", duration = "15us" }, { op = "sleep", duration = "47us" } ]
"#;
    let with = |kvm: &str| {
        run(
            &scenario(kvm, "", SHORT_SLEEPS, neighbour),
            None,
            &checked(),
        )
    };
    let polled = with("[kvm]").unwrap();
    let unpolled = with("[kvm]\nhalt_poll_ns = 0").unwrap();
    let p = vm_poll(&polled, 0);
    assert!(p.polls > p.successful_polls + 10, "{p:?}");
    assert!(p.successful_polls > 0, "{p:?}");
    for vm in 0..2 {
        assert_eq!(
            polled.vms[vm].workloads[0].completed, unpolled.vms[vm].workloads[0].completed,
            "vm {vm}"
        );
        assert_eq!(polled.vms[vm].cpu_time_s, unpolled.vms[vm].cpu_time_s);
    }
    // The pCPU's time: run time of both VMs plus polling never exceeds the run.
    let busy: f64 = polled.vms.iter().map(|v| v.cpu_time_s).sum();
    assert!(busy + p.poll_time_s <= 0.020 + 1e-9);
}

/// halt_wakeup_cost is paid by a vCPU woken from a real block and not by one a poll
/// caught: with polling its wake-ups are free, without they cost it.
#[test]
fn a_caught_wake_up_skips_the_wakeup_cost() {
    let lat = |kvm: &str| {
        let s = run(&scenario(kvm, "", SHORT_SLEEPS, ""), None, &checked()).unwrap();
        vm_poll(&s, 0).wakeup_latency_ms.clone().unwrap()
    };
    let polled = lat("[kvm]\nhalt_wakeup_cost = \"4us\"");
    let blocked = lat("[kvm]\nhalt_wakeup_cost = \"4us\"\nhalt_poll_ns = 0");
    assert_eq!(blocked.p50, 0.004);
    assert_eq!(polled.p50, 0.0);
}

/// A measured latency is a distribution, not a constant (issue 27 part 1): a log-normal
/// `halt_wakeup_cost` gives each blocked wake-up its own draw, around the median it is
/// given, the same draws for the same seed and other draws for another seed.
#[test]
fn a_wakeup_cost_distribution_is_drawn_per_wake_up_from_its_own_stream() {
    let lat = |seed: u64| {
        let kvm = "[kvm]\nhalt_poll_ns = 0\nhalt_wakeup_cost = { dist = \"lognormal\", median = \"40us\", sigma = 0.5 }";
        let mut sc = scenario(kvm, "", SHORT_SLEEPS, "");
        sc.seed = seed;
        let s = run(&sc, None, &checked()).unwrap();
        vm_poll(&s, 0).wakeup_latency_ms.clone().unwrap()
    };
    let (a, b, c) = (lat(1), lat(1), lat(2));
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert_ne!(format!("{a:?}"), format!("{c:?}"));
    // Median 40 us (the histogram's buckets resolve a few percent); sigma 0.5 puts the
    // 90th percentile at 40 x e^(1.28 x 0.5) = 76 us.
    assert!((0.036..=0.044).contains(&a.p50), "{a:?}");
    assert!(a.p90 > 0.060 && a.p90 < 0.095, "{a:?}");
}

/// The guest haltpoll governor: the first idle halts (limit 0), the halt of 30 us grows
/// the limit to 50 us, and from then on every idle period is a guest poll ended by the
/// timer's wake-up; the vCPU never halts again, so the host never polls (the driver
/// turns host polling off) and the polled time is the vCPU's own CPU time.
#[test]
fn guest_haltpoll_polls_in_the_guest_and_turns_host_polling_off() {
    let s = run(
        &scenario("[kvm]", "[vm.haltpoll]", SHORT_SLEEPS, ""),
        None,
        &checked(),
    )
    .unwrap();
    let p = vm_poll(&s, 0);
    assert_eq!(p.polls, 0);
    assert_eq!(s.vms[0].vcpus[0].halts, 1);
    assert!(p.guest_polls > 100);
    assert!(p.guest_polls - p.guest_successful_polls <= 1, "{p:?}");
    let got = ns(p.guest_poll_time_s);
    let expected = 30_000 * p.guest_successful_polls as i64;
    assert!((got - expected).abs() <= 30_000, "{got} vs {expected}");
    // Compute 10 us + poll 30 us per loop: the vCPU is on its pCPU nearly all the time.
    assert!(s.vms[0].cpu_time_s > 0.019, "{}", s.vms[0].cpu_time_s);
    // Sleeps past the 200 us ceiling: the limit never grows, so it never polls.
    let long = r#"{ op = "compute", duration = "10us" }, { op = "sleep", duration = "300us" }"#;
    let s = run(
        &scenario("[kvm]", "[vm.haltpoll]", long, ""),
        None,
        &checked(),
    )
    .unwrap();
    assert_eq!(vm_poll(&s, 0).guest_polls, 0);
}

/// A guest poll burns the pCPU as the vCPU's own run time: a CPU-hog neighbour on it
/// gets only its fair share against the polling vCPU, while host polling yields to it at
/// once (the hog runs exactly as without polling).
#[test]
fn guest_polling_takes_cpu_from_a_neighbour_and_host_polling_does_not() {
    let hog = r#"
[[vm]]
name = "hog"
vcpus = 1
[[vm.workload]]
kind = "stress-ng"
"#;
    let hog_ops = |kvm: &str, svc: &str| {
        let s = run(&scenario(kvm, svc, SHORT_SLEEPS, hog), None, &checked()).unwrap();
        s.vms[1].workloads[0].completed
    };
    let none = hog_ops("[kvm]\nhalt_poll_ns = 0", "");
    let host = hog_ops("[kvm]", "");
    let guest = hog_ops("[kvm]", "[vm.haltpoll]");
    assert_eq!(host, none);
    assert!(
        (guest as f64) < none as f64 * 0.9,
        "guest {guest} vs none {none}"
    );
}

#[test]
fn keys_are_validated_with_clear_errors() {
    let err = |text: &str| {
        Scenario::from_toml_str(text, "bad.toml")
            .expect_err("refused")
            .to_string()
    };
    let base = "duration = \"1s\"\n[host]\ncores_per_socket = 1\n[scheduler]\nname = \"cfs\"\n";
    let e = err(&format!(
        "{base}[[vm]]\nname = \"a\"\nvcpus = 1\n[vm.haltpoll]\n"
    ));
    assert!(e.contains("haltpoll") && e.contains("[kvm]"), "{e}");
    let e = err(&format!(
        "{base}[kvm]\n[[vm]]\nname = \"a\"\nvcpus = 1\n[vm.haltpoll]\nguest_halt_poll_nss = 1\n"
    ));
    assert!(
        e.contains("guest_halt_poll_nss") && e.contains("guest_halt_poll_ns"),
        "{e}"
    );
    let e = err(&format!(
        "{base}[kvm]\nhalt_poll_ns = -1\n[[vm]]\nname = \"a\"\nvcpus = 1\n"
    ));
    assert!(e.contains("halt_poll_ns"), "{e}");
    let e = err(&format!(
        "{base}[kvm]\nhalt_poll_grow = 2\n[[vm]]\nname = \"a\"\nvcpus = 1\n"
    ));
    assert!(
        e.contains("halt_poll_grow") && e.contains("halt_poll_ns_grow"),
        "{e}"
    );
}

/// Without [kvm] the summary has no halt_poll keys (outputs of such scenarios unchanged).
#[test]
fn no_halt_poll_keys_without_kvm() {
    let s = run(&scenario("", "", SHORT_SLEEPS, ""), None, &checked()).unwrap();
    assert!(!summary_json(&s).contains("halt_poll"));
    let s = run(&scenario("[kvm]", "", SHORT_SLEEPS, ""), None, &checked()).unwrap();
    assert!(summary_json(&s).contains("\"halt_poll\""));
}
