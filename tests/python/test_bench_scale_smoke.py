"""CI smoke test of scripts/bench_scale.py: proves the script works, times nothing.

Runs `scripts/bench_scale.py --smoke` (a sweep of 4 tiny runs with the local engine at
N = 1 and 2, and every PLE/Xen shape of benches/ cut to a few simulated milliseconds, once)
and checks the Markdown tables and the saved JSON are well-formed. No assertion is on a
timing: only that each figure is there and positive.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import run_command

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_scale.py"
SHAPES = ["eevdf-p6", "eevdf-p24", "eevdf-p64", "credit-p8", "credit-p32", "credit-p64",
          "flms-p8", "flms-p32", "flms-p64"]


def test_bench_scale_smoke(tmp_path):
    saved = tmp_path / "smoke.json"
    p = run_command(
        [sys.executable, str(SCRIPT), "--smoke", "--save", str(saved)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout
    assert out.startswith("load average at start ")
    assert "| engine | N | n | wall s (median) | runs/s whole-process (median) |" in out
    assert "| local | 1 | 1 |" in out and "| local | 2 | 1 |" in out, out
    assert "| local N=2/N=1 |" in out
    assert "| ray |" not in out  # --smoke is local only (a Ray start alone takes seconds)
    assert "| shape | P | vCPUs | sim s | n | events |" in out
    assert "| family | vCPUs | ns/event whole |" in out
    for fam, v in (("eevdf", 8), ("eevdf", 86), ("credit", 192), ("flms", 24)):
        assert f"| {fam} | {v} |" in out, out

    data = json.loads(saved.read_text())
    assert data["machine"]["loadavg_start"]
    sw = data["sweep"]
    assert sw["runs"] == 4 and sw["serial"]["events"] > 0
    assert set(sw["rows"]) == {"local/1", "local/2"}
    for r in sw["rows"].values():
        assert r["n"] == 1 and r["runs_per_s"] > 0 and r["phase_runs_per_s"] > 0 and r["startup_s"] > 0
    assert sw["ratios"]["local N=2/N=1"]["runs_per_s"] > 0

    rows = data["shapes"]["rows"]
    assert sorted(Path(k).stem for k in rows) == sorted(SHAPES)
    for k, r in rows.items():
        assert Path(ROOT / r["file"]).exists(), r["file"]
        assert r["events"] > 0 and r["wall_s"] > 0 and r["events_per_s"] > 0 and r["rss_mib"] > 0, (k, r)
        assert r["tiny_events"] == 0  # the 1 us cut has no events: it measures the fixed cost
    p64 = {Path(k).stem: r for k, r in rows.items()}
    assert p64["eevdf-p64"]["pcpus"] == 64 and p64["eevdf-p64"]["vcpus"] == 86
    assert p64["credit-p64"]["pcpus"] == 64 and p64["flms-p64"]["vcpus"] == 192


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="--mode instructions needs valgrind")
def test_bench_scale_instructions_smoke(tmp_path):
    """`--mode instructions` counts (not times) the marginal cost per event: on two
    small shapes, the table and the JSON carry positive counts, and the doubled duration
    has more events and more instructions than the single one."""
    saved = tmp_path / "ir.json"
    p = run_command(
        [sys.executable, str(SCRIPT), "--mode", "instructions", "--smoke",
         "--shapes", "xen/credit-p8.toml,xen/credit-p32.toml", "--save", str(saved)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert "| family | vCPUs | events (1x / 2x) | instructions per event (marginal) |" in p.stdout
    assert "| credit | 24 |" in p.stdout and "| credit | 96 |" in p.stdout
    rows = json.loads(saved.read_text())["instructions"]["rows"]
    assert len(rows) == 2
    for r in rows.values():
        assert r["events"][1] > r["events"][0] > 0
        assert r["instructions"][1] > r["instructions"][0] > 0
        assert r["per_event"] > 0
