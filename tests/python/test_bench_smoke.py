"""CI smoke test of scripts/bench.py: proves the benchmark script works, times nothing.

Runs `scripts/bench.py --smoke --no-simpy` (tiny simulated durations, one repetition) and
checks the Markdown table. The plain-Rust reference (../shared/bench/rr-overcommit/rr_rust)
is built by the script when cargo and the sources are there; otherwise the script skips it
and says why, and this test checks that reason is printed instead of the Rust rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import run_command

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench.py"


def test_bench_smoke(tmp_path):
    saved = tmp_path / "smoke.json"
    p = run_command(
        [sys.executable, str(SCRIPT), "--smoke", "--no-simpy", "--save", str(saved)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout
    assert "| engine | P/V/T |" in out
    assert "vcpulab / plain Rust" in out
    for size in ("4/16/", "64/512/", "1024/8192/"):
        assert f"| vcpulab | {size}" in out, out
    rust_ran = "| rust | 4/16/" in out
    assert rust_ran or "plain-Rust reference skipped:" in out, out

    data = json.loads(saved.read_text())
    for size, engines in data["sizes"].items():
        v = engines["vcpulab"]
        assert v["events"] > 0 and v["events_per_s"] > 0 and v["rss_mib"] > 0
        if rust_ran:
            # Same model, same seed: event counts agree within statistical noise.
            r = engines["rust"]["events"]
            assert abs(v["events"] - r) <= 0.1 * r + 50, (size, v["events"], r)
            assert data["ratios"][size]["vcpulab/rust"] > 0

    # --baseline against itself: nothing regresses by more than 10 % against the same numbers.
    p2 = run_command(
        [sys.executable, str(SCRIPT), "--smoke", "--no-simpy", "--no-rust", "--sizes", "4/16",
         "--baseline", str(saved)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert p2.returncode == 0, p2.stderr[-3000:]
    assert "Against baseline" in p2.stdout
