"""Shared fixtures: the installed `vcpulab` command, a small user-written scenario."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

# A user-written `program` scenario exercising every kind of guest operation: compute,
# a spinlock, IPIs, I/O and sleep; beside a CPU hog in a second VM. 0.5 s simulated.
PROGRAM_SCENARIO = """\
name = "program-mix"
duration = "500ms"
warmup = "50ms"
seed = 7

[host]
sockets = 2
cores_per_socket = 2
threads_per_core = 2
numa_nodes = 2

[scheduler]
name = "rr"

[[vm]]
name = "app"
vcpus = 4
weight = 512

[[vm.workload]]
kind = "program"
threads = 4
ops = [
  { op = "compute", duration = { dist = "exp", mean = "200us" } },
  { op = "lock", lock = "big", hold = "20us" },
  { op = "ipi", targets = "all" },
  { op = "io", latency = "100us" },
  { op = "sleep", duration = "50us" },
]

[[vm]]
name = "hog"
vcpus = 4
affinity = "0-3"

[[vm.workload]]
kind = "stress-ng"
threads = 4
"""


def _find_vcpulab() -> str:
    here = Path(sys.executable).parent
    for name in ("vcpulab", "vcpulab.exe"):
        if (here / name).exists():
            return str(here / name)
    found = shutil.which("vcpulab")
    if found is None:
        pytest.fail("the `vcpulab` command is not on PATH; install the package first (pip install -e '.[test]')")
    return found


VCPULAB = _find_vcpulab()


def default_sigint() -> None:
    """Run in a child before it starts its program: SIGINT's default action. A test run
    that is a background job of a non-interactive shell (CI, nohup, `( ./scripts/test.sh & )`)
    has SIGINT ignored, and an ignored signal stays ignored across fork and exec, so a
    child would never see the Ctrl-C a test sends it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kill_group(proc: subprocess.Popen) -> None:
    """Kills the process group of ``proc`` (started with ``start_new_session=True``):
    whatever it started too (a shell's loop, a sweep's workers, a browser's helpers)."""
    if os.name != "posix":
        proc.kill()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group has ended already
        pass


def spawn(cmd: Sequence[Any], preexec_fn=default_sigint, **kw: Any) -> subprocess.Popen:
    """Popen in a process group of its own, with SIGINT's default action (see
    :func:`default_sigint`); the caller kills the group in a ``finally`` (:func:`kill_group`)."""
    if os.name == "posix":
        kw.update(start_new_session=True, preexec_fn=preexec_fn)
    return subprocess.Popen(cmd, **kw)


def run_command(cmd: Sequence[Any], *, input: Any = None, capture_output: bool = False,
                timeout: float | None = None, check: bool = False, **kw: Any) -> subprocess.CompletedProcess:
    """subprocess.run, but the command runs in a process group of its own with SIGINT's
    default action, and the group is killed when the call returns, however it returns (a
    timeout, a failed assertion, Ctrl-C): nothing a test starts outlives it."""
    if capture_output:
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    if input is not None:
        kw["stdin"] = subprocess.PIPE
    with spawn(cmd, **kw) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        finally:
            kill_group(proc)
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs `vcpulab ARGS...` with no TTY; returns the completed process (text mode)."""
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return run_command(
        [VCPULAB, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def program_toml(tmp_path: Path) -> Path:
    p = tmp_path / "program.toml"
    p.write_text(PROGRAM_SCENARIO, encoding="utf-8")
    return p


def program_dict() -> dict:
    """PROGRAM_SCENARIO as a dict (for the dict input of the Python API)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads(PROGRAM_SCENARIO)


@pytest.fixture
def program() -> dict:
    return program_dict()
