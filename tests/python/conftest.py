"""Shared fixtures: the installed `vcpulab` command, a small user-written scenario."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

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


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs `vcpulab ARGS...` with no TTY; returns the completed process (text mode)."""
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
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
