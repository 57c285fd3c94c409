//! The `vcpulab` command that `pip install` puts on the PATH.
//!
//! Every vcpulab command is implemented once, in Python (`python/vcpulab/cli.py`). A
//! Python process, though, spends 25-30 ms starting the interpreter and importing the
//! package before it does any work, and for short runs that start is most of what a user
//! waits for (issue 6 measures whole-process time against a plain-Rust loop that finishes
//! P=4/V=16/60 s in 17 ms). So this small binary runs the one form that scripts, sweeps
//! and benchmarks call most, `vcpulab run SCENARIO --json` (with `--seed N`, `--force`,
//! `--check-invariants` in any order), itself, through the same core as the extension
//! module, and writes the bytes the Python CLI would write. It also answers `--version`.
//!
//! Everything else is handed, unchanged, to the Python CLI (run as `python -m vcpulab`
//! runs it): other subcommands, `run` without `--json` (the tables are formatted in
//! Python), with `--out` or `--trace`, help, abbreviated options, arguments it does not
//! recognise, a file it cannot read, that is not UTF-8 or that is not a regular file (a
//! pipe can be read only once), and any error found before the simulation starts (a bad
//! scenario, a run refused as too long). Messages and exit statuses so have one
//! implementation; the Python CLI re-reads the file to report them. Two errors are
//! reported here, with the Python CLI's messages and statuses: a simulation that fails
//! while running (exit 1; a long run is not repeated just to fail again), and a failed
//! write of the output (exit 2; a closed pipe exits 1 silently). Ctrl-C during a native
//! run ends it as it ends the Python CLI's: "vcpulab: interrupted" on stderr, then
//! SIGINT's default action, which a shell reports as status 130 (on Unix; elsewhere, and
//! while the output is being written, the default action alone ends it). The output is
//! UTF-8 with `\n` line ends whatever the locale or platform.
//!
//! Which Python: `VCPULAB_PYTHON` if set; else the interpreter beside this executable
//! (`python3.X` of the version that built it, then `python3`, `python`: the layout of a
//! virtualenv, conda or a prefix install); else the interpreter that built it (recorded at
//! build time, for `pip install --user`); else `python3` / `python` on the PATH.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use vcpulab_core::api::{self, RunOptions};
use vcpulab_core::{Error, Scenario};

const EXIT_SIM_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;
/// Seeds the CLI accepts (python/vcpulab/cli.py `_seed`): 0 ..= 2^63-1.
const SEED_MAX: u64 = (1 << 63) - 1;

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

/// A seed as the Python CLI's `int(text, 0)` reads plain decimal numbers; anything else
/// (hex, underscores, spaces, leading zeros, out of range) goes to Python, which accepts
/// or rejects it with its own message.
fn plain_seed(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (text.len() > 1 && text.starts_with('0')) {
        return None;
    }
    text.parse::<u64>().ok().filter(|&v| v <= SEED_MAX)
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
                        match rest.get(i).and_then(|v| plain_seed(v)) {
                            Some(v) => seed = Some(v),
                            None => return Plan::Python,
                        }
                    }
                    _ if a.starts_with("--seed=") => match plain_seed(&a["--seed=".len()..]) {
                        Some(v) => seed = Some(v),
                        None => return Plan::Python,
                    },
                    _ if a.starts_with('-') || a.is_empty() => return Plan::Python,
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

/// The scenario text as the Python API reads it (`api._scenario_text`): UTF-8, with
/// `\r\n` and a lone `\r` read as line ends. None when that read would fail, and for
/// anything but a regular file: a pipe or `/dev/stdin` can be read only once, and the
/// Python CLI must be able to read it if it reports an error.
fn scenario_text(path: &str) -> Option<String> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let raw = std::fs::read(path).ok()?;
    let text = String::from_utf8(raw).ok()?;
    if text.contains('\r') {
        Some(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Some(text)
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

/// Runs the scenario and writes its summary JSON. `Err(())` when the command line must
/// go to Python after all (an error that Python reports).
fn fast_run(run: &FastRun) -> Result<ExitCode, ()> {
    let text = scenario_text(&run.scenario).ok_or(())?;
    let parsed = if run.scenario.to_lowercase().ends_with(".json") {
        Scenario::from_json_str(&text, &run.scenario)
    } else {
        Scenario::from_toml_str(&text, &run.scenario)
    };
    let sc = parsed.map_err(|_| ())?;
    let opts = RunOptions {
        check_invariants: run.check_invariants,
        force: run.force,
        stop: Some(Arc::new(|| INTERRUPTED.load(Ordering::Relaxed))),
        ..Default::default()
    };
    let caught = interrupts::catch();
    let mut result = api::run(&sc, run.seed, &opts);
    interrupts::release(caught);
    // A Ctrl-C after the run's last look at the flag still counts.
    if result.is_ok() && INTERRUPTED.load(Ordering::Relaxed) {
        result = Err(Error::Interrupted);
    }
    match result {
        Ok(summary) => {
            // Formatted straight into a buffered stdout: at 8,192 vCPUs the text is 6.4 MB,
            // which a String would grow (and copy) to before the first byte is written.
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            let written = api::write_summary_json(&mut out, &summary)
                .and_then(|_| out.write_all(b"\n"))
                .and_then(|_| out.flush());
            match written {
                Ok(()) => Ok(ExitCode::SUCCESS),
                // The reader went away (`| head`): no message, as in the Python CLI.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Ok(ExitCode::from(EXIT_SIM_FAILED))
                }
                Err(e) => {
                    eprintln!("vcpulab: error: {}", os_error_message(&e));
                    Ok(ExitCode::from(EXIT_USAGE))
                }
            }
        }
        Err(Error::Sim(e)) => {
            eprintln!("vcpulab: error: {e}");
            Ok(ExitCode::from(EXIT_SIM_FAILED))
        }
        Err(Error::Interrupted) => {
            eprintln!("vcpulab: interrupted");
            interrupts::die_of_sigint();
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        // Refused before running (too long, bad trace window) or another input error.
        Err(_) => Err(()),
    }
}

/// An output error as the Python CLI prints an `OSError` without a file name:
/// `[Errno 28] No space left on device`.
fn os_error_message(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let detail = text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text);
            format!("[Errno {code}] {detail}")
        }
        None => e.to_string(),
    }
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
    eprintln!(
        "vcpulab: error: no Python interpreter found to run this command; \
         set VCPULAB_PYTHON to the Python that vcpulab is installed in"
    );
    ExitCode::from(EXIT_USAGE)
}

fn main() -> ExitCode {
    let raw: Vec<OsString> = std::env::args_os().skip(1).collect();
    let utf8: Option<Vec<String>> = raw.iter().map(|a| a.clone().into_string().ok()).collect();
    let plan = utf8.as_deref().map_or(Plan::Python, plan);
    match plan {
        Plan::Version => {
            println!("vcpulab {}", vcpulab_core::VERSION);
            ExitCode::SUCCESS
        }
        Plan::Run(run) => fast_run(&run).unwrap_or_else(|()| hand_to_python(raw)),
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
            "run a.toml --json --seed 0x10", // int(text, 0) takes it; Python decides
            "run a.toml --json --seed 010",  // int(text, 0) refuses it
            "run a.toml --json --seed 9223372036854775808", // 2^63
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
    fn seeds_are_plain_decimals_in_range() {
        assert_eq!(plain_seed("0"), Some(0));
        assert_eq!(plain_seed("9223372036854775807"), Some(SEED_MAX));
        for bad in [
            "",
            "00",
            "07",
            "+1",
            " 1",
            "1_0",
            "1e3",
            "18446744073709551616",
        ] {
            assert_eq!(plain_seed(bad), None, "{bad:?}");
        }
    }
}
