//! The scheduler registry, after Xen's `REGISTER_SCHEDULER`: what each scheduler declares
//! about itself (`Registered`), the `schedulers!` list in `sched/mod.rs` that turns those
//! declarations into the module list, the `REGISTRY` table, the monomorphised
//! `with_scheduler` dispatch, and the validation of a scenario's `[scheduler]` table.
//!
//! ## Adding a scheduler
//! 1. Write `sched/NAME.rs`: the scheduler (`impl Scheduler`) and, at the end of the file,
//!    its declaration (`impl Registered`: name, description, parameters, properties, how
//!    to build it, and the parameter checks and event period if it has any).
//! 2. Add `NAME::Type,` to `schedulers!` in `sched/mod.rs`, where it should appear in
//!    `vcpulab schedulers`.
//!
//! Nothing else names it: scenario validation, `vcpulab schedulers` (text and JSON), the
//! run-length estimate, the engine's dispatch and every test that loops over the registry
//! pick it up, and tests that need a kind of scheduler filter on its `Properties`. The
//! list names types, so a typo there is a compile error, and two declarations with the
//! same name fail the build too.
//!
//! `cargo fmt` does not look into macros, so it does not see the modules `schedulers!`
//! declares; `tests/registry.rs` runs rustfmt on their files instead.

use super::{ParamInfo, ParamKind, Params, Scheduler};
use crate::error::ScenarioError;
use crate::reader::{Owned, Res, Table};
use crate::time::SimDuration;

/// What a scheduler promises that tests and tools must know to treat it right: they
/// filter schedulers on these, never on names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Properties {
    /// pCPUs are time-shared: every runnable vCPU gets turns on a pCPU of its affinity,
    /// so none waits through the whole run (though a starvation bound may not be
    /// promised). False for space sharing: `null` gives each pCPU to one vCPU for good,
    /// and the vCPUs beyond one per pCPU may never run.
    pub time_sharing: bool,
    /// Xen Credit's accounting: credits earned per period and burnt per tick, the
    /// BOOST/UNDER/OVER priorities, and a rate limit that lets a still-runnable vCPU keep
    /// its pCPU `ratelimit_us` (the schedulers built on `credit.rs`).
    pub credit_accounting: bool,
    /// Whether the scheduler splits the host's pCPUs into pools of its own.
    pub pools: Pools,
}

/// How a scheduler splits the host's pCPUs (see `Properties::pools`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pools {
    /// One pool: a vCPU may run on every pCPU of its affinity.
    None,
    /// Pools the scheduler resizes at run time (FLMS: latency and CPU pools by load).
    Resized,
    /// A fixed number of pCPUs (a parameter: at least one, one by default) reserved for
    /// latency vCPUs, the rest for the others: such a scheduler needs a host of two
    /// pCPUs or more.
    Reserved,
}

impl Pools {
    /// The name in `vcpulab schedulers --json`.
    pub fn name(self) -> &'static str {
        match self {
            Pools::None => "none",
            Pools::Resized => "resized",
            Pools::Reserved => "reserved",
        }
    }
}

/// One scheduler's declaration, implemented at the end of its own file and listed in
/// `schedulers!` (see the module header).
pub trait Registered {
    /// The scheduler this declaration builds: often `Self`; a marker type declares a
    /// variant of a shared implementation (`cfs` and `eevdf` both build `Fair`).
    type Sched: Scheduler;
    /// `[scheduler] name` in a scenario.
    const NAME: &'static str;
    /// One line for `vcpulab schedulers`.
    const DESCRIPTION: &'static str;
    /// The parameters `[scheduler]` may set, with their types, defaults and help.
    const PARAMS: &'static [ParamInfo];
    const PROPERTIES: Properties;
    /// Builds the scheduler from its parameters (validated; defaults filled in).
    fn build(p: &Params) -> Self::Sched;
    /// Checks the parameters beyond their declared types (ranges, and rules between
    /// parameters). Runs after the types are checked.
    fn check_params(_t: &Table) -> Res<()> {
        Ok(())
    }
    /// Checks the parameters against a host of `ncpus` pCPUs (after `check_params`).
    fn check_host(_t: &Table, _ncpus: usize) -> Res<()> {
        Ok(())
    }
    /// The shortest interval at which a busy pCPU gets a scheduler event (tick, slice end)
    /// under these parameters, for the run-length estimate (None: no periodic events).
    fn event_period(_p: &Params) -> Option<SimDuration> {
        None
    }
}

/// One registered scheduler: its declaration, as data.
pub struct SchedulerEntry {
    pub name: &'static str,
    pub description: &'static str,
    pub params: &'static [ParamInfo],
    pub properties: Properties,
    /// The file under `sched/` that declares it (without `.rs`).
    pub module: &'static str,
    check_params: fn(&Table) -> Res<()>,
    check_host: fn(&Table, usize) -> Res<()>,
    event_period: fn(&Params) -> Option<SimDuration>,
}

impl SchedulerEntry {
    /// The entry of the scheduler `R` declares, in module `module` (`schedulers!` calls it).
    pub const fn of<R: Registered>(module: &'static str) -> SchedulerEntry {
        SchedulerEntry {
            name: R::NAME,
            description: R::DESCRIPTION,
            params: R::PARAMS,
            properties: R::PROPERTIES,
            module,
            check_params: R::check_params,
            check_host: R::check_host,
            event_period: R::event_period,
        }
    }

    /// The shortest interval between scheduler events on a busy pCPU under `params` (a
    /// validated `[scheduler]` table), for the run-length estimate.
    pub fn event_period(&self, params: &toml::Table) -> Option<SimDuration> {
        (self.event_period)(&Params {
            table: params,
            infos: self.params,
        })
    }
}

/// Builds scheduler `R` from a validated `[scheduler]` table (`with_scheduler` calls it).
pub fn build<R: Registered>(params: &toml::Table) -> R::Sched {
    R::build(&Params {
        table: params,
        infos: R::PARAMS,
    })
}

/// Fails the build if two entries share a name (`schedulers!` calls it in a constant).
pub const fn assert_distinct_names(entries: &[SchedulerEntry]) {
    let mut i = 0;
    while i < entries.len() {
        let mut j = i + 1;
        while j < entries.len() {
            if same_str(entries[i].name, entries[j].name) {
                panic!("two registered schedulers have the same name");
            }
            j += 1;
        }
        i += 1;
    }
}

const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares the schedulers, one `module::Type` per line, `Type` implementing
/// `Registered`, in the order of `vcpulab schedulers`. Generates the `pub mod` lines,
/// `REGISTRY`, and `with_scheduler`, which builds the named scheduler and hands it to the
/// caller with its static type, so the engine is monomorphised per scheduler (no dynamic
/// dispatch on the hot path).
macro_rules! schedulers {
    ($($module:ident :: $sched:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// Every scheduler, in the order of `schedulers!` (that of `vcpulab schedulers`).
        pub const REGISTRY: &[$crate::sched::SchedulerEntry] = &[
            $($crate::sched::SchedulerEntry::of::<$module::$sched>(stringify!($module)),)+
        ];

        const _: () = $crate::sched::registry::assert_distinct_names(REGISTRY);

        /// Builds the scheduler `name` (registered, its parameters validated) and hands it
        /// to `f` with its static type.
        pub fn with_scheduler<F: $crate::sched::WithScheduler>(
            name: &str,
            params: &toml::Table,
            f: F,
        ) -> F::Output {
            $(
                if name == <$module::$sched as $crate::sched::Registered>::NAME {
                    return f.call($crate::sched::registry::build::<$module::$sched>(params));
                }
            )+
            panic!("unknown scheduler {name:?}: a validated scenario names a registered one")
        }
    };
}
pub(super) use schedulers;

pub fn find(name: &str) -> Option<&'static SchedulerEntry> {
    super::REGISTRY.iter().find(|e| e.name == name)
}

/// Validates the parameters of scheduler `name` (keys and types).
pub fn validate_params(name: &str, params: &toml::Table, origin: &str, path: &str) -> Res<()> {
    let Some(entry) = find(name) else {
        let names: Vec<&str> = super::REGISTRY.iter().map(|e| e.name).collect();
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
    let core_key = super::fair::CORE_SCHED_PARAM.name;
    if let Some(o) = table.get(core_key) {
        if !entry.params.iter().any(|p| p.name == core_key) {
            // Said plainly rather than as an unknown key: the key exists, on other schedulers.
            let with: Vec<&str> = super::REGISTRY
                .iter()
                .filter(|e| e.params.iter().any(|p| p.name == core_key))
                .map(|e| e.name)
                .collect();
            return o.err(format!(
                "scheduler {name} has no Linux core scheduling; {core_key} is allowed only with scheduler {} (values \"off\", \"vm\", \"vcpu\")",
                with.join(" or ")
            ));
        }
    }
    for info in entry.params {
        if let Some(o) = table.get(info.name) {
            check_param(&o, info)?;
        }
    }
    (entry.check_params)(&table)?;
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
    let Some(entry) = find(name) else {
        return Ok(());
    };
    let value = toml::Value::Table(params.clone());
    let table = Table::root(origin, &value)?.with_path(path);
    (entry.check_host)(&table, ncpus)
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
