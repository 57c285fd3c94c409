//! What a Credit-derived scheduler (`flms`, `vslicer`, `vturbo`, `io-bound`) sees of
//! Credit: the `CreditPolicy` trait, whose hooks Credit calls at fixed points of its
//! algorithm, and the methods through which a policy reads and changes Credit's state.
//! Credit's fields are private to `credit`; a variant goes through this file only, so
//! everything a variant may touch, and when, is listed here.

use super::Credit;
use crate::sched::{CpuId, RunState, SchedCtx, SchedView, TaskId};
use crate::time::SimDuration;
use crate::topology::CpuSet;
use std::collections::VecDeque;

/// The hooks through which `flms`, `vslicer`, `vturbo` and `io-bound` change Credit. Each
/// is a function of the whole scheduler (so it may read and change Credit's state through
/// the methods below) with Credit's own behaviour as the default.
pub trait CreditPolicy: Sized {
    /// After Credit's own set-up and before any vCPU is placed: narrow pools
    /// (`set_initial_pool`), set slices (`set_slice`) and rate limits (`set_ratelimit`).
    fn init(_c: &mut Credit<Self>, _ctx: &mut SchedCtx) {}
    /// After every accounting pass.
    fn after_acct(_c: &mut Credit<Self>, _ctx: &mut SchedCtx) {}
    /// The policy's own decision counters, listed after Credit's.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![]
    }
    /// The policy's own invariants, checked after Credit's.
    fn check(_c: &Credit<Self>, _view: &SchedView) -> Result<(), String> {
        Ok(())
    }
    /// The starvation bound under the policy, given Credit's (`credit`, computed as if
    /// every vCPU could use every pCPU of its affinity).
    fn starvation_bound(
        _c: &Credit<Self>,
        _view: &SchedView,
        credit: Option<SimDuration>,
    ) -> Option<SimDuration> {
        credit
    }
    /// Whether `t`, being queued on `cpu`, goes ahead of `other` of the same priority
    /// (Credit: never, so equal priorities are first in, first out).
    fn runs_before(_c: &Credit<Self>, _t: TaskId, _other: TaskId, _cpu: usize) -> bool {
        false
    }
    /// `t` has just paid `credits` for running on its pCPU (`processor`).
    fn charged(_c: &mut Credit<Self>, _t: TaskId, _credits: i64) {}
    /// `t` has just been given a slice on `cpu` (also when it continues there after its
    /// slice; not when the rate limit keeps it).
    fn dispatched(_c: &mut Credit<Self>, _t: TaskId, _cpu: usize) {}
    /// `csched_load_balance`: a queued vCPU of priority above `pri` that `cpu` takes from a
    /// peer (it then lives on `cpu`: see `take_queued`), or None.
    fn load_balance(c: &mut Credit<Self>, ctx: &SchedCtx, cpu: usize, pri: i8) -> Option<TaskId> {
        c.steal(ctx, cpu, pri)
    }
}

/// Credit itself: no hooks.
pub struct Plain;
impl CreditPolicy for Plain {}

/// Reading Credit's state. Any hook may call these; they change nothing.
impl<P: CreditPolicy> Credit<P> {
    /// The policy's own state.
    #[inline]
    pub(in crate::sched) fn policy(&self) -> &P {
        &self.policy
    }
    /// The policy's own state, to change. Credit never reads it.
    #[inline]
    pub(in crate::sched) fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }
    /// Credit's time slice (`tslice_ms`), which is also its accounting period.
    #[inline]
    pub(in crate::sched) fn tslice(&self) -> SimDuration {
        self.tslice
    }
    /// The credit one vCPU earns at most per accounting period (a slice's worth: 300).
    #[inline]
    pub(in crate::sched) fn credits_per_tslice(&self) -> i64 {
        self.credits_per_tslice
    }
    /// The pCPUs `t` may use: its affinity, narrowed by the policy's pools.
    #[inline]
    pub(in crate::sched) fn pool(&self, t: TaskId) -> &CpuSet {
        &self.pool[t as usize]
    }
    /// The pCPU `t` lives on: where it runs, waits, or last ran.
    #[inline]
    pub(in crate::sched) fn processor(&self, t: TaskId) -> CpuId {
        self.processor[t as usize]
    }
    /// `t`'s Credit priority (`PRI_BOOST`, `PRI_UNDER`, `PRI_OVER`).
    #[inline]
    pub(in crate::sched) fn priority(&self, t: TaskId) -> i8 {
        self.pri[t as usize]
    }
    /// `t` is parked: paused by its VM's cap until accounting unparks it.
    #[inline]
    pub(in crate::sched) fn is_parked(&self, t: TaskId) -> bool {
        self.parked[t as usize]
    }
    /// `t` is marked to leave its pCPU at that pCPU's next decision.
    #[inline]
    pub(in crate::sched) fn is_migrating(&self, t: TaskId) -> bool {
        self.migrating[t as usize]
    }
    /// What runs on `cpu` as Credit sees it (the engine agrees after every hook).
    #[inline]
    pub(in crate::sched) fn running(&self, cpu: usize) -> Option<TaskId> {
        self.curr[cpu]
    }
    /// `cpu` is idle, waiting to be tickled.
    #[inline]
    pub(in crate::sched) fn is_idler(&self, cpu: usize) -> bool {
        self.idlers.contains(cpu)
    }
    /// The vCPUs waiting on `cpu`, head (next to run) first: by priority, and within a
    /// priority in arrival order unless `runs_before` says otherwise.
    #[inline]
    pub(in crate::sched) fn queue(&self, cpu: usize) -> &VecDeque<TaskId> {
        &self.runq[cpu]
    }
    /// pCPUs whose queue may hold a vCPU: a superset of the non-empty queues, so that a
    /// balancer need not look at every pCPU.
    #[inline]
    pub(in crate::sched) fn maybe_queued(&self) -> &CpuSet {
        &self.maybe_queued
    }
}

/// Changing Credit's state. Each says from which hooks it may be called.
impl<P: CreditPolicy> Credit<P> {
    /// From `init` only (before any vCPU is placed): `t` may run only on `pool`, which
    /// must be a non-empty subset of its affinity. At run time use `set_pool`.
    #[inline]
    pub(in crate::sched) fn set_initial_pool(&mut self, t: TaskId, pool: CpuSet) {
        self.pool[t as usize] = pool;
    }
    /// From `init` (or any hook): `t`'s time slice from its next dispatch on (default:
    /// `tslice`).
    #[inline]
    pub(in crate::sched) fn set_slice(&mut self, t: TaskId, slice: SimDuration) {
        self.slice_of[t as usize] = slice;
    }
    /// From `init` (or any hook): how long `t` keeps its pCPU at least once dispatched,
    /// from its next decision on (default: `ratelimit_us`; zero turns the limit off).
    #[inline]
    pub(in crate::sched) fn set_ratelimit(&mut self, t: TaskId, ratelimit: SimDuration) {
        self.ratelimit_of[t as usize] = ratelimit;
    }
    /// From `load_balance` only: takes `t`, queued on some peer of `cpu`, off that queue;
    /// `t` now lives on `cpu`, and `load_balance` must return it.
    #[inline]
    pub(in crate::sched) fn take_queued(&mut self, t: TaskId, cpu: usize) {
        self.runq_remove(t);
        self.processor[t as usize] = cpu as CpuId;
    }
    /// At run time (`after_acct`): binds `t` to `pool` (within its affinity) and moves it
    /// if it lives outside: a running vCPU is marked for migration and its pCPU
    /// reschedules; a queued one is re-placed and woken there (without a boost unless it
    /// is UNDER, as upstream's migration); a halted one just gets a new pCPU.
    pub(in crate::sched) fn set_pool(&mut self, ctx: &mut SchedCtx, t: TaskId, pool: CpuSet) {
        let ti = t as usize;
        let pool = pool.intersect(&ctx.view.tasks[ti].affinity);
        assert!(!pool.is_empty(), "a pool outside the vCPU's affinity");
        self.pool[ti] = pool;
        if self.pool[ti].contains(self.processor[ti] as usize) {
            return;
        }
        match ctx.view.state[ti] {
            RunState::Running(c) => {
                if !self.migrating[ti] {
                    self.migrating[ti] = true;
                    ctx.resched(c);
                }
            }
            _ if self.on_runq[ti] => {
                self.runq_remove(t);
                let to = self.cpu_pick(ctx.view, t, true);
                self.processor[ti] = to as CpuId;
                self.enqueue_wake(ctx, t);
            }
            _ => {
                self.processor[ti] = self.cpu_pick(ctx.view, t, true) as CpuId;
            }
        }
    }
}

/// For the variants' unit tests: states set up directly, bypassing the engine.
#[cfg(test)]
impl<P: CreditPolicy> Credit<P> {
    /// The time slice `t` gets at each dispatch.
    pub(in crate::sched) fn slice_of(&self, t: TaskId) -> SimDuration {
        self.slice_of[t as usize]
    }
    /// Queues `t` on `cpu` as Credit would (by priority, then `runs_before`).
    pub(in crate::sched) fn test_enqueue(&mut self, t: TaskId, cpu: usize) {
        self.runq_insert(t, cpu);
    }
    pub(in crate::sched) fn test_queue_mut(&mut self, cpu: usize) -> &mut VecDeque<TaskId> {
        &mut self.runq[cpu]
    }
    /// `t` runs on `cpu` (None: `cpu` idles), in Credit's view of the host.
    pub(in crate::sched) fn test_set_running(&mut self, cpu: usize, t: Option<TaskId>) {
        self.curr[cpu] = t;
        if t.is_some() {
            self.idlers.remove(cpu);
        } else {
            self.idlers.insert(cpu);
        }
    }
    pub(in crate::sched) fn test_set_priority(&mut self, t: TaskId, pri: i8) {
        self.pri[t as usize] = pri;
    }
    pub(in crate::sched) fn test_set_processor(&mut self, t: TaskId, cpu: usize) {
        self.processor[t as usize] = cpu as CpuId;
    }
}
