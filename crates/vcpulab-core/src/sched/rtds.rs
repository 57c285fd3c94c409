//! `rtds` — Xen's RTDS scheduler: global EDF over per-vCPU deferrable servers.
//!
//! ## Policy
//! Every unit (vCPU) has a `period` and a `budget` (a reservation) and an `extratime`
//! flag. Its deadline is the end of its current period; at each deadline its budget is
//! refilled (`rt_update_deadline`: unused budget is lost, the deadline moves past `now`
//! by whole periods, and its priority level returns to 0). While it runs the unit burns
//! its budget; while it is halted its budget is kept (a deferrable server). A unit whose
//! budget runs out:
//! - with `extratime`, goes down one priority level and gets a fresh budget, so it keeps
//!   running when nothing of a better level wants the pCPU;
//! - without, is *depleted*: off the runqueue until its next deadline refills it.
//!
//! **Queues.** One runqueue for the host, ordered by priority: lower level first, then
//! earlier deadline (ties: first come); a depleted queue (unordered); and a replenishment
//! queue of every runnable unit by deadline, whose earliest deadline arms the one
//! replenishment timer (`repl_timer_handler`).
//!
//! **Scheduling** (`rt_schedule`): the running unit pays for its run. The first unit of
//! the runqueue that may run on this pCPU is the candidate; the running unit continues if
//! it is runnable, has budget, and outranks the candidate (or there is none). The chosen
//! unit runs until its budget would be spent (then the pCPU reschedules). The unit
//! switched out goes back on the runqueue (or the depleted queue) if runnable, and a pCPU
//! is tickled for it.
//!
//! **Tickling** (`runq_tickle`, when a unit is queued): walking the untickled pCPUs of
//! its affinity from the pCPU it last ran on, the first idle one reschedules; if none is
//! idle, the pCPU running the lowest-priority unit reschedules if the new unit outranks
//! it. At a replenishment, a running unit that the runqueue's head now outranks has the
//! head tickled, and a unit that was depleted and is queued again is tickled.
//!
//! **Counters**, one per decision branch: see `declare_counters!` below.
//!
//! ## Parameters
//! | key | default | meaning |
//! |---|---|---|
//! | `period` | `"10ms"` | `RTDS_DEFAULT_PERIOD`, for VMs without `rt_period` |
//! | `budget` | `"4ms"` | `RTDS_DEFAULT_BUDGET`, for VMs without `rt_budget` |
//! | `extratime` | `true` | the extra-time flag, for VMs without `rt_extratime` (Xen sets it on every new unit) |
//! Per VM (every vCPU of the VM): `rt_period`, `rt_budget` (durations, at least 10 us,
//! budget at most the period) and `rt_extratime` (boolean), as `xl sched-rtds -d DOM -p
//! -b -e` sets them.
//!
//! ## Source
//! `xen/common/sched/rt.c` (Sisu Xi, Meng Xu, Dagaen Golomb; in Xen since 4.5, the
//! event-driven version since 4.7, extra time since 4.10), read at commit c447b7308b13
//! (4.23 development, August 2026): `rt_update_deadline` (including its skip of the run
//! between the last charge and a missed deadline: "only deduct the time spent in current
//! period"), `burn_budget`, `runq_insert` (depleted queue for a unit with neither budget
//! nor extra time), `runq_pick`, `rt_schedule`, `runq_tickle`, `rt_unit_wake` (a missed
//! deadline refills on wake-up), `rt_context_saved`, `repl_timer_handler`,
//! `rt_validate_params` (10 us minimum period and budget, budget at most the period).
//!
//! ## Deviations
//! - Context switches complete at once: the unit switched out is queued again in the same
//!   decision (`rt_context_saved` right after `rt_schedule`).
//! - Not modelled: tasklets, cpupools (a cpupool is a host), CPU hotplug, per-vCPU
//!   parameters (`xl sched-rtds -v`: here per VM), and the `UPDATE_LIMIT_SHIFT` shortcut
//!   (whole periods are skipped either way).
//! - A unit's first pCPU is the i-th of its affinity (task i), as in `credit`.
//! - Host threads that are not vCPUs get the scheduler's default reservation.

use super::{
    Counters, CpuId, ParamInfo, ParamKind, Params, RunState, SchedCtx, SchedView, Scheduler, TaskId,
};
use crate::reader::{Res, Table};
use crate::time::{SimDuration, SimTime};
use crate::topology::CpuSet;

pub const DESCRIPTION: &str = "Xen RTDS: global EDF over per-vCPU deferrable servers (period 10 ms, budget 4 ms, extra time on by default)";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "period",
        kind: ParamKind::Duration,
        default: "10ms",
        help: "reservation period of VMs that set no rt_period (at least 10us)",
    },
    ParamInfo {
        name: "budget",
        kind: ParamKind::Duration,
        default: "4ms",
        help: "budget per period of VMs that set no rt_budget (at least 10us, at most the period)",
    },
    ParamInfo {
        name: "extratime",
        kind: ParamKind::Bool,
        default: "true",
        help: "whether VMs that set no rt_extratime may run beyond their budget at a lower priority level",
    },
];

super::counters::declare_counters! {
    WAKE_QUEUED => "wake_queued",
    WAKE_MISSED_DEADLINE => "wake_missed_deadline",
    WAKE_DEPLETED => "wake_depleted",
    BLOCK => "block",
    PICK_CURRENT => "pick_current",
    PICK_QUEUED => "pick_queued",
    PICK_IDLE => "pick_idle",
    BUDGET_EXTRA => "budget_out_extratime",
    BUDGET_DEPLETED => "budget_out_depleted",
    REQUEUE_PREV => "requeue_prev",
    TICKLE_IDLE => "tickle_idle_cpu",
    TICKLE_BUSY => "tickle_busy_cpu",
    TICKLE_NONE => "tickle_no_cpu",
    REPLENISH => "replenish",
    REPLENISH_PREEMPT => "replenish_tickle_head",
    REPLENISH_UNDEPLETED => "replenish_tickle_undepleted",
}

#[derive(Clone, Debug)]
struct Unit {
    period: i64,
    budget: i64,
    extratime: bool,
    cur_budget: i64,
    cur_deadline: i64,
    last_start: i64,
    priority_level: u32,
    depleted: bool,
    on_runq: bool,
    on_depletedq: bool,
    on_replq: bool,
    processor: usize,
    /// Run time in the current period, for `check` (units without extra time).
    used: i64,
}

pub struct Rtds {
    default_period: i64,
    default_budget: i64,
    default_extratime: bool,
    counters: Counters<NCOUNTERS>,
    violation: Option<String>,
    runq: Vec<TaskId>,
    depletedq: Vec<TaskId>,
    tickled: CpuSet,
    curr: Vec<Option<TaskId>>,
    units: Vec<Unit>,
    affinity: Vec<CpuSet>,
}

fn ns(t: SimTime) -> i64 {
    t.ns() as i64
}

impl Rtds {
    pub fn new(p: &Params) -> Rtds {
        Rtds {
            default_period: p.duration("period").ns() as i64,
            default_budget: p.duration("budget").ns() as i64,
            default_extratime: p.bool("extratime"),
            counters: Counters::new(COUNTER_NAMES),
            violation: None,
            runq: vec![],
            depletedq: vec![],
            tickled: CpuSet::empty(1),
            curr: vec![],
            units: vec![],
            affinity: vec![],
        }
    }

    /// `compare_unit_priority(a, b) > 0`: `a` outranks `b`.
    fn outranks(&self, a: TaskId, b: TaskId) -> bool {
        let (ua, ub) = (&self.units[a as usize], &self.units[b as usize]);
        (ua.priority_level, ua.cur_deadline) < (ub.priority_level, ub.cur_deadline)
    }

    /// `rt_update_deadline` at `now` >= the unit's deadline.
    fn update_deadline(&mut self, t: TaskId, now: i64) {
        let running = self.running(t);
        let u = &mut self.units[t as usize];
        if running {
            // The run since the last charge belongs to the ending period, uncharged.
            u.used += now - u.last_start;
        }
        if !u.extratime && u.used > u.budget {
            let (used, budget) = (u.used, u.budget);
            self.violated(|| format!("rtds: task {t} ran {used} ns in a period with a budget of {budget} ns and no extra time"));
        }
        let u = &mut self.units[t as usize];
        let periods = (now - u.cur_deadline) / u.period + 1;
        u.cur_deadline += periods * u.period;
        u.last_start = now;
        u.cur_budget = u.budget;
        u.priority_level = 0;
        u.used = 0;
    }

    fn running(&self, t: TaskId) -> bool {
        self.curr[self.units[t as usize].processor] == Some(t)
    }

    fn violated(&mut self, msg: impl FnOnce() -> String) {
        if self.violation.is_none() {
            self.violation = Some(msg());
        }
    }

    /// `burn_budget` for the running unit `t`.
    fn burn(&mut self, t: TaskId, now: i64) {
        let u = &mut self.units[t as usize];
        let delta = now - u.last_start;
        if delta <= 0 {
            return;
        }
        u.cur_budget -= delta;
        u.used += delta;
        u.last_start = now;
        if u.cur_budget <= 0 {
            if u.extratime {
                u.priority_level = u.priority_level.saturating_add(1);
                u.cur_budget = u.budget;
                self.counters.bump(BUDGET_EXTRA);
            } else {
                u.cur_budget = 0;
                u.depleted = true;
                self.counters.bump(BUDGET_DEPLETED);
            }
        }
    }

    /// `runq_insert`: by priority if it has budget or extra time, else depleted.
    fn runq_insert(&mut self, t: TaskId) {
        let u = &self.units[t as usize];
        if u.cur_budget > 0 || u.extratime {
            let pos = self
                .runq
                .iter()
                .position(|&o| self.outranks(t, o))
                .unwrap_or(self.runq.len());
            self.runq.insert(pos, t);
            self.units[t as usize].on_runq = true;
        } else {
            self.depletedq.insert(0, t);
            self.units[t as usize].on_depletedq = true;
        }
    }

    fn q_remove(&mut self, t: TaskId) {
        let u = &mut self.units[t as usize];
        if u.on_runq {
            u.on_runq = false;
            self.runq.retain(|&o| o != t);
        } else if u.on_depletedq {
            u.on_depletedq = false;
            self.depletedq.retain(|&o| o != t);
        }
    }

    fn tickle_cpu(&mut self, ctx: &mut SchedCtx, cpu: usize) {
        self.tickled.insert(cpu);
        ctx.resched(cpu as CpuId);
    }

    /// `runq_tickle`.
    fn runq_tickle(&mut self, ctx: &mut SchedCtx, new: TaskId) {
        let mut not_tickled = self.affinity[new as usize].subtract(&self.tickled);
        let mut cpu = test_or_cycle(self.units[new as usize].processor, &not_tickled);
        let mut latest: Option<TaskId> = None;
        while let Some(c) = cpu {
            match self.curr[c] {
                None => {
                    self.counters.bump(TICKLE_IDLE);
                    self.tickle_cpu(ctx, c);
                    return;
                }
                Some(t) => {
                    if latest.is_none_or(|l| self.outranks(l, t)) {
                        latest = Some(t);
                    }
                }
            }
            not_tickled.remove(c);
            cpu = cycle_after(c, &not_tickled);
        }
        match latest {
            Some(l) if self.outranks(new, l) => {
                self.counters.bump(TICKLE_BUSY);
                let c = self.units[l as usize].processor;
                self.tickle_cpu(ctx, c);
            }
            _ => self.counters.bump(TICKLE_NONE),
        }
    }

    fn arm_replenish(&self, ctx: &mut SchedCtx) {
        if let Some(at) = self
            .units
            .iter()
            .filter(|u| u.on_replq)
            .map(|u| u.cur_deadline)
            .min()
        {
            ctx.set_global_timer(SimTime(at.max(ns(ctx.now)) as u64));
        }
    }

    /// `rt_context_saved` for `p`, switched out (`requeue`: still runnable).
    fn context_saved(&mut self, ctx: &mut SchedCtx, p: TaskId, requeue: bool) {
        if requeue {
            self.counters.bump(REQUEUE_PREV);
            self.runq_insert(p);
            self.runq_tickle(ctx, p);
        } else {
            self.units[p as usize].on_replq = false;
        }
    }
}

fn test_or_cycle(cpu: usize, mask: &CpuSet) -> Option<usize> {
    if mask.contains(cpu) {
        Some(cpu)
    } else {
        cycle_after(cpu, mask)
    }
}

fn cycle_after(cpu: usize, mask: &CpuSet) -> Option<usize> {
    mask.next_after(cpu).or_else(|| mask.first())
}

impl Scheduler for Rtds {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let v = ctx.view;
        let n = v.topo.ncpus();
        self.curr = vec![None; n];
        self.tickled = CpuSet::empty(n);
        self.affinity = v.tasks.iter().map(|t| t.affinity.clone()).collect();
        let now = ns(ctx.now);
        self.units = v
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let period = t.rt.period_ns.map_or(self.default_period, |p| p as i64);
                let budget =
                    t.rt.budget_ns
                        .map_or(self.default_budget, |b| b as i64)
                        .min(period);
                Unit {
                    period,
                    budget,
                    extratime: t.rt.extratime.unwrap_or(self.default_extratime),
                    cur_budget: budget,
                    cur_deadline: now + period,
                    last_start: now,
                    priority_level: 0,
                    depleted: false,
                    on_runq: false,
                    on_depletedq: false,
                    on_replq: false,
                    processor: t
                        .affinity
                        .nth_wrapping(i)
                        .expect("an affinity is never empty"),
                    used: 0,
                }
            })
            .collect();
    }

    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let now = ns(ctx.now);
        if now >= self.units[t as usize].cur_deadline {
            self.counters.bump(WAKE_MISSED_DEADLINE);
            self.update_deadline(t, now);
            self.units[t as usize].depleted = false;
        }
        self.units[t as usize].on_replq = true;
        self.runq_insert(t);
        if self.units[t as usize].on_depletedq {
            self.counters.bump(WAKE_DEPLETED);
        } else {
            self.counters.bump(WAKE_QUEUED);
        }
        self.runq_tickle(ctx, t);
        self.arm_replenish(ctx);
    }

    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        self.counters.bump(BLOCK);
        self.burn(t, ns(ctx.now));
        if self.curr[cpu as usize] == Some(t) {
            self.curr[cpu as usize] = None;
        }
        self.context_saved(ctx, t, false);
        self.arm_replenish(ctx);
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        let now = ns(ctx.now);
        let c = cpu as usize;
        self.tickled.remove(c);
        if let Some(p) = prev {
            self.burn(p, now);
        }
        let mut snext = self
            .runq
            .iter()
            .copied()
            .find(|&t| self.affinity[t as usize].contains(c));
        if let Some(p) = prev {
            let pu = &self.units[p as usize];
            if pu.cur_budget > 0 && snext.is_none_or(|n| self.outranks(p, n)) {
                snext = Some(p);
            }
        }
        let requeue = prev.is_some_and(|p| snext != Some(p));
        match snext {
            Some(n) if Some(n) == prev => self.counters.bump(PICK_CURRENT),
            Some(n) => {
                self.counters.bump(PICK_QUEUED);
                self.q_remove(n);
            }
            None => self.counters.bump(PICK_IDLE),
        }
        self.curr[c] = snext;
        if let Some(n) = snext {
            let u = &mut self.units[n as usize];
            u.last_start = now;
            u.processor = c;
            ctx.set_timer(cpu, SimTime((now + u.cur_budget) as u64));
        } else {
            ctx.cancel_timer(cpu);
        }
        if let Some(p) = prev {
            if requeue {
                self.context_saved(ctx, p, true);
            }
        }
        self.arm_replenish(ctx);
        snext
    }

    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        ctx.resched(cpu);
    }

    /// `repl_timer_handler`.
    fn global_timer(&mut self, ctx: &mut SchedCtx) {
        let now = ns(ctx.now);
        let mut due: Vec<TaskId> = (0..self.units.len() as TaskId)
            .filter(|&t| {
                self.units[t as usize].on_replq && self.units[t as usize].cur_deadline <= now
            })
            .collect();
        due.sort_by_key(|&t| (self.units[t as usize].cur_deadline, t));
        for &t in &due {
            self.counters.bump(REPLENISH);
            self.update_deadline(t, now);
            let u = &self.units[t as usize];
            if u.on_runq || u.on_depletedq {
                self.q_remove(t);
                self.runq_insert(t);
            }
        }
        for &t in &due {
            if self.running(t) {
                if let Some(&head) = self.runq.first() {
                    if self.outranks(head, t) {
                        self.counters.bump(REPLENISH_PREEMPT);
                        self.runq_tickle(ctx, head);
                    }
                }
            } else if std::mem::take(&mut self.units[t as usize].depleted)
                && self.units[t as usize].on_runq
            {
                self.counters.bump(REPLENISH_UNDEPLETED);
                self.runq_tickle(ctx, t);
            }
        }
        self.arm_replenish(ctx);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    /// The engine and the scheduler agree on what runs; every runnable unit runs or is
    /// queued once (on the depleted queue only if it has neither budget nor extra time);
    /// the runqueue is in priority order; and no unit without extra time ran more than its
    /// budget in one period.
    fn check(&self, view: &SchedView) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        for c in 0..self.curr.len() {
            if view.cpu_curr[c] != self.curr[c] {
                return Err(format!(
                    "rtds: pCPU {c} runs {:?} but the scheduler has {:?}",
                    view.cpu_curr[c], self.curr[c]
                ));
            }
        }
        for w in self.runq.windows(2) {
            if self.outranks(w[1], w[0]) {
                return Err(format!(
                    "rtds: the runqueue has task {} ahead of task {}, which outranks it",
                    w[0], w[1]
                ));
            }
        }
        for (t, u) in self.units.iter().enumerate() {
            let queued = self.runq.iter().filter(|&&o| o as usize == t).count()
                + self.depletedq.iter().filter(|&&o| o as usize == t).count();
            let want = usize::from(view.state[t] == RunState::Runnable);
            if queued != want || (u.on_runq || u.on_depletedq) != (want == 1) {
                return Err(format!(
                    "rtds: task {t} ({:?}) is queued {queued} times",
                    view.state[t]
                ));
            }
            if u.on_depletedq && (u.extratime || u.cur_budget > 0) {
                return Err(format!(
                    "rtds: task {t} is on the depleted queue with budget {} ns or extra time",
                    u.cur_budget
                ));
            }
            if !u.extratime && u.used > u.budget {
                return Err(format!(
                    "rtds: task {t} ran {} ns of its period, over its budget of {} ns",
                    u.used, u.budget
                ));
            }
        }
        Ok(())
    }
}

fn check_params(t: &Table) -> Res<()> {
    let min = SimDuration::from_us(10);
    let period = match t.get("period") {
        Some(o) => {
            let d = o.duration()?;
            if d < min {
                return o.err("must be at least 10us (Xen's RTDS_MIN_PERIOD)");
            }
            d
        }
        None => SimDuration::from_ms(10),
    };
    if let Some(o) = t.get("budget") {
        let d = o.duration()?;
        if d < min {
            return o.err("must be at least 10us (Xen's RTDS_MIN_BUDGET)");
        }
        if d > period {
            return o.err(format!("{d} is longer than the period ({period})"));
        }
    } else if period < SimDuration::from_ms(4) {
        return t.err(
            "period",
            format!("{period} is shorter than the default budget (4ms); give budget too"),
        );
    }
    Ok(())
}

/// `rtds`: a busy pCPU reschedules at least when the budget runs out.
impl super::Registered for Rtds {
    type Sched = Rtds;
    const NAME: &'static str = "rtds";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Rtds {
        Rtds::new(p)
    }
    fn check_params(t: &Table) -> Res<()> {
        self::check_params(t)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(p.duration("budget"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{call_hook, SchedOut, TaskInfo};
    use crate::topology::Topology;
    use crate::vocab::RtReservation;

    fn view(rts: &[RtReservation]) -> SchedView {
        SchedView {
            topo: Topology::new(1, 1, 1, 1),
            tasks: rts
                .iter()
                .enumerate()
                .map(|(i, rt)| TaskInfo {
                    vm: i as u32,
                    index: 0,
                    affinity: CpuSet::full(1),
                    weight: 256,
                    cap: 0,
                    class: None,
                    latency_vcpu: false,
                    host_thread: false,
                    rt: *rt,
                })
                .collect(),
            state: vec![RunState::Halted; rts.len()],
            cpu_curr: vec![None],
            nvms: rts.len() as u32,
        }
    }

    fn hook<R>(
        s: &mut Rtds,
        view: &SchedView,
        now: i64,
        f: impl FnOnce(&mut Rtds, &mut SchedCtx) -> R,
    ) -> (R, SchedOut) {
        call_hook(s, view, SimTime(now as u64), f)
    }

    fn started(view: &SchedView) -> Rtds {
        let mut s = Rtds::new(&Params {
            table: &toml::Table::new(),
            infos: PARAMS,
        });
        hook(&mut s, view, 0, |s, ctx| s.init(ctx));
        s
    }

    /// A busy unit without extra time runs its budget (1 ms), is depleted until its
    /// deadline (5 ms), where the replenishment refills it, moves the deadline a period
    /// on and tickles its pCPU; with extra time it would have kept running at level 1.
    #[test]
    fn replenishment_refills_a_depleted_unit_at_its_deadline() {
        let ms = 1_000_000;
        let rt = RtReservation {
            period_ns: Some(5 * ms as u64),
            budget_ns: Some(ms as u64),
            extratime: Some(false),
        };
        let mut v = view(&[rt]);
        let mut s = started(&v);
        v.state[0] = RunState::Runnable;
        hook(&mut s, &v, 0, |s, ctx| s.wake(ctx, 0));
        let (next, out) = hook(&mut s, &v, 0, |s, ctx| s.pick_next(ctx, 0, None));
        assert_eq!(next, Some(0));
        assert_eq!(out.timers, [(0, Some(SimTime(ms as u64)))]);
        assert_eq!(out.global_timer, Some(Some(SimTime(5 * ms as u64))));
        v.state[0] = RunState::Running(0);
        v.cpu_curr[0] = Some(0);
        let (next, _) = hook(&mut s, &v, ms, |s, ctx| s.pick_next(ctx, 0, Some(0)));
        assert_eq!(next, None, "depleted");
        // Queued again, it tickled its idle pCPU, which reschedules and stays idle.
        let (next, _) = hook(&mut s, &v, ms, |s, ctx| s.pick_next(ctx, 0, None));
        assert_eq!(next, None);
        assert!(s.units[0].on_depletedq && s.units[0].depleted);
        v.state[0] = RunState::Runnable;
        v.cpu_curr[0] = None;
        assert_eq!(s.check(&v), Ok(()));
        let (_, out) = hook(&mut s, &v, 5 * ms, |s, ctx| s.global_timer(ctx));
        let u = &s.units[0];
        assert_eq!(
            (u.cur_budget, u.cur_deadline, u.on_runq),
            (ms, 10 * ms, true)
        );
        assert_eq!(out.resched, [0]);
        assert_eq!(s.counters.values[REPLENISH_UNDEPLETED], 1);
        // The check catches a unit that ran over its budget in a period.
        s.units[0].used = 2 * ms;
        assert!(s.check(&v).unwrap_err().contains("over its budget"));
        // With extra time the same unit keeps running past its budget, a level down.
        let mut v = view(&[RtReservation {
            extratime: Some(true),
            ..rt
        }]);
        let mut s = started(&v);
        v.state[0] = RunState::Runnable;
        hook(&mut s, &v, 0, |s, ctx| s.wake(ctx, 0));
        hook(&mut s, &v, 0, |s, ctx| s.pick_next(ctx, 0, None));
        v.state[0] = RunState::Running(0);
        v.cpu_curr[0] = Some(0);
        let (next, _) = hook(&mut s, &v, ms, |s, ctx| s.pick_next(ctx, 0, Some(0)));
        assert_eq!(next, Some(0));
        assert_eq!(s.units[0].priority_level, 1);
    }

    /// EDF: a waking unit with an earlier deadline preempts the running one.
    #[test]
    fn an_earlier_deadline_preempts() {
        let ms = 1_000_000u64;
        let long = RtReservation {
            period_ns: Some(100 * ms),
            budget_ns: Some(50 * ms),
            extratime: None,
        };
        let short = RtReservation {
            period_ns: Some(10 * ms),
            budget_ns: Some(ms),
            extratime: None,
        };
        let mut v = view(&[long, short]);
        let mut s = started(&v);
        v.state[0] = RunState::Runnable;
        hook(&mut s, &v, 0, |s, ctx| s.wake(ctx, 0));
        hook(&mut s, &v, 0, |s, ctx| s.pick_next(ctx, 0, None));
        v.state[0] = RunState::Running(0);
        v.cpu_curr[0] = Some(0);
        v.state[1] = RunState::Runnable;
        let (_, out) = hook(&mut s, &v, 1000, |s, ctx| s.wake(ctx, 1));
        assert_eq!(out.resched, [0]);
        let (next, _) = hook(&mut s, &v, 1000, |s, ctx| s.pick_next(ctx, 0, Some(0)));
        assert_eq!(next, Some(1));
    }
}
