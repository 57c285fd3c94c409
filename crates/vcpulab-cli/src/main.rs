//! The `vcpulab` command that `pip install` puts on the PATH.
//!
//! Every vcpulab command is implemented once, in Python (`python/vcpulab/cli/`). A
//! Python process, though, spends 25-30 ms starting the interpreter and importing the
//! package before it does any work, and for short runs that start is most of what a user
//! waits for (issue 6 measures whole-process time against a plain-Rust loop that finishes
//! P=4/V=16/60 s in 17 ms). So this small binary runs the one form that scripts, sweeps
//! and benchmarks call most, `vcpulab run SCENARIO --json` (with `--seed N`, `--force`,
//! `--check-invariants` in any order), itself, through the same core as the extension
//! module, and writes the bytes the Python CLI would write. It also answers `--version`.
//!
//! What both commands promise (exit statuses, the line each failure prints, which seed
//! texts are valid, how a scenario file is read and what a failed read says) is
//! `vcpulab_core::contract`, which the Python CLI calls through the bindings: the two
//! agree by construction, and every error of a run this binary takes is reported here.
//!
//! Everything else is handed, unchanged, to the Python CLI (run as `python -m vcpulab`
//! runs it), because argparse parses command lines and words their usage errors: other
//! subcommands, `run` without `--json` (the tables are formatted in Python), with `--out`
//! or `--trace`, help, abbreviated options, arguments it does not recognise, a seed the
//! contract refuses (argparse's usage line comes with the message), and arguments that
//! are not UTF-8. Ctrl-C during a native run ends it as it ends the Python CLI's:
//! "vcpulab: interrupted" on stderr, then SIGINT's default action, which a shell reports
//! as status 130 (on Unix; elsewhere, and while the output is being written, the default
//! action alone ends it). The output is UTF-8 with `\n` line ends whatever the locale or
//! platform.
//!
//! Which Python: `VCPULAB_PYTHON` if set; else the interpreter beside this executable
//! (`python3.X` of the version that built it, then `python3`, `python`: the layout of a
//! virtualenv, conda or a prefix install); else the interpreter that built it (recorded at
//! build time, for `pip install --user`); else `python3` / `python` on the PATH.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use vcpulab_core::api::{self, RunOptions};
use vcpulab_core::contract::{self, Failure, OsError};
use vcpulab_core::{Error, Scenario, Summary};

/// A `vcpulab run` command line this binary runs itself.
#[derive(Debug, PartialEq)]
struct FastRun {
    scenario: String,
    seed: Option<u64>,
    check_invariants: bool,
    force: bool,
}

/// What to do with a command line.
#[derive(Debug, PartialEq)]
enum Plan {
    Version,
    Run(FastRun),
    /// Hand the whole command line to the Python CLI.
    Python,
}

/// The seed of `--seed TEXT` as the contract reads it, or None to hand the command line
/// to Python: an invalid seed (argparse prints the usage line with the contract's
/// message), and any text starting with `-`, which argparse reads as an option unless it
/// looks like a negative number (`-1`, refused; `-0`, seed 0).
fn seed_value(text: &str) -> Option<u64> {
    if text.starts_with('-') {
        return None;
    }
    contract::parse_seed(text).ok()
}

/// Decides from the arguments (without the program name) whether this binary handles
/// the command line. Only exact spellings are taken: argparse also accepts unambiguous
/// prefixes (`--js`), and those go to Python.
fn plan(args: &[String]) -> Plan {
    match args {
        [only] if only == "--version" => Plan::Version,
        [first, rest @ ..] if first == "run" => {
            let mut scenario = None;
            let mut seed = None;
            let mut json = false;
            let mut check_invariants = false;
            let mut force = false;
            let mut i = 0;
            while i < rest.len() {
                let a = rest[i].as_str();
                match a {
                    "--json" => json = true,
                    "--check-invariants" => check_invariants = true,
                    "--force" => force = true,
                    "--seed" => {
                        i += 1;
                        match rest.get(i).and_then(|v| seed_value(v)) {
                            Some(v) => seed = Some(v),
                            None => return Plan::Python,
                        }
                    }
                    // argparse takes the value after `=` whatever it starts with.
                    _ if a.starts_with("--seed=") => {
                        match contract::parse_seed(&a["--seed=".len()..]) {
                            Ok(v) => seed = Some(v),
                            Err(_) => return Plan::Python,
                        }
                    }
                    _ if a.starts_with('-') => return Plan::Python,
                    _ if scenario.is_some() => return Plan::Python, // argparse's error
                    _ => scenario = Some(a.to_string()),
                }
                i += 1;
            }
            match scenario {
                Some(scenario) if json => Plan::Run(FastRun {
                    scenario,
                    seed,
                    check_invariants,
                    force,
                }),
                _ => Plan::Python,
            }
        }
        _ => Plan::Python,
    }
}

/// Set by the SIGINT handler; the run asks it every few ms (`RunOptions::stop`).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Ctrl-C during a native run ends it as it ends the Python CLI's: the run stops within
/// a few ms, nothing is written to stdout, "vcpulab: interrupted" goes to stderr, and the
/// process ends by SIGINT (status 130 in a shell). The handler only sets a flag
/// (async-signal-safe). It is in place for the run alone (`catch` .. `release`); a Ctrl-C
/// while the summary is written ends the process by the default action, since a write
/// blocked on a full pipe would never see the flag.
#[cfg(unix)]
mod interrupts {
    use super::{Ordering, INTERRUPTED};
    use std::os::raw::c_int;

    const SIGINT: c_int = 2; // the same number on Linux, the BSDs and macOS
    const SIG_DFL: usize = 0;
    const SIG_IGN: usize = 1;
    extern "C" {
        fn signal(signum: c_int, handler: usize) -> usize;
    }

    extern "C" fn on_interrupt(_: c_int) {
        INTERRUPTED.store(true, Ordering::Relaxed);
    }

    /// The disposition to put back, if the handler was installed.
    pub struct Caught(Option<usize>);

    /// Installs the handler, unless SIGINT is ignored (a background job of a
    /// non-interactive shell, nohup): then it stays ignored, as Python leaves it. Setting
    /// SIG_IGN first to read the disposition means an ignored SIGINT is never caught; a
    /// Ctrl-C in the instant between the two calls is lost instead.
    pub fn catch() -> Caught {
        // SAFETY: signal(2) with SIG_IGN, then with a handler that only stores to an
        // atomic (async-signal-safe); both are valid dispositions for SIGINT.
        unsafe {
            let previous = signal(SIGINT, SIG_IGN);
            if previous == SIG_IGN {
                return Caught(None);
            }
            let handler: extern "C" fn(c_int) = on_interrupt;
            signal(SIGINT, handler as usize);
            Caught(Some(previous))
        }
    }

    /// Ends the process by SIGINT's default action, as Python ends on an unhandled
    /// KeyboardInterrupt: the shell reports status 130 and, seeing the Ctrl-C, stops a
    /// loop that ran this command instead of going on to its next iteration.
    pub fn die_of_sigint() {
        extern "C" {
            #[link_name = "raise"]
            fn raise_signal(signum: c_int) -> c_int;
        }
        // SAFETY: resets SIGINT to its default action, then sends it to this thread;
        // stdout and stderr are unbuffered or flushed by then.
        unsafe {
            signal(SIGINT, SIG_DFL);
            raise_signal(SIGINT);
        }
    }

    /// Puts the previous disposition back.
    pub fn release(caught: Caught) {
        if let Some(previous) = caught.0 {
            // SAFETY: restores the disposition signal(2) returned, as it was.
            unsafe {
                signal(SIGINT, previous);
            }
        }
    }
}

#[cfg(not(unix))]
mod interrupts {
    pub struct Caught;
    pub fn catch() -> Caught {
        Caught
    }
    pub fn release(_: Caught) {}
    pub fn die_of_sigint() {}
}

/// Runs the scenario and writes its summary JSON; every error ends the command as the
/// contract says.
fn fast_run(run: &FastRun) -> ExitCode {
    let summary = contract::read_scenario_file(Path::new(&run.scenario))
        .map_err(|e| (Failure::BadInput, e.to_string()))
        .and_then(|src| src.parse().map_err(|e| (Failure::BadInput, e.to_string())))
        .and_then(|sc| simulate(&sc, run).map_err(|e| (Failure::of(&e), e.to_string())));
    match summary {
        Ok(summary) => write_summary(&summary),
        Err((failure, detail)) => fail(failure, &detail),
    }
}

/// The run, with Ctrl-C caught for its duration.
fn simulate(sc: &Scenario, run: &FastRun) -> Result<Summary, Error> {
    let opts = RunOptions {
        check_invariants: run.check_invariants,
        force: run.force,
        stop: Some(Arc::new(|| INTERRUPTED.load(Ordering::Relaxed))),
        ..Default::default()
    };
    let caught = interrupts::catch();
    let result = api::run(sc, run.seed, &opts);
    interrupts::release(caught);
    // A Ctrl-C after the run's last look at the flag still counts.
    match result {
        Ok(_) if INTERRUPTED.load(Ordering::Relaxed) => Err(Error::Interrupted),
        other => other,
    }
}

fn write_summary(summary: &Summary) -> ExitCode {
    // Formatted straight into a buffered stdout: at 8,192 vCPUs the text is 6.4 MB, which
    // a String would grow (and copy) to before the first byte is written.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = api::write_summary_json(&mut out, summary)
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush());
    match written {
        Ok(()) => ExitCode::from(contract::EXIT_OK),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => fail(Failure::ClosedOutput, ""),
        Err(e) => fail(Failure::BadInput, &OsError::from_io(&e, None).to_string()),
    }
}

/// Ends the command with `failure`: its line on stderr, then its status (or, for Ctrl-C,
/// SIGINT's default action).
fn fail(failure: Failure, detail: &str) -> ExitCode {
    if let Some(line) = failure.stderr_line(detail) {
        eprintln!("{line}");
    }
    if failure == Failure::Interrupted {
        interrupts::die_of_sigint();
    }
    ExitCode::from(failure.exit_status())
}

/// Runs the Python CLI as `python -m vcpulab` does, except that the current directory is
/// not put first on the import path (where a user's own `vcpulab.py` would shadow the
/// package; pip's console scripts did not do that either).
const PYTHON_MAIN: &str = "import sys\n\
    if sys.path and sys.path[0] == '':\n    del sys.path[0]\n\
    from vcpulab.cli import exit_with, main\n\
    exit_with(main())\n";

/// Interpreters to try for the Python CLI, in order (see the module comment).
fn python_candidates() -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Some(p) = std::env::var_os("VCPULAB_PYTHON").filter(|p| !p.is_empty()) {
        found.push(PathBuf::from(p));
    }
    let exe_suffix = std::env::consts::EXE_SUFFIX;
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        let mut names = Vec::new();
        if let Some(v) = option_env!("VCPULAB_BUILD_PYTHON_VERSION").filter(|v| !v.is_empty()) {
            names.push(format!("python{v}"));
        }
        names.extend(["python3".to_string(), "python".to_string()]);
        for name in names {
            let p = dir.join(format!("{name}{exe_suffix}"));
            if p.is_file() {
                found.push(p);
            }
        }
    }
    if let Some(p) = option_env!("VCPULAB_BUILD_PYTHON").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_file() {
            found.push(p);
        }
    }
    found.push(PathBuf::from("python3"));
    found.push(PathBuf::from("python"));
    found
}

/// Runs the Python CLI with ARGS (`PYTHON_MAIN`) in place of this process (Unix) or as a
/// child whose exit status becomes ours.
fn hand_to_python(args: Vec<OsString>) -> ExitCode {
    for python in python_candidates() {
        let mut cmd = Command::new(&python);
        cmd.arg("-c").arg(PYTHON_MAIN).args(&args);
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Only returns if the interpreter could not be started; try the next one.
            let _ = cmd.exec();
        }
        #[cfg(not(unix))]
        {
            if let Ok(status) = cmd.status() {
                // Windows reports Ctrl-C and crashes as large NTSTATUS codes: not 0.
                let code = status.code().filter(|c| (0..=255).contains(c)).unwrap_or(1);
                return ExitCode::from(code as u8);
            }
        }
    }
    fail(
        Failure::BadInput,
        "no Python interpreter found to run this command; \
         set VCPULAB_PYTHON to the Python that vcpulab is installed in",
    )
}

fn main() -> ExitCode {
    let raw: Vec<OsString> = std::env::args_os().skip(1).collect();
    let utf8: Option<Vec<String>> = raw.iter().map(|a| a.clone().into_string().ok()).collect();
    let plan = utf8.as_deref().map_or(Plan::Python, plan);
    match plan {
        Plan::Version => {
            println!("{}", contract::VERSION_LINE);
            ExitCode::SUCCESS
        }
        Plan::Run(run) => fast_run(&run),
        Plan::Python => hand_to_python(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn fast(scenario: &str, seed: Option<u64>, check_invariants: bool, force: bool) -> Plan {
        Plan::Run(FastRun {
            scenario: scenario.into(),
            seed,
            check_invariants,
            force,
        })
    }

    #[test]
    fn takes_run_json_with_its_flags_in_any_order() {
        assert_eq!(
            plan(&args("run a.toml --json")),
            fast("a.toml", None, false, false)
        );
        assert_eq!(
            plan(&args(
                "run --seed 7 --force a.toml --check-invariants --json"
            )),
            fast("a.toml", Some(7), true, true)
        );
        assert_eq!(
            plan(&args("run --json --seed=3 a.toml")),
            fast("a.toml", Some(3), false, false)
        );
        // argparse: a repeated option's last value wins.
        assert_eq!(
            plan(&args("run a --json --seed 1 --seed 2")),
            fast("a", Some(2), false, false)
        );
        assert_eq!(plan(&args("--version")), Plan::Version);
        // Every seed the contract reads, in argparse's two spellings.
        assert_eq!(
            plan(&args("run a.toml --json --seed 0x10")),
            fast("a.toml", Some(16), false, false)
        );
        assert_eq!(
            plan(&args("run a.toml --json --seed=-0")),
            fast("a.toml", Some(0), false, false)
        );
        // An empty name is a scenario to argparse (and a missing file).
        assert_eq!(
            plan(&["run".into(), "".into(), "--json".into()]),
            fast("", None, false, false)
        );
    }

    #[test]
    fn hands_everything_else_to_python() {
        for line in [
            "",
            "run a.toml",                // tables are formatted in Python
            "run a.toml --json --out d", // files written by Python
            "run a.toml --json --trace t.json",
            "run a.toml --js",          // an abbreviation argparse accepts
            "run --json",               // no scenario: argparse's error
            "run a.toml b.toml --json", // two: argparse's error
            "run a.toml --json --seed", // missing value
            "run a.toml --json --seed -1",
            "run a.toml --json --seed -0", // argparse's to tell option from value
            "run a.toml --json --seed 010", // int(text, 0) refuses it
            "run a.toml --json --seed 9223372036854775808", // 2^63
            "run a.toml --json --seed=x",
            "run - --json",
            "run a.toml --json -h",
            "validate a.toml",
            "--version run",
            "reproduce --json",
        ] {
            assert_eq!(plan(&args(line)), Plan::Python, "{line:?}");
        }
    }

    #[test]
    fn seeds_are_the_contracts() {
        assert_eq!(seed_value("0"), Some(0));
        assert_eq!(seed_value("9223372036854775807"), Some(contract::SEED_MAX));
        assert_eq!(seed_value("1_0"), Some(10));
        for bad in ["", "07", "-0", "-1", "1e3", "18446744073709551616"] {
            assert_eq!(seed_value(bad), None, "{bad:?}");
        }
    }
}
