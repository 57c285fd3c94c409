"""What a first user meets (issue 30, defects 4, 6, 7 and 9): `run --out D --trace
D/trace.json`, the frames' dtypes, numpy values in dict scenarios, the README's two.toml,
plurals in sweep/compare messages, `report --open` without a browser, and the sweep
report's wording and plot titles."""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import vcpulab
from conftest import PROGRAM_SCENARIO, VCPULAB, run_cli, run_command

REPO = Path(__file__).resolve().parents[2]
TWO = REPO / "scenarios" / "examples" / "two.toml"
OVERCOMMIT = REPO / "scenarios" / "examples" / "overcommit.toml"

SHORT = PROGRAM_SCENARIO.replace('duration = "500ms"', 'duration = "100ms"').replace('warmup = "50ms"', 'warmup = "10ms"')


@pytest.fixture
def short_toml(tmp_path: Path) -> Path:
    p = tmp_path / "a.toml"
    p.write_text(SHORT)
    return p


# ----------------------------------------------------------------------- defect 4


def test_run_trace_into_the_out_folder_it_creates(short_toml: Path, tmp_path: Path):
    """`vcpulab run a.toml --out out_a --trace out_a/trace.json` with no out_a yet."""
    out_a = tmp_path / "out_a"
    p = run_cli("run", str(short_toml), "--out", str(out_a), "--trace", str(out_a / "trace.json"))
    assert p.returncode == 0, p.stderr
    assert "No such file or directory" not in p.stderr
    assert (out_a / "summary.json").exists()
    events = json.loads((out_a / "trace.json").read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)


def test_trace_creates_the_folder_of_its_file(short_toml: Path, tmp_path: Path):
    """--trace (and `trace --out`) create the trace's parent folder, as --out does."""
    t1 = tmp_path / "new" / "deeper" / "run.json"
    p = run_cli("run", str(short_toml), "--json", "--trace", str(t1))
    assert p.returncode == 0, p.stderr
    assert json.loads(t1.read_text())["traceEvents"]
    t2 = tmp_path / "other" / "t.json"
    p = run_cli("trace", str(short_toml), "--out", str(t2))
    assert p.returncode == 0, p.stderr
    assert json.loads(t2.read_text())["traceEvents"]


# ----------------------------------------------------------------------- defect 6


def _frames(res: vcpulab.Result) -> dict[str, pd.DataFrame]:
    return {"vms": res.vms(), "vcpus": res.vcpus(), "workloads": res.workloads(), "host_threads": res.host_threads()}


TEXT_COLUMNS = {"name", "vm", "helper", "kind", "throughput_unit"}


def test_optional_numeric_columns_are_float_nan_without_kvm():
    res = vcpulab.run(tomllib.loads(SHORT))
    v = res.vcpus()
    for c in ("boost_to_run_mean_ms", "boost_to_run_max_ms"):
        assert v[c].dtype == np.float64, (c, v[c].dtype)
        assert v[c].isna().all()
    for name, df in _frames(res).items():
        numeric = [c for c in df.columns if c not in TEXT_COLUMNS]
        assert all(df[c].dtype != object for c in numeric), (name, df[numeric].dtypes[df[numeric].dtypes == object])


def test_every_frame_has_numeric_dtypes_for_numeric_columns():
    """A VM without workloads (throughput null in every row) and host threads."""
    sc = tomllib.loads(SHORT)
    sc["vm"].append({"name": "idle", "vcpus": 1})
    res = vcpulab.run(sc)
    vms = res.vms()
    assert vms["throughput"].dtype == np.float64
    ft = vcpulab.run(str(REPO / "scenarios" / "reproductions" / "software-ft" / "scenario.toml"))
    for r in (res, ft):
        for name, df in _frames(r).items():
            bad = [c for c in df.columns if c not in TEXT_COLUMNS and df[c].dtype == object]
            assert not bad, (name, bad)
    # Text columns stay text.
    assert vms["name"].tolist()[-1] == "idle"


# ----------------------------------------------------------------------- defect 7


def _numpy_scenario() -> dict:
    """The short scenario with its numbers as a DataFrame gives them: numpy int64,
    float64, int32, a 0-d array and a numpy bool."""
    sc = tomllib.loads(SHORT)
    hosts = pd.DataFrame([{"sockets": 2, "cores_per_socket": 2, "threads_per_core": 2, "numa_nodes": 2}])
    row = hosts.iloc[0]
    sc["host"] = {k: row[k] for k in hosts.columns}
    assert isinstance(sc["host"]["cores_per_socket"], np.int64)
    sc["seed"] = np.uint64(7)
    sc["vm"][0]["vcpus"] = np.array(4)  # 0-d array
    sc["vm"][0]["weight"] = np.int32(512)
    sc["vm"][0]["workload"][0]["threads"] = np.int16(4)
    return sc


def test_dict_scenario_with_numpy_values_runs_as_the_plain_one():
    plain = tomllib.loads(SHORT)
    sc = _numpy_scenario()
    assert vcpulab.validate(sc) == vcpulab.validate(plain)
    assert vcpulab.run(sc).to_json() == vcpulab.run(plain).to_json()
    # floats and bools too
    assert json.loads(vcpulab.api.to_json({"a": np.float32(0.5), "b": np.bool_(True), "c": np.array([1, 2])})) == {
        "a": 0.5, "b": True, "c": [1, 2]}


def test_numpy_nan_and_unconvertible_values_are_still_refused_by_key_path():
    sc = tomllib.loads(SHORT)
    sc["host"]["cores_per_socket"] = np.float64("nan")
    with pytest.raises(vcpulab.ScenarioError, match=r"<dict>: host.cores_per_socket: nan is not a finite number"):
        vcpulab.run(sc)
    sc["host"]["cores_per_socket"] = object()
    with pytest.raises(vcpulab.ScenarioError, match=r"host.cores_per_socket: a value of type object"):
        vcpulab.run(sc)


def test_trace_and_kvm_dicts_take_numpy_values():
    sc = _numpy_scenario()
    assert vcpulab.trace(sc).result.to_json() == vcpulab.run(tomllib.loads(SHORT)).to_json()
    from vcpulab import kvm

    doc, origin = kvm.load({"vm": {"vcpus": np.int64(2), "ok": np.bool_(False)}})
    assert origin == "<dict>"
    assert doc == {"vm": {"vcpus": 2, "ok": False}}
    assert type(doc["vm"]["vcpus"]) is int and type(doc["vm"]["ok"]) is bool


# ----------------------------------------------------------------------- defect 9


def _readme_two_toml() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    mine = [b for b in blocks if b.startswith("# two.toml")]
    assert len(mine) == 1, "the README's quickstart two.toml block"
    return mine[0]


def test_readme_two_toml_is_shipped_and_validates():
    assert TWO.exists(), "scenarios/examples/two.toml"
    assert TWO.read_text(encoding="utf-8") == _readme_two_toml()
    assert "scenarios/examples/two.toml" in _readme_two_toml().splitlines()[0]
    p = run_cli("validate", str(TWO))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("OK ")
    assert vcpulab.validate(str(TWO))["name"] == "two-vms"


def test_one_run_sweep_says_run_not_runs(tmp_path: Path):
    (tmp_path / "a.toml").write_text(SHORT)
    (tmp_path / "one.toml").write_text('base = "a.toml"\n[axes]\n"scheduler.name" = ["rr"]\n')
    p = run_cli("sweep", str(tmp_path / "one.toml"), "--out", str(tmp_path / "res"), "--workers", "1")
    assert p.returncode == 0, p.stderr
    assert "sweep: 1 run: 1 ran, 0 skipped" in p.stdout, p.stdout
    # "(11 runs/s)" is a rate and may legitimately follow; only a count of one
    # must not be pluralised.
    assert re.search(r"(?<![0-9.])1 runs\b", p.stdout) is None, p.stdout


def test_compare_header_counts_seeds_right():
    from vcpulab.compare import _seeds_text, format_table

    res = {"a": ["scheduler.name=rr"], "b": ["scheduler.name=cfs"], "seeds": [1], "metrics": []}
    head = format_table(res)
    assert "1 seed each (seed 1)" in head and "1 seeds" not in head and "(1..1)" not in head
    assert _seeds_text([1, 2, 3]) == "3 seeds each (1..3)"
    assert _seeds_text([4, 9]) == "2 seeds each (4, 9)"


def test_compare_cli_with_one_seed(short_toml: Path):
    p = run_cli("compare", str(short_toml), "--a", "scheduler.name=rr", "--b", "scheduler.name=cfs",
                "--seeds", "1", "--workers", "1")
    assert p.returncode == 0, p.stderr
    assert "1 seed each (seed 1)" in p.stdout and "1 seeds" not in p.stdout


def test_report_open_without_a_browser_says_where_the_page_is(short_toml: Path, tmp_path: Path):
    out = tmp_path / "one"
    assert run_cli("run", str(short_toml), "--out", str(out)).returncode == 0
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER", "TERM")}
    env.pop("PYTHONWARNINGS", None)
    p = run_command([VCPULAB, "report", str(out), "--open"], capture_output=True, text=True, env=env,
                    stdin=run_command.__globals__["subprocess"].DEVNULL, timeout=120)
    assert p.returncode == 0, p.stderr
    page = out / "report.html"
    assert page.exists()
    assert "no web browser could be opened" in p.stderr, p.stderr
    assert str(page.resolve()) in p.stderr


def _alts(page: str) -> list[str]:
    return re.findall(r'<img alt="([^"]*)"', page)


@pytest.fixture(scope="module")
def sweep_pages(tmp_path_factory) -> dict[str, str]:
    """Two small sweeps of overcommit.toml: one over a categorical axis only (bar charts),
    one over a numeric axis (line charts)."""
    tmp = tmp_path_factory.mktemp("sweeps")
    (tmp / "overcommit.toml").write_text(OVERCOMMIT.read_text())
    specs = {
        "bars": '[axes]\n"scheduler.name" = ["rr", "hyperv-root"]\nseed = { range = [1, 2] }\n',
        "lines": '[axes]\n"scheduler.name" = ["rr", "hyperv-root"]\n"vm[1].vcpus" = [2, 4]\n',
    }
    pages = {}
    for name, axes in specs.items():
        (tmp / f"{name}.toml").write_text(f'base = "overcommit.toml"\n[set]\nduration = "200ms"\nwarmup = "20ms"\n{axes}')
        p = run_cli("sweep", str(tmp / f"{name}.toml"), "--out", str(tmp / name))
        assert p.returncode == 0, p.stderr
        p = run_cli("report", str(tmp / name))
        assert p.returncode == 0, p.stderr
        pages[name] = (tmp / name / "report.html").read_text(encoding="utf-8")
    return pages


def test_sweep_report_says_error_bars_for_bars_and_bands_for_lines(sweep_pages):
    bars, lines = sweep_pages["bars"], sweep_pages["lines"]
    assert "error bars are 95% confidence intervals" in bars
    assert "bands" not in bars
    assert "bands around the lines are 95% confidence intervals" in lines
    assert "error bars" not in lines


def test_sweep_plot_titles_are_words_with_units(sweep_pages):
    bars, lines = _alts(sweep_pages["bars"]), _alts(sweep_pages["lines"])
    assert "p99 latency of VM web (ms) by scheduler" in bars, bars
    assert "CPU share of VM hogs (fraction of host CPU) by scheduler" in bars, bars
    assert "p99 latency of VM web (ms) vs vCPUs of vm[1]" in lines, lines
    for alt in bars + lines:
        assert not re.search(r"\bvm\.\w+\.", alt), alt  # no raw column path
        assert "latency_ms" not in alt and "scheduler.name" not in alt, alt
    # the raw column is still named (in the caption), for `vcpulab query`
    assert "column vm.web.latency_ms.p99" in sweep_pages["bars"]


def test_describe_column_maps_paths_to_words_and_units():
    from vcpulab.report import describe_column

    assert describe_column("vm.latency.latency_ms.p99") == ("p99 latency of VM latency", "ms")
    assert describe_column("scheduler.name") == ("scheduler", "")
    assert describe_column("vm.a.wait_time_s") == ("wait (steal) time of VM a", "s")
    assert describe_column("vm.a.ple.exits") == ("PLE exits of VM a", "count")
    assert describe_column("vm.a.ple.streaks.median") == ("median PLE streak of VM a", "PLE exits")
    assert describe_column("host.utilization") == ("host CPU utilization", "fraction of host CPU")
    assert describe_column("host.migrations.total") == ("vCPU migrations", "count")
    assert describe_column("fairness.jain_vm") == ("Jain fairness over VMs", "1 = fair")
    assert describe_column("host.cores_per_socket") == ("cores per socket", "")
    assert describe_column("vm[1].workload[0].threads") == ("threads of vm[1].workload[0]", "")
    df = pd.DataFrame({"vm.web.throughput": [1.0], "vm.web.throughput_unit": ["req/s"]})
    assert describe_column("vm.web.throughput", df) == ("throughput of VM web", "req/s")
