//! Host schedulers: the ops table every scheduler implements, the view of the host it
//! gets, and the registry (one line per scheduler) that also feeds `--help` and Python.
//!
//! ## Contract between the engine and a scheduler
//! The engine owns *what runs where* (`SchedView::cpu_curr`) and the guest model; the
//! scheduler owns its run queues and decides *what should run*. The engine calls:
//! - `wake(task)` when a halted vCPU becomes runnable. The scheduler queues it somewhere
//!   and calls `ctx.resched(cpu)` for any pCPU that should reconsider what it runs.
//! - `block(cpu, task)` when the task running on `cpu` halts; the engine then asks
//!   `pick_next(cpu, None)`.
//! - `pick_next(cpu, prev)` when a pCPU was asked to reschedule. `prev` is the task that
//!   was running there and is still runnable: the scheduler must either return it again or
//!   keep it queued. The returned task must be runnable, not running elsewhere, and allowed
//!   on `cpu` by its affinity; the engine checks this when invariants are on.
//! - `timer(cpu)` when the pCPU's timer, armed with `ctx.set_timer`, expires.
//! - `global_timer()` when the timer armed with `ctx.set_global_timer` expires.
//!
//! Every hook receives `ctx.now`. Hooks never see partially updated engine state: the
//! engine applies their requests (reschedules, timers) after the hook returns.

pub mod cfs;
pub mod credit;
pub mod eevdf;
pub mod fair;
pub mod flms;
pub mod hyperv_classic;
pub mod hyperv_core;
pub mod hyperv_root;
pub mod io_bound;
pub mod rr;
pub mod vslicer;
pub mod vturbo;

use crate::error::ScenarioError;
use crate::reader::{Owned, Res, Table};
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
    pub class: Option<crate::scenario::VmClass>,
    /// A latency (I/O) vCPU: any vCPU of an LSVM, a reserved vCPU of a MixVM.
    pub latency_vcpu: bool,
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
    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, task: TaskId);
    fn pick_next(&mut self, ctx: &mut SchedCtx, cpu: CpuId, prev: Option<TaskId>)
        -> Option<TaskId>;
    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId);
    fn global_timer(&mut self, _ctx: &mut SchedCtx) {}
    /// Directed yield. Schedulers without it fail every request (returns 0 in Linux terms).
    fn yield_to(&mut self, _ctx: &mut SchedCtx, _req: YieldRequest) -> YieldResult {
        YieldResult::Failed
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

/// One registered scheduler.
pub struct SchedulerEntry {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [ParamInfo],
}

/// The registry: one line per scheduler. The order is the order of `vcpulab schedulers`.
pub const REGISTRY: &[SchedulerEntry] = &[
    SchedulerEntry {
        name: "rr",
        description: rr::DESCRIPTION,
        params: rr::PARAMS,
    },
    SchedulerEntry {
        name: "hyperv-root",
        description: hyperv_root::DESCRIPTION,
        params: hyperv_root::PARAMS,
    },
    SchedulerEntry {
        name: "hyperv-classic",
        description: hyperv_classic::DESCRIPTION,
        params: hyperv_classic::PARAMS,
    },
    SchedulerEntry {
        name: "hyperv-core",
        description: hyperv_core::DESCRIPTION,
        params: hyperv_core::PARAMS,
    },
    SchedulerEntry {
        name: "cfs",
        description: cfs::DESCRIPTION,
        params: cfs::PARAMS,
    },
    SchedulerEntry {
        name: "eevdf",
        description: eevdf::DESCRIPTION,
        params: eevdf::PARAMS,
    },
    SchedulerEntry {
        name: "credit",
        description: credit::DESCRIPTION,
        params: credit::PARAMS,
    },
    SchedulerEntry {
        name: "flms",
        description: flms::DESCRIPTION,
        params: flms::PARAMS,
    },
    SchedulerEntry {
        name: "vslicer",
        description: vslicer::DESCRIPTION,
        params: vslicer::PARAMS,
    },
    SchedulerEntry {
        name: "vturbo",
        description: vturbo::DESCRIPTION,
        params: vturbo::PARAMS,
    },
    SchedulerEntry {
        name: "io-bound",
        description: io_bound::DESCRIPTION,
        params: io_bound::PARAMS,
    },
];

/// Builds the scheduler named in a scenario and hands it to `f` with its static type, so
/// the engine is monomorphised per scheduler (no dynamic dispatch on the hot path).
pub trait WithScheduler {
    type Output;
    fn call<S: Scheduler>(self, sched: S) -> Self::Output;
}

pub fn with_scheduler<F: WithScheduler>(name: &str, params: &toml::Table, f: F) -> F::Output {
    let entry = find(name).expect("validated scheduler name");
    let p = Params {
        table: params,
        infos: entry.params,
    };
    match name {
        "rr" => f.call(rr::Rr::new(&p)),
        "hyperv-root" => f.call(hyperv_root::HyperVRoot::new(&p)),
        "hyperv-classic" => f.call(hyperv_classic::HyperVClassic::new(&p)),
        "hyperv-core" => f.call(hyperv_core::HyperVCore::new(&p)),
        "cfs" => f.call(cfs::new(&p)),
        "eevdf" => f.call(eevdf::new(&p)),
        "credit" => f.call(credit::Credit::new(&p)),
        "flms" => f.call(credit::Credit::with_policy(&p, flms::Flms::new(&p))),
        "vslicer" => f.call(credit::Credit::with_policy(&p, vslicer::VSlicer::new(&p))),
        "vturbo" => f.call(credit::Credit::with_policy(&p, vturbo::VTurbo::new(&p))),
        "io-bound" => f.call(credit::Credit::with_policy(&p, io_bound::IoBound::new(&p))),
        _ => unreachable!("scheduler {name} is registered but not constructible"),
    }
}

pub fn find(name: &str) -> Option<&'static SchedulerEntry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// Validates the parameters of scheduler `name` (keys and types).
pub fn validate_params(name: &str, params: &toml::Table, origin: &str, path: &str) -> Res<()> {
    let Some(entry) = find(name) else {
        let names: Vec<&str> = REGISTRY.iter().map(|e| e.name).collect();
        let hint = crate::reader::closest(name, &names)
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        return Err(ScenarioError::new(
            origin,
            format!("{path}.name"),
            format!(
                "unknown scheduler {name:?}{hint}; available: {}",
                names.join(", ")
            ),
        ));
    };
    let value = toml::Value::Table(params.clone());
    let table = Table::root(origin, &value)?.with_path(path);
    for info in entry.params {
        if let Some(o) = table.get(info.name) {
            check_param(&o, info)?;
        }
    }
    match name {
        "credit" | "io-bound" => credit::check_params(&table)?,
        "vslicer" => vslicer::check_params(&table)?,
        "vturbo" => vturbo::check_params(&table)?,
        _ => {}
    }
    if name == "flms" {
        flms::check_params(&table)?;
    }
    let mut allowed: Vec<&str> = vec!["name"];
    allowed.extend(entry.params.iter().map(|p| p.name));
    table.finish(&allowed).map_err(|e| ScenarioError {
        message: format!("{} (scheduler {name})", e.message),
        ..e
    })
}

/// Validates the parameters of scheduler `name` that depend on the host (`ncpus` pCPUs):
/// reserved pCPUs must leave some for the rest. Called after `validate_params`.
pub fn validate_for_host(
    name: &str,
    params: &toml::Table,
    ncpus: usize,
    origin: &str,
    path: &str,
) -> Res<()> {
    let value = toml::Value::Table(params.clone());
    let table = Table::root(origin, &value)?.with_path(path);
    match name {
        "vturbo" => vturbo::check_host(&table, ncpus),
        "io-bound" => io_bound::check_host(&table, ncpus),
        _ => Ok(()),
    }
}

fn check_param(o: &Owned, info: &ParamInfo) -> Res<()> {
    match info.kind {
        ParamKind::Duration => {
            let d = o.duration()?;
            if d.ns() == 0 {
                return o.err("must be longer than 0s");
            }
        }
        ParamKind::Int => {
            o.u64_in(0, 1 << 40)?;
        }
        ParamKind::Float => {
            o.f64_in(0.0, 1e12)?;
        }
        ParamKind::Bool => {
            o.bool()?;
        }
        ParamKind::Choice(allowed) => {
            let v = o.str()?;
            if !allowed.contains(&v) {
                return o.err(format!(
                    "{v:?} is not allowed; allowed: {}",
                    allowed
                        .iter()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    Ok(())
}
