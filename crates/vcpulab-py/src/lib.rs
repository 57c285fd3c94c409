//! `vcpulab._native`: thin PyO3 bindings over `vcpulab_core::api`.
//!
//! Every function takes and returns plain strings/numbers (scenario text, JSON), so no
//! PyO3 object ever needs to cross a process boundary. The command-line contract
//! (`vcpulab_core::contract`: exit statuses, failure lines, seed texts, scenario-file
//! reading) is exported as is, so that the Python CLI and the native command share it. Errors become Python exceptions:
//! `ScenarioError` (bad input; a `ValueError`), `SimulationError` (a run failed; a
//! `RuntimeError`), `NotFoundError` (unknown experiment or case; a `LookupError`).
//! Simulations release the GIL, and take it back every few ms of a run to let the
//! interpreter run its signal handlers: Ctrl-C raises `KeyboardInterrupt` at once rather
//! than when the run ends.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyLookupError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyString;
use vcpulab_core::api::{self, RunOptions, StopFn};
use vcpulab_core::contract::{self, Failure, OsError, ReadError, ScenarioFormat, SeedError};
use vcpulab_core::{Error, Scenario};

create_exception!(
    _native,
    ScenarioError,
    PyValueError,
    "A scenario, sweep or experiment input is invalid."
);
create_exception!(
    _native,
    SimulationError,
    PyRuntimeError,
    "A simulation failed; the message names scenario and seed."
);
create_exception!(
    _native,
    NotFoundError,
    PyLookupError,
    "An unknown experiment, case or name."
);

fn to_py(e: Error) -> PyErr {
    match e {
        Error::Scenario(s) => ScenarioError::new_err(s.to_string()),
        Error::Sim(s) => SimulationError::new_err(s.to_string()),
        Error::Io { .. } => PyOSError::new_err(e.to_string()),
        Error::NotFound(m) => NotFoundError::new_err(m),
        Error::Interrupted => PyKeyboardInterrupt::new_err(()),
    }
}

/// A run's `stop` hook that runs the interpreter's signal handlers, and the exception one
/// of them raised, which then ends the run.
///
/// Only a run on the main thread gets the hook: Python runs signal handlers there alone
/// (`check_signals` is a no-op elsewhere), and a daemon thread that asks for the GIL while
/// the interpreter exits is ended by `pthread_exit`, which must not unwind through the
/// engine. The GIL is asked for at most every `SIGNAL_CHECK_EVERY` of wall time: when
/// another thread holds it, each request can wait a switch interval (5 ms).
struct Interrupts {
    raised: Arc<Mutex<Option<PyErr>>>,
    on_main_thread: bool,
}

/// Wall time between two runs of the signal handlers during a simulation: how late Ctrl-C
/// can be noticed, at most (the run's own results never depend on it).
const SIGNAL_CHECK_EVERY: Duration = Duration::from_millis(100);

impl Interrupts {
    fn new(py: Python<'_>) -> Self {
        let on_main_thread = (|| -> PyResult<bool> {
            let threading = py.import("threading")?;
            let main = threading.call_method0("main_thread")?.getattr("ident")?;
            let me = threading.call_method0("get_ident")?;
            main.eq(me)
        })()
        .unwrap_or(false);
        Interrupts {
            raised: Arc::new(Mutex::new(None)),
            on_main_thread,
        }
    }

    fn stop_fn(&self) -> Option<StopFn> {
        if !self.on_main_thread {
            return None;
        }
        let raised = self.raised.clone();
        let last = Mutex::new(Instant::now());
        Some(Arc::new(move || {
            {
                let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
                if last.elapsed() < SIGNAL_CHECK_EVERY {
                    return false;
                }
                *last = Instant::now();
            }
            Python::with_gil(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    true
                }
            })
        }))
    }

    /// The error to raise: the handler's own exception for an interrupted run.
    fn to_py(&self, e: Error) -> PyErr {
        match e {
            Error::Interrupted => self
                .raised
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .unwrap_or_else(|| to_py(e)),
            other => to_py(other),
        }
    }
}

fn parse(text: &str, origin: &str, format: &str) -> Result<Scenario, Error> {
    Ok(contract::parse_scenario(
        text,
        origin,
        ScenarioFormat::named(format),
    )?)
}

/// The seed a command-line text names (`contract::parse_seed`); ValueError with the
/// CLI's message if it names none.
#[pyfunction]
fn parse_seed(text: &Bound<'_, PyString>) -> PyResult<u64> {
    let parsed = match text.to_cow() {
        Ok(text) => contract::parse_seed(&text),
        // Lone surrogates (undecodable bytes of a command line) are in no integer; they
        // are quoted as Python quotes them.
        Err(_) => Err(SeedError::not_an_integer(text.repr()?.to_string())),
    };
    parsed.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Reads a scenario file as both CLIs do (`contract::read_scenario_file`); returns
/// (text, origin, format). Raises OSError(errno, reason, path), the path as `os.fspath`
/// gives it (as `open` names it), or ScenarioError for a file that is not UTF-8 text.
#[pyfunction]
fn read_scenario_file(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
) -> PyResult<(String, String, &'static str)> {
    let fspath = py.import("os")?.call_method1("fspath", (path,))?;
    let path_buf: PathBuf = fspath.extract()?;
    if path_buf.as_os_str().as_encoded_bytes().contains(&0) {
        // What Python's open() says; the OS would never see the name.
        return Err(PyValueError::new_err("embedded null byte"));
    }
    match contract::read_scenario_file(&path_buf) {
        Ok(src) => Ok((src.text, src.origin, src.format.name())),
        Err(ReadError::Os(e)) => Err(PyOSError::new_err((e.errno, e.reason, fspath.unbind()))),
        Err(ReadError::Text(e)) => Err(ScenarioError::new_err(e.to_string())),
    }
}

/// Python's text in a line the contract words around `STAND_IN`. Python's strings can
/// hold lone surrogates (the undecodable bytes of a command line or a path), which no Rust
/// string can: the contract writes the line with a stand-in (a NUL, which neither holds)
/// and Python's text goes in as Python holds it.
const STAND_IN: &str = "\0";

fn around_stand_in<'py>(
    py: Python<'py>,
    line: &str,
    text: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyString>> {
    match line.split_once(STAND_IN) {
        Some((before, after)) => PyString::new(py, before)
            .add(text)?
            .add(after)?
            .downcast_into::<PyString>()
            .map_err(PyErr::from),
        None => Ok(PyString::new(py, line)),
    }
}

/// How a command ends on a failure of kind `kind` ("bad-input", "sim-failed",
/// "interrupted", "closed-output"): (exit status, line for stderr or None).
#[pyfunction]
#[pyo3(signature = (kind, detail=None))]
fn cli_failure<'py>(
    py: Python<'py>,
    kind: &str,
    detail: Option<Bound<'py, PyString>>,
) -> PyResult<(u8, Option<Bound<'py, PyString>>)> {
    let failure = Failure::named(kind)
        .ok_or_else(|| PyValueError::new_err(format!("unknown failure kind {kind:?}")))?;
    let detail = detail.unwrap_or_else(|| PyString::new(py, ""));
    let line = failure
        .stderr_line(STAND_IN)
        .map(|line| around_stand_in(py, &line, &detail))
        .transpose()?;
    Ok((failure.exit_status(), line))
}

/// An OSError's text as the CLIs print it: "FILE: reason", "[Errno N] reason" or "reason".
#[pyfunction]
#[pyo3(signature = (errno, reason, filename=None))]
fn os_error_text<'py>(
    py: Python<'py>,
    errno: Option<i32>,
    reason: String,
    filename: Option<Bound<'py, PyString>>,
) -> PyResult<Bound<'py, PyString>> {
    let line = OsError {
        errno,
        reason,
        filename: filename.as_ref().map(|_| STAND_IN.to_string()),
    }
    .to_string();
    match filename {
        Some(name) => around_stand_in(py, &line, &name),
        None => Ok(PyString::new(py, &line)),
    }
}

/// Runs a scenario given as text (`format` "toml" or "json"); returns the summary JSON.
#[pyfunction]
#[pyo3(signature = (text, origin, format="toml", seed=None, check_invariants=false, force=false))]
fn run_text(
    py: Python<'_>,
    text: String,
    origin: String,
    format: &str,
    seed: Option<u64>,
    check_invariants: bool,
    force: bool,
) -> PyResult<String> {
    let format = format.to_string();
    let interrupts = Interrupts::new(py);
    let stop = interrupts.stop_fn();
    py.allow_threads(move || {
        let sc = parse(&text, &origin, &format)?;
        let s = api::run(
            &sc,
            seed,
            &RunOptions {
                check_invariants,
                force,
                stop,
                ..Default::default()
            },
        )?;
        Ok(api::summary_json(&s))
    })
    .map_err(|e| interrupts.to_py(e))
}

/// Runs a scenario and returns (summary JSON, Chrome JSON trace of [from_ns, to_ns]);
/// `check_invariants` and `force` as `run_text`.
#[pyfunction]
#[pyo3(signature = (text, origin, format="toml", seed=None, from_ns=0, to_ns=u64::MAX, check_invariants=false, force=false))]
#[allow(clippy::too_many_arguments)]
fn trace_text(
    py: Python<'_>,
    text: String,
    origin: String,
    format: &str,
    seed: Option<u64>,
    from_ns: u64,
    to_ns: u64,
    check_invariants: bool,
    force: bool,
) -> PyResult<(String, String)> {
    let format = format.to_string();
    let interrupts = Interrupts::new(py);
    let stop = interrupts.stop_fn();
    py.allow_threads(move || {
        let sc = parse(&text, &origin, &format)?;
        let opts = RunOptions {
            trace_window: Some((from_ns, to_ns)),
            check_invariants,
            force,
            stop,
            ..Default::default()
        };
        let out = api::run_full(&sc, seed, &opts)?;
        Ok((
            api::summary_json(&out.summary),
            out.trace_json.unwrap_or_default(),
        ))
    })
    .map_err(|e| interrupts.to_py(e))
}

/// Validates a scenario given as text; returns a short JSON description of it. Like
/// `run_text`, refuses a scenario estimated over the event limit unless `force`.
#[pyfunction]
#[pyo3(signature = (text, origin, format="toml", force=false))]
fn validate_text(text: &str, origin: &str, format: &str, force: bool) -> PyResult<String> {
    let sc = parse(text, origin, format).map_err(to_py)?;
    if !force {
        api::check_size(&sc).map_err(to_py)?;
    }
    // Built with serde_json: names may hold any Unicode, which Rust's `{:?}` would escape
    // in a way JSON does not accept (e.g. `\u{200b}`).
    let vms: Vec<serde_json::Value> = sc
        .vms
        .iter()
        .map(|v| serde_json::json!({"name": v.name, "vcpus": v.vcpus, "workloads": v.workloads.len()}))
        .collect();
    let desc = serde_json::json!({
        "name": sc.name,
        "scheduler": sc.scheduler.name,
        "duration_s": sc.duration.as_secs_f64(),
        "seed": sc.seed,
        "pcpus": sc.host.ncpus(),
        "estimated_events": api::estimate_events(&sc),
        "vms": vms,
    });
    Ok(desc.to_string())
}

#[pyfunction]
fn schedulers_json() -> String {
    api::schedulers_json()
}

#[pyfunction]
fn workload_kinds_json() -> String {
    api::workload_kinds_json()
}

#[pyfunction]
fn experiments_json() -> String {
    api::experiments_json()
}

/// Runs one case of a built-in experiment; returns its raw rows (one per metric) as JSON.
#[pyfunction]
#[pyo3(signature = (experiment, case, seed=None))]
fn reproduce_case(
    py: Python<'_>,
    experiment: String,
    case: String,
    seed: Option<u64>,
) -> PyResult<String> {
    let interrupts = Interrupts::new(py);
    let opts = RunOptions {
        stop: interrupts.stop_fn(),
        ..Default::default()
    };
    py.allow_threads(move || api::reproduce_case_json(&experiment, &case, seed, &opts))
        .map_err(|e| interrupts.to_py(e))
}

/// Reproduces one experiment on `workers` threads, with its claims' verdicts (and more
/// seeds for undecided claims when `adaptive`): `{"rows": [...], "claims": [...]}`.
/// `progress(done, total)` is called after each run (from the calling thread only, so
/// that a Python callback needs no lock). Releases the GIL; Ctrl-C stops it.
#[pyfunction]
#[pyo3(signature = (experiment, seed=None, workers=1, adaptive=true, progress=None))]
fn reproduce_experiment(
    py: Python<'_>,
    experiment: String,
    seed: Option<u64>,
    workers: usize,
    adaptive: bool,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let interrupts = Interrupts::new(py);
    let opts = RunOptions {
        stop: interrupts.stop_fn(),
        ..Default::default()
    };
    let caller = std::thread::current().id();
    let report = move |done: usize, total: usize| {
        if let Some(cb) = &progress {
            if std::thread::current().id() == caller {
                Python::with_gil(|py| {
                    // A failing progress callback must not fail the reproduction.
                    let _ = cb.call1(py, (done, total));
                });
            }
        }
    };
    py.allow_threads(move || {
        api::reproduce_json(&experiment, seed, workers, adaptive, &opts, &report)
    })
    .map_err(|e| interrupts.to_py(e))
}

/// The runs of a robustness check (see `api::robustness_plan_json`), as JSON.
#[pyfunction]
#[pyo3(signature = (experiment, seeds, seed=None, perturbations=None))]
fn robustness_plan(
    experiment: &str,
    seeds: u64,
    seed: Option<u64>,
    perturbations: Option<Vec<String>>,
) -> PyResult<String> {
    api::robustness_plan_json(experiment, seeds, seed, &perturbations.unwrap_or_default())
        .map_err(to_py)
}

/// A robustness check's report from its runs' records (JSON list), as JSON.
#[pyfunction]
#[pyo3(signature = (experiment, seeds, records, seed=None, perturbations=None))]
fn robustness_report(
    py: Python<'_>,
    experiment: String,
    seeds: u64,
    records: String,
    seed: Option<u64>,
    perturbations: Option<Vec<String>>,
) -> PyResult<String> {
    let only = perturbations.unwrap_or_default();
    py.allow_threads(move || api::robustness_report_json(&experiment, seeds, seed, &only, &records))
        .map_err(to_py)
}

/// Normalises an experiment's raw rows (JSON list) and computes sim / paper.
#[pyfunction]
fn reproduce_finish(experiment: &str, raw_rows: &str) -> PyResult<String> {
    api::reproduce_finish_json(experiment, raw_rows).map_err(to_py)
}

/// The scenario text of a built-in experiment (before its cases' edits), or of one case
/// (with its edits; for `metric`, the first metric's run by default).
#[pyfunction]
#[pyo3(signature = (experiment, case=None, metric=None))]
fn experiment_scenario(
    experiment: &str,
    case: Option<&str>,
    metric: Option<&str>,
) -> PyResult<String> {
    let e = vcpulab_core::repro::find(experiment).map_err(to_py)?;
    match case {
        None => Ok(e.scenario_text),
        Some(c) => vcpulab_core::repro::case_scenario_toml(&e, c, metric).map_err(to_py),
    }
}

/// Runs one real-KVM harness configuration (JSON, see vcpulab-kvm's `config::Config`);
/// returns `(ok, json)`: the result, or `{"error": {"kind", "message"}}`. Releases the GIL.
/// The harness installs its own SIGINT/SIGTERM handlers and changes host scheduling
/// settings for the run (restored afterwards), so callers run it in a subprocess
/// (`python -m vcpulab._kvm_worker`).
#[pyfunction]
fn kvm_run_json(py: Python<'_>, config: String) -> (bool, String) {
    py.allow_threads(move || match vcpulab_kvm::run_json(&config) {
        Ok(r) => (true, r),
        Err(e) => (false, e),
    })
}

/// cgroup directories left by the KVM harness (empty after clean runs).
#[pyfunction]
fn kvm_cgroup_leftovers() -> Vec<String> {
    vcpulab_kvm::cgroup_leftovers()
}

/// The host profiles shipped with vcpulab: (name, TOML text).
#[pyfunction]
fn shipped_profiles() -> Vec<(&'static str, &'static str)> {
    vcpulab_core::profile::SHIPPED.to_vec()
}

#[pyfunction]
fn version() -> &'static str {
    vcpulab_core::VERSION
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_text, m)?)?;
    m.add_function(wrap_pyfunction!(validate_text, m)?)?;
    m.add_function(wrap_pyfunction!(trace_text, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers_json, m)?)?;
    m.add_function(wrap_pyfunction!(shipped_profiles, m)?)?;
    m.add_function(wrap_pyfunction!(workload_kinds_json, m)?)?;
    m.add_function(wrap_pyfunction!(experiments_json, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_case, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_finish, m)?)?;
    m.add_function(wrap_pyfunction!(robustness_plan, m)?)?;
    m.add_function(wrap_pyfunction!(robustness_report, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(experiment_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(kvm_run_json, m)?)?;
    m.add_function(wrap_pyfunction!(kvm_cgroup_leftovers, m)?)?;
    m.add_function(wrap_pyfunction!(parse_seed, m)?)?;
    m.add_function(wrap_pyfunction!(read_scenario_file, m)?)?;
    m.add_function(wrap_pyfunction!(cli_failure, m)?)?;
    m.add_function(wrap_pyfunction!(os_error_text, m)?)?;
    m.add("EXIT_OK", contract::EXIT_OK)?;
    m.add("EXIT_SIM_FAILED", contract::EXIT_SIM_FAILED)?;
    m.add("EXIT_BAD_INPUT", contract::EXIT_BAD_INPUT)?;
    m.add("EXIT_INTERRUPTED", contract::EXIT_INTERRUPTED)?;
    m.add("EXIT_STATUS_HELP", contract::EXIT_STATUS_HELP)?;
    m.add("SEED_MAX", contract::SEED_MAX)?;
    m.add("VERSION_LINE", contract::VERSION_LINE)?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("NotFoundError", m.py().get_type::<NotFoundError>())?;
    Ok(())
}
