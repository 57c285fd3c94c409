"""Terminal output (issue 30): every line a text-printing command writes fits 100 columns,
and `vcpulab run` shows the figures of the features a scenario uses (KVM's PLE exits,
yields and streaks; Kemari syncs and stopped time; host threads; every workload), with
the scheduler's raw counters only under --verbose."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

from vcpulab._format import num

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 100

# The short PLE paper's setup (scenarios/reproductions/kvm-ple-short), cut to 0.3 s, with a
# second workload in the benchmark VM so that "every workload" shows.
KVM_SCENARIO = """\
name = "kvm-ple: ebizzy beside swaptions, 8 vCPUs on 4 pCPUs, a name long enough to need wrapping on a terminal"
duration = "300ms"
warmup = "50ms"
seed = 1

[host]
cores_per_socket = 4
base_ghz = 2.2

[scheduler]
name = "cfs"
group_per_vm = true

[kvm]
vendor = "intel"
version = "4.15"
ple_window = 32768
ple_window_grow = 1

[[vm]]
name = "noise"
start_jitter = "20ms"
vcpus = 4
[[vm.workload]]
kind = "swaptions"

[[vm]]
name = "bench"
start_jitter = "20ms"
vcpus = 4
[[vm.workload]]
kind = "ebizzy"
[[vm.workload]]
kind = "sysbench-cpu"
threads = 1
"""

# Kemari + DRBD protecting a timer VM (scenarios/reproductions/software-ft), its journal
# writes every 200 ms instead of 5 s so that a 1 s run has syncs.
FT_SCENARIO = """\
name = "ft: timer VM under Kemari + DRBD"
duration = "1s"
seed = 1

[host]
sockets = 1
cores_per_socket = 2
threads_per_core = 2

[scheduler]
name = "cfs"

[[vm]]
name = "eval"
vcpus = 1
[[vm.workload]]
kind = "timer-rt"
interval = "10ms"
[[vm.workload]]
kind = "program"
ops = [
  { op = "sleep", duration = "200ms" },
  { op = "io", latency = "3ms", write_kib = 60 },
]

[[vm]]
name = "load"
vcpus = 1
[[vm.workload]]
kind = "stress-ng"

[[host_thread]]
name = "kemari"
vm = "eval"
helper = "kemari"

[[host_thread]]
name = "drbd"
vm = "eval"
helper = "drbd"
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    p = run_cli(*args, timeout=300)
    assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def _columns(line: str) -> int:
    """Terminal columns: East Asian wide characters (the papers' Japanese quotes) take two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _fits(p: subprocess.CompletedProcess) -> str:
    for stream in (p.stdout, p.stderr):
        for line in stream.splitlines():
            assert _columns(line) <= WIDTH, f"{_columns(line)} columns: {line!r}"
    return p.stdout


def test_wrap_counts_wide_characters_as_two_columns():
    from vcpulab._format import table, wrap

    quote = "result tables ('ほとんど差異はありませんでした ... 仕事のない VM に対してはタイムスライスが与えられ') " * 4
    text = wrap(quote, "notes: ") + "\n" + table(["case", "note"], [["a", quote]])
    assert max(_columns(line) for line in text.splitlines()) <= WIDTH
    assert "ほとんど" in text and "8 pCPUs" in wrap("x " * 40 + "8 pCPUs " + "y " * 40)


def _section(text: str, title: str) -> dict[str, list[str]]:
    """The table under the line starting with ``title``: its rows split into cells, by
    the first cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    sep = next(i for i in range(start, len(lines)) if lines[i].startswith("---"))
    rows = {}
    for line in lines[sep + 1:]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = cells
    return rows


@pytest.fixture(scope="module")
def kvm_toml(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("kvm") / "kvm.toml"
    path.write_text(KVM_SCENARIO)
    return path


@pytest.fixture(scope="module")
def ft_toml(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ft") / "ft.toml"
    path.write_text(FT_SCENARIO)
    return path


def test_schedulers_and_workloads_fit_and_list_keys_with_defaults():
    text = _fits(_cli("schedulers"))
    for name in ("cfs", "credit", "hyperv-root"):
        assert name in text
    text = _fits(_cli("workloads"))
    # Each kind's own keys with their defaults, as the core's reader defines them.
    for line in ("window = 16", "interval = 1s", "event_cycles = 3066616", "utilization = required",
                 "work = 1", "priority = "):
        assert line in text, line
    kinds = json.loads(_cli("workloads", "--json").stdout)
    netperf = next(k for k in kinds if k["name"] == "netperf")
    own = {k["name"]: k["default"] for k in netperf["keys"] if not k["common"]}
    assert own["window"] == "16" and own["rtt"] == "50us"
    # The keys listed are the keys the reader accepts: each validates, one not listed does not.
    for k in kinds:
        names = {key["name"] for key in k["keys"]}
        if k["name"] == "rt-app":
            # An rt-app table only names its file; the file gives threads and the rest.
            assert names == {"file"}, names
        else:
            assert {"threads", "unit"} <= names, k["name"]


def test_listed_keys_are_the_ones_the_reader_accepts(tmp_path):
    import vcpulab

    base = {"name": "k", "duration": "10ms", "host": {"cores_per_socket": 1}, "scheduler": {"name": "rr"}}
    kinds = {k["name"]: k for k in vcpulab.workload_kinds()}
    own = {k["name"] for k in kinds["stress-ng"]["keys"]}
    assert "bogo_op" in own and "window" not in own
    vcpulab.validate({**base, "vm": [{"name": "v", "vcpus": 1, "workload": [{"kind": "stress-ng", "bogo_op": "2ms"}]}]})
    with pytest.raises(vcpulab.ScenarioError, match="window"):
        vcpulab.validate({**base, "vm": [{"name": "v", "vcpus": 1, "workload": [{"kind": "stress-ng", "window": 4}]}]})


def test_run_on_a_kvm_scenario_shows_ple_figures_and_every_workload(kvm_toml):
    text = _fits(_cli("run", str(kvm_toml)))
    summary = json.loads(_cli("run", str(kvm_toml), "--json").stdout)
    bench = next(v for v in summary["vms"] if v["name"] == "bench")
    assert bench["ple"]["exits"] > 0  # the figures below are not all zeros
    ple = _section(text, "KVM pause-loop exits (PLE)")["bench"]
    # VM, PLE exits, yields, yields ok, streaks, median, max
    assert ple[1:7] == [str(bench["ple"][k]) for k in ("exits", "yield_attempts", "yield_successes")] + [
        str(bench["ple"]["streaks"][k]) for k in ("count", "median", "max")]
    # Both of bench's workloads, not only the first.
    assert "0: ebizzy" in text and "1: sysbench-cpu" in text and "records/s" in text and "events/s" in text
    # Raw scheduler counters only with --verbose.
    counters = summary["scheduler_counters"]
    assert counters
    some = next(iter(counters))
    assert f"{some} " not in text
    verbose = _fits(_cli("run", str(kvm_toml), "--verbose"))
    assert f"{some} {counters[some]}" in verbose
    assert "counters    cfs: " in verbose and "counters    cfs: " not in text


def test_run_on_an_ft_scenario_shows_syncs_stopped_time_and_host_threads(ft_toml):
    text = _fits(_cli("run", str(ft_toml)))
    summary = json.loads(_cli("run", str(ft_toml), "--json").stdout)
    ft = next(v for v in summary["vms"] if v["name"] == "eval")["ft"]
    assert ft["syncs"] > 0
    assert "stopped s" in text
    row = _section(text, "fault tolerance (Kemari)")["eval"]
    assert row[1:3] == [str(ft["syncs"]), f"{ft['paused_time_s']:.3f}"]
    rows = _section(text, "host threads")
    helpers = [t for t in summary["host_threads"] if t["helper"]]
    for t in helpers:
        # thread, VM, role, cpu s, wait s, migrations, jobs
        assert rows[t["name"]][2] == t["helper"] and rows[t["name"]][6] == str(t["jobs"]), rows
    assert {t["helper"] for t in helpers} == {"kemari", "drbd"}
    # The host's housekeeping threads (the default noise, one per pCPU): one row of sums.
    kthreads = [t for t in summary["host_threads"] if not t["helper"]]
    assert kthreads and all(t["name"].startswith("kthread-") for t in kthreads)
    row = rows[f"kthread-0..{len(kthreads) - 1}"]
    assert row[2] == "housekeeping" and row[3] == num(sum(t["cpu_time_s"] for t in kthreads)), row
    assert "0: timer-rt" in text and "1: program" in text


def test_run_shows_core_scheduling_forced_idle_only_when_on(tmp_path):
    shipped = (ROOT / "scenarios/reproductions/core-sched/scenario.toml").read_text(encoding="utf-8")
    shipped = shipped.replace('duration = "1s"', 'duration = "200ms"').replace('warmup = "100ms"', 'warmup = "0s"')
    on, off = tmp_path / "on.toml", tmp_path / "off.toml"
    on.write_text(shipped.replace('name = "eevdf"', 'name = "eevdf"\ncore_sched = "vcpu"'), encoding="utf-8")
    off.write_text(shipped, encoding="utf-8")
    text = _fits(_cli("run", str(on)))
    core = json.loads(_cli("run", str(on), "--json").stdout)["host"]["core_sched"]
    assert core["forced_idle_pct"] > 0
    assert f"core sched  forced idle {core['forced_idle_pct']:.1f}% of pCPU time" in text
    assert "core sched" not in _fits(_cli("run", str(off)))


def test_sweep_compare_validate_reproduce_fit(tmp_path, kvm_toml):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'base = "{kvm_toml}"\n\n[set]\nduration = "100ms"\nwarmup = "0s"\n\n'
                     '[axes]\n"kvm.ple_window" = [4096, 32768]\n')
    out = tmp_path / ("a-results-folder-with-a-name-long-enough-to-push-the-line-past-the-width-" * 2)
    _fits(_cli("sweep", str(sweep), "--out", str(out), "--workers", "1", "--no-progress"))
    _fits(_cli("validate", str(kvm_toml)))
    text = _fits(_cli("compare", str(kvm_toml), "--a", "kvm.ple_window=32768", "--b", "kvm.ple_window=4096",
                      "--seeds", "2", "--workers", "1"))
    assert "B-A" in text
    _fits(_cli("reproduce", "hyperv-root"))
    _fits(_cli("reproduce", "--list"))


def test_report_names_reproduction_metrics_and_workload_figures_in_words():
    import vcpulab
    from vcpulab.report import _experiment_metric_name, describe_column

    assert describe_column("vm.vm1.workloads.1.bandwidth_mbps") == ("bandwidth of VM vm1's workload 1", "Mb/s")
    assert describe_column("vm.eval.ft.paused_time_s") == ("time stopped for fault-tolerance syncs of VM eval", "s")
    exps = {e["id"]: e for e in vcpulab.experiments()}
    assert (_experiment_metric_name(exps["kvm-ple-short"], "perf_norm")
            == "throughput of VM bench, relative to variant baseline")
    # No reproduction metric is left as its bare name or another identifier.
    for e in exps.values():
        for m in e.get("metrics") or []:
            words = _experiment_metric_name(e, m["name"])
            assert words != m["name"] and "_" not in words, (e["id"], m["name"], words)
