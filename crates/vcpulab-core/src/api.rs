//! Entry points for the CLI and the Python bindings. Everything returns plain data or
//! JSON text; nothing here holds state between calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::engine::Sim;
pub use crate::engine::{RunOptions, RunOutput, StopFn};
use crate::error::{Error, SimError};
use crate::model::Model;
use crate::scenario::Scenario;
use crate::sched::{self, Scheduler, WithScheduler};
use crate::summary::Summary;

struct Runner<'a> {
    model: &'a Model,
    seed: u64,
    opts: RunOptions,
}

impl WithScheduler for Runner<'_> {
    type Output = Result<RunOutput, SimError>;
    fn call<S: Scheduler>(self, sched: S) -> Self::Output {
        Sim::new(self.model, sched, self.seed, self.opts).run_full()
    }
}

/// Runs a validated scenario. `seed` overrides the scenario's seed. A panic inside the
/// engine (a vcpulab bug) is returned as a `SimError` naming the scenario and seed.
pub fn run(sc: &Scenario, seed: Option<u64>, opts: &RunOptions) -> Result<Summary, Error> {
    run_full(sc, seed, opts).map(|o| o.summary)
}

/// Like `run`, also returning the trace when `opts.trace_window` is set.
pub fn run_full(sc: &Scenario, seed: Option<u64>, opts: &RunOptions) -> Result<RunOutput, Error> {
    if !opts.force {
        check_size(sc)?;
    }
    if let Some((from_ns, _)) = opts.trace_window {
        if from_ns >= sc.duration.ns() {
            return Err(Error::Scenario(crate::ScenarioError::new(
                &sc.origin,
                "",
                format!(
                    "empty trace window: it starts at {} s, at or after the scenario's end ({} s)",
                    from_ns as f64 / 1e9,
                    sc.duration.as_secs_f64()
                ),
            )));
        }
    }
    let seed = seed.unwrap_or(sc.seed);
    let mut opts = opts.clone();
    // Whether the caller's `stop` ended the run, told apart from a failure of the run.
    let stopped = Arc::new(AtomicBool::new(false));
    if let Some(stop) = opts.stop.take() {
        let stopped = stopped.clone();
        opts.stop = Some(Arc::new(move || {
            let yes = stop();
            stopped.fetch_or(yes, Ordering::Relaxed);
            yes
        }));
    }
    let model = Model::compile(sc);
    let runner = Runner {
        model: &model,
        seed,
        opts,
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sched::with_scheduler(&sc.scheduler.name, &sc.scheduler.params, runner)
    }));
    match result {
        Ok(_) if stopped.load(Ordering::Relaxed) => Err(Error::Interrupted),
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
                message: format!(
                    "internal error (please report with this scenario and seed): {msg}"
                ),
            }))
        }
    }
}

pub fn run_file(path: &str, seed: Option<u64>, opts: &RunOptions) -> Result<Summary, Error> {
    run(&Scenario::from_file(path)?, seed, opts)
}

/// The summary as JSON text (pretty-printed, stable field order).
pub fn summary_json(s: &Summary) -> String {
    let mut buf = Vec::with_capacity(4096);
    write_summary_json(&mut buf, s).expect("summary serialises");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

/// Writes `summary_json`'s text to `w` as it is formatted, without holding it in memory
/// (6.4 MB at 8,192 vCPUs); the same bytes.
pub fn write_summary_json<W: std::io::Write>(w: W, s: &Summary) -> std::io::Result<()> {
    use serde::Serialize;
    let mut ser = serde_json::Serializer::with_formatter(w, Pretty::default());
    s.serialize(&mut ser).map_err(std::io::Error::from)
}

/// serde_json's `PrettyFormatter` (two-space indent), but each line break goes out with
/// its indentation in one write: the stock formatter writes the indent one level at a
/// time, and at 8,192 vCPUs those small writes were a quarter of the summary's cost
/// (about 100 M instructions). The bytes are the same (tested against serde_json's).
#[derive(Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

/// ",\n" and the spaces of up to 63 levels, sliced per line break.
const LINE_BREAKS: &[u8; 2 + 126] = &{
    let mut b = [b' '; 2 + 126];
    b[0] = b',';
    b[1] = b'\n';
    b
};

impl Pretty {
    #[inline]
    fn line_break<W: ?Sized + std::io::Write>(
        &self,
        w: &mut W,
        comma: bool,
    ) -> std::io::Result<()> {
        let (start, end) = (usize::from(!comma), 2 + 2 * self.depth);
        if end <= LINE_BREAKS.len() {
            w.write_all(&LINE_BREAKS[start..end])
        } else {
            w.write_all(&LINE_BREAKS[start..2])?;
            (0..self.depth).try_for_each(|_| w.write_all(b"  "))
        }
    }
    #[inline]
    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }
    #[inline]
    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line_break(w, false)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.line_break(w, !first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.line_break(w, !first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// The workload kinds (`program` and the presets) as JSON: `[{name, description, keys}]`,
/// `keys` being `[{name, default, common}]`: the kind's own keys, then those every kind
/// takes (`common`), each with its default in words.
pub fn workload_kinds_json() -> String {
    use crate::workload::{kind_keys, takes_common_keys, COMMON_KEYS, PRESETS};
    let key = |k: &crate::workload::KeyInfo, common: bool| serde_json::json!({"name": k.name, "default": k.default, "common": common});
    let list: Vec<serde_json::Value> = PRESETS
        .iter()
        .map(|(name, description)| {
            let keys: Vec<serde_json::Value> = kind_keys(name)
                .iter()
                .map(|k| key(k, false))
                .chain(
                    COMMON_KEYS
                        .iter()
                        .filter(|_| takes_common_keys(name))
                        .map(|k| key(k, true)),
                )
                .collect();
            serde_json::json!({"name": name, "description": description, "keys": keys})
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

/// `vcpulab schedulers --json`: name, description, parameters and properties (what tests
/// filter on) of each scheduler.
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
                "properties": {
                    "time_sharing": e.properties.time_sharing,
                    "credit_accounting": e.properties.credit_accounting,
                    "pools": e.properties.pools.name(),
                },
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
pub fn reproduce_case_json(
    experiment: &str,
    case: &str,
    seed: Option<u64>,
    opts: &RunOptions,
) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let rows = crate::repro::run_case_with(&e, case, seed, opts)?;
    Ok(serde_json::to_string(&rows).unwrap())
}

/// Normalises an experiment's raw rows and computes the paper ratios.
pub fn reproduce_finish_json(experiment: &str, raw_rows_json: &str) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let raw: Vec<crate::repro::Row> = serde_json::from_str(raw_rows_json).map_err(|err| {
        Error::NotFound(format!(
            "reproduce_finish: rows are not valid JSON rows: {err}"
        ))
    })?;
    Ok(serde_json::to_string(&crate::repro::finish_rows(&e, &raw)).unwrap())
}

/// Reproduces one experiment (see `repro::reproduce`): `{"rows": [...], "claims": [...]}`.
/// `workers` runs share the cases; the output does not depend on it.
pub fn reproduce_json(
    experiment: &str,
    seed: Option<u64>,
    workers: usize,
    adaptive: bool,
    opts: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let r = crate::repro::reproduce(&e, seed, workers, adaptive, opts, progress)?;
    Ok(serde_json::to_string(&r).unwrap())
}

/// The runs of a robustness check of one experiment (see `repro::robustness`), as JSON:
/// `{"experiment", "seeds", "perturbations": [{"id", "text", "skipped", "flips_overcommit",
/// "runs": [{"run_id", "perturbation", "case", "seed", "scenario"}]}]}`. `only`: the
/// perturbations to plan (empty: the whole family).
pub fn robustness_plan_json(
    experiment: &str,
    seeds: u64,
    seed: Option<u64>,
    only: &[String],
) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let plan = crate::repro::robustness::plan(&e, seeds, seed, only)?;
    Ok(serde_json::to_string(&plan).unwrap())
}

/// The robustness report of one experiment from its runs' records (a JSON list of
/// `{"run_id", "status", "error", "summary"}`, as a sweep writes them), planned again with
/// the same `seeds`, `seed` and `only`.
pub fn robustness_report_json(
    experiment: &str,
    seeds: u64,
    seed: Option<u64>,
    only: &[String],
    records_json: &str,
) -> Result<String, Error> {
    let e = crate::repro::find(experiment)?;
    let plan = crate::repro::robustness::plan(&e, seeds, seed, only)?;
    let records: Vec<serde_json::Value> = serde_json::from_str(records_json).map_err(|err| {
        Error::NotFound(format!("robustness: records are not a JSON list: {err}"))
    })?;
    let mut results = std::collections::BTreeMap::new();
    for r in records {
        let Some(id) = r["run_id"].as_str() else {
            continue;
        };
        let res = if r["status"] == "ok" {
            Ok(r["summary"].clone())
        } else {
            Err(r["error"].as_str().unwrap_or("failed").to_string())
        };
        results.insert(id.to_string(), res);
    }
    let report = crate::repro::robustness::report(&e, &plan, &results);
    Ok(serde_json::to_string(&report).unwrap())
}

/// Scenarios whose estimated event count exceeds this are refused unless forced: at the
/// engine's ~5-10 M events/s this is a run of 1.5-3 hours.
pub const MAX_ESTIMATED_EVENTS: f64 = 5e10;

/// A rough, order-of-magnitude estimate of the number of events a run of `sc` takes,
/// split by where they come from.
#[derive(Clone, Debug, PartialEq)]
pub struct EventEstimate {
    /// Guest operations: per thread, `duration / (mean loop time)` loops of its ops
    /// (each op counted as at least 1 us), capped by the host's CPU capacity for the
    /// compute part and by the arrivals for request-driven workloads.
    pub guest_ops: f64,
    /// Scheduler ticks and slice ends: pCPUs x duration / the smallest periodic parameter.
    pub scheduler: f64,
    /// Request arrivals of open- and closed-loop workloads.
    pub arrivals: f64,
}

impl EventEstimate {
    pub fn total(&self) -> f64 {
        self.guest_ops + self.scheduler + self.arrivals
    }
    /// The largest part, described for an error message.
    pub fn dominant(&self) -> &'static str {
        if self.scheduler >= self.guest_ops && self.scheduler >= self.arrivals {
            "scheduler ticks/slices (pCPUs x duration / the smallest time parameter of [scheduler])"
        } else if self.guest_ops >= self.arrivals {
            "guest operations (threads x duration / the mean time of one loop of their ops)"
        } else {
            "request arrivals (arrival rate x duration)"
        }
    }
}

/// Estimates the events a run of `sc` takes (see `EventEstimate`). Cheap: no simulation.
pub fn estimate_parts(sc: &Scenario) -> EventEstimate {
    use crate::workload::{Arrivals, Op};
    const FLOOR_NS: f64 = 1e3;
    let dur = sc.duration.ns() as f64;
    let pcpus = sc.host.ncpus() as f64;
    let base_ghz = sc.host.base_ghz;

    // Scheduler: its shortest periodic interval (parameters given, else the defaults).
    let period = sched::find(&sc.scheduler.name)
        .and_then(|e| e.event_period(&sc.scheduler.params))
        .map_or(f64::INFINITY, |d| d.ns().max(1) as f64);
    let scheduler = if period.is_finite() {
        pcpus * dur / period
    } else {
        0.0
    };

    // Guest ops, and the CPU they would need.
    let mut free_ops = 0.0; // ops of threads not bounded by arrivals
    let mut free_cpu = 0.0; // CPU ns those threads would use
    let mut request_ops = 0.0;
    let mut arrivals = 0.0;
    for vm in &sc.vms {
        for w in &vm.workloads {
            let mut loop_ns = 0.0;
            let mut cpu_ns = 0.0;
            for op in &w.ops {
                let (mean, cpu) = match op {
                    Op::Compute { work, .. } => {
                        let m = work.base_ns(base_ghz).mean();
                        (m, m)
                    }
                    // Its first cycle's work; the controller may lengthen it.
                    Op::LookbusySpin { first_busy, .. } => {
                        let m = first_busy.base_ns(base_ghz).mean();
                        (m, m)
                    }
                    Op::Lock { hold, .. } | Op::RespondHeld { hold } => (hold.mean(), hold.mean()),
                    Op::Io { latency, .. } => (latency.mean(), 0.0),
                    Op::Sleep { duration } => (duration.mean(), 0.0),
                    Op::Timer { period, .. } => (*period, 0.0),
                    Op::Ipi { .. } | Op::WaitRequest | Op::Respond | Op::WaitPacket => (0.0, 0.0),
                    Op::ForwardPacket { per_packet, .. } => (*per_packet, *per_packet),
                };
                let mean = if mean.is_finite() {
                    mean.max(FLOOR_NS)
                } else {
                    FLOOR_NS
                };
                loop_ns += mean;
                cpu_ns += if cpu.is_finite() {
                    cpu.max(FLOOR_NS)
                } else {
                    FLOOR_NS
                };
            }
            let nops = w.ops.len() as f64;
            let loops = w.threads as f64 * dur / loop_ns.max(FLOOR_NS);
            match &w.arrivals {
                None => {
                    free_ops += loops * nops;
                    free_cpu += loops * cpu_ns;
                }
                Some(a) => {
                    let n = match a {
                        Arrivals::Poisson { rate } => rate * dur / 1e9,
                        Arrivals::Periodic { interval } => dur / interval.max(1.0),
                        Arrivals::Closed { clients, think } => {
                            *clients as f64 * dur / (think.mean() + loop_ns).max(FLOOR_NS)
                        }
                    };
                    arrivals += n;
                    // A receive path (`rx`) adds its own three operations per request.
                    let rx_ops = if w.rx.is_some() { 3.0 } else { 0.0 };
                    request_ops += loops.min(n) * (nops + rx_ops);
                }
            }
        }
    }
    // Threads cannot use more CPU than the host has: scale the compute-bound loops.
    let capacity = pcpus * dur;
    if free_cpu > capacity {
        free_ops *= capacity / free_cpu;
    }
    EventEstimate {
        guest_ops: free_ops + request_ops,
        scheduler,
        arrivals,
    }
}

/// The estimated number of events of a run of `sc`: `estimate_parts(sc).total()`.
pub fn estimate_events(sc: &Scenario) -> f64 {
    estimate_parts(sc).total()
}

/// How long `events` take at the engine's 5-10 M events/s, e.g. "about 1.4-2.8 hours".
fn wall_time_at_engine_speed(events: f64) -> String {
    let (lo, hi) = (events / 10e6, events / 5e6); // seconds
    let (unit, div) = if hi < 120.0 {
        ("seconds", 1.0)
    } else if hi < 2.0 * 3600.0 {
        ("minutes", 60.0)
    } else if hi < 72.0 * 3600.0 {
        ("hours", 3600.0)
    } else if hi < 2.0 * 365.0 * 86400.0 {
        ("days", 86400.0)
    } else {
        ("years", 365.0 * 86400.0)
    };
    // Two significant figures, no exponent: "1.4", "28", "5600".
    let fmt = |x: f64| {
        let x = x / div;
        if x >= 10.0 {
            format!("{:.0}", x)
        } else {
            format!("{:.1}", x)
        }
    };
    format!("about {}-{} {unit}", fmt(lo), fmt(hi))
}

/// Refuses scenarios estimated to exceed `MAX_ESTIMATED_EVENTS` (what `run` does unless
/// forced; `validate` gives the same verdict).
pub fn check_size(sc: &Scenario) -> Result<(), Error> {
    let est = estimate_parts(sc);
    let total = est.total();
    if total <= MAX_ESTIMATED_EVENTS {
        return Ok(());
    }
    Err(Error::Scenario(crate::ScenarioError::new(
        &sc.origin,
        "",
        format!(
            "this run is estimated at {total:.2e} events, {} at 5-10 M events/s (the limit is \
             {MAX_ESTIMATED_EVENTS:.0e} events, {}); most come from {}: {:.2e} guest operations, {:.2e} scheduler \
             events, {:.2e} request arrivals. Shorten duration, lengthen the scheduler's time parameters or use \
             fewer threads, or run it anyway with --force (`vcpulab run --force`, `vcpulab validate --force`; \
             Python: force=True)",
            wall_time_at_engine_speed(total),
            wall_time_at_engine_speed(MAX_ESTIMATED_EVENTS),
            est.dominant(),
            est.guest_ops,
            est.scheduler,
            est.arrivals
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::Pretty;
    use serde::Serialize;

    fn ours(v: &serde_json::Value) -> String {
        let mut buf = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, Pretty::default());
        v.serialize(&mut ser).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn pretty_writes_what_serde_jsons_pretty_printer_writes() {
        let mut deep = serde_json::json!([1, {}]);
        for i in 0..70 {
            // Deeper than the precomputed indentation (63 levels) to take the slow path.
            deep = serde_json::json!({ "level": i, "inner": deep, "list": [[], [i], {"k": null}] });
        }
        for v in [
            serde_json::json!(null),
            serde_json::json!([]),
            serde_json::json!({}),
            serde_json::json!({"a": [1, 2.5, "x\n\"y\""], "b": {"c": [], "d": {}, "e": [{}]}}),
            deep,
        ] {
            assert_eq!(ours(&v), serde_json::to_string_pretty(&v).unwrap());
        }
    }
}
