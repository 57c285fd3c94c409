//! The scheduler side of Wanpeng Li's proposed "Semantics-aware vCPU scheduling for
//! oversubscribed KVM" series, as EEVDF's `yield_series` switch ("off", "v2", "v3"):
//! what `yield_to_task_fair` does between `set_next_buddy` and `yield_task_fair`.
//!
//! ## v2, the "debooster" ([PATCH v2 1-5/9], 2025-12-19, based on v6.19-rc1)
//! Read from the patches (lore message ids 20251219035334.39790-2..6@gmail.com):
//! - Rate limit first (`yield_deboost_rate_limit`): if the yielder's run queue last
//!   passed this check at most 6 ms ago, nothing more; otherwise the time is recorded
//!   (even when a later check fails).
//! - Then the target must be on the yielder's run queue (`task_rq(p_target) == rq`), as
//!   must the yielder; else nothing.
//! - At the lowest common ancestor (`yield_deboost_find_lca`: the queue where the
//!   yielder's and the target's entities meet; in vcpulab the VM's queue on that pCPU for
//!   two vCPUs of one VM, the root for two VMs, the root without `group_per_vm`):
//!   `gran` = the base slice in the yielder's entity's vruntime, `need` = max(0, target's
//!   vruntime - yielder's), penalty = gran + need + need / 10.
//! - Reverse-pair debounce: if the previous penalty on this run queue was target ->
//!   yielder, at most 600 us ago, the penalty is cut to max(need, gran). The pair and
//!   time are recorded.
//! - Clamped to [gran, cap], the cap by `h_nr_queued` of the common queue: 2 tasks 6.0 x
//!   gran, 3: 4.0 x, 4-6: 2.5 x, 7-8: 2.0 x, 9-12: 1.5 x, more: 1.0 x (fewer than 2 falls
//!   in the 4-6 row, as the patch's `else if` chain does).
//! - With need = 0 a baseline (3 tasks 15/16 x gran ... more than 12: 1/4 x) is a floor.
//!   Every baseline is at most gran, the clamp's own floor, so it never changes the
//!   penalty: kept (and tested) as written, it is dead code in the patch too.
//! - The yielder's LCA entity (the running one, off the tree): vruntime += penalty,
//!   deadline = vruntime + its slice. This happens before `yield_task_fair`, so under
//!   the 6.19 rule a yielder still eligible afterwards also forfeits (the patch orders it
//!   so on purpose), and on the yielder's vruntime as last charged (the patch calls
//!   `update_curr` only when the LCA entity is not the queue's current one, which it
//!   always is here).
//!
//! ## v3, lag credit ([PATCH v3 1-5/10], 2026-06-12, based on v7.1-rc7)
//! Read from the cover letter and patch 5 (the primitives of patches 1-4 were not
//! reachable; what they do is taken from the cover letter's words):
//! - Only when the target shares the yielder's run queue (the cover letter's "Scope":
//!   "The lag credit takes effect only when the yielding vCPU and its target share a
//!   runqueue"; with 1:1 pinning "the path is inert").
//! - Each level of the chain `set_next_buddy` nominated whose entity is not eligible
//!   gets lag credited to a positive margin, "clamped to entity_lag()'s legal positive-lag
//!   bound" (max(2 x slice, tick) of its vruntime). The margin itself "scales with
//!   runqueue depth"; its formula is in patch 2, which was not reachable, so vcpulab
//!   credits the bound itself: the largest credit the patch allows (deviation). A queued
//!   entity is requeued through `place_entity` with that lag (the patch's "canonical
//!   requeue"); the running one is shifted in place so its lag becomes the margin.
//!   Levels already eligible are left alone. The credit is not rate limited.
//! - Then a forced local reschedule: slice protection (RUN_TO_PARITY) is cancelled along
//!   the yielder's entities and the pCPU rescheduled, at most once per 6 ms per run
//!   queue (patch 5). vcpulab's `yield_to` reschedules the yielder's pCPU on every
//!   successful yield already (as `schedule()` after `yield_to` does), and its pick after
//!   a yield has put the yielder back, so cancelling the protection changes only a
//!   wake-up's preemption check: the rule is kept for its counters and that check.
//!
//! ## Counters (only with the series on)
//! v2: `deboost_applied`, `deboost_zero_gap` (applied, need = 0), `deboost_capped`
//! (penalty cut to the queue-length cap), `deboost_debounced` (reverse pair),
//! `deboost_rate_limited`, `deboost_other_rq`. v3: `lag_credit_levels` (levels
//! credited), `lag_credit_eligible_levels` (levels already eligible), `lag_credit_other_rq`,
//! `forced_resched`, `forced_resched_rate_limited`.

use super::Eevdf;
use crate::sched::fair::Fair;
use crate::sched::{SchedCtx, TaskId};
use crate::time::{SimDuration, SimTime};

/// Which version of the series' scheduler side runs on `yield_to`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Series {
    /// Upstream: nothing between the buddy and the yield.
    #[default]
    Off,
    /// v2: the yielder's vruntime pushed at the common ancestor ("debooster").
    V2,
    /// v3: lag credited to the nominated buddy, and a forced local reschedule.
    V3,
}

impl Series {
    pub fn parse(s: &str) -> Series {
        match s {
            "v2" => Series::V2,
            "v3" => Series::V3,
            _ => Series::Off,
        }
    }
}

/// v2's rate limit and v3's forced-reschedule limit: once per 6 ms per run queue.
pub const RATE_LIMIT: SimDuration = SimDuration(6_000_000);
/// v2's reverse-pair window: ~600 us.
pub const DEBOUNCE: SimDuration = SimDuration(600_000);

/// One run queue's (pCPU's) state of the series.
#[derive(Clone, Copy, Debug, Default)]
pub struct RqState {
    /// When the rate limit last let a v2 deboost (or a v3 forced reschedule) through.
    last_pass: Option<SimTime>,
    /// v2: the last (yielder, target) pair penalised here, and when.
    last_pair: Option<(TaskId, TaskId, SimTime)>,
}

/// Per-branch counts (reported only with the series on).
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub deboost_applied: u64,
    pub deboost_zero_gap: u64,
    pub deboost_capped: u64,
    pub deboost_debounced: u64,
    pub deboost_rate_limited: u64,
    pub deboost_other_rq: u64,
    pub lag_credit_levels: u64,
    pub lag_credit_eligible_levels: u64,
    pub lag_credit_other_rq: u64,
    pub forced_resched: u64,
    pub forced_resched_rate_limited: u64,
}

/// The series' switch and state inside `Eevdf`.
#[derive(Clone, Debug, Default)]
pub struct YieldSeries {
    pub series: Series,
    pub rq: Vec<RqState>,
    pub counts: Counts,
}

/// `yield_deboost_rate_limit`: true (limited) if `last` passed at most `RATE_LIMIT`
/// before `now`; otherwise `last` becomes `now`.
pub fn rate_limited(last: &mut Option<SimTime>, now: SimTime) -> bool {
    if let Some(t) = *last {
        if now.since(t) <= RATE_LIMIT {
            return true;
        }
    }
    *last = Some(now);
    false
}

/// The v2 cap on the penalty by the common queue's `h_nr_queued`, in units of `gran`.
pub fn deboost_cap(gran: i64, h_nr_queued: u64) -> i64 {
    match h_nr_queued {
        2 => gran * 6,
        3 => gran * 4,
        0..=6 => gran * 5 / 2,
        7..=8 => gran * 2,
        9..=12 => gran * 3 / 2,
        _ => gran,
    }
}

/// The v2 floor when there is no fairness gap (see the module notes: never above gran).
pub fn deboost_zero_gap_floor(gran: i64, h_nr_queued: u64) -> i64 {
    match h_nr_queued {
        3 => gran * 15 / 16,
        4..=6 => gran * 5 / 8,
        7..=8 => gran / 2,
        9..=12 => gran * 3 / 8,
        13.. => gran / 4,
        _ => gran,
    }
}

/// What `yield_deboost_calculate_penalty` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Penalty {
    pub value: i64,
    pub debounced: bool,
    pub capped: bool,
}

/// `yield_deboost_calculate_penalty` for a yielder entity at `v_y`, a target entity at
/// `v_t`, `gran` of vruntime, `h_nr_queued` tasks under the common queue; `reverse`:
/// the previous penalty on this queue was target -> yielder within `DEBOUNCE`.
pub fn deboost_penalty(gran: i64, v_y: i64, v_t: i64, h_nr_queued: u64, reverse: bool) -> Penalty {
    let need = (v_t - v_y).max(0);
    let mut p = gran.saturating_add(need.saturating_add(need / 10));
    let mut debounced = false;
    if reverse {
        let alt = need.max(gran);
        if p > alt {
            p = alt;
            debounced = true;
        }
    }
    let cap = deboost_cap(gran, h_nr_queued);
    let capped = p > cap;
    p = p.clamp(gran, cap);
    if need == 0 {
        p = p.max(deboost_zero_gap_floor(gran, h_nr_queued));
    }
    Penalty {
        value: p,
        debounced,
        capped,
    }
}

/// The largest positive lag `entity_lag` allows an entity of `weight`: max(2 x slice,
/// tick) of its vruntime. v3 credits to it (see the module notes).
pub fn lag_credit_bound(slice: SimDuration, tick: SimDuration, weight: u64) -> i64 {
    Fair::<Eevdf>::calc_delta_fair((slice * 2).max(tick), weight)
}

/// The in-place shift that gives the running entity (weight `w`, in a queue of load
/// `big_w` that includes it) lag `want` when its lag is `lag`: moving it by `d` moves V
/// by d x w / W, so d = (want - lag) x W / (W - w). None when it is alone.
pub fn curr_credit_shift(lag: i64, want: i64, w: u64, big_w: u64) -> Option<i64> {
    if big_w <= w {
        return None;
    }
    let d = (want - lag) as i128 * big_w as i128 / (big_w - w) as i128;
    Some(d as i64)
}

/// The series' part of `yield_to_task_fair` (see the module notes).
pub fn yield_to(
    f: &mut Fair<Eevdf>,
    ctx: &mut SchedCtx,
    me: TaskId,
    cpu: u32,
    target: TaskId,
    p_cpu: u32,
) {
    let series = f.policy.series.series;
    if series == Series::Off {
        return;
    }
    if f.policy.series.rq.len() < ctx.ncpus() {
        f.policy.series.rq.resize(ctx.ncpus(), RqState::default());
    }
    match series {
        Series::Off => {}
        Series::V2 => deboost(f, ctx.now, me, cpu, target, p_cpu),
        Series::V3 => {
            lag_credit(f, cpu, target, p_cpu);
            force_resched(f, ctx.now, me, cpu);
        }
    }
}

/// v2: `yield_to_deboost`.
fn deboost(f: &mut Fair<Eevdf>, now: SimTime, me: TaskId, cpu: u32, target: TaskId, p_cpu: u32) {
    let st = &mut f.policy.series.rq[cpu as usize];
    if rate_limited(&mut st.last_pass, now) {
        f.policy.series.counts.deboost_rate_limited += 1;
        return;
    }
    if p_cpu != cpu || !f.ents[target as usize].on_rq || !f.ents[me as usize].on_rq {
        f.policy.series.counts.deboost_other_rq += 1;
        return;
    }
    // The lowest common ancestor: the first level where both entities share a queue.
    let (py, n) = f.path(me, cpu);
    let (pt, _) = f.path(target, cpu);
    let Some(level) = (0..n).find(|&i| f.ents[py[i] as usize].rq == f.ents[pt[i] as usize].rq)
    else {
        f.policy.series.counts.deboost_other_rq += 1;
        return;
    };
    let (se_y, se_t) = (py[level], pt[level]);
    let rq = f.ents[se_y as usize].rq;
    if f.rqs[rq as usize].curr != Some(se_y) {
        // The yielder runs, so its entity at every level is its queue's current one; a
        // queued LCA entity would need a requeue the patch does not do.
        f.policy.series.counts.deboost_other_rq += 1;
        return;
    }
    let (vy, vt, w) = {
        let (a, b) = (&f.ents[se_y as usize], &f.ents[se_t as usize]);
        (a.vruntime, b.vruntime, a.weight)
    };
    let gran = Fair::<Eevdf>::calc_delta_fair(f.policy.base_slice, w);
    let h = f.h_nr_queued(rq);
    let st = &mut f.policy.series.rq[cpu as usize];
    let reverse = matches!(st.last_pair, Some((s, d, t)) if s == target && d == me && now.since(t) <= DEBOUNCE);
    st.last_pair = Some((me, target, now));
    let p = deboost_penalty(gran, vy, vt, h, reverse);
    let c = &mut f.policy.series.counts;
    c.deboost_applied += 1;
    c.deboost_zero_gap += u64::from(vt <= vy);
    c.deboost_debounced += u64::from(p.debounced);
    c.deboost_capped += u64::from(p.capped);
    let e = &mut f.ents[se_y as usize];
    e.vruntime += p.value;
    e.deadline = e.vruntime + gran;
}

/// v3: credit each not-yet-eligible level of the target's chain to the legal lag bound.
fn lag_credit(f: &mut Fair<Eevdf>, cpu: u32, target: TaskId, p_cpu: u32) {
    if p_cpu != cpu {
        f.policy.series.counts.lag_credit_other_rq += 1;
        return;
    }
    let (pt, n) = f.path(target, p_cpu);
    for &e in &pt[..n] {
        let rq = f.ents[e as usize].rq;
        if !f.ents[e as usize].on_rq || f.eligible(rq, e) {
            f.policy.series.counts.lag_credit_eligible_levels += 1;
            continue;
        }
        let w = f.ents[e as usize].weight;
        let want = lag_credit_bound(f.policy.base_slice, f.tun.tick, w);
        if f.rqs[rq as usize].curr == Some(e) {
            let lag = f.avg_vruntime(rq) - f.ents[e as usize].vruntime;
            let Some(d) = curr_credit_shift(lag, want, w, f.rqs[rq as usize].load) else {
                continue;
            };
            let ent = &mut f.ents[e as usize];
            ent.vruntime -= d;
            ent.deadline -= d;
        } else {
            // The canonical requeue: out of the queue, placed with the credited lag, back.
            let key = (f.ents[e as usize].vruntime, e);
            let r = &mut f.rqs[rq as usize];
            r.tree.remove(&key);
            r.nr_running -= 1;
            r.load -= w;
            f.ents[e as usize].vlag = want;
            <Eevdf as crate::sched::fair::FairPolicy>::place_entity(f, rq, e, false);
            let key = (f.ents[e as usize].vruntime, e);
            let r = &mut f.rqs[rq as usize];
            r.tree.insert(key);
            r.nr_running += 1;
            r.load += w;
        }
        f.policy.series.counts.lag_credit_levels += 1;
    }
}

/// v3 patch 5: cancel the yielder's slice protection, at most once per 6 ms per run queue.
fn force_resched(f: &mut Fair<Eevdf>, now: SimTime, me: TaskId, cpu: u32) {
    if rate_limited(&mut f.policy.series.rq[cpu as usize].last_pass, now) {
        f.policy.series.counts.forced_resched_rate_limited += 1;
        return;
    }
    f.policy.series.counts.forced_resched += 1;
    let (py, n) = f.path(me, cpu);
    for &e in &py[..n] {
        f.ents[e as usize].protect = None;
    }
}

/// The counters of the series on, in the order the module notes list them.
pub fn counters(s: &YieldSeries, out: &mut Vec<(&'static str, u64)>) {
    let c = &s.counts;
    match s.series {
        Series::Off => {}
        Series::V2 => out.extend([
            ("deboost_applied", c.deboost_applied),
            ("deboost_zero_gap", c.deboost_zero_gap),
            ("deboost_capped", c.deboost_capped),
            ("deboost_debounced", c.deboost_debounced),
            ("deboost_rate_limited", c.deboost_rate_limited),
            ("deboost_other_rq", c.deboost_other_rq),
        ]),
        Series::V3 => out.extend([
            ("lag_credit_levels", c.lag_credit_levels),
            ("lag_credit_eligible_levels", c.lag_credit_eligible_levels),
            ("lag_credit_other_rq", c.lag_credit_other_rq),
            ("forced_resched", c.forced_resched),
            ("forced_resched_rate_limited", c.forced_resched_rate_limited),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::fair::Tunables;
    use crate::sched::{
        RunState, SchedOut, SchedView, Scheduler, TaskInfo, YieldRequest, YieldResult,
    };
    use crate::topology::{CpuSet, Topology};

    const MS: u64 = 1_000_000;

    /// EEVDF 6.19 (unscaled 0.75 ms slice, 4 ms tick) with `series`, `ntasks` tasks of one
    /// VM on `ncpus` pCPUs, all woken at time 0; `body` runs with the context.
    fn with_sched(
        series: Series,
        ncpus: u32,
        ntasks: usize,
        body: impl FnOnce(&mut Fair<Eevdf>, &mut SchedCtx),
    ) {
        let view = SchedView {
            topo: Topology::new(1, ncpus, 1, 1),
            tasks: (0..ntasks)
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
            state: vec![RunState::Runnable; ntasks],
            cpu_curr: vec![None; ncpus as usize],
            nvms: 1,
        };
        let mut out = SchedOut {
            resched_pending: vec![false; ncpus as usize],
            ..Default::default()
        };
        let mut ctx = SchedCtx {
            now: SimTime(0),
            view: &view,
            out: &mut out,
        };
        let policy = Eevdf {
            base_slice: SimDuration(750_000),
            pick_buddy: true,
            forfeit_on_yield: true,
            yields: Default::default(),
            period_floor: SimDuration(6 * MS),
            series: YieldSeries {
                series,
                ..Default::default()
            },
            delay_dequeue: false,
        };
        let tun = Tunables {
            tick: SimDuration(4 * MS),
            migration_cost: SimDuration(500_000),
            group_per_vm: false,
            tunable_scaling: false,
            // The tests place task i on pCPU i; no fork balancing.
            fork_balance: false,
            root_host_threads: true,
            tick_grid: true,
            busy_factor: 16,
            wake_affine: true,
            wakee_pelt: false,
        };
        let mut f = Fair::new(policy, tun);
        Scheduler::init(&mut f, &mut ctx);
        for t in 0..ntasks as u32 {
            Scheduler::wake(&mut f, &mut ctx, t);
        }
        body(&mut f, &mut ctx);
    }

    /// Runs task `t` on `cpu`: picks until it is the one chosen (the others stay queued).
    fn run(f: &mut Fair<Eevdf>, ctx: &mut SchedCtx, cpu: u32, t: TaskId) {
        // Make `t` the only eligible one with the earliest deadline, then pick.
        let rq = cpu;
        for e in f.rqs[rq as usize]
            .tree
            .iter()
            .map(|k| k.1)
            .collect::<Vec<_>>()
        {
            place(f, e, if e == t { 0 } else { 10 * MS as i64 });
        }
        assert_eq!(Scheduler::pick_next(f, ctx, cpu, None), Some(t));
    }

    /// Moves a queued entity to vruntime `v` (deadline one slice later).
    fn place(f: &mut Fair<Eevdf>, e: u32, v: i64) {
        let rq = f.ents[e as usize].rq as usize;
        let old = (f.ents[e as usize].vruntime, e);
        let queued = f.rqs[rq].tree.remove(&old);
        f.ents[e as usize].vruntime = v;
        f.ents[e as usize].deadline = v + 750_000;
        if queued {
            f.rqs[rq].tree.insert((v, e));
        }
    }

    fn yield_to(
        f: &mut Fair<Eevdf>,
        ctx: &mut SchedCtx,
        me: TaskId,
        cpu: u32,
        target: TaskId,
    ) -> YieldResult {
        Scheduler::yield_to(
            f,
            ctx,
            YieldRequest {
                from: me,
                from_cpu: cpu,
                target,
                ignore_vcpu_fairness: false,
                migrate_to_yielder: false,
            },
        )
    }

    /// The patch's table: 6.0 x gran at 2 tasks, 4.0 x at 3, 2.5 x at 4-6, 2.0 x at 7-8,
    /// 1.5 x at 9-12, 1.0 x above (and the 4-6 row below 2, as its `else if` chain has it).
    #[test]
    fn v2_cap_follows_the_patch_table_by_queue_length() {
        let g = 1_000_000;
        let caps: Vec<i64> = (1..=14).map(|h| deboost_cap(g, h)).collect();
        assert_eq!(
            caps,
            [2.5, 6.0, 4.0, 2.5, 2.5, 2.5, 2.0, 2.0, 1.5, 1.5, 1.5, 1.5, 1.0, 1.0]
                .map(|x: f64| (x * g as f64) as i64)
        );
        // The zero-gap floor never exceeds gran, the clamp's own floor: it cannot move the
        // penalty (dead code in the patch as well).
        for h in 0..20 {
            assert!(deboost_zero_gap_floor(g, h) <= g, "h = {h}");
            assert!(deboost_penalty(g, 5, 5, h, false).value >= g);
        }
    }

    /// gran + 1.1 x the positive gap, clamped to [gran, cap]; a reverse pair within the
    /// window cuts it to max(gap, gran).
    #[test]
    fn v2_penalty_is_gran_plus_110_percent_of_the_gap_capped_and_debounced() {
        let g = 1_000_000;
        // Yielder ahead of the target: no gap, gran alone.
        assert_eq!(deboost_penalty(g, 9 * g, 2 * g, 2, false).value, g);
        // Gap 2 ms: 1 + 2.2 = 3.2 ms, under the 6 ms cap of a 2-task queue.
        let p = deboost_penalty(g, 0, 2 * g, 2, false);
        assert_eq!((p.value, p.capped, p.debounced), (3_200_000, false, false));
        // The same gap in a 13-task queue: capped at 1.0 x gran.
        let p = deboost_penalty(g, 0, 2 * g, 13, false);
        assert_eq!((p.value, p.capped), (g, true));
        // A gap of 10 ms in a 2-task queue: 12 ms capped to 6 ms.
        assert_eq!(deboost_penalty(g, 0, 10 * g, 2, false).value, 6 * g);
        // Reverse pair: 3.2 ms cut to max(2 ms, 1 ms) = 2 ms.
        let p = deboost_penalty(g, 0, 2 * g, 2, true);
        assert_eq!((p.value, p.debounced), (2 * g, true));
        // Reverse pair without a gap: gran + 0 is not above max(0, gran): unchanged.
        assert!(!deboost_penalty(g, 0, 0, 2, true).debounced);
    }

    #[test]
    fn rate_limit_lets_one_through_per_6ms_inclusive() {
        let mut last = None;
        assert!(!rate_limited(&mut last, SimTime(10 * MS)));
        assert!(rate_limited(&mut last, SimTime(10 * MS + 1)));
        assert!(
            rate_limited(&mut last, SimTime(16 * MS)),
            "6 ms exactly is still limited"
        );
        assert!(!rate_limited(&mut last, SimTime(16 * MS + 1)));
        assert_eq!(last, Some(SimTime(16 * MS + 1)));
    }

    /// The wired v2 path on one pCPU: the yielder (task 0, running) behind the target by
    /// 2 ms gets 1.1 x that plus a slice; a second yield within 6 ms is rate limited,
    /// so the 600 us reverse-pair debounce can never fire on the same run queue.
    #[test]
    fn v2_deboost_pushes_the_yielder_once_per_6ms_so_the_debounce_never_fires() {
        with_sched(Series::V2, 1, 2, |f, ctx| {
            run(f, ctx, 0, 0);
            place(f, 1, 2 * MS as i64);
            f.ents[0].vruntime = 0;
            let before = f.ents[0].vruntime;
            assert_eq!(yield_to(f, ctx, 0, 0, 1), YieldResult::Yielded);
            // 0.75 ms slice + 2.2 ms, under the 2-task cap of 4.5 ms; then 6.19's forfeit
            // does not apply (the pushed yielder is no longer eligible).
            assert_eq!(f.ents[0].vruntime - before, 750_000 + 2_200_000);
            let c = f.policy.series.counts;
            assert_eq!((c.deboost_applied, c.deboost_rate_limited), (1, 0));
            // Task 1 yields back 300 us later: a reverse pair, but rate limited first.
            ctx.now = SimTime(300_000);
            Scheduler::pick_next(f, ctx, 0, Some(0));
            f.ents[1].vruntime = 0;
            yield_to(f, ctx, 1, 0, 0);
            let c = f.policy.series.counts;
            assert_eq!(
                (
                    c.deboost_applied,
                    c.deboost_rate_limited,
                    c.deboost_debounced
                ),
                (1, 1, 0)
            );
        });
    }

    /// v2 and v3 act only when the target shares the yielder's run queue.
    #[test]
    fn both_versions_leave_a_target_on_another_run_queue_alone() {
        for series in [Series::V2, Series::V3] {
            with_sched(series, 2, 3, |f, ctx| {
                // Tasks 0 and 2 on pCPU 0, task 1 on pCPU 1 (queued, not running).
                assert_eq!((f.ents[0].rq, f.ents[2].rq, f.ents[1].rq), (0, 0, 1));
                run(f, ctx, 0, 0);
                let v1 = f.ents[1].vruntime;
                assert_eq!(yield_to(f, ctx, 0, 0, 1), YieldResult::Yielded);
                let c = f.policy.series.counts;
                assert_eq!(f.ents[1].vruntime, v1, "{series:?}");
                assert_eq!(c.deboost_other_rq + c.lag_credit_other_rq, 1, "{series:?}");
                assert_eq!(c.deboost_applied + c.lag_credit_levels, 0, "{series:?}");
            });
        }
    }

    /// v3: an ineligible buddy is credited to the largest lag `entity_lag` allows (2 x
    /// 0.75 ms < 4 ms tick: 4 ms), which makes it eligible so PICK_BUDDY picks it; an
    /// eligible one is left alone. The forced reschedule cancels the yielder's slice
    /// protection once per 6 ms.
    #[test]
    fn v3_credits_an_ineligible_buddy_to_the_lag_bound_and_it_is_picked() {
        with_sched(Series::V3, 1, 3, |f, ctx| {
            run(f, ctx, 0, 0);
            // V = (0 + 1 + 8 ms) / 3 = 3 ms: task 2 at 8 ms is ineligible.
            f.ents[0].vruntime = 0;
            place(f, 1, MS as i64);
            place(f, 2, 8 * MS as i64);
            assert!(!f.eligible(0, 2));
            assert_eq!(yield_to(f, ctx, 0, 0, 2), YieldResult::Yielded);
            let lag = f.avg_vruntime(0) - f.ents[2].vruntime;
            let bound = lag_credit_bound(SimDuration(750_000), SimDuration(4 * MS), 1024);
            assert_eq!(bound, 4 * MS as i64);
            // The requeue places it as place_entity does, so its lag is exactly the bound
            // (the yielder, now behind V, keeps its vruntime: no forfeit).
            assert_eq!(lag, bound);
            assert!(f.eligible(0, 2));
            let c = f.policy.series.counts;
            assert_eq!((c.lag_credit_levels, c.forced_resched), (1, 1));
            assert_eq!(f.ents[0].protect, None);
            assert_eq!(Scheduler::pick_next(f, ctx, 0, Some(0)), Some(2));
            // An eligible buddy is not credited; within 6 ms no forced reschedule.
            ctx.now = SimTime(MS);
            let protect = Some(f.ents[2].deadline);
            f.ents[2].protect = protect;
            place(f, 1, -8 * MS as i64);
            assert!(f.eligible(0, 1));
            let v1 = f.ents[1].vruntime;
            yield_to(f, ctx, 2, 0, 1);
            let c = f.policy.series.counts;
            assert_eq!(f.ents[1].vruntime, v1);
            assert_eq!(
                (c.lag_credit_eligible_levels, c.forced_resched_rate_limited),
                (1, 1)
            );
            assert_eq!(f.ents[2].protect, protect);
        });
    }

    /// The running entity's in-place shift: with V = (v_curr w + rest) / W, moving curr by
    /// d moves V by d w / W; the shift gives exactly the wanted lag.
    #[test]
    fn v3_shift_of_the_running_entity_reaches_the_wanted_lag() {
        // Two equal entities at 0 (curr) and 2 ms: V = 1 ms, curr's lag +1 ms; want -1 ms
        // to +3 ms: d = 2 ms x 2048 / 1024 = 4 ms: curr at -4 ms, V = -1 ms, lag 3 ms.
        assert_eq!(
            curr_credit_shift(MS as i64, 3 * MS as i64, 1024, 2048),
            Some(4 * MS as i64)
        );
        assert_eq!(curr_credit_shift(0, MS as i64, 1024, 1024), None);
    }

    #[test]
    fn series_off_changes_nothing_and_reports_no_counters() {
        with_sched(Series::Off, 1, 2, |f, ctx| {
            run(f, ctx, 0, 0);
            let v1 = f.ents[1].vruntime;
            yield_to(f, ctx, 0, 0, 1);
            assert_eq!(f.ents[1].vruntime, v1);
            let mut out = vec![];
            counters(&f.policy.series, &mut out);
            assert!(out.is_empty());
        });
    }
}
