//! Credit2's unit tests: the reset, both runtime rules on one state, caps and parking.

use super::*;
use crate::sched::{call_hook as hook, TaskInfo};
use crate::topology::Topology;

/// One socket of `ncpus` pCPUs (one runqueue) and `n` halted tasks of weight 256.
fn view(ncpus: u32, n: usize) -> SchedView {
    SchedView {
        topo: Topology::new(1, ncpus, 1, 1),
        tasks: (0..n)
            .map(|i| TaskInfo {
                vm: 0,
                index: i as u32,
                affinity: CpuSet::full(ncpus as usize),
                weight: 256,
                cap: 0,
                class: None,
                latency_vcpu: false,
                host_thread: false,
                rt: Default::default(),
            })
            .collect(),
        state: vec![RunState::Halted; n],
        cpu_curr: vec![None; ncpus as usize],
        nvms: 1,
    }
}

fn started(view: &SchedView, params: &[(&str, &str)]) -> Credit2 {
    let mut table = toml::Table::new();
    for (k, v) in params {
        table.insert(k.to_string(), toml::Value::String(v.to_string()));
    }
    let mut s = Credit2::new(&Params {
        table: &table,
        infos: PARAMS,
    });
    hook(&mut s, view, SimTime::ZERO, |s, ctx| s.init(ctx));
    s
}

/// A reset adds CREDIT_INIT to every unit of the runqueue and clips at CREDIT_INIT +
/// CARRYOVER_MAX; a chosen unit at CREDIT_MIN gets twice CREDIT_INIT.
#[test]
fn a_reset_adds_credit_init_and_clips_at_the_carryover() {
    let v = view(1, 3);
    let mut s = started(&v, &[]);
    s.units[0].credit = -300_000;
    s.units[1].credit = 2_000_000;
    s.units[2].credit = 0;
    hook(&mut s, &v, SimTime(1000), |s, ctx| {
        s.reset_credit(ctx, 0, 0)
    });
    let credits: Vec<i64> = s.units.iter().map(|u| u.credit).collect();
    assert_eq!(
        credits,
        [9_700_000, CREDIT_INIT + CARRYOVER_MAX, CREDIT_INIT]
    );
    s.units[0].credit = CREDIT_MIN;
    s.units[1].credit = CREDIT_MIN + 1;
    hook(&mut s, &v, SimTime(2000), |s, ctx| {
        s.reset_credit(ctx, 0, 0)
    });
    assert_eq!(s.units[0].credit, CREDIT_INIT);
    assert_eq!(s.units[1].credit, CREDIT_INIT + 1);
    assert_eq!(s.counters.values[RESET], 2);
    assert_eq!(s.counters.values[RESET_DOUBLE], 1);
}

/// Through the scheduling path: when the unit chosen and the head both sit at or
/// below zero, the epoch is reset before the chosen unit runs, so it runs with
/// positive credit; a dispatch without that reset is reported by `check`.
#[test]
fn a_unit_runs_below_zero_only_after_a_reset() {
    let mut v = view(1, 2);
    let mut s = started(&v, &[]);
    for t in 0..2 {
        v.state[t] = RunState::Runnable;
        hook(&mut s, &v, SimTime(0), |s, ctx| s.wake(ctx, t as TaskId));
    }
    s.units[0].credit = -1_000;
    s.units[1].credit = -2_000;
    let (next, _) = hook(&mut s, &v, SimTime(10), |s, ctx| s.pick_next(ctx, 0, None));
    assert_eq!(next, Some(0));
    assert_eq!(s.units[0].credit, CREDIT_INIT - 1_000);
    assert_eq!(s.units[1].credit, CREDIT_INIT - 2_000);
    v.state[0] = RunState::Running(0);
    v.cpu_curr[0] = Some(0);
    assert_eq!(s.check(&v), Ok(()));
    s.violated(|| "credit2: task 1 dispatched on pCPU 0 with top credit -5 ns and no reset".into());
    assert!(s.check(&v).unwrap_err().contains("no reset"));
}

/// Unit 0 ran and is preempted by unit 1 (more credit); unit 1's run time under the
/// two rules. 4.19: the runqueue is empty (unit 0 is not back yet), so unit 1 gets
/// its whole credit, up to MAX_TIMER. 2025: unit 0's credit counts, so unit 1 runs
/// until the two meet (here 2 ms).
#[test]
fn the_runtime_rules_differ_on_the_unit_switched_out() {
    for (rule, want) in [("4.19", MAX_TIMER), ("2025", 2_000_000)] {
        let mut v = view(1, 2);
        let mut s = started(&v, &[("runtime_rule", rule)]);
        v.state[0] = RunState::Runnable;
        hook(&mut s, &v, SimTime(0), |s, ctx| s.wake(ctx, 0));
        hook(&mut s, &v, SimTime(0), |s, ctx| s.pick_next(ctx, 0, None));
        v.state[0] = RunState::Running(0);
        v.cpu_curr[0] = Some(0);
        // Unit 0 has run 2 ms when unit 1 wakes with a full credit.
        let now = SimTime(2_000_000);
        v.state[1] = RunState::Runnable;
        let (_, out) = hook(&mut s, &v, now, |s, ctx| s.wake(ctx, 1));
        assert_eq!(out.resched, [0], "{rule}: unit 1 preempts");
        let (next, out) = hook(&mut s, &v, now, |s, ctx| s.pick_next(ctx, 0, Some(0)));
        assert_eq!(next, Some(1), "{rule}");
        assert_eq!(s.units[0].credit, CREDIT_INIT - 2_000_000);
        assert_eq!(
            out.timers,
            [(0, Some(now.plus(SimDuration(want as u64))))],
            "{rule}"
        );
        // Straight from csched2_runtime, with unit 0 not yet back on the runqueue:
        // only the in-flight credit differs.
        s.runq_remove(0);
        let rt = s.runtime(0, 1, false, now, 8_000_000);
        let want_direct = if rule == "4.19" { MAX_TIMER } else { 2_000_000 };
        assert_eq!(rt, want_direct, "{rule}");
    }
}

/// A capped VM's units take budget from the domain's pool and are parked when it is
/// empty; the refill unparks them, and `check` fails if the VM ran more than granted.
#[test]
fn a_capped_vm_is_parked_without_budget_and_the_check_can_fail() {
    let mut v = view(1, 1);
    v.tasks[0].cap = 50;
    let mut s = started(&v, &[]);
    assert_eq!(s.doms[0].tot_budget, 5_000_000);
    v.state[0] = RunState::Runnable;
    hook(&mut s, &v, SimTime(0), |s, ctx| s.wake(ctx, 0));
    let (next, out) = hook(&mut s, &v, SimTime(0), |s, ctx| s.pick_next(ctx, 0, None));
    assert_eq!(next, Some(0));
    assert_eq!(
        out.timers,
        [(0, Some(SimTime(5_000_000)))],
        "runs its 5 ms quota"
    );
    v.state[0] = RunState::Running(0);
    v.cpu_curr[0] = Some(0);
    let (next, _) = hook(&mut s, &v, SimTime(5_000_000), |s, ctx| {
        s.pick_next(ctx, 0, Some(0))
    });
    assert_eq!(next, None, "parked");
    assert!(s.units[0].parked);
    v.state[0] = RunState::Runnable;
    v.cpu_curr[0] = None;
    assert_eq!(s.check(&v), Ok(()));
    let (_, out) = hook(&mut s, &v, SimTime(10_000_000), |s, ctx| {
        s.global_timer(ctx)
    });
    assert!(!s.units[0].parked);
    assert_eq!(out.resched, [0]);
    s.doms[0].used += 10_000_000;
    assert!(s.check(&v).unwrap_err().contains("capped VM 0 ran"));
}
