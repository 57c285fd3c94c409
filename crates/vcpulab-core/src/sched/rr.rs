//! `rr` — per-pCPU round robin with home pCPUs.
//!
//! ## Policy
//! Every vCPU has a home pCPU and never leaves it: the i-th vCPU of the host (VMs in
//! scenario order, vCPUs in index order) lives on the (i mod n)-th pCPU of its affinity
//! mask, n being the size of the mask. Each pCPU keeps a FIFO run queue. A waking vCPU
//! joins the tail of its home queue and starts at once if the pCPU is idle. The running
//! vCPU is preempted when its slice expires, and only if another vCPU is waiting: it then
//! goes to the tail; otherwise it starts a fresh slice. A vCPU that halts leaves the pCPU
//! to the head of the queue.
//!
//! ## Parameters
//! - `slice` (duration, default 1 ms): the round-robin quantum.
//!
//! ## Source
//! This is the template scheduler and the speed baseline: the model of
//! `shared/bench/rr-overcommit` (README: home pCPU i mod P, FIFO queue, 1 ms slice,
//! preempt at slice end only if the queue is non-empty). It models no real hypervisor.
//!
//! ## Deviations
//! None from the reference model. Weights are ignored (round robin is weight-blind).

use super::{Counters, CpuId, ParamInfo, ParamKind, Params, SchedCtx, Scheduler, TaskId};
use crate::time::SimDuration;
use std::collections::VecDeque;

pub const DESCRIPTION: &str =
    "per-pCPU round robin, vCPUs fixed on home pCPUs (template and speed baseline)";

pub const PARAMS: &[ParamInfo] = &[ParamInfo {
    name: "slice",
    kind: ParamKind::Duration,
    default: "1ms",
    help: "round-robin time slice",
}];

super::counters::declare_counters! {
    WAKE_IDLE => "wake_on_idle_cpu",
    WAKE_QUEUED => "wake_queued",
    SLICE_PREEMPT => "slice_end_preempt",
    SLICE_RENEW => "slice_end_renew",
    BLOCK => "block",
    PICK_IDLE => "pick_went_idle",
}

pub struct Rr {
    // global
    slice: SimDuration,
    counters: Counters<NCOUNTERS>,
    // per-pCPU
    runqueue: Vec<VecDeque<TaskId>>,
    // per-vCPU
    home: Vec<CpuId>,
}

impl Rr {
    pub fn new(p: &Params) -> Rr {
        Rr {
            slice: p.duration("slice"),
            counters: Counters::new(COUNTER_NAMES),
            runqueue: Vec::new(),
            home: Vec::new(),
        }
    }
}

impl Scheduler for Rr {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let n = ctx.ncpus();
        self.runqueue = (0..n).map(|_| VecDeque::new()).collect();
        self.home = ctx
            .view
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| t.affinity.nth_wrapping(i).expect("affinity is never empty") as CpuId)
            .collect();
    }

    #[inline]
    fn wake(&mut self, ctx: &mut SchedCtx, task: TaskId) {
        let cpu = self.home[task as usize];
        self.runqueue[cpu as usize].push_back(task);
        if ctx.is_idle(cpu) {
            self.counters.bump(WAKE_IDLE);
            ctx.resched(cpu);
        } else {
            self.counters.bump(WAKE_QUEUED);
        }
    }

    #[inline]
    fn block(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId, _task: TaskId) {
        self.counters.bump(BLOCK);
    }

    #[inline]
    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        let rq = &mut self.runqueue[cpu as usize];
        if let Some(p) = prev {
            // Only the slice timer asks us to reschedule a running vCPU.
            rq.push_back(p);
        }
        match rq.pop_front() {
            Some(next) => {
                ctx.set_timer(cpu, ctx.now + self.slice);
                Some(next)
            }
            None => {
                self.counters.bump(PICK_IDLE);
                ctx.cancel_timer(cpu);
                None
            }
        }
    }

    #[inline]
    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        if self.runqueue[cpu as usize].is_empty() {
            self.counters.bump(SLICE_RENEW);
            ctx.set_timer(cpu, ctx.now + self.slice);
        } else {
            self.counters.bump(SLICE_PREEMPT);
            ctx.resched(cpu);
        }
    }

    /// The head of the pCPU's queue: it runs when the current vCPU halts or its slice ends.
    #[inline]
    fn likely_next(&self, cpu: CpuId) -> Option<TaskId> {
        self.runqueue[cpu as usize].front().copied()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }
    /// Weight-blind round robin: each queued task runs within one slice per task ahead.
    fn starvation_bound(&self, view: &super::SchedView) -> Option<SimDuration> {
        Some(super::turns_bound(self.slice, view.tasks.len() as u64))
    }
}

/// `rr`: its slice ends are its periodic events.
impl super::Registered for Rr {
    type Sched = Rr;
    const NAME: &'static str = "rr";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Rr {
        Rr::new(p)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(p.duration("slice"))
    }
}
