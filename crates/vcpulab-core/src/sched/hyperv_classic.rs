//! `hyperv-classic` — the Hyper-V hypervisor's classic scheduler: fair-share, preemptive
//! round robin of virtual processors over logical processors.
//!
//! ## Policy (what Hyper-V does, as far as we model it)
//! The hypervisor itself schedules guest virtual processors (VPs) on logical processors
//! (LPs, i.e. SMT threads). Microsoft describes the classic scheduler, the default of every
//! Hyper-V release up to Windows Server 2016, as a fair-share, preemptive round-robin
//! scheduler that treats every LP as a place to run any VP: two VPs of two different VMs
//! may therefore run on the two SMT siblings of one core at the same time (the property the
//! side-channel attacks exploit and the core scheduler removes).
//!
//! - Fair share: every VP carries a virtual time that advances by its run time divided by
//!   its weight relative to the default (`vt += ran * 256 / weight`). The VM's `weight`
//!   (scenario key, default 256, Hyper-V's "relative weight") applies to each of its VPs.
//!   One ready list is shared by all LPs; the ready VP with the lowest virtual time goes
//!   first, ties in FIFO order.
//! - Preemptive round robin: a VP runs for at most one `timeslice`. At its end the LP
//!   switches to the lowest-virtual-time ready VP allowed there if there is one (the
//!   preempted VP rejoins the ready list); otherwise the VP runs on with a fresh slice.
//! - A VP that halts (the guest executed HLT) leaves its LP, which takes the best ready VP
//!   or goes idle. A VP that wakes is placed on an idle LP, preferring an LP whose whole
//!   core is idle (SMT hosts: the classic scheduler places a VP "where it gets the most
//!   processing power"), then the LP it ran on last, then any idle LP, searching from its
//!   last (or ideal) LP. With no idle LP it preempts the running VP furthest ahead in
//!   virtual time if that one is more than `wakeup_granularity` ahead of it (the
//!   preempted VP rejoins the ready list); otherwise it waits for a slice end.
//! - A VP that halted does not bank credit: on wake its virtual time is raised to at least
//!   the virtual clock (the lowest virtual time among running and ready VPs, never
//!   decreasing) minus one slice.
//! - Boot event: the hypervisor logs Hyper-V-Hypervisor event ID 2 with its scheduler type
//!   (1 = classic with SMT off, 2 = classic, 3 = core, 4 = root). The counter
//!   `hypervisor_scheduler_type` reports 1 on a host without SMT (`threads_per_core = 1`),
//!   as the measured blog (seed 001) saw on an SMT-less CPU, and 2 otherwise.
//!
//! SMT throughput is the engine's: with n > 1 siblings of a core busy, each runs at
//! `[host] smt_throughput / n` of a lone thread (default 1.25 when `threads_per_core > 1`;
//! a scenario may set it).
//!
//! ## Parameters
//! - `timeslice` (duration, default 10 ms): the longest a VP runs while another VP waits.
//! - `wakeup_granularity` (duration, default 1 ms): how far ahead in virtual time a running
//!   VP must be for a waking VP to preempt it.
//!
//! ## Sources
//! Microsoft Learn, "Manage Hyper-V hypervisor scheduler types" (classic scheduler:
//! fair-share, preemptive round-robin; default before Windows Server 2019; any VP on any LP
//! including SMT siblings; event ID 2 values) and "About Hyper-V hypervisor scheduler type
//! selection" (the classic scheduler lets two VMs share a core's SMT threads); the Hyper-V
//! TLFS-era MSDN page "Hypervisor Scheduler" (per-partition CPU reserve, cap and weight;
//! policies hold over periods "on the order of hundredths of a second", whence a 10 ms
//! slice); seed 001 (event ID 2 reads 0x1 on a CPU without SMT whichever of Classic and
//! Core is configured); public write-ups (Altaro, TechTarget) for the SMT-aware placement,
//! and "Hyper-V Performance: Virtual Processor Scheduling Priority" (performancebydesign
//! blog, 2017: round robin in which any ready VP is equally likely to be dispatched,
//! weights shift it; ideal processor and NUMA considered).
//!
//! ## Assumptions where the documentation is silent
//! - The slice length is not published; 10 ms is our choice (see above).
//! - Wake-up preemption and its 1 ms granularity are ours: "preemptive" in the documentation
//!   does not say when. Without it a VP woken by an interrupt on a busy host waits up to a
//!   whole slice, which the documented fair-share design does not suggest.
//! - Weight is applied per VP (each VP of a VM has the VM's weight), so a VM with more busy
//!   VPs gets more CPU; the documentation does not say how a VM's weight splits over VPs.
//! - One ready list for the whole host: Hyper-V's queue structure is not documented, and
//!   the NUMA and ideal-processor preferences write-ups mention are not specified.
//!
//! ## Deviations
//! - CPU reserve and cap are not modelled (every VM has reserve 0 and cap 100%).
//! - No ideal-processor/NUMA affinity beyond "last LP first" (the ideal LP of a VP that
//!   never ran is the i-th LP of its affinity, i its index among the host's VPs).
//! - VP dispatch costs the host's `context_switch`, not a measured hypervisor switch cost.

use super::{
    Counters, CpuId, ParamInfo, ParamKind, Params, SchedCtx, SchedView, Scheduler, TaskId,
};
use crate::time::{SimDuration, SimTime};
use std::collections::BTreeSet;

pub const DESCRIPTION: &str =
    "Hyper-V classic scheduler: fair-share preemptive round robin of VPs over LPs; two VMs may share a core's SMT siblings";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "timeslice",
        kind: ParamKind::Duration,
        default: "10ms",
        help: "longest run of a VP while another VP waits (not published; assumed)",
    },
    ParamInfo {
        name: "wakeup_granularity",
        kind: ParamKind::Duration,
        default: "1ms",
        help: "a waking VP preempts a running one that is this far ahead in virtual time (assumed)",
    },
];

/// Weight of a VM that sets none; virtual time advances at wall-clock rate at this weight.
const DEFAULT_WEIGHT: u64 = 256;

/// Hyper-V-Hypervisor boot event ID 2 values.
pub const TYPE_CLASSIC_SMT_OFF: u64 = 1;
pub const TYPE_CLASSIC: u64 = 2;
pub const TYPE_CORE: u64 = 3;
pub const TYPE_ROOT: u64 = 4;

super::counters::declare_counters! {
    SCHEDULER_TYPE => "hypervisor_scheduler_type",
    WAKE_IDLE_CORE => "wake_idle_core",
    WAKE_LAST_LP => "wake_last_lp",
    WAKE_OTHER_IDLE_LP => "wake_other_idle_lp",
    WAKE_PREEMPT => "wake_preempt",
    WAKE_QUEUED => "wake_queued",
    SLICE_END_SWITCH => "slice_end_switch",
    SLICE_END_RENEW => "slice_end_renew",
    PICK_READY => "pick_ready_vp",
    PICK_WENT_IDLE => "pick_went_idle",
    BLOCK => "block",
}

/// Ready-list key: virtual time, then FIFO sequence.
type Key = (u64, u64, TaskId);

/// Fair-share bookkeeping shared by the classic and the core scheduler: per-VP virtual
/// time, one ready set per VM (ordered by virtual time), and the virtual clock.
pub(crate) struct Vps {
    slice: SimDuration,
    seq: u64,
    /// The lowest virtual time of the running and ready VPs, seen at the last wake-up
    /// (monotone).
    vclock: u64,
    pub(crate) ready: Vec<BTreeSet<Key>>,
    pub(crate) vm: Vec<u32>,
    weight: Vec<u64>,
    pub(crate) vt: Vec<u64>,
    run_start: Vec<SimTime>,
    pub(crate) last: Vec<Option<CpuId>>,
    pub(crate) ideal: Vec<CpuId>,
    queued: Vec<Option<Key>>,
}

impl Vps {
    pub(crate) fn new(view: &SchedView, slice: SimDuration) -> Vps {
        let n = view.tasks.len();
        Vps {
            slice,
            seq: 0,
            vclock: 0,
            ready: vec![BTreeSet::new(); view.nvms as usize],
            vm: view.tasks.iter().map(|t| t.vm).collect(),
            weight: view.tasks.iter().map(|t| t.weight.max(1) as u64).collect(),
            vt: vec![0; n],
            run_start: vec![SimTime::ZERO; n],
            last: vec![None; n],
            ideal: view
                .tasks
                .iter()
                .enumerate()
                .map(|(i, t)| t.affinity.nth_wrapping(i).expect("affinity is never empty") as CpuId)
                .collect(),
            queued: vec![None; n],
        }
    }

    /// Virtual time of `ns` of run time at this VP's weight.
    pub(crate) fn scaled(&self, t: TaskId, ns: u64) -> u64 {
        ((ns as u128 * DEFAULT_WEIGHT as u128) / self.weight[t as usize] as u128) as u64
    }

    /// Charges the running VP `t` for its run since it started or was last charged.
    pub(crate) fn charge(&mut self, t: TaskId, now: SimTime) {
        let ti = t as usize;
        let ran = now.since(self.run_start[ti]).ns();
        self.vt[ti] += self.scaled(t, ran);
        self.run_start[ti] = now;
    }

    /// The current virtual time of `t`, which runs since its last charge.
    pub(crate) fn running_vt(&self, t: TaskId, now: SimTime) -> u64 {
        let ti = t as usize;
        self.vt[ti] + self.scaled(t, now.since(self.run_start[ti]).ns())
    }

    /// A waking VP gets at most one slice of credit below the virtual clock: the lowest
    /// virtual time of the running and ready VPs (never moving back).
    pub(crate) fn wake_vt(&mut self, view: &SchedView, t: TaskId, now: SimTime) {
        let running = view
            .cpu_curr
            .iter()
            .flatten()
            .map(|&r| self.running_vt(r, now));
        let ready = self.ready.iter().filter_map(|r| r.first().map(|k| k.0));
        if let Some(m) = running.chain(ready).min() {
            self.vclock = self.vclock.max(m);
        }
        let floor = self.vclock.saturating_sub(self.slice.ns());
        let v = &mut self.vt[t as usize];
        *v = (*v).max(floor);
    }

    pub(crate) fn enqueue(&mut self, t: TaskId) {
        self.seq += 1;
        let key = (self.vt[t as usize], self.seq, t);
        self.ready[self.vm[t as usize] as usize].insert(key);
        self.queued[t as usize] = Some(key);
    }

    pub(crate) fn dequeue(&mut self, t: TaskId) {
        if let Some(key) = self.queued[t as usize].take() {
            self.ready[self.vm[t as usize] as usize].remove(&key);
        }
    }

    /// `t` starts (or continues with a fresh slice) on `cpu`.
    pub(crate) fn start(&mut self, t: TaskId, cpu: CpuId, now: SimTime) {
        self.dequeue(t);
        self.run_start[t as usize] = now;
        self.last[t as usize] = Some(cpu);
    }

    /// The best ready VP of VM `vm` that `ok` accepts.
    pub(crate) fn best_of_vm(&self, vm: u32, ok: impl Fn(TaskId) -> bool) -> Option<Key> {
        self.ready[vm as usize].iter().find(|k| ok(k.2)).copied()
    }

    /// The best ready VP of any VM that `ok` accepts.
    pub(crate) fn best(&self, ok: impl Fn(TaskId) -> bool) -> Option<Key> {
        (0..self.ready.len() as u32)
            .filter_map(|v| self.best_of_vm(v, &ok))
            .min()
    }
}

pub struct HyperVClassic {
    timeslice: SimDuration,
    wakeup_granularity: SimDuration,
    counters: Counters<NCOUNTERS>,
    vps: Option<Vps>,
    smt: bool,
    // per LP
    claimed: Vec<bool>,
    expired: Vec<bool>,
}

impl HyperVClassic {
    pub fn new(p: &Params) -> HyperVClassic {
        HyperVClassic {
            timeslice: p.duration("timeslice"),
            wakeup_granularity: p.duration("wakeup_granularity"),
            counters: Counters::new(COUNTER_NAMES),
            vps: None,
            smt: false,
            claimed: vec![],
            expired: vec![],
        }
    }

    pub fn timeslice(&self) -> SimDuration {
        self.timeslice
    }

    pub fn wakeup_granularity(&self) -> SimDuration {
        self.wakeup_granularity
    }

    fn vps(&mut self) -> &mut Vps {
        self.vps.as_mut().expect("init ran")
    }

    fn free(&self, ctx: &SchedCtx, cpu: CpuId) -> bool {
        ctx.is_idle(cpu) && !self.claimed[cpu as usize]
    }

    fn dispatch(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: CpuId) {
        let now = ctx.now;
        self.vps().start(t, cpu, now);
        ctx.set_timer(cpu, now + self.timeslice);
    }

    /// The value reported as the boot event's scheduler type.
    pub fn scheduler_type(&self) -> u64 {
        self.counters.values[SCHEDULER_TYPE]
    }
}

impl Scheduler for HyperVClassic {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let n = ctx.ncpus();
        self.smt = ctx.view.topo.threads_per_core > 1;
        self.counters.values[SCHEDULER_TYPE] = if self.smt {
            TYPE_CLASSIC
        } else {
            TYPE_CLASSIC_SMT_OFF
        };
        self.vps = Some(Vps::new(ctx.view, self.timeslice));
        self.claimed = vec![false; n];
        self.expired = vec![false; n];
    }

    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let now = ctx.now;
        let vps = self.vps.as_mut().expect("init ran");
        vps.wake_vt(ctx.view, t, now);
        vps.enqueue(t);
        let ti = t as usize;
        let last = vps.last[ti];
        let from = last.unwrap_or(vps.ideal[ti]) as usize;
        let n = ctx.ncpus();
        let topo = &ctx.view.topo;
        let mut choice = None;
        // 1. An idle LP whose whole core is idle (SMT hosts only).
        if self.smt {
            choice = (0..n)
                .map(|off| ((from + off) % n) as CpuId)
                .find(|&c| {
                    ctx.allowed(t, c)
                        && topo
                            .core_cpus(topo.cpus[c as usize].core)
                            .all(|s| self.free(ctx, s as CpuId))
                })
                .map(|c| (c, WAKE_IDLE_CORE));
        }
        // 2. The LP it ran on last, 3. any idle LP.
        if choice.is_none() {
            if let Some(l) = last.filter(|&l| ctx.allowed(t, l) && self.free(ctx, l)) {
                choice = Some((l, WAKE_LAST_LP));
            } else {
                choice = (0..n)
                    .map(|off| ((from + off) % n) as CpuId)
                    .find(|&c| ctx.allowed(t, c) && self.free(ctx, c))
                    .map(|c| (c, WAKE_OTHER_IDLE_LP));
            }
        }
        // 4. No idle LP: preempt the running VP furthest ahead in virtual time, if it is
        //    more than the wake-up granularity ahead of this one.
        if choice.is_none() {
            let vps = self.vps.as_ref().expect("init ran");
            let mine = vps.vt[ti] + vps.scaled(t, self.wakeup_granularity.ns());
            choice = (0..n as CpuId)
                .filter(|&c| ctx.allowed(t, c) && !self.expired[c as usize])
                .filter_map(|c| ctx.curr(c).map(|r| (vps.running_vt(r, now), c)))
                .filter(|&(v, _)| v > mine)
                .max_by_key(|&(v, c)| (v, std::cmp::Reverse(c)))
                .map(|(_, c)| (c, WAKE_PREEMPT));
        }
        match choice {
            Some((cpu, WAKE_PREEMPT)) => {
                self.counters.bump(WAKE_PREEMPT);
                self.expired[cpu as usize] = true;
                ctx.resched(cpu);
            }
            Some((cpu, counter)) => {
                self.counters.bump(counter);
                self.claimed[cpu as usize] = true;
                ctx.resched(cpu);
            }
            None => self.counters.bump(WAKE_QUEUED),
        }
    }

    fn block(&mut self, ctx: &mut SchedCtx, _cpu: CpuId, t: TaskId) {
        self.counters.bump(BLOCK);
        let now = ctx.now;
        self.vps().charge(t, now);
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        let c = cpu as usize;
        self.claimed[c] = false;
        let expired = std::mem::take(&mut self.expired[c]);
        let now = ctx.now;
        if let Some(p) = prev {
            if !expired {
                return Some(p); // not our request: keep running
            }
            // Slice end with a VP waiting: the lowest virtual time goes next.
            let vps = self.vps();
            vps.charge(p, now);
            vps.enqueue(p);
            let next = vps.best(|t| ctx.allowed(t, cpu)).expect("prev is queued").2;
            self.counters.bump(if next == p {
                SLICE_END_RENEW
            } else {
                SLICE_END_SWITCH
            });
            self.dispatch(ctx, next, cpu);
            return Some(next);
        }
        match self.vps().best(|t| ctx.allowed(t, cpu)) {
            Some((_, _, next)) => {
                self.counters.bump(PICK_READY);
                self.dispatch(ctx, next, cpu);
                Some(next)
            }
            None => {
                self.counters.bump(PICK_WENT_IDLE);
                ctx.cancel_timer(cpu);
                None
            }
        }
    }

    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let Some(t) = ctx.curr(cpu) else { return };
        let now = ctx.now;
        let waiting = self.vps().best(|w| ctx.allowed(w, cpu)).is_some();
        if waiting {
            self.expired[cpu as usize] = true;
            ctx.resched(cpu);
        } else {
            self.counters.bump(SLICE_END_RENEW);
            self.vps().charge(t, now);
            ctx.set_timer(cpu, now + self.timeslice);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    /// Fair share with one shared ready list: a ready VP waits at most for every other VP
    /// to take its turn (a slice), stretched by the weight ratios.
    fn starvation_bound(&self, view: &SchedView) -> Option<SimDuration> {
        Some(super::proportional_share_bound(view, self.timeslice))
    }
}

/// `hyperv-classic`: slice ends (`timeslice`).
impl super::Registered for HyperVClassic {
    type Sched = HyperVClassic;
    const NAME: &'static str = "hyperv-classic";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> HyperVClassic {
        HyperVClassic::new(p)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(p.duration("timeslice"))
    }
}
