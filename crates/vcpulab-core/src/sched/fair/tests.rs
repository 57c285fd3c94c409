//! Unit tests of the fair class: the buddy rules of CFS and of EEVDF's kernels, EEVDF's
//! yield before and after 6.19, new and sleeper placement, tunable scaling, fork balancing,
//! root-cgroup host threads beside the VMs' groups, the tick grid, delayed dequeue.

use super::*;
use crate::sched::cfs::Cfs;
use crate::sched::eevdf::{Eevdf, YieldCounts};
use crate::sched::{RunState, SchedOut, SchedView, TaskInfo};
use crate::time::SimTime;
use crate::topology::{CpuSet, Topology};

fn view(ntasks: usize) -> SchedView {
    SchedView {
        topo: Topology::new(1, 1, 1, 1),
        tasks: (0..ntasks)
            .map(|i| TaskInfo {
                vm: 0,
                index: i as u32,
                affinity: CpuSet::full(1),
                weight: 256,
                cap: 0,
                class: None,
                latency_vcpu: false,
                host_thread: false,
                rt: Default::default(),
            })
            .collect(),
        state: vec![RunState::Runnable; ntasks],
        cpu_curr: vec![None],
        nvms: 1,
    }
}

fn tunables() -> Tunables {
    Tunables {
        tick: SimDuration(4_000_000),
        migration_cost: SimDuration(500_000),
        group_per_vm: false,
        tunable_scaling: false,
        fork_balance: true,
        root_host_threads: true,
        tick_grid: true,
        busy_factor: 32,
        wake_affine: true,
        wakee_pelt: false,
    }
}

/// CFS with 4.15's tunables (unscaled) and features.
fn cfs() -> Cfs {
    Cfs {
        latency: SimDuration(6_000_000),
        min_granularity: SimDuration(750_000),
        wakeup_granularity: SimDuration(1_000_000),
        gentle_fair_sleepers: true,
        start_debit: true,
        wakeup_preemption: true,
    }
}

/// EEVDF with its default base slice (unscaled); `pick_buddy`: the 6.14 buddy rule.
fn eevdf(pick_buddy: bool) -> Eevdf {
    Eevdf {
        base_slice: SimDuration(750_000),
        pick_buddy,
        forfeit_on_yield: false,
        yields: YieldCounts::default(),
        period_floor: SimDuration(6_000_000),
        series: Default::default(),
        delay_dequeue: false,
    }
}

/// EEVDF under `buddy_rule = "6.19"`: the 6.14 buddy and the vruntime forfeited on yield.
fn eevdf_6_19() -> Eevdf {
    Eevdf {
        forfeit_on_yield: true,
        ..eevdf(true)
    }
}

/// Runs `body` on scheduler `f` with a context of `ntasks` tasks on one pCPU, at time 0.
fn in_ctx<P: FairPolicy>(
    f: &mut Fair<P>,
    ntasks: usize,
    body: impl FnOnce(&mut Fair<P>, &mut SchedCtx),
) {
    let v = view(ntasks);
    let mut out = SchedOut {
        resched_pending: vec![false],
        ..Default::default()
    };
    let mut ctx = SchedCtx {
        now: SimTime(0),
        view: &v,
        out: &mut out,
    };
    body(f, &mut ctx);
}

/// An initialised scheduler of `ntasks` tasks on one pCPU, after `body` ran on it at
/// time 0.
fn with_fair<P: FairPolicy>(
    policy: P,
    ntasks: usize,
    body: impl FnOnce(&mut Fair<P>, &mut SchedCtx),
) -> Fair<P> {
    let mut f = Fair::new(policy, tunables());
    in_ctx(&mut f, ntasks, |f, ctx| {
        f.init(ctx);
        body(f, ctx);
    });
    f
}

/// Three tasks queued on one pCPU; returns the scheduler with the buddy `next` set.
fn queue_with_next<P: FairPolicy>(policy: P, lead: i64) -> Fair<P> {
    let mut f = with_fair(policy, 3, |f, ctx| {
        for t in 0..3 {
            f.enqueue_task(ctx, t, 0, true, false);
        }
    });
    // Hand-set positions: task 1 is the leftmost, task 2 leads it by `lead`, task 0 last.
    for (t, v) in [(0u32, 10_000_000i64), (1, 0), (2, lead)] {
        let old = f.key(t);
        f.rqs[0].tree.remove(&old);
        f.ents[t as usize].vruntime = v;
        f.ents[t as usize].deadline = v + 1_000_000;
        f.rqs[0].tree.insert((v, t));
    }
    f.rqs[0].next = Some(2);
    f
}

#[test]
fn cfs_honours_the_next_buddy_only_within_the_wakeup_granularity() {
    // Granularity for a nice-0 buddy: 1 ms of vruntime.
    let mut near = queue_with_next(cfs(), 900_000);
    assert_eq!(near.pick_entity(0), Some(2));
    let mut far = queue_with_next(cfs(), 1_100_000);
    assert_eq!(
        far.pick_entity(0),
        Some(1),
        "a buddy beyond the granularity is refused"
    );
    assert_eq!(far.counters.values[C_PICK_NEXT_BUDDY_REFUSED], 1);
    // Fix (b) forces it.
    let mut forced = queue_with_next(cfs(), 1_100_000);
    forced.rqs[0].next_forced = true;
    assert_eq!(forced.pick_entity(0), Some(2));
}

#[test]
fn eevdf_buddy_rule_6_6_ignores_and_6_14_honours_an_eligible_buddy() {
    // V = (10ms + 0 + 0.2ms)/3 = 3.4 ms: task 2 at 0.2 ms is eligible but its deadline
    // (1.2 ms) is later than task 1's (1 ms), so plain EEVDF picks task 1.
    let mut v66 = queue_with_next(eevdf(false), 200_000);
    assert_eq!(v66.pick_entity(0), Some(1));
    let mut v614 = queue_with_next(eevdf(true), 200_000);
    assert_eq!(v614.pick_entity(0), Some(2));
    // An ineligible buddy is refused even under 6.14: at 6 ms it is past V = 16/3 ms.
    let mut inel = queue_with_next(eevdf(true), 6_000_000);
    assert_eq!(inel.pick_entity(0), Some(1));
}

/// Tasks 0..n queued on one pCPU at the hand-set (vruntime, deadline) `pos`, task 0
/// running (curr, out of the tree, as the kernel keeps it).
fn running_queue(policy: Eevdf, pos: &[(i64, i64)]) -> Fair<Eevdf> {
    let mut f = with_fair(policy, pos.len(), |f, ctx| {
        for t in 0..pos.len() as u32 {
            f.enqueue_task(ctx, t, 0, true, false);
        }
    });
    for (t, &(v, d)) in pos.iter().enumerate() {
        let old = f.key(t as u32);
        f.rqs[0].tree.remove(&old);
        f.ents[t].vruntime = v;
        f.ents[t].deadline = d;
        if t > 0 {
            f.rqs[0].tree.insert((v, t as u32));
        }
    }
    f.rqs[0].curr = Some(0);
    f
}

/// The 6.19 yield's branch counts: (forfeited, left unchanged as ineligible).
fn yields(f: &Fair<Eevdf>) -> (u64, u64) {
    (
        f.policy.yields.forfeit,
        f.policy.yields.ineligible_unchanged,
    )
}

/// The yielder's vslice: the base slice in its own vruntime.
fn vslice(f: &Fair<Eevdf>, e: usize) -> i64 {
    Fair::<Eevdf>::calc_delta_fair(f.policy.base_slice, f.ents[e].weight)
}

/// 79104becf42b on one yield: an eligible yielder's vruntime jumps to its deadline and
/// its deadline moves a slice past that (6.14 moves only the deadline); an ineligible
/// yielder is left alone under 6.19 (6.14 still moves its deadline).
#[test]
fn eevdf_6_19_yield_forfeits_the_vruntime_of_an_eligible_yielder_only() {
    // V = (1 ms + 2 ms + 3 ms) / 3 = 2 ms: task 0 at 1 ms is eligible.
    let eligible = [
        (1_000_000, 1_400_000),
        (2_000_000, 2_750_000),
        (3_000_000, 3_750_000),
    ];
    let mut old = running_queue(eevdf(true), &eligible);
    let slice = vslice(&old, 0);
    Eevdf::yield_task(&mut old, 0, 0);
    assert_eq!(
        (old.ents[0].vruntime, old.ents[0].deadline),
        (1_000_000, 1_400_000 + slice)
    );
    let mut new = running_queue(eevdf_6_19(), &eligible);
    Eevdf::yield_task(&mut new, 0, 0);
    assert_eq!(
        (new.ents[0].vruntime, new.ents[0].deadline),
        (1_400_000, 1_400_000 + slice)
    );
    assert_eq!(yields(&new), (1, 0));

    // V = (3 ms + 1 ms + 2 ms) / 3 = 2 ms: task 0 at 3 ms is not eligible.
    let ineligible = [
        (3_000_000, 3_400_000),
        (1_000_000, 1_750_000),
        (2_000_000, 2_750_000),
    ];
    let mut old = running_queue(eevdf(true), &ineligible);
    Eevdf::yield_task(&mut old, 0, 0);
    assert_eq!(
        (old.ents[0].vruntime, old.ents[0].deadline),
        (3_000_000, 3_400_000 + slice)
    );
    let mut new = running_queue(eevdf_6_19(), &ineligible);
    Eevdf::yield_task(&mut new, 0, 0);
    assert_eq!(
        (new.ents[0].vruntime, new.ents[0].deadline),
        (3_000_000, 3_400_000)
    );
    assert_eq!(yields(&new), (0, 1));
}

/// The loop the commit fixes: a task that yields again each time it is picked, while it
/// is the only eligible one. Under 6.14 only its deadline runs ahead, it stays eligible
/// and is picked every time; under 6.19 its vruntime advances a slice per yield, so after
/// a few yields it is past V and the other task runs.
#[test]
fn eevdf_yield_loop_keeps_the_yielder_under_6_14_and_lets_the_other_run_under_6_19() {
    // Task 0 at 0 (deadline 0.75 ms), task 1 at 2 ms: V = 1 ms, only task 0 eligible.
    let pos = [(0, 750_000), (2_000_000, 2_750_000)];
    let picks = |policy: Eevdf| {
        let mut f = running_queue(policy, &pos);
        (0..6)
            .map(|_| {
                Eevdf::yield_task(&mut f, 0, 0);
                Eevdf::pick_next_entity(&mut f, 0, 1)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(picks(eevdf(true)), [0; 6]);
    // 6.19: vruntime 0.75, 1.5, then 2.25 ms > V = 2.125 ms; from then on task 0 is
    // ineligible and its further yields change nothing.
    assert_eq!(picks(eevdf_6_19()), [0, 0, 1, 1, 1, 1]);
    let mut f = running_queue(eevdf_6_19(), &pos);
    for _ in 0..6 {
        Eevdf::yield_task(&mut f, 0, 0);
    }
    assert_eq!(
        (f.ents[0].vruntime, f.ents[0].deadline),
        (2_250_000, 3_000_000)
    );
    assert_eq!(yields(&f), (3, 3));
}

/// A task's first wake-up is `wake_up_new_task`: CFS places it one vslice after
/// min_vruntime (START_DEBIT); a later wake-up after sleeping is placed as a sleeper,
/// half a latency before min_vruntime (GENTLE_FAIR_SLEEPERS).
#[test]
fn first_wake_is_placed_as_a_new_task_later_ones_as_sleepers() {
    with_fair(cfs(), 2, |f, ctx| {
        f.wake(ctx, 0);
        let min = f.rqs[0].min_vruntime;
        f.wake(ctx, 1);
        // Two queued nice-0 tasks share the 6 ms period: a 3 ms slice, in vruntime too.
        assert_eq!(f.ents[1].vruntime, min + 3_000_000);
        // Long asleep: a sleeper's credit is capped at half the 6 ms latency.
        f.dequeue_task(ctx, 1, 0);
        f.ents[1].vruntime = min - 100_000_000;
        f.wake(ctx, 1);
        assert_eq!(f.ents[1].vruntime, f.rqs[0].min_vruntime - 3_000_000);
        assert!(!f.never_queued[1]);
    });
}

#[test]
fn tunables_scale_with_log_of_cpus() {
    assert_eq!([1, 2, 4, 8, 64].map(scale_factor), [1, 2, 3, 4, 4]);
}

/// Each policy's longest turn (the starvation bound's) is the one both had when they
/// shared CFS's tunables: max(latency, min_granularity, 2 x base_slice + tick), with
/// EEVDF's latency and min_granularity at CFS's defaults and CFS's base slice 0, all
/// scaled alike.
#[test]
fn longest_turns_keep_the_bound_of_the_shared_tunables() {
    let tick = SimDuration::from_ms(4);
    let shared = |latency: SimDuration, min_granularity: SimDuration, base_slice: SimDuration| {
        latency.max(min_granularity).max(base_slice * 2 + tick)
    };
    for k in [1, 2, 3, 4] {
        let mut c = cfs();
        c.scale(k);
        let want = shared(c.latency, c.min_granularity, SimDuration::ZERO);
        assert_eq!(c.longest_turn(tick), want, "cfs, k {k}");
        for base in [SimDuration::from_us(750), SimDuration::from_ms(10)] {
            let mut e = Eevdf {
                base_slice: base,
                ..eevdf(true)
            };
            e.scale(k);
            let (latency, min_granularity) =
                (SimDuration::from_ms(6) * k, SimDuration::from_us(750) * k);
            let want = shared(latency, min_granularity, e.base_slice);
            assert_eq!(e.longest_turn(tick), want, "eevdf, k {k}, base {base}");
        }
    }
}

/// Where fork balancing starts `n` new tasks of full affinity on 2 sockets x 2 cores x 2
/// threads, woken one after the other at time 0 (each wake sees the ones before it).
fn fork_placement(n: usize, fork_balance: bool) -> Vec<u32> {
    let ncpus = 8;
    let mut v = view(n);
    v.topo = Topology::new(2, 2, 2, 1);
    for t in &mut v.tasks {
        t.affinity = CpuSet::full(ncpus);
    }
    v.cpu_curr = vec![None; ncpus];
    let mut out = SchedOut {
        resched_pending: vec![false; ncpus],
        ..Default::default()
    };
    let mut ctx = SchedCtx {
        now: SimTime(0),
        view: &v,
        out: &mut out,
    };
    let mut f = Fair::new(
        cfs(),
        Tunables {
            fork_balance,
            ..tunables()
        },
    );
    f.init(&mut ctx);
    for t in 0..n as TaskId {
        f.wake(&mut ctx, t);
    }
    f.task_cpu.clone()
}

#[test]
fn fork_balancing_spreads_new_tasks_over_sockets_then_cores() {
    // Task 0 stays on its start pCPU (every group ties); task 1's socket has one busy
    // pCPU, the other none: it goes to the other socket's first idle pCPU; task 2 ties
    // on sockets and stays local on an idle core; task 3 goes to the idle core of socket 1.
    assert_eq!(fork_placement(4, true), vec![0, 4, 2, 6]);
    // Eight tasks fill every pCPU once.
    let mut all = fork_placement(8, true);
    all.sort();
    assert_eq!(all, (0..8).collect::<Vec<u32>>());
    // Without it, task i starts on pCPU i: the first four share two cores.
    assert_eq!(fork_placement(4, false), vec![0, 1, 2, 3]);
}

/// Group scheduling on two pCPUs: VM 0's two vCPUs (tasks 0 and 1) and two host threads no
/// VM owns (tasks 2 and 3, VM id 1 as the engine gives them), task i placed on pCPU i % 2;
/// `body` runs after all four are queued.
fn groups_with_unowned_threads(
    root_host_threads: bool,
    body: impl FnOnce(&mut Fair<Eevdf>, &mut SchedCtx),
) -> Fair<Eevdf> {
    let ncpus = 2;
    let mut v = view(4);
    v.topo = Topology::new(1, 2, 1, 1);
    v.nvms = 2;
    for (i, t) in v.tasks.iter_mut().enumerate() {
        t.affinity = CpuSet::full(ncpus);
        if i >= 2 {
            (t.vm, t.index, t.host_thread) = (1, i as u32 - 2, true);
        }
    }
    v.cpu_curr = vec![None; ncpus];
    let mut out = SchedOut {
        resched_pending: vec![false; ncpus],
        ..Default::default()
    };
    let mut ctx = SchedCtx {
        now: SimTime(0),
        view: &v,
        out: &mut out,
    };
    let tun = Tunables {
        group_per_vm: true,
        fork_balance: false,
        root_host_threads,
        ..tunables()
    };
    let mut f = Fair::new(eevdf(true), tun);
    f.init(&mut ctx);
    for t in 0..4 {
        f.enqueue_task(&mut ctx, t, t % 2, true, false);
    }
    body(&mut f, &mut ctx);
    f
}

#[test]
fn unowned_host_threads_are_root_cgroup_tasks_beside_the_vm_groups() {
    // Upstream: a task never moved into a cgroup is an entity of the root queue with its
    // own weight (nice 0: 1024), beside VM 0's group entity, which weighs half the VM's
    // shares on each pCPU (one of its two runnable vCPUs is here).
    let f = groups_with_unowned_threads(true, |_, _| {});
    for cpu in 0..2u32 {
        let host = 2 + cpu;
        assert_eq!(
            f.ents[host as usize].rq, cpu,
            "host thread on the root queue"
        );
        assert_eq!(f.ents[host as usize].weight, NICE_0_LOAD);
        assert_eq!(f.path(host, cpu), ([host, 0], 1));
        assert_eq!(f.rqs[cpu as usize].nr_running, 2);
        assert_eq!(f.rqs[cpu as usize].load, NICE_0_LOAD / 2 + NICE_0_LOAD);
    }
    assert_eq!(f.task_h_load(2), NICE_0_LOAD);
    let names: Vec<_> = Scheduler::counters(&f).into_iter().collect();
    assert!(
        names.contains(&("root_cgroup_task_enqueue", 2)),
        "{names:?}"
    );
    // The previous model: the two threads share one group of 1024 shares, split over the
    // two pCPUs where each has a runnable thread, so each weighs half a nice-0 task.
    let g = groups_with_unowned_threads(false, |_, _| {});
    for cpu in 0..2usize {
        assert_ne!(g.ents[2 + cpu].rq, cpu as u32);
        assert_eq!(g.rqs[cpu].load, NICE_0_LOAD / 2 + NICE_0_LOAD / 2);
    }
    assert!(!Scheduler::counters(&g)
        .iter()
        .any(|(n, _)| n.starts_with("root_cgroup")));
}

#[test]
fn a_root_cgroup_task_waking_meets_the_running_vcpu_at_its_group_entity() {
    // find_matching_se: the host thread (task 2, a root-queue entity) and the running vCPU
    // (task 0, under VM 0's group entity) are compared where they share a queue, the root:
    // host thread against group entity.
    let f = groups_with_unowned_threads(true, |f, ctx| {
        f.dequeue_task(ctx, 2, 0);
        assert_eq!(f.pick_next(ctx, 0, None), Some(0));
        f.wake(ctx, 2);
        assert_eq!(f.task_cpu[2], 0, "woken on its previous, busy pCPU");
    });
    let matched: Vec<_> = Scheduler::counters(&f)
        .into_iter()
        .filter(|(n, _)| *n == "root_cgroup_task_vs_group_wakeup")
        .collect();
    assert_eq!(matched, vec![("root_cgroup_task_vs_group_wakeup", 1)]);
}

/// The tick each pick arms on one pCPU with two tasks: task 0 runs from 0, blocks at
/// 1.3 ms (task 1 runs), task 1 blocks at 2 ms (idle), task 0 wakes at 9.1 ms. Returns the
/// tick times armed by the three picks and the two tick-grid counters.
fn ticks_armed(tick_grid: bool) -> (Vec<u64>, u64, u64) {
    let v = view(2);
    let mut out = SchedOut {
        resched_pending: vec![false],
        ..Default::default()
    };
    let mut f = Fair::new(
        eevdf(true),
        Tunables {
            tick_grid,
            ..tunables()
        },
    );
    let mut armed = vec![];
    type Step<'a> = &'a dyn Fn(&mut Fair<Eevdf>, &mut SchedCtx);
    let steps: [(u64, Step); 4] = [
        (0, &|f, ctx| {
            f.init(ctx);
            f.wake(ctx, 0);
            f.wake(ctx, 1);
            f.pick_next(ctx, 0, None);
        }),
        (1_300_000, &|f, ctx| {
            f.block(ctx, 0, 0);
            f.pick_next(ctx, 0, Some(0));
        }),
        (2_000_000, &|f, ctx| {
            f.block(ctx, 0, 1);
            f.pick_next(ctx, 0, Some(1));
        }),
        (9_100_000, &|f, ctx| {
            f.wake(ctx, 0);
            f.pick_next(ctx, 0, None);
        }),
    ];
    for (now, step) in steps {
        out.timers.clear();
        let mut ctx = SchedCtx {
            now: SimTime(now),
            view: &v,
            out: &mut out,
        };
        step(&mut f, &mut ctx);
        if let Some(&(_, Some(at))) = out.timers.last() {
            armed.push(at.ns());
        }
    }
    let c = &f.counters;
    (
        armed,
        c.values[C_TICK_KEPT_ON_SWITCH],
        c.values[C_TICK_RESTARTED_ON_GRID],
    )
}

#[test]
fn the_tick_stays_on_its_grid_across_switches_and_restarts_on_it_after_idle() {
    // Periodic tick (Linux): a switch at 1.3 ms leaves the tick at 4 ms; leaving idle at
    // 9.1 ms restarts it at the next grid point, 12 ms.
    assert_eq!(
        ticks_armed(true),
        (vec![4_000_000, 4_000_000, 12_000_000], 1, 1)
    );
    // The old rule: every pick put the tick a whole period later.
    assert_eq!(
        ticks_armed(false),
        (vec![4_000_000, 5_300_000, 13_100_000], 0, 0)
    );
}

/// A wake-up by task 0, running alone on pCPU 0, of task 1, asleep since it last ran on
/// pCPU 1, on one socket of 4 pCPUs (one LLC, no SMT), every task of weight 1024 in no
/// group: `on_prev` other tasks are runnable on pCPU 1, and with `others_busy` one on each
/// of pCPUs 2 and 3. `flips`: the waker's and the wakee's `wakee_flips` beforehand.
/// Returns where task 1 was queued and the scheduler's counters.
fn affine_wake<P: FairPolicy>(
    policy: P,
    wake_affine: bool,
    on_prev: u32,
    others_busy: bool,
    waker: bool,
    flips: (u32, u32),
) -> (u32, Vec<(&'static str, u64)>) {
    affine_wake_pelt(
        policy,
        wake_affine,
        on_prev,
        others_busy,
        waker,
        flips,
        None,
    )
}

/// `affine_wake`, with `wakee_load = "pelt"` and the wakee's load average at `pelt`
/// (a fraction of its weight) when given.
fn affine_wake_pelt<P: FairPolicy>(
    policy: P,
    wake_affine: bool,
    on_prev: u32,
    others_busy: bool,
    waker: bool,
    flips: (u32, u32),
    pelt: Option<f64>,
) -> (u32, Vec<(&'static str, u64)>) {
    let ncpus = 4;
    let ntasks = 2 + on_prev as usize + 2;
    let mut v = view(ntasks);
    v.topo = Topology::new(1, 4, 1, 1);
    for t in &mut v.tasks {
        t.affinity = CpuSet::full(ncpus);
    }
    v.cpu_curr = vec![None; ncpus];
    let mut out = SchedOut {
        resched_pending: vec![false; ncpus],
        ..Default::default()
    };
    let mut ctx = SchedCtx {
        now: SimTime(0),
        view: &v,
        out: &mut out,
    };
    let tun = Tunables {
        fork_balance: false,
        wake_affine,
        wakee_pelt: pelt.is_some(),
        ..tunables()
    };
    let mut f = Fair::new(policy, tun);
    f.init(&mut ctx);
    if let Some(frac) = pelt {
        f.set_load_frac(1, frac);
    }
    f.enqueue_task(&mut ctx, 0, 0, true, false);
    for i in 0..on_prev {
        f.enqueue_task(&mut ctx, 2 + i, 1, true, false);
    }
    if others_busy {
        f.enqueue_task(&mut ctx, 2 + on_prev, 2, true, false);
        f.enqueue_task(&mut ctx, 3 + on_prev, 3, true, false);
    }
    // Task 1 ran on pCPU 1 before and sleeps: its next wake-up is not its first.
    f.task_cpu[1] = 1;
    f.never_queued[1] = false;
    (f.wakee_flips[0], f.wakee_flips[1]) = flips;
    let w = waker.then_some(Waker { task: 0, cpu: 0 });
    Scheduler::wake_from(&mut f, &mut ctx, 1, w);
    (f.task_cpu[1], Scheduler::counters(&f))
}

fn count(list: &[(&'static str, u64)], name: &str) -> Option<u64> {
    list.iter().find(|c| c.0 == name).map(|c| c.1)
}

#[test]
fn wake_affine_weight_pulls_the_task_to_a_less_loaded_waker() {
    // Loads (NICE_0_LOAD units): this 1 + the task 1 = 2, x 100; prev 3 - the task 1 = 2,
    // x (100 + (117 - 100) / 2) = 108: the waker's pCPU is lighter, the task moves there
    // (4.15 and 6.x alike).
    let (cpu, c) = affine_wake(cfs(), true, 3, true, true, (0, 0));
    assert_eq!(cpu, 0);
    assert_eq!(count(&c, "wake_affine_weight_pulled"), Some(1));
    assert_eq!(count(&c, "wake_affine_target_busy"), Some(1));
    let (cpu, _) = affine_wake(eevdf(true), true, 3, true, true, (0, 0));
    assert_eq!(cpu, 0);
    // With two tasks on prev: 2 x 100 > 1 x 108, the task stays.
    let (cpu, c) = affine_wake(cfs(), true, 2, true, true, (0, 0));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_affine_kept_prev"), Some(1));
    assert_eq!(count(&c, "wake_prev_cpu_busy"), Some(1));
}

#[test]
fn a_wakee_that_mostly_sleeps_weighs_its_load_average_under_pelt() {
    // Two tasks on prev, which the full weight keeps (2 x 100 > 1 x 108, above). A wakee
    // queued 2 % of the time weighs 20: this (1024 + 20) x 100 < prev (2048 - 20) x 108,
    // so it moves to its waker's pCPU, as upstream moves a thread that mostly sleeps.
    let (cpu, c) = affine_wake_pelt(eevdf(true), true, 2, true, true, (0, 0), Some(0.02));
    assert_eq!(cpu, 0);
    assert_eq!(count(&c, "wake_affine_weight_pulled"), Some(1));
    // A new task's average is its full weight: the same answer as without PELT.
    let (cpu, c) = affine_wake_pelt(eevdf(true), true, 2, true, true, (0, 0), Some(1.0));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_affine_kept_prev"), Some(1));
}

#[test]
fn an_idle_previous_pcpu_keeps_the_task() {
    // 6.x (`wake_affine_idle`, 4.16+): prev idle, prev kept by the idle rule.
    let (cpu, c) = affine_wake(eevdf(true), true, 0, true, true, (0, 0));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_affine_idle_prev"), Some(1));
    assert_eq!(count(&c, "wake_prev_cpu_idle"), Some(1));
    // 4.15 has no such rule: the weight rule keeps prev (its load without the task is
    // below zero), then `select_idle_sibling` finds prev idle.
    let (cpu, c) = affine_wake(cfs(), true, 0, true, true, (0, 0));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_affine_idle_prev"), Some(0));
    assert_eq!(count(&c, "wake_affine_kept_prev"), Some(1));
}

#[test]
fn wake_wide_keeps_a_many_partner_wake_on_the_previous_pcpu() {
    // The waker switched wakees 20 times (21 with this one), the wakee 4: with an LLC of
    // 4 pCPUs, 4 >= 4 and 21 >= 4 x 4: wide, no affine wake-up, where the weight rule
    // would have pulled it (see above).
    let (cpu, c) = affine_wake(cfs(), true, 3, true, true, (20, 4));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_wide"), Some(1));
    assert_eq!(count(&c, "wake_affine_weight_pulled"), Some(0));
    // The wakee's 3 flips are below the factor: not wide.
    let (cpu, c) = affine_wake(cfs(), true, 3, true, true, (20, 3));
    assert_eq!(cpu, 0);
    assert_eq!(count(&c, "wake_wide"), Some(0));
}

#[test]
fn without_a_waker_or_with_wake_affine_off_the_search_starts_from_prev() {
    // No waker (a timer or an interrupt): the previous pCPU, busy, nothing idle: prev.
    let (cpu, c) = affine_wake(cfs(), true, 3, true, false, (0, 0));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_prev_cpu_busy"), Some(1));
    assert_eq!(count(&c, "wake_affine_kept_prev"), Some(0));
    assert_eq!(count(&c, "wake_affine_weight_pulled"), Some(0));
    // wake_affine off: the waker is ignored, and its counters are not listed.
    let (cpu, c) = affine_wake(cfs(), false, 3, true, true, (0, 0));
    assert_eq!(cpu, 1);
    assert_eq!(count(&c, "wake_affine_weight_pulled"), None);
    // Prev busy but pCPU 2 idle: the socket search from prev finds it, as before.
    let (cpu, _) = affine_wake(cfs(), true, 3, false, false, (0, 0));
    assert_eq!(cpu, 2);
}

/// Three nice-0 tasks on one pCPU, task 0 running at `v0` (deadline a slice on), tasks 1
/// and 2 queued at 1 ms and 2 ms; EEVDF with or without DELAY_DEQUEUE.
fn delay_queue(delay_dequeue: bool, v0: i64) -> Fair<Eevdf> {
    let policy = Eevdf {
        delay_dequeue,
        ..eevdf(true)
    };
    let mut f = running_queue(
        policy,
        &[
            (v0, v0 + 750_000),
            (1_000_000, 1_750_000),
            (2_000_000, 2_750_000),
        ],
    );
    f.running[0] = Some(0);
    f
}

/// Tasks 1 and 2 of `delay_queue` have run on to 4 ms and 5 ms (deadlines a slice on).
fn others_run_on(f: &mut Fair<Eevdf>) {
    for (t, v) in [(1u32, 4_000_000i64), (2, 5_000_000)] {
        let old = f.key(t);
        f.rqs[0].tree.remove(&old);
        f.ents[t as usize].vruntime = v;
        f.ents[t as usize].deadline = v + 750_000;
        f.rqs[0].tree.insert((v, t));
    }
}

fn delay_count(f: &Fair<Eevdf>, name: &str) -> u64 {
    count(&Scheduler::counters(f), name).expect(name)
}

/// An ineligible sleeper stays queued (tree, load, V) but leaves the runnable counts; an
/// eligible one, or any one without the feature, leaves at once.
#[test]
fn delay_dequeue_keeps_an_ineligible_sleeper_queued() {
    // V = (3 + 1 + 2) / 3 ms = 2 ms: task 0 at 3 ms is not eligible.
    let mut f = delay_queue(true, 3_000_000);
    in_ctx(&mut f, 3, |f, ctx| Fair::block(f, ctx, 0, 0));
    assert!(f.ents[0].delayed && f.ents[0].on_rq);
    assert!(f.rqs[0].tree.contains(&(3_000_000, 0)));
    assert_eq!((f.rqs[0].nr_running, f.rqs[0].load), (3, 3 * NICE_0_LOAD));
    assert_eq!(
        f.avg_vruntime(0),
        2_000_000,
        "the delayed task still counts in V"
    );
    assert_eq!(f.h_nr[0], 2);
    assert!(
        !f.cpu_tasks[0].contains(&0),
        "not runnable: the balancer cannot take it"
    );
    assert_eq!(delay_count(&f, "delay_dequeue_delayed"), 1);

    // At 1.5 ms it is eligible (V = 1.5 ms): it leaves.
    let mut eligible = delay_queue(true, 1_500_000);
    in_ctx(&mut eligible, 3, |f, ctx| Fair::block(f, ctx, 0, 0));
    assert!(!eligible.ents[0].on_rq && !eligible.ents[0].delayed);
    assert_eq!(eligible.rqs[0].nr_running, 2);

    // Without the feature the ineligible sleeper leaves too, its lag saved.
    let mut off = delay_queue(false, 3_000_000);
    in_ctx(&mut off, 3, |f, ctx| Fair::block(f, ctx, 0, 0));
    assert!(!off.ents[0].on_rq && !off.ents[0].delayed);
    assert_eq!(off.ents[0].vlag, 2_000_000 - 3_000_000);
    assert!(count(&Scheduler::counters(&off), "delay_dequeue_delayed").is_none());
}

/// A delayed task woken before it is eligible keeps its vruntime and deadline and stays
/// on its pCPU; one whose lag has turned positive is placed anew at lag 0 (DELAY_ZERO).
#[test]
fn a_woken_delayed_task_keeps_its_place_or_restarts_at_zero_lag() {
    let mut f = delay_queue(true, 3_000_000);
    in_ctx(&mut f, 3, |f, ctx| {
        Fair::block(f, ctx, 0, 0);
        f.wake_with(ctx, 0, None);
    });
    assert!(!f.ents[0].delayed && f.ents[0].on_rq);
    assert_eq!(
        (f.ents[0].vruntime, f.ents[0].deadline),
        (3_000_000, 3_750_000)
    );
    assert_eq!((f.h_nr[0], f.rqs[0].nr_running), (3, 3));
    assert_eq!(delay_count(&f, "delay_dequeue_woken_in_place"), 1);

    // While it sleeps the others run past it: V (with it) = (3 + 4 + 5) / 3 = 4 ms.
    let mut g = delay_queue(true, 3_000_000);
    in_ctx(&mut g, 3, |f, ctx| {
        Fair::block(f, ctx, 0, 0);
        others_run_on(f);
        f.wake_with(ctx, 0, None);
    });
    // Placed at the others' V, 4.5 ms, with lag 0: a slice to its deadline.
    assert_eq!(g.ents[0].vruntime, 4_500_000);
    assert_eq!(g.ents[0].deadline, 4_500_000 + 750_000);
    assert_eq!(g.ents[0].vlag, 0);
    assert_eq!(g.rqs[0].nr_running, 3);
    assert_eq!(delay_count(&g, "delay_dequeue_woken_replaced"), 1);
}

/// The pick that would run a delayed task takes it off the queue instead, its positive
/// lag clipped to 0, and picks again.
#[test]
fn a_picked_delayed_task_leaves_with_its_lag_clipped_to_zero() {
    let mut f = delay_queue(true, 3_000_000);
    let mut picked = None;
    in_ctx(&mut f, 3, |f, ctx| {
        Fair::block(f, ctx, 0, 0);
        // The others run on: task 0 now has the earliest deadline and is eligible
        // (V = (3 + 4 + 5) / 3 = 4 ms).
        others_run_on(f);
        picked = f.pick_task(ctx, 0);
    });
    assert_eq!(
        picked,
        Some(1),
        "the earliest eligible deadline after task 0 left"
    );
    assert!(!f.ents[0].on_rq && !f.ents[0].delayed);
    assert_eq!(f.ents[0].vlag, 0, "its lag of +1 ms is clipped");
    assert_eq!(f.rqs[0].nr_running, 2);
    assert_eq!(delay_count(&f, "delay_dequeue_picked_lag_zeroed"), 1);
}

/// A pCPU left with only delayed tasks takes them all off its queue as it goes idle, as
/// `pick_next_task_fair` does.
#[test]
fn a_pcpu_with_only_delayed_tasks_clears_them_as_it_goes_idle() {
    let policy = Eevdf {
        delay_dequeue: true,
        ..eevdf(true)
    };
    let mut f = running_queue(policy, &[(3_000_000, 3_750_000), (1_000_000, 1_750_000)]);
    f.running[0] = Some(0);
    let mut picks = vec![];
    in_ctx(&mut f, 2, |f, ctx| {
        // V = 2 ms: task 0 sleeps delayed; task 1 runs, then sleeps eligible.
        Fair::block(f, ctx, 0, 0);
        picks.push(Fair::pick_next(f, ctx, 0, None));
        Fair::block(f, ctx, 0, 1);
        picks.push(Fair::pick_next(f, ctx, 0, None));
    });
    assert_eq!(picks, vec![Some(1), None]);
    assert!(!f.ents[0].on_rq && !f.ents[0].delayed);
    assert_eq!((f.rqs[0].nr_running, f.nr_delayed[0]), (0, 0));
    assert_eq!(delay_count(&f, "delay_dequeue_delayed"), 1);
    assert_eq!(delay_count(&f, "delay_dequeue_picked"), 1);
}

/// `--check-invariants` catches a delayed task the engine thinks runnable, and a per-pCPU
/// count of delayed tasks that disagrees with the tasks.
#[test]
fn the_delayed_dequeue_check_catches_broken_bookkeeping() {
    let mut f = delay_queue(true, 3_000_000);
    in_ctx(&mut f, 3, |f, ctx| Fair::block(f, ctx, 0, 0));
    let mut v = view(3);
    v.state[0] = RunState::Halted;
    assert_eq!(Scheduler::check(&f, &v), Ok(()));
    v.state[0] = RunState::Runnable;
    let err = Scheduler::check(&f, &v).unwrap_err();
    assert!(err.contains("task 0 is delayed but not asleep"), "{err}");
    v.state[0] = RunState::Halted;
    f.nr_delayed[0] = 0;
    let err = Scheduler::check(&f, &v).unwrap_err();
    assert!(err.contains("are 1 but nr_delayed says 0"), "{err}");
}

#[test]
fn the_load_average_follows_the_queue_through_enqueue_and_dequeue() {
    // Queued for one half-life (32.768 ms), then asleep for one: a new task's average
    // stays at its full weight while queued and halves while asleep. Without the update at
    // enqueue the wakee would still weigh 1024; without the one at dequeue, 256.
    let half = SimDuration::from_ns(32 * 1_024_000);
    let mut f = Fair::new(
        eevdf(true),
        Tunables {
            wakee_pelt: true,
            ..tunables()
        },
    );
    in_ctx(&mut f, 2, |f, ctx| {
        f.init(ctx);
        f.enqueue_task(ctx, 0, 0, true, false);
        ctx.now = SimTime(0) + half;
        f.dequeue_task(ctx, 0, 0);
        assert_eq!(f.wakee_load(0, 1024), 1024);
        ctx.now += half;
        f.enqueue_task(ctx, 0, 0, true, false);
        assert_eq!(f.wakee_load(0, 1024), 512);
    });
}

/// A reweight counter's value (`fair/reweight.rs`), by name.
fn reweights(f: &Fair<Eevdf>, name: &str) -> u64 {
    let list = Scheduler::counters(f);
    list.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
}

#[test]
fn raising_a_queued_task_preempts_an_ineligible_curr_but_not_a_protected_one() {
    // Curr 0 at 2 ms is past V = 1.5 ms: ineligible. Task 1 to nice -20 keeps its lag
    // (+0.5 ms at 1024, 5768 at 88761) and its request in real time, and V stays.
    let mut f = running_queue(
        eevdf(true),
        &[(2_000_000, 2_750_000), (1_000_000, 1_750_000)],
    );
    f.running[0] = Some(0);
    f.ents[0].protect = Some(2_750_000);
    in_ctx(&mut f, 2, |f, ctx| {
        assert_eq!(f.avg_vruntime(0), 1_500_000);
        assert!(Scheduler::set_nice(f, ctx, 1, -20));
        assert_eq!(f.ents[1].weight, 88761);
        assert_eq!(f.ents[1].vlag, 5768);
        assert_eq!(f.ents[1].deadline - f.ents[1].vruntime, 8652);
        assert!(
            (f.avg_vruntime(0) - 1_500_000).abs() < 100,
            "{}",
            f.avg_vruntime(0)
        );
        assert!(f.eligible(0, 1));
        assert_eq!(ctx.out.resched, vec![0]);
    });
    assert_eq!(reweights(&f, "reweight_queued_preempt"), 1);
    // Curr 0 eligible (1 ms <= V = 1.1 ms) and protected; the raised task waits (it is
    // ineligible anyway: `a_raised_task_waits_for_a_protected_current_task` tests the
    // protection itself).
    let mut f = running_queue(
        eevdf(true),
        &[(1_000_000, 1_750_000), (1_200_000, 1_950_000)],
    );
    f.running[0] = Some(0);
    f.ents[0].protect = Some(1_750_000);
    in_ctx(&mut f, 2, |f, ctx| {
        Scheduler::set_nice(f, ctx, 1, -20);
        assert!(ctx.out.resched.is_empty());
        // Its lag in real time, -100 us at weight 1024, is kept to within 0.2 %.
        let real_lag = (f.avg_vruntime(0) - f.ents[1].vruntime) as f64 * 88761.0;
        assert!(
            (real_lag / (-100_000.0 * 1024.0) - 1.0).abs() < 0.002,
            "{real_lag}"
        );
    });
    assert_eq!(reweights(&f, "reweight_queued_no_preempt"), 1);
}

#[test]
fn lowering_a_running_task_keeps_it_while_eligible_and_switches_it_out_when_not() {
    for (pos, eligible) in [
        ([(1_000_000, 1_750_000), (1_050_000, 1_800_000)], true),
        ([(1_050_000, 1_800_000), (1_000_000, 1_750_000)], false),
    ] {
        let mut f = running_queue(eevdf(true), &pos);
        f.running[0] = Some(0);
        f.ents[0].protect = Some(pos[0].1);
        in_ctx(&mut f, 2, |f, ctx| {
            // Raising the running task asks for nothing.
            Scheduler::set_nice(f, ctx, 0, -20);
            assert!(ctx.out.resched.is_empty());
            let rel = (f.ents[0].deadline - f.ents[0].vruntime) * 88761;
            Scheduler::set_nice(f, ctx, 0, 0);
            assert_eq!(f.ents[0].weight, 1024);
            // Its request in real time is kept, and protection re-armed at the new deadline.
            let rel_after = (f.ents[0].deadline - f.ents[0].vruntime) * 1024;
            assert!((rel - rel_after).abs() < 100 * 88761, "{rel} {rel_after}");
            assert_eq!(f.ents[0].protect, Some(f.ents[0].deadline));
            assert_eq!(f.eligible(0, 0), eligible);
            assert_eq!(ctx.out.resched.is_empty(), eligible);
        });
        assert_eq!(reweights(&f, "reweight_running_raised"), 1);
        let (kept, switched) = if eligible { (1, 0) } else { (0, 1) };
        assert_eq!(reweights(&f, "reweight_running_lowered_kept"), kept);
        assert_eq!(reweights(&f, "reweight_running_lowered_resched"), switched);
    }
}

#[test]
fn a_sleeping_task_keeps_its_lag_in_real_time_and_an_unchanged_nice_does_nothing() {
    let mut f = with_fair(eevdf(true), 2, |_, _| {});
    f.ents[0].vlag = -300_000;
    assert!(!f.ents[0].on_rq);
    in_ctx(&mut f, 2, |f, ctx| {
        Scheduler::set_nice(f, ctx, 0, -20);
        assert_eq!(f.ents[0].vlag, -3460); // div_s64 truncates toward zero
        Scheduler::set_nice(f, ctx, 0, -20);
        Scheduler::set_nice(f, ctx, 0, 0);
        // The round trip loses less than one 88761/1024 step.
        assert_eq!(f.ents[0].vlag, -299_915);
        assert!(ctx.out.resched.is_empty());
    });
    assert_eq!(reweights(&f, "reweight_sleeping"), 2);
    assert_eq!(reweights(&f, "reweight_unchanged"), 1);
    // A run that changes no nice value lists no reweight counters; CFS has no nice here.
    let plain = with_fair(eevdf(true), 1, |_, _| {});
    assert!(!Scheduler::counters(&plain)
        .iter()
        .any(|(n, _)| n.starts_with("reweight")));
    let mut cfs = with_fair(cfs(), 1, |_, _| {});
    in_ctx(&mut cfs, 1, |f, ctx| {
        assert!(!Scheduler::set_nice(f, ctx, 0, -20))
    });
}

#[test]
fn a_raised_task_waits_for_a_protected_current_task() {
    // Both at V = 1 ms (lag 0). Raised to nice -20, task 1's remaining request (0.95 ms at
    // 1024) becomes 10959 of vruntime: the earliest eligible deadline. An unprotected pick
    // would run it; curr 0 keeps its pCPU while protected, and loses it once it is not.
    for (protected, preempts) in [(true, false), (false, true)] {
        let mut f = running_queue(
            eevdf(true),
            &[(1_000_000, 1_750_000), (1_000_000, 1_950_000)],
        );
        f.running[0] = Some(0);
        f.ents[0].protect = protected.then_some(1_750_000);
        in_ctx(&mut f, 2, |f, ctx| {
            Scheduler::set_nice(f, ctx, 1, -20);
            assert_eq!(f.ents[1].deadline - f.ents[1].vruntime, 10959);
            assert!(f.eligible(0, 1) && f.eligible(0, 0));
            assert_eq!(f.pick_eevdf(0, None), Some(1));
            assert_eq!(!ctx.out.resched.is_empty(), preempts);
        });
        let (yes, no) = if preempts { (1, 0) } else { (0, 1) };
        assert_eq!(reweights(&f, "reweight_queued_preempt"), yes);
        assert_eq!(reweights(&f, "reweight_queued_no_preempt"), no);
    }
}
