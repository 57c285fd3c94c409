"""Typed stub of ``vcpulab._native``, the PyO3 bindings of vcpulab-core.

Every function takes and returns plain strings; JSON results are ``str`` and are parsed
by the pure-Python layer (:mod:`vcpulab`).
"""

import os
from typing import Callable, Literal, Optional, Union

class ScenarioError(ValueError):
    """A scenario, sweep or experiment input is invalid (``FILE: key.path: message``)."""

class SimulationError(RuntimeError):
    """A simulation failed; the message names scenario and seed."""

class NotFoundError(LookupError):
    """An unknown experiment, case or name."""

def run_text(
    text: str,
    origin: str,
    format: Literal["toml", "json"] = "toml",
    seed: Optional[int] = None,
    check_invariants: bool = False,
    force: bool = False,
) -> str:
    """Runs a scenario given as text; returns the summary JSON. Refuses scenarios
    estimated at over 5e10 events unless ``force``."""

def trace_text(
    text: str,
    origin: str,
    format: Literal["toml", "json"] = "toml",
    seed: Optional[int] = None,
    from_ns: int = 0,
    to_ns: int = 18446744073709551615,
    check_invariants: bool = False,
    force: bool = False,
) -> tuple[str, str]:
    """Runs a scenario; returns (summary JSON, Chrome JSON trace of the window [from_ns, to_ns]).
    ``check_invariants`` and ``force`` as ``run_text``."""

def validate_text(
    text: str, origin: str, format: Literal["toml", "json"] = "toml", force: bool = False
) -> str:
    """Validates a scenario given as text; returns a short JSON description of it. Refuses
    (ScenarioError) a scenario estimated over the event limit, as run_text does, unless
    ``force``."""

def schedulers_json() -> str:
    """The schedulers (name, description, params) as JSON."""
    ...

def workload_kinds_json() -> str:
    """The workload kinds (program and the presets: name, description) as JSON."""
    ...

def shipped_profiles() -> list[tuple[str, str]]:
    """The host profiles shipped with vcpulab: (name, TOML text)."""
    ...

def experiments_json() -> str:
    """The built-in experiments with their cases as JSON."""

def reproduce_case(experiment: str, case: str, seed: Optional[int] = None) -> str:
    """Runs one case of a built-in experiment; returns its raw rows (one per metric) as JSON."""

def reproduce_experiment(
    experiment: str,
    seed: Optional[int] = None,
    workers: int = 1,
    adaptive: bool = True,
    progress: Optional[Callable[[int, int], None]] = None,
) -> str:
    """Reproduces one experiment on ``workers`` threads with its claims' verdicts (more seeds
    for undecided claims when ``adaptive``); returns ``{"rows": [...], "claims": [...]}`` as
    JSON. ``progress(done, total)`` is called after each run. The output does not depend on
    ``workers``."""

def robustness_plan(experiment: str, seeds: int, seed: Optional[int] = None,
                    perturbations: Optional[list[str]] = None) -> str:
    """The runs of a robustness check of one experiment, as JSON (see
    ``crates/vcpulab-core/src/repro/robustness.rs``); ``perturbations``: only these of the
    family (None: all)."""

def robustness_report(experiment: str, seeds: int, records: str, seed: Optional[int] = None,
                      perturbations: Optional[list[str]] = None) -> str:
    """A robustness check's report (JSON) from its runs' records (a JSON list), planned with
    the same arguments as ``robustness_plan``."""

def reproduce_finish(experiment: str, raw_rows: str) -> str:
    """Normalises an experiment's raw rows (a JSON list) and computes sim / paper."""

def experiment_scenario(experiment: str, case: str | None = None, metric: str | None = None) -> str:
    """The scenario text (TOML) of a built-in experiment, before its cases' edits."""

def version() -> str:
    """The version of vcpulab-core."""

def kvm_run_json(config: str) -> tuple[bool, str]:
    """Runs one real-KVM harness configuration (JSON); returns (ok, result or error JSON).
    Run it in a subprocess (``python -m vcpulab._kvm_worker``): it installs signal handlers."""

def kvm_cgroup_leftovers() -> list[str]:
    """cgroup directories left by the KVM harness (empty after clean runs)."""

# The command-line contract (vcpulab_core::contract), shared with the native command.

EXIT_OK: int
"""0: the command did what it was asked."""
EXIT_SIM_FAILED: int
"""1: a simulation failed (also: the reader of stdout went away)."""
EXIT_BAD_INPUT: int
"""2: bad input (scenario, name, file, usage)."""
EXIT_INTERRUPTED: int
"""130: Ctrl-C."""
EXIT_STATUS_HELP: str
"""The paragraph of ``vcpulab --help`` that lists the exit statuses."""
SEED_MAX: int
"""The largest seed: 2**63-1."""
VERSION_LINE: str
"""What ``vcpulab --version`` prints."""

def parse_seed(text: str) -> int:
    """The seed a command-line text names (Python's ``int(text, 0)`` syntax, 0..2**63-1);
    ValueError with the CLI's message (``invalid seed 'x': ...``) if it names none."""

def read_scenario_file(path: Union[str, os.PathLike[str]]) -> tuple[str, str, Literal["toml", "json"]]:
    """Reads a scenario file as both CLIs do: (text with ``\n`` line ends, origin, format).
    Raises OSError(errno, reason, path) if it cannot be read, ScenarioError if it is not
    UTF-8 text."""

def cli_failure(
    kind: Literal["bad-input", "sim-failed", "interrupted", "closed-output"], detail: Optional[str] = None
) -> tuple[int, Optional[str]]:
    """How a command ends on a failure of ``kind``: (exit status, line for stderr or None)."""

def os_error_text(errno: Optional[int], reason: str, filename: Optional[str] = None) -> str:
    """An OSError as the CLIs print it: "FILE: reason", "[Errno N] reason" or "reason"."""
