"""Steal time as the guest sees it (issue 28, part 5): each VM's ``steal_pct`` in the
summary, the ``steal.csv`` table of ``run --out``, the ``vms.csv`` columns, the VM table of
``vcpulab run`` and the run report's plot show the same figures. In-process: a second."""

from __future__ import annotations

import csv
import math

import pytest

from vcpulab import api
from vcpulab._format import WIDTH, summary_text
from vcpulab.cli.run import write_outputs
from vcpulab.report import write_report

# Two pCPUs: "pair"'s two busy vCPUs share pCPU 0, so at every instant one runs and the
# other waits (steal exactly 50% in every window); "solo" has pCPU 1 to itself (0%).
# 2.3 s measured: windows of 1 s, 1 s and 0.3 s.
SCENARIO = {
    "name": "steal: a pair on one pCPU, one vCPU alone",
    "duration": "2500ms",
    "warmup": "200ms",
    "seed": 1,
    # No host noise: its kernel threads would take a share of both pCPUs.
    "host": {"cores_per_socket": 2, "noise": {"enabled": False}},
    "scheduler": {"name": "cfs"},
    "vm": [
        {"name": "pair", "vcpus": 2, "affinity": "0", "workload": [{"kind": "stress-ng", "threads": 2}]},
        {"name": "solo", "vcpus": 1, "affinity": "1", "workload": [{"kind": "stress-ng", "threads": 1}]},
    ],
}
WANT = {"pair": 50.0, "solo": 0.0}


@pytest.fixture(scope="module")
def result() -> api.Result:
    return api.run(SCENARIO)


def test_summary_has_steal_per_vm_with_known_values(result):
    for vm in result.summary["vms"]:
        st = vm["steal_pct"]
        assert set(st) == {"mean", "p95", "window_s", "windows"}
        assert st["window_s"] == 1.0
        assert len(st["windows"]) == 3
        want = WANT[vm["name"]]
        assert all(math.isclose(w, want, abs_tol=1e-9) for w in st["windows"]), st
        assert math.isclose(st["mean"], want, abs_tol=1e-9) and math.isclose(st["p95"], want, abs_tol=1e-9)
        # The mean is the VM's wait time over its vCPU time.
        assert math.isclose(st["mean"], 100 * vm["wait_time_s"] / (vm["vcpu_count"] * 2.3), abs_tol=1e-6)


def test_steal_table_matches_the_summary(result, tmp_path):
    df = result.steal()
    assert list(df.columns) == ["vm", "window", "start_s", "end_s", "steal_pct"]
    for vm in result.summary["vms"]:
        rows = df[df["vm"] == vm["name"]]
        assert list(rows["window"]) == [0, 1, 2]
        assert list(rows["start_s"]) == pytest.approx([0.2, 1.2, 2.2])
        assert list(rows["end_s"]) == pytest.approx([1.2, 2.2, 2.5])
        assert list(rows["steal_pct"]) == vm["steal_pct"]["windows"]
        # The summary's mean is the windows weighted by their length.
        lengths = rows["end_s"] - rows["start_s"]
        assert (rows["steal_pct"] * lengths).sum() / lengths.sum() == pytest.approx(vm["steal_pct"]["mean"], abs=1e-9)
    vms = result.vms().set_index("name")
    for vm in result.summary["vms"]:
        assert vms.loc[vm["name"], "steal_pct_mean"] == vm["steal_pct"]["mean"]
        assert vms.loc[vm["name"], "steal_pct_p95"] == vm["steal_pct"]["p95"]

    written = write_outputs(result, str(tmp_path))
    assert str(tmp_path / "steal.csv") in written
    with open(tmp_path / "steal.csv", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert [(r["vm"], int(r["window"])) for r in table] == [(v, k) for v in ("pair", "solo") for k in range(3)]
    for r in table:
        assert float(r["steal_pct"]) == pytest.approx(WANT[r["vm"]], abs=1e-9)


def test_vm_table_shows_steal_within_the_width(result):
    text = summary_text(result.summary)
    assert all(len(line) <= WIDTH for line in text.splitlines())
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("VM ") and "halted s" in line)
    assert header.split()[-3:] == ["steal", "steal", "p95"]
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 2:][:2]}
    assert rows["pair"][-2:] == ["50.0%", "50.0%"]
    assert rows["solo"][-2:] == ["0.0%", "0.0%"]


def test_run_report_plots_steal_over_time(result, tmp_path):
    write_outputs(result, str(tmp_path))
    page = open(write_report(str(tmp_path)), encoding="utf-8").read()
    assert "Steal time per VM" in page
    assert "steal %" in page  # the table under the plots
