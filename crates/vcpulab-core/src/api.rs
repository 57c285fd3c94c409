//! Entry points for the CLI and the Python bindings. Everything returns plain data or
//! JSON text; nothing here holds state between calls.

pub use crate::engine::{RunOptions, RunOutput};
use crate::engine::Sim;
use crate::error::{Error, SimError};
use crate::scenario::Scenario;
use crate::sched::{self, Scheduler, WithScheduler};
use crate::summary::Summary;

struct Runner<'a> {
    sc: &'a Scenario,
    seed: u64,
    opts: RunOptions,
}

impl WithScheduler for Runner<'_> {
    type Output = Result<RunOutput, SimError>;
    fn call<S: Scheduler>(self, sched: S) -> Self::Output {
        Sim::new(self.sc, sched, self.seed, self.opts).run_full(self.sc)
    }
}

/// Runs a validated scenario. `seed` overrides the scenario's seed. A panic inside the
/// engine (a vcpulab bug) is returned as a `SimError` naming the scenario and seed.
pub fn run(sc: &Scenario, seed: Option<u64>, opts: &RunOptions) -> Result<Summary, Error> {
    run_full(sc, seed, opts).map(|o| o.summary)
}

/// Like `run`, also returning the trace when `opts.trace_window` is set.
pub fn run_full(sc: &Scenario, seed: Option<u64>, opts: &RunOptions) -> Result<RunOutput, Error> {
    let seed = seed.unwrap_or(sc.seed);
    let runner = Runner { sc, seed, opts: opts.clone() };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sched::with_scheduler(&sc.scheduler.name, &sc.scheduler.params, runner)
    }));
    match result {
        Ok(r) => Ok(r?),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::Sim(SimError {
                scenario: sc.name.clone(),
                seed,
                at_ns: 0,
                message: format!("internal error (please report with this scenario and seed): {msg}"),
            }))
        }
    }
}

pub fn run_file(path: &str, seed: Option<u64>, opts: &RunOptions) -> Result<Summary, Error> {
    run(&Scenario::from_file(path)?, seed, opts)
}

/// The summary as JSON text (pretty-printed, stable field order).
pub fn summary_json(s: &Summary) -> String {
    serde_json::to_string_pretty(s).expect("summary serialises")
}

/// `vcpulab schedulers --json`: name, description and parameters of each scheduler.
pub fn schedulers_json() -> String {
    let list: Vec<serde_json::Value> = sched::REGISTRY
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name,
                "description": e.description,
                "params": e.params.iter().map(|p| serde_json::json!({
                    "name": p.name, "type": p.kind.name(), "default": p.default, "help": p.help,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&list).unwrap()
}

/// The built-in experiments with their cases, as JSON.
pub fn experiments_json() -> String {
    serde_json::to_string_pretty(&crate::repro::experiments()).unwrap()
}

/// Runs one case of a built-in experiment; returns its raw rows (one per metric) as JSON.
/// Pass all of an experiment's raw rows to `reproduce_finish_json` for the final rows.
pub fn reproduce_case_json(experiment: &str, case: &str, seed: Option<u64>) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let rows = crate::repro::run_case(&e, case, seed)?;
    Ok(serde_json::to_string(&rows).unwrap())
}

/// Normalises an experiment's raw rows and computes the paper ratios.
pub fn reproduce_finish_json(experiment: &str, raw_rows_json: &str) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let raw: Vec<crate::repro::Row> = serde_json::from_str(raw_rows_json)
        .map_err(|err| Error::NotFound(format!("reproduce_finish: rows are not valid JSON rows: {err}")))?;
    Ok(serde_json::to_string(&crate::repro::finish_rows(&e, &raw)).unwrap())
}
