//! Host schedulers: the ops table every scheduler implements, the view of the host it
//! gets, and the list of schedulers (`schedulers!`, one line each; the machinery is in
//! `registry.rs`) that also feeds `--help` and Python.
//!
//! ## Contract between the engine and a scheduler
//! The engine owns *what runs where* (`SchedView::cpu_curr`) and the guest model; the
//! scheduler owns its run queues and decides *what should run*. The engine calls:
//! - `wake(task)` when a halted vCPU becomes runnable. The scheduler queues it somewhere
//!   and calls `ctx.resched(cpu)` for any pCPU that should reconsider what it runs. The
//!   engine calls it through `wake_from(task, waker)`, which names the task and pCPU whose
//!   action woke it, if a running task did (`Waker`).
//! - `block(cpu, task)` when the task running on `cpu` halts; the engine then asks
//!   `pick_next(cpu, None)`.
//! - `pick_next(cpu, prev)` when a pCPU was asked to reschedule. `prev` is the task that
//!   was running there and is still runnable: the scheduler must either return it again or
//!   keep it queued. The returned task must be runnable, not running elsewhere, and allowed
//!   on `cpu` by its affinity; the engine checks this on every pick.
//! - `timer(cpu)` when the pCPU's timer, armed with `ctx.set_timer`, expires.
//! - `global_timer()` when the timer armed with `ctx.set_global_timer` expires.
//!
//! Every hook receives `ctx.now`. Hooks never see partially updated engine state: the
//! engine applies their requests (reschedules, timers) after the hook returns.

pub mod fair;
pub mod registry;

pub use registry::{
    find, validate_for_host, validate_params, Pools, Properties, Registered, SchedulerEntry,
};

// The schedulers, in the order of `vcpulab schedulers`: one line each (see `registry`).
registry::schedulers! {
    rr::Rr,
    hyperv_root::HyperVRoot,
    hyperv_classic::HyperVClassic,
    hyperv_core::HyperVCore,
    cfs::Cfs,
    eevdf::Eevdf,
    credit::Credit,
    credit2::Credit2,
    rtds::Rtds,
    flms::Flms,
    vslicer::VSlicer,
    vturbo::VTurbo,
    io_bound::IoBound,
    null::Null,
}

use crate::time::{SimDuration, SimTime};
use crate::topology::{CpuSet, Topology};

pub type TaskId = u32;
pub type CpuId = u32;

/// Host-visible state of a schedulable entity (a vCPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    Running(CpuId),
    Runnable,
    Halted,
}

/// Static facts about a task that schedulers may use.
#[derive(Clone, Debug)]
pub struct TaskInfo {
    pub vm: u32,
    /// Index of the vCPU within its VM.
    pub index: u32,
    pub affinity: CpuSet,
    pub weight: u32,
    /// The VM's cap in percent of one pCPU (0: none; host threads have none).
    pub cap: u32,
    /// The VM's FLMS class, if the scenario gives one (host threads: None).
    pub class: Option<crate::vocab::VmClass>,
    /// A latency (I/O) vCPU: any vCPU of an LSVM, a reserved vCPU of a MixVM.
    pub latency_vcpu: bool,
    /// A host thread (`[[host_thread]]`), not a vCPU: Linux core scheduling leaves it
    /// untagged (cookie 0) whatever its VM.
    pub host_thread: bool,
    /// The VM's RTDS reservation (host threads: none, the scheduler's defaults).
    pub rt: crate::vocab::RtReservation,
}

/// What a scheduler may read about the host. Updated by the engine between hooks.
pub struct SchedView {
    pub topo: Topology,
    pub tasks: Vec<TaskInfo>,
    pub state: Vec<RunState>,
    pub cpu_curr: Vec<Option<TaskId>>,
    /// Number of VMs; VM ids are 0..nvms.
    pub nvms: u32,
}

/// Requests a hook makes; the engine applies them after the hook returns.
#[derive(Default)]
pub struct SchedOut {
    pub(crate) resched: Vec<CpuId>,
    pub(crate) resched_pending: Vec<bool>,
    pub(crate) timers: Vec<(CpuId, Option<SimTime>)>,
    pub(crate) global_timer: Option<Option<SimTime>>,
}

pub struct SchedCtx<'a> {
    pub now: SimTime,
    pub view: &'a SchedView,
    pub(crate) out: &'a mut SchedOut,
}

/// Calls hook `f` of `sched` with a context over `view` at `now`, as the engine does, and
/// returns what `f` returned with what the hook asked of the engine. For the unit tests
/// in scheduler files, which drive hooks on hand-built views.
#[cfg(test)]
pub(crate) fn call_hook<S, R>(
    sched: &mut S,
    view: &SchedView,
    now: SimTime,
    f: impl FnOnce(&mut S, &mut SchedCtx) -> R,
) -> (R, SchedOut) {
    let mut out = SchedOut {
        resched_pending: vec![false; view.cpu_curr.len()],
        ..Default::default()
    };
    let r = f(
        sched,
        &mut SchedCtx {
            now,
            view,
            out: &mut out,
        },
    );
    (r, out)
}

impl<'a> SchedCtx<'a> {
    /// Asks `cpu` to call `pick_next` (after this hook returns).
    #[inline]
    pub fn resched(&mut self, cpu: CpuId) {
        let c = cpu as usize;
        if !self.out.resched_pending[c] {
            self.out.resched_pending[c] = true;
            self.out.resched.push(cpu);
        }
    }
    /// Arms (replacing any earlier) the timer of `cpu`.
    #[inline]
    pub fn set_timer(&mut self, cpu: CpuId, at: SimTime) {
        self.out.timers.push((cpu, Some(at)));
    }
    #[inline]
    pub fn cancel_timer(&mut self, cpu: CpuId) {
        self.out.timers.push((cpu, None));
    }
    pub fn set_global_timer(&mut self, at: SimTime) {
        self.out.global_timer = Some(Some(at));
    }
    #[inline]
    pub fn curr(&self, cpu: CpuId) -> Option<TaskId> {
        self.view.cpu_curr[cpu as usize]
    }
    #[inline]
    pub fn is_idle(&self, cpu: CpuId) -> bool {
        self.view.cpu_curr[cpu as usize].is_none()
    }
    #[inline]
    pub fn allowed(&self, task: TaskId, cpu: CpuId) -> bool {
        self.view.tasks[task as usize]
            .affinity
            .contains(cpu as usize)
    }
    pub fn ncpus(&self) -> usize {
        self.view.cpu_curr.len()
    }
}

/// A directed yield (Linux `yield_to`): the vCPU `from`, running on `from_cpu`, asks that
/// `target` run instead. KVM's PLE handler issues these.
#[derive(Clone, Copy, Debug)]
pub struct YieldRequest {
    pub from: TaskId,
    pub from_cpu: CpuId,
    pub target: TaskId,
    /// Fix (b): honour the boost even against per-vCPU fairness; charge the spinner.
    pub ignore_vcpu_fairness: bool,
    /// Fix (c): move the target to the spinner's run queue.
    pub migrate_to_yielder: bool,
}

/// Who caused a wake-up: the task running on `cpu` whose action woke the other (a vCPU
/// sending an IPI or a pv kick, a host thread handing work over), Linux's `current` and
/// `smp_processor_id()` in `try_to_wake_up`. A timer or an interrupt has none: KVM's
/// lapic hrtimer fires on the pCPU the vCPU last ran on, where the waker would be the
/// wakee's own previous pCPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waker {
    pub task: TaskId,
    pub cpu: CpuId,
}

/// What `yield_to` returned (Linux: 1, 0, -ESRCH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YieldResult {
    Yielded,
    Failed,
    NoSuchTarget,
}

/// The ops table. One implementation per file in this folder.
pub trait Scheduler {
    fn init(&mut self, ctx: &mut SchedCtx);
    fn wake(&mut self, ctx: &mut SchedCtx, task: TaskId);
    /// `wake` with what caused it (None: a timer or an interrupt). The engine calls this
    /// one; a scheduler that places wake-ups by their waker (the fair class's
    /// `wake_affine`) overrides it, the others ignore the waker.
    fn wake_from(&mut self, ctx: &mut SchedCtx, task: TaskId, _waker: Option<Waker>) {
        self.wake(ctx, task)
    }
    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, task: TaskId);
    fn pick_next(&mut self, ctx: &mut SchedCtx, cpu: CpuId, prev: Option<TaskId>)
        -> Option<TaskId>;
    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId);
    fn global_timer(&mut self, _ctx: &mut SchedCtx) {}
    /// Directed yield. Schedulers without it fail every request (returns 0 in Linux terms).
    fn yield_to(&mut self, _ctx: &mut SchedCtx, _req: YieldRequest) -> YieldResult {
        YieldResult::Failed
    }
    /// `sched_yield` by `task`, running on `cpu` (Linux `do_sched_yield`: the class's
    /// `yield_task`, then a reschedule of `cpu`). Contract: `task` is the running task of
    /// `cpu`; the scheduler asks for the reschedule itself. Returns false if this
    /// scheduler has no yield (the default; nothing changed).
    fn sched_yield(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId, _task: TaskId) -> bool {
        false
    }
    /// `task`'s nice value becomes `nice` (-20..=19), as Linux `set_user_nice` or
    /// `sched_setattr` with SCHED_NORMAL does, whether the task runs, waits or sleeps.
    /// Contract: applied at once; the scheduler asks for any reschedule it implies.
    /// Returns false if this scheduler has no nice values (the default; nothing changed).
    fn set_nice(&mut self, _ctx: &mut SchedCtx, _task: TaskId, _nice: i8) -> bool {
        false
    }
    /// `task`'s affinity (`ctx.view.tasks[task].affinity`) has just changed, as Linux
    /// `sched_setaffinity` changes it. Contract: a task queued or running on a pCPU now
    /// outside its affinity is moved at once (a running one when its pCPU reschedules,
    /// which the scheduler asks for); a sleeping one is placed within it at its next
    /// wake-up. Returns false if this scheduler does not follow affinity changes (the
    /// default; the caller must not change affinities then).
    fn set_affinity(&mut self, _ctx: &mut SchedCtx, _task: TaskId) -> bool {
        false
    }
    /// Counters, one per decision branch, as (name, value) in a fixed order.
    fn counters(&self) -> Vec<(&'static str, u64)>;
    /// The longest a runnable task may wait without running under this scheduler on this
    /// host, for `--check-invariants` (None: no bound is promised, e.g. strict priorities).
    /// Asked once, after `init`.
    fn starvation_bound(&self, _view: &SchedView) -> Option<SimDuration> {
        None
    }
    /// The task this scheduler would most likely run next on `cpu` if its current one
    /// stopped, if that is cheap to tell. Only a hint, for prefetching that task's state
    /// before the pCPU's next event; it must not change anything (None: no hint).
    #[inline]
    fn likely_next(&self, _cpu: CpuId) -> Option<TaskId> {
        None
    }
    /// Scheduler-specific invariants (e.g. pools, gangs), checked after every event when
    /// invariant checking is on. Returns what is violated.
    fn check(&self, _view: &SchedView) -> Result<(), String> {
        Ok(())
    }
    /// Forced-idle time so far of each pCPU (ns, open stretches counted up to `now`):
    /// time it idled with tasks runnable on it because its core ran another
    /// core-scheduling cookie. None: no core scheduling (the summary then has no
    /// `host.core_sched`).
    fn forced_idle_ns(&self, _now: SimTime) -> Option<Vec<u64>> {
        None
    }
}

/// Slack added to every starvation bound: load balancing, wake-up placement and switch
/// costs delay a task by a few milliseconds beyond its queue's round.
pub const STARVATION_SLACK: SimDuration = SimDuration::from_ms(100);

/// A generous starvation bound for a proportional-share scheduler whose longest turn is
/// `turn`: every other task on the host takes at most one turn, stretched by the largest
/// ratio of per-task shares (weights, and a VM's weight split over its vCPUs).
pub fn proportional_share_bound(view: &SchedView, turn: SimDuration) -> SimDuration {
    let n = view.tasks.len() as u64;
    let (wmin, wmax) = view.tasks.iter().fold((u64::MAX, 1u64), |(lo, hi), t| {
        (lo.min(t.weight as u64), hi.max(t.weight as u64))
    });
    let mut per_vm = vec![0u64; view.nvms as usize];
    for t in &view.tasks {
        per_vm[t.vm as usize] += 1;
    }
    let widest_vm = per_vm.into_iter().max().unwrap_or(1).max(1);
    let stretch = (wmax / wmin.max(1)).max(1).saturating_mul(widest_vm);
    turns_bound(turn, n.saturating_mul(stretch))
}

/// `turns` turns of at most `turn` each, plus the slack.
pub fn turns_bound(turn: SimDuration, turns: u64) -> SimDuration {
    SimDuration(
        turn.ns()
            .saturating_mul(turns)
            .saturating_add(STARVATION_SLACK.ns()),
    )
}

mod counters;
pub use counters::Counters;

/// A scheduler parameter, for validation and documentation.
#[derive(Clone, Copy, Debug)]
pub struct ParamInfo {
    pub name: &'static str,
    pub kind: ParamKind,
    pub default: &'static str,
    pub help: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Duration,
    Int,
    Float,
    Bool,
    /// A string, one of these.
    Choice(&'static [&'static str]),
}

impl ParamKind {
    pub fn name(self) -> &'static str {
        match self {
            ParamKind::Duration => "duration",
            ParamKind::Int => "integer",
            ParamKind::Float => "number",
            ParamKind::Bool => "boolean",
            ParamKind::Choice(_) => "string",
        }
    }
}

/// Typed access to a validated parameter table, with defaults from the `ParamInfo`s.
pub struct Params<'a> {
    table: &'a toml::Table,
    infos: &'static [ParamInfo],
}

impl<'a> Params<'a> {
    fn raw(&self, name: &str) -> toml::Value {
        if let Some(v) = self.table.get(name) {
            return v.clone();
        }
        let info = self
            .infos
            .iter()
            .find(|p| p.name == name)
            .expect("undeclared parameter");
        match info.kind {
            ParamKind::Duration => toml::Value::String(info.default.to_string()),
            ParamKind::Int => toml::Value::Integer(info.default.parse().expect("bad default")),
            ParamKind::Float => toml::Value::Float(info.default.parse().expect("bad default")),
            ParamKind::Bool => toml::Value::Boolean(info.default == "true"),
            ParamKind::Choice(_) => toml::Value::String(info.default.to_string()),
        }
    }
    pub fn duration(&self, name: &str) -> SimDuration {
        let v = self.raw(name);
        crate::time::parse_duration(v.as_str().unwrap()).expect("validated")
    }
    pub fn int(&self, name: &str) -> i64 {
        let v = self.raw(name);
        v.as_integer()
            .unwrap_or_else(|| v.as_float().unwrap() as i64)
    }
    /// An integer the scenario gives, for a parameter that only some of the schedulers
    /// sharing a constructor declare (Credit's `tslice_us` is not its variants').
    pub fn given_int(&self, name: &str) -> Option<i64> {
        self.table.get(name).and_then(toml::Value::as_integer)
    }
    pub fn float(&self, name: &str) -> f64 {
        let v = self.raw(name);
        v.as_float()
            .unwrap_or_else(|| v.as_integer().unwrap() as f64)
    }
    pub fn bool(&self, name: &str) -> bool {
        self.raw(name).as_bool().unwrap()
    }
    pub fn choice(&self, name: &str) -> String {
        self.raw(name).as_str().unwrap().to_string()
    }
}

/// What `with_scheduler` hands the scheduler it built to, with its static type, so the
/// engine is monomorphised per scheduler (no dynamic dispatch on the hot path).
pub trait WithScheduler {
    type Output;
    fn call<S: Scheduler>(self, sched: S) -> Self::Output;
}
