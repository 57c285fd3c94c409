"""Typed stub of ``vcpulab._native``, the PyO3 bindings of vcpulab-core.

Every function takes and returns plain strings; JSON results are ``str`` and are parsed
by the pure-Python layer (:mod:`vcpulab`).
"""

from typing import Literal, Optional

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
) -> tuple[str, str]:
    """Runs a scenario; returns (summary JSON, Chrome JSON trace of the window [from_ns, to_ns])."""

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

def experiments_json() -> str:
    """The built-in experiments with their cases as JSON."""

def reproduce_case(experiment: str, case: str, seed: Optional[int] = None) -> str:
    """Runs one case of a built-in experiment; returns its raw rows (one per metric) as JSON."""

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
