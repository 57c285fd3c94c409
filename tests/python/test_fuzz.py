"""Bounded CI run of the cargo-fuzz targets (fuzz/): `parse_scenario` (arbitrary bytes as
a scenario) and `run_scenario` (parse, then a short run with the invariant checks on),
each for VCPULAB_FUZZ_SECONDS (default 15; 0 skips), seeded with the shipped scenarios.
Skipped where nightly Rust or cargo-fuzz is missing; the stable-Rust mutation test
(crates/vcpulab-core/tests/mutation.rs) runs everywhere. Longer runs: scripts/fuzz.sh 3600."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_command

ROOT = Path(__file__).resolve().parents[2]
SECONDS = int(os.environ.get("VCPULAB_FUZZ_SECONDS", "15"))


def _cargo_fuzz_available() -> bool:
    if shutil.which("cargo") is None:
        return False
    try:
        p = run_command(["cargo", "+nightly", "fuzz", "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


@pytest.mark.skipif(SECONDS <= 0, reason="VCPULAB_FUZZ_SECONDS=0")
@pytest.mark.skipif(not _cargo_fuzz_available(), reason="needs nightly Rust and cargo-fuzz")
def test_fuzz_targets_find_no_crash_in_a_bounded_run(tmp_path: Path):
    env = dict(os.environ, FUZZ_CORPUS_DIR=str(tmp_path))
    # The build is cached in fuzz/target; a cold build takes about a minute.
    p = run_command([str(ROOT / "scripts" / "fuzz.sh"), str(SECONDS)], cwd=ROOT, env=env,
                    capture_output=True, text=True, timeout=600 + 4 * SECONDS)
    assert p.returncode == 0, f"fuzzing found a crash (see fuzz/artifacts/):\n{p.stdout}\n{p.stderr}"
    assert p.stdout.count("Done ") == 2, p.stdout
