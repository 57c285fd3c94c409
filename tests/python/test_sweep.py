"""Sweeps: grid expansion, a 240-run sweep killed and resumed, killed workers, Ray, query,
compare, statistics and bad sweep files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import VCPULAB, kill_group, run_cli, run_command, spawn

REPO = Path(__file__).resolve().parents[2]
OVERCOMMIT = REPO / "scenarios" / "examples" / "overcommit.toml"


def write_sweep(tmp_path: Path, body: str, name: str = "sweep.toml") -> Path:
    base = tmp_path / "overcommit.toml"
    if not base.exists():
        base.write_text(OVERCOMMIT.read_text(encoding="utf-8"), encoding="utf-8")
    p = tmp_path / name
    p.write_text('base = "overcommit.toml"\n' + body, encoding="utf-8")
    return p


SMALL = """
[set]
duration = "200ms"
warmup = "20ms"
[axes]
"scheduler.name" = ["rr", "hyperv-root"]
seed = { range = [1, 2] }
[zip]
"vm[1].vcpus" = [2, 4]
"vm[1].workload[0].threads" = [2, 4]
"""


def run_files(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "runs").glob("*.json"))


def test_grid_zip_run_ids_and_edits(tmp_path):
    from vcpulab import sweep

    sw = sweep.load(str(write_sweep(tmp_path, SMALL)))
    runs = sw.runs()
    assert len(runs) == 8
    assert sw.columns == ["scheduler.name", "seed", "vm[1].vcpus", "vm[1].workload[0].threads"]
    assert len({r.run_id for r in runs}) == 8
    # zipped keys advance together
    assert all(r.assign["vm[1].vcpus"] == r.assign["vm[1].workload[0].threads"] for r in runs)
    # the run id is a hash of the axis values only (not of their order)
    assert sweep.run_id_of({"a": 1, "b": 2}) == sweep.run_id_of({"b": 2, "a": 1})
    doc = sw.scenario(runs[-1].assign)
    assert doc["duration"] == "200ms" and doc["vm"][1]["vcpus"] == 4 and doc["scheduler"]["name"] == "hyperv-root"
    # edits create missing tables
    from vcpulab import keypath

    d = {"vm": [{"name": "a"}]}
    keypath.set_value(d, "vm[0].workload_extra.x", 3)
    assert d["vm"][0]["workload_extra"] == {"x": 3}


def test_sweep_killed_and_resumed_loses_and_repeats_nothing(tmp_path):
    """240 runs on 2 workers; SIGKILL the whole process group after >= 30 runs are on disk;
    --resume finishes the rest: every run exactly once, runs.parquet has 240 unique ids."""
    sw = write_sweep(tmp_path, """
[set]
duration = "60s"
warmup = "100ms"
[axes]
"scheduler.name" = ["rr", "hyperv-root"]
seed = { range = [1, 30] }
[zip]
"vm[1].vcpus" = [2, 4, 8, 16]
"vm[1].workload[0].threads" = [2, 4, 8, 16]
""")
    out = tmp_path / "out"
    proc = spawn(
        [VCPULAB, "sweep", str(sw), "--out", str(out), "--workers", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "runs").is_dir() and len(run_files(out)) >= 30:
                break
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_group(proc)
        proc.communicate()
    before = run_files(out)
    assert 30 <= len(before) < 240, f"the sweep was not killed mid-way ({len(before)} runs written)"
    assert not (out / "runs.parquet").exists()
    # every file on disk is a complete record (atomic writes)
    for name in before:
        rec = json.loads((out / "runs" / name).read_text(encoding="utf-8"))
        assert rec["status"] == "ok" and rec["run_id"] + ".json" == name
    # leftover temp files are not records
    mtimes = {n: (out / "runs" / n).stat().st_mtime_ns for n in before}

    res = run_cli("sweep", str(sw), "--out", str(out), "--workers", "2", "--resume", "--progress", timeout=120)
    assert res.returncode == 0, res.stderr
    assert "240/240" in res.stderr  # the progress bar (tqdm) counts the skipped runs too
    assert f"240 runs: {240 - len(before)} ran, {len(before)} skipped (already done), 0 failed" in res.stdout
    after = run_files(out)
    assert len(after) == 240
    # the finished runs were not repeated
    assert all((out / "runs" / n).stat().st_mtime_ns == t for n, t in mtimes.items())

    import pandas as pd

    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 240 and runs["run_id"].is_unique
    assert set(runs["run_id"] + ".json") == set(after)
    assert (runs["status"] == "ok").all()
    for col in ("scheduler.name", "seed", "vm[1].vcpus", "vm.web.latency_ms.p99", "vm.hogs.throughput",
                "host.utilization", "host.migrations.total", "fairness.jain_vm", "events"):
        assert col in runs.columns, col
    assert runs.groupby(["scheduler.name", "vm[1].vcpus"]).size().eq(30).all()
    vms = pd.read_parquet(out / "vms.parquet")
    assert len(vms) == 480 and set(vms["vm"]) == {"web", "hogs"}

    # a resumed finished sweep runs nothing
    res = run_cli("sweep", str(sw), "--out", str(out), "--resume")
    assert "0 ran, 240 skipped" in res.stdout

    # a result is a pure function of (scenario, seed): rerunning one run gives the same bytes
    import vcpulab
    from vcpulab import sweep

    s = sweep.load(str(sw))
    r = s.runs()[17]
    rec = json.loads((out / "runs" / f"{r.run_id}.json").read_text(encoding="utf-8"))
    assert vcpulab.run(s.scenario(r.assign)).summary == rec["summary"]

    # SQL over the results
    q = run_cli("query", str(out), 'SELECT "scheduler.name" AS s, count(*) AS n FROM runs GROUP BY 1 ORDER BY 1', "--json")
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout) == [{"s": "hyperv-root", "n": 120}, {"s": "rr", "n": 120}]
    q = run_cli("query", str(out), "SELECT count(*) AS n FROM vms WHERE vm = 'web'")
    assert q.returncode == 0 and "240" in q.stdout and "(1 row)" in q.stdout
    q = run_cli("query", str(out), "SELECT nope FROM runs")
    assert q.returncode == 2 and "query:" in q.stderr


def test_killed_worker_is_retried_once_then_reported(tmp_path, monkeypatch):
    from vcpulab import sweep

    sw = write_sweep(tmp_path, SMALL)
    runs = sweep.load(str(sw)).runs()
    flaky, dead = runs[2].run_id, runs[5].run_id
    env = dict(os.environ, _VCPULAB_SWEEP_CRASH=f"{flaky},{dead}:always")
    out = tmp_path / "out"
    res = run_command([VCPULAB, "sweep", str(sw), "--out", str(out), "--workers", "2"],
                      capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 1, res.stderr
    assert "8 runs: 8 ran, 0 skipped (already done), 1 failed" in res.stdout
    assert dead in res.stderr and "WorkerDied" in res.stderr and "exit status 86" in res.stderr
    assert len(run_files(out)) == 8
    assert json.loads((out / "runs" / f"{flaky}.json").read_text())["status"] == "ok"
    import pandas as pd

    df = pd.read_parquet(out / "runs.parquet")
    row = df[df.run_id == dead].iloc[0]
    assert row["status"] == "failed" and "died" in row["error"]
    # --resume re-runs the failed run (now without the fault) and nothing else
    res = run_cli("sweep", str(sw), "--out", str(out), "--resume")
    assert res.returncode == 0 and "1 ran, 7 skipped" in res.stdout


def test_ray_gives_the_same_records_as_local(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install 'ray>=2.9'); the Ray engine is not tested")
    sw = write_sweep(tmp_path, SMALL)
    local, ray_out = tmp_path / "local", tmp_path / "ray"
    a = run_cli("sweep", str(sw), "--out", str(local), "--workers", "2")
    b = run_cli("sweep", str(sw), "--out", str(ray_out), "--engine", "ray", "--workers", "2", timeout=300)
    assert a.returncode == 0, a.stderr
    assert b.returncode == 0, b.stderr
    assert "8 ran" in b.stdout and "engine ray" in b.stdout
    names = run_files(local)
    assert names == run_files(ray_out) and len(names) == 8
    for n in names:
        assert (local / "runs" / n).read_bytes() == (ray_out / "runs" / n).read_bytes()


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[axes]\n"vm[0].vcpuz" = [1, 2]\n', ['axis "vm[0].vcpuz"', "vcpuz", "unknown key"]),
        ('[axes]\nseed = { range = [10, 1] }\n', ['axes."seed".range', "FIRST (10) is greater than LAST (1)"]),
        ('[axes]\nseed = { range = [1] }\n', ['axes."seed".range', "expected two integers"]),
        ('[axes]\nseed = { rnage = [1, 2] }\n', ['axes."seed"', "range = [FIRST, LAST]"]),
        ('[axes]\n"vm[5].vcpus" = [1, 2]\n', ['axis "vm[5].vcpus"', "index 5 is out of range", "has 2 entries"]),
        ('[axes]\n"vm[1].vcpus" = [2, 0]\n', ['axis "vm[1].vcpus" = 0', "out of range"]),
        ('[axes]\n"vm[1]..vcpus" = [2]\n', ['axes."vm[1]..vcpus"', "invalid key path"]),
        ('[axes]\n"vm[1].vcpus" = []\n', ['axes."vm[1].vcpus"', "empty list"]),
        ('[zip]\n"vm[1].vcpus" = [2, 4]\n"vm[1].workload[0].threads" = [2]\n', ["zip[0]", "equal lengths"]),
        ('[axes]\n"scheduler.quantum" = ["10ms"]\n', ['axis "scheduler.quantum"', "unknown key"]),
        ('[axis]\nseed = [1]\n', ["axis: unknown key", "allowed keys"]),
    ],
)
def test_bad_sweep_files_name_the_file_and_the_axis(tmp_path, body, expected):
    sw = write_sweep(tmp_path, body)
    res = run_cli("sweep", str(sw), "--out", str(tmp_path / "out"))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert str(sw) in res.stderr
    for e in expected:
        assert e in res.stderr, (e, res.stderr)
    assert not (tmp_path / "out" / "runs").exists() or not run_files(tmp_path / "out")


def test_missing_base_and_existing_results(tmp_path):
    sw = tmp_path / "s.toml"
    sw.write_text('base = "nope.toml"\n[axes]\nseed = [1]\n')
    res = run_cli("sweep", str(sw))
    assert res.returncode == 2 and "base: cannot read 'nope.toml'" in res.stderr
    sw = write_sweep(tmp_path, SMALL)
    out = tmp_path / "out"
    assert run_cli("sweep", str(sw), "--out", str(out)).returncode == 0
    res = run_cli("sweep", str(sw), "--out", str(out))
    assert res.returncode == 2 and "--resume" in res.stderr
    # resuming into results of another base scenario would mix them
    (tmp_path / "overcommit.toml").write_text(OVERCOMMIT.read_text().replace('duration = "5s"', 'duration = "4s"'))
    sw.write_text(sw.read_text().replace('duration = "200ms"\n', ""))
    res = run_cli("sweep", str(sw), "--out", str(out), "--resume")
    assert res.returncode == 2 and "different base scenario" in res.stderr


def test_a_sweep_without_pyarrow_stops_before_running_anything(tmp_path, monkeypatch):
    import importlib.util

    import vcpulab
    from vcpulab.sweep import run_sweep

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    sw = write_sweep(tmp_path, SMALL)
    with pytest.raises(vcpulab.ScenarioError, match=r"needs pyarrow, a dependency .*: pip install 'pyarrow>=10'"):
        run_sweep(str(sw), out_dir=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_compare_two_schedulers(tmp_path):
    res = run_cli("compare", str(OVERCOMMIT), "--a", "scheduler.name=rr", "--b", "scheduler.name=hyperv-root",
                  "--seeds", "4", "--metric", "vm.web.latency_ms.p99", "--metric", "vm.*.throughput", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["seeds"] == [1, 2, 3, 4]
    metrics = {m["metric"]: m for m in doc["metrics"]}
    assert set(metrics) == {"vm.web.latency_ms.p99", "vm.web.throughput", "vm.hogs.throughput"}
    for m in metrics.values():
        for k in ("a", "b", "diff"):
            e = m[k]
            assert e["n"] == 4 and e["ci_lo"] <= e["mean"] <= e["ci_hi"]
        assert m["diff"]["mean"] == pytest.approx(m["b"]["mean"] - m["a"]["mean"])
    # hyperv-root's wake boost cuts the web VM's tail latency (see the sweep report)
    assert metrics["vm.web.latency_ms.p99"]["diff"]["ci_hi"] < 0
    text = run_cli("compare", str(OVERCOMMIT), "--a", "scheduler.name=rr", "--b", "scheduler.name=hyperv-root",
                   "--seeds", "3", "--metric", "vm.web.latency_ms.p99")
    assert text.returncode == 0 and "B-A [95% CI]" in text.stdout and "vm.web.latency_ms.p99" in text.stdout
    bad = run_cli("compare", str(OVERCOMMIT), "--a", "scheduler.name=rr", "--b", "scheduler.nme=x", "--seeds", "2")
    assert bad.returncode == 2 and "--b" in bad.stderr and "scheduler.nme" in bad.stderr
    bad = run_cli("compare", str(OVERCOMMIT), "--a", "seed=1", "--b", "seed=2", "--seeds", "2", "--metric", "vm.nope")
    assert bad.returncode == 2 and "unknown metric" in bad.stderr


def test_compare_with_one_seed_prints_no_interval_and_help_has_no_doubled_percent():
    from vcpulab.compare import format_table

    nan = float("nan")
    one = {"mean": 2.0, "ci_lo": nan, "ci_hi": nan, "n": 1, "sd": nan}
    res = {"a": ["seed=1"], "b": ["seed=2"], "seeds": [1],
           "metrics": [{"metric": "vm.web.throughput", "a": one, "b": dict(one, mean=3.0),
                        "diff": dict(one, mean=1.0), "rel_change": 0.5}]}
    row = next(line for line in format_table(res).splitlines() if line.startswith("vm.web.throughput"))
    assert "+1" in row and "[" not in row and "nan" not in row, row
    help_text = run_cli("compare", "--help").stdout
    assert "95% CI" in help_text and "%%" not in help_text


def test_compare_with_one_seed_writes_valid_json():
    """One seed has no interval: --json carries it as null. (Python's json.dumps would
    write NaN, which strict parsers such as jq and JSON.parse reject.)"""
    res = run_cli("compare", str(OVERCOMMIT), "--a", "scheduler.name=rr", "--b", "scheduler.name=hyperv-root",
                  "--seeds", "1", "--metric", "vm.web.throughput", "--json")
    assert res.returncode == 0, res.stderr
    assert "NaN" not in res.stdout

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    doc = json.loads(res.stdout, parse_constant=refuse)
    (m,) = doc["metrics"]
    for k in ("a", "b", "diff"):
        assert m[k]["n"] == 1 and isinstance(m[k]["mean"], float)
        assert m[k]["ci_lo"] is None and m[k]["ci_hi"] is None and m[k]["sd"] is None


def test_statistics():
    from vcpulab import stats

    # Student t quantiles (tables)
    for df, q in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (1000, 1.9623)):
        assert stats.t_ppf(0.975, df) == pytest.approx(q, abs=1e-4)
    e = stats.mean_ci([1, 2, 3, 4, 5])
    assert e.mean == 3 and e.n == 5
    assert e.half_width == pytest.approx(2.7764 * (2.5 ** 0.5) / 5 ** 0.5, rel=1e-4)
    one = stats.mean_ci([7.0, None, float("nan")])
    assert one.n == 1 and one.mean == 7 and one.lo != one.lo
    d = stats.paired_diff_ci([1, 2, 3], [2, 3, 5])
    assert d.mean == pytest.approx(4 / 3) and d.n == 3
