"""Perfetto traces read back with plain json, and HTML reports rendered in headless Chromium."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import run_cli, run_command

REPO = Path(__file__).resolve().parents[2]
OVERCOMMIT = REPO / "scenarios" / "examples" / "overcommit.toml"


# Pause-loop exits: an overcommitted VM with a ticket lock under cfs with [kvm] PLE on.
PLE_SCENARIO = """\
name = "ple-overcommit"
duration = "300ms"
warmup = "50ms"
seed = 5
[host]
cores_per_socket = 2
[host.noise]
enabled = false  # the reader below knows vCPUs only, not the housekeeping threads
[scheduler]
name = "cfs"
[kvm]
ple = true
[[vm]]
name = "locks"
vcpus = 4
[[vm.workload]]
kind = "program"
threads = 4
ops = [
  { op = "compute", duration = { dist = "exp", mean = "20us" } },
  { op = "lock", lock = "l", kind = "ticket", hold = "5us" },
]
[[vm]]
name = "hog"
vcpus = 2
[[vm.workload]]
kind = "stress-ng"
threads = 2
"""


def check_trace(trace: dict, summary: dict) -> dict:
    """An independent reader: per-pCPU slices do not overlap; each vCPU's run time adds up
    to the summary's cpu_time_s (the trace window must be the measured interval)."""
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    per_cpu: dict[int, list[tuple[float, float]]] = defaultdict(list)
    per_vcpu: dict[tuple[str, int], float] = defaultdict(float)
    instants: dict[str, int] = defaultdict(int)
    for e in events:
        if e["ph"] == "X":
            assert e["pid"] == 0 and names[(0, e["tid"])] == f"pCPU {e['tid']}"
            assert e["name"] == f"{e['args']['vm']}/vcpu{e['args']['vcpu']}"
            assert e["dur"] > 0
            per_cpu[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
            per_vcpu[(e["args"]["vm"], e["args"]["vcpu"])] += e["dur"]
        elif e["ph"] == "i":
            assert e["pid"] == 1 and names[(1, e["tid"])] == f"{e['args']['vm']}/vcpu{e['args']['vcpu']}"
            instants[e["name"]] += 1
    assert len(per_cpu) <= summary["host"]["pcpus"]
    for cpu, slices in per_cpu.items():
        slices.sort()
        for (s0, e0), (s1, _) in zip(slices, slices[1:]):
            assert e0 <= s1 + 1e-6, f"pCPU {cpu}: slices overlap: ends {e0} us, next starts {s1} us"
    for vm in summary["vms"]:
        for v in vm["vcpus"]:
            traced_s = per_vcpu.get((vm["name"], v["index"]), 0.0) / 1e6
            assert traced_s == pytest.approx(v["cpu_time_s"], abs=1e-6), (vm["name"], v["index"])
    return instants


def test_trace_reads_back(tmp_path):
    import vcpulab

    from vcpulab.sweep import load_toml

    sc = load_toml(str(OVERCOMMIT))
    sc.update(duration="1s", warmup="200ms")
    sc["vm"][1].update(vcpus=6)
    sc["vm"][1]["workload"][0]["threads"] = 6
    for sched in ("rr", "hyperv-root"):
        sc["scheduler"] = {"name": sched}
        tr = vcpulab.trace(sc, seed=3, window=("200ms", "1s"))
        assert tr.result.summary == vcpulab.run(sc, seed=3).summary  # tracing changes nothing
        instants = check_trace(json.loads(tr.text), tr.result.summary)
        assert instants["wake"] > 0 and instants["halt"] > 0 and instants["preempted"] > 0
        if sched == "hyperv-root":
            assert instants["migrate"] > 0


def test_trace_of_a_ple_scenario_reads_back(tmp_path):
    sc = tmp_path / "ple.toml"
    sc.write_text(PLE_SCENARIO)
    out = tmp_path / "ple-trace.json"
    res = run_cli("trace", str(sc), "--from", "50ms", "--out", str(out))
    assert res.returncode == 0, res.stderr
    summary = json.loads(run_cli("run", str(sc), "--json").stdout)
    instants = check_trace(json.loads(out.read_text()), summary)
    ple = summary["vms"][0]["ple"]
    assert ple["exits"] > 0 and instants["ple_exit"] > 0 and instants["yield_to"] > 0
    # every PLE exit and yield of the measured interval is in the trace
    assert instants["ple_exit"] == sum(v["ple_exits"] for vm in summary["vms"] for v in vm["vcpus"])
    assert instants["yield_to"] == ple["yield_attempts"]


def test_trace_cli_window_and_run_trace(tmp_path):
    out = tmp_path / "t.json"
    res = run_cli("trace", str(OVERCOMMIT), "--seed", "2", "--from", "1s", "--to", "1.25s", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "run slices" in res.stderr and "window 1 s to 1.25 s" in res.stderr
    events = json.loads(out.read_text())["traceEvents"]
    timed = [e for e in events if e["ph"] in ("X", "i")]
    assert timed and all(1e6 - 1e-6 <= e["ts"] and e["ts"] + e.get("dur", 0) <= 1.25e6 + 1e-6 for e in timed)
    # run --trace: the summary is the plain run's, and the whole run's trace adds up
    sc = tmp_path / "s.toml"
    sc.write_text(OVERCOMMIT.read_text().replace('warmup = "500ms"', 'warmup = "0s"').replace('duration = "5s"', 'duration = "500ms"'))
    t2 = tmp_path / "run.json"
    a = run_cli("run", str(sc), "--json", "--trace", str(t2))
    b = run_cli("run", str(sc), "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    check_trace(json.loads(t2.read_text()), json.loads(a.stdout))
    for bad in (["--from", "1 sec"], ["--from", "2s", "--to", "1s"], ["--from", "5s", "--to", "6s"]):
        res = run_cli("trace", str(sc), *bad, "--out", str(tmp_path / "x.json"))
        assert res.returncode == 2 and "vcpulab: error:" in res.stderr
        if bad[1] == "5s":
            assert "after the scenario's end (0.5 s)" in res.stderr, res.stderr


# ------------------------------------------------------------------------ reports


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _dump_dom(chrome: str, page: Path, tmp_path: Path, screenshot: Path | None = None) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", "--disable-sync",
             f"--user-data-dir={tmp_path / 'chrome-profile'}", "--window-size=1200,1600"]
    if screenshot is not None:
        run_command([chrome, *flags, f"--screenshot={screenshot}", page.as_uri()],
                    capture_output=True, timeout=120, check=False)
    res = run_command([chrome, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.fixture(scope="module")
def report_dirs(tmp_path_factory) -> dict[str, Path]:
    """A small sweep, a single run and a reproduction, each with its report.html."""
    tmp = tmp_path_factory.mktemp("reports")
    (tmp / "overcommit.toml").write_text(OVERCOMMIT.read_text())
    (tmp / "sweep.toml").write_text("""
base = "overcommit.toml"
[set]
duration = "500ms"
warmup = "50ms"
[axes]
"scheduler.name" = ["rr", "hyperv-root"]
seed = { range = [1, 4] }
[zip]
"vm[1].vcpus" = [2, 4, 8]
"vm[1].workload[0].threads" = [2, 4, 8]
""")
    (tmp / "ple.toml").write_text(PLE_SCENARIO)
    dirs = {"sweep": tmp / "sweep", "run": tmp / "run", "ple": tmp / "ple", "reproduce": tmp / "repro"}
    assert run_cli("sweep", str(tmp / "sweep.toml"), "--out", str(dirs["sweep"])).returncode == 0
    assert run_cli("run", str(OVERCOMMIT), "--out", str(dirs["run"])).returncode == 0
    assert run_cli("run", str(tmp / "ple.toml"), "--out", str(dirs["ple"])).returncode == 0
    # One quick experiment; `--all` runs them all (minutes) and is exercised by users' main job.
    r = run_cli("reproduce", "hyperv-root", "--out", str(dirs["reproduce"]))
    assert r.returncode == 0, r.stderr
    rows = json.loads((dirs["reproduce"] / "reproduce.json").read_text())["rows"]
    assert rows and {"experiment", "case", "paper", "sim", "ratio"} <= set(rows[0])
    for d in dirs.values():
        res = run_cli("report", str(d))
        assert res.returncode == 0, res.stderr
        assert (d / "report.html").exists()
    return dirs


def test_report_pages_are_self_contained(report_dirs):
    for kind, d in report_dirs.items():
        page = (d / "report.html").read_text(encoding="utf-8")
        figures = page.count('<figure class="plot">')
        assert figures >= {"sweep": 8, "run": 4, "ple": 4, "reproduce": 1}[kind], kind
        # nothing is fetched: no src/href to the network, plots are data URIs
        assert not re.search(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', page), kind
        assert page.count('src="data:image/svg+xml;base64,') == figures
    sweep_page = (report_dirs["sweep"] / "report.html").read_text()
    assert "p99 latency of VM web (ms) vs vCPUs of vm[1]" in sweep_page and "95% CI" in sweep_page
    assert "CPU share per VM" in (report_dirs["run"] / "report.html").read_text()
    assert "PLE exit streaks" in (report_dirs["ple"] / "report.html").read_text()
    repro_page = (report_dirs["reproduce"] / "report.html").read_text()
    assert "paper vs vcpulab" in repro_page
    # The chart is titled by what the metric reads, in words, not by its name (issue 30).
    assert "hyperv-root: throughput of VM vm1, paper vs vcpulab" in repro_page
    assert "sysbench_events_per_s, paper vs" not in repro_page
    assert 'id="claims"' in repro_page and " claims:</b>" in repro_page
    assert repro_page.index('id="claims"') < repro_page.index('<figure class="plot">')
    assert "whiskers: 95% bootstrap CI" in repro_page
    res = run_cli("report", str(report_dirs["sweep"] / "runs"))
    assert res.returncode == 2 and "nothing to report" in res.stderr


def test_report_renders_in_headless_chromium(report_dirs, tmp_path):
    chrome = _chromium()
    if chrome is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium); the page was not rendered")
    for kind, d in report_dirs.items():
        page = d / "report.html"
        shot = d / "report.png" if kind == "sweep" else None
        dom = _dump_dom(chrome, page, tmp_path / kind, screenshot=shot)
        body = re.search(r"<body([^>]*)>", dom)
        assert body, dom[:500]
        attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', body.group(1)))
        figures = dom.count('<figure class="plot">')
        assert figures > 0
        # the page's load handler ran (no script error) and every plot image decoded
        # with a non-empty size
        assert attrs.get("errors") == "0", (kind, attrs)
        assert attrs.get("plots") == str(figures), (kind, attrs)
        assert attrs.get("rendered") == str(figures), (kind, attrs)
        assert 'class="plot broken"' not in dom
        if shot is not None:
            assert shot.exists() and shot.stat().st_size > 20_000


# ------------------------------------------------------- reproduce: claims and whiskers


def _claim(exp, cid, verdict, value, lo, hi, thr):
    return {"experiment": exp, "claim": cid, "text": f"text of {cid}", "source": "seed.md §4",
            "premise": "the host is overcommitted", "verdict": verdict, "value": value, "ci_low": lo,
            "ci_high": hi, "threshold": thr, "seeds": 10, "detail": f"a / b: {value} [{lo}, {hi}] > {thr}"}


SYNTH_ROWS = [
    {"experiment": "exp-a", "case": "base", "metric": "ops", "unit": "ops/s", "paper": 100.0, "sim": 90.0,
     "ratio": 0.9, "seeds": 10, "ci_low": 80.0, "ci_high": 101.0, "regimes": None},
    {"experiment": "exp-a", "case": "fix", "metric": "ops", "unit": "ops/s", "paper": 150.0, "sim": 170.0,
     "ratio": 1.13, "seeds": 10, "ci_low": 160.0, "ci_high": 185.0,
     "regimes": {"low_seeds": 4, "low_mean": 2500.0, "high_seeds": 6, "high_mean": 22000.0, "d": 5.1,
                 "text": "4 of 10 seeds in a collapsed regime"}},
    {"experiment": "exp-a", "case": "none", "metric": "ops", "unit": "ops/s", "paper": 120.0, "sim": 110.0,
     "ratio": 0.92, "seeds": 10, "ci_low": None, "ci_high": None, "regimes": None},
]
SYNTH_CLAIMS = [
    _claim("exp-a", "gain-holds", "holds", 1.9, 1.7, 2.1, 1.0),
    _claim("exp-a", "gain-fails", "fails", 0.8, 0.7, 0.9, 1.0),
    _claim("exp-a", "gain-undecided", "undecided", 1.02, 0.95, 1.1, 1.0),
    _claim("exp-a", "order-holds", "holds", 0.2, 0.1, 0.3, 0.0),
]


def test_reproduce_report_leads_with_failed_and_undecided_claims(tmp_path):
    from vcpulab import report

    (tmp_path / "reproduce.json").write_text(json.dumps(
        {"experiments": [{"id": "exp-a", "title": "A"}], "rows": SYNTH_ROWS, "claims": SYNTH_CLAIMS}))
    page = report.render(str(tmp_path))
    assert "4 claims:" in page and "2 hold" in page and "1 fail" in page and "1 undecided" in page
    # the claims block comes before the first chart; failed, then undecided, then holding
    pos = {c["claim"]: page.index(f"<code>{c['claim']}</code>") for c in SYNTH_CLAIMS}
    assert pos["gain-fails"] < pos["gain-undecided"] < pos["gain-holds"] and pos["gain-undecided"] < pos["order-holds"]
    assert pos["order-holds"] < page.index('<figure class="plot">')
    assert page.index("<details>") < pos["gain-holds"]  # holding claims are collapsed
    # every claim carries a visible verdict (text and a coloured class), with its interval and threshold
    for c in SYNTH_CLAIMS:
        row = re.search(rf'<tr class="v-row-{c["verdict"]}">(?:(?!</tr>).)*<code>{c["claim"]}</code>(?:(?!</tr>).)*</tr>',
                        page)
        assert row, c["claim"]
        assert f'class="verdict v-{c["verdict"]}"' in row.group(0)
        assert f"[{c['ci_low']:.4g}, {c['ci_high']:.4g}]" in row.group(0) and f"&gt; {c['threshold']:.4g}" in row.group(0)
    assert ".v-fails" in page and ".v-undecided" in page  # the colours are in the page's own CSS
    assert "4 of 10 seeds in a collapsed regime" in page
    assert not re.search(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', page)


def test_reproduce_bars_have_ci_whiskers(tmp_path):
    from vcpulab import report

    d = report._bar_data(SYNTH_ROWS)
    assert d["sim"] == [90.0, 170.0, 110.0]
    assert d["whiskers"] == [(0, 80.0, 101.0), (1, 160.0, 185.0)]  # the row without an interval has none
    (tmp_path / "reproduce.json").write_text(json.dumps({"experiments": [], "rows": SYNTH_ROWS, "claims": []}))
    page = report.render(str(tmp_path))
    assert "whiskers: 95% bootstrap CI of vcpulab&#x27;s mean over seeds (2 of 3 bars have one)" in page
    svg = base64.b64decode(re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)).decode()
    assert "vcpulab 95% CI" in svg  # the whiskers' legend entry is drawn


def test_reproduce_report_reads_an_old_reproduce_json(tmp_path):
    """Rows without ci/seeds fields and no "claims" (and the older bare list) still render."""
    from vcpulab import report

    old = [{k: r[k] for k in ("experiment", "case", "metric", "unit", "paper", "sim", "ratio")} for r in SYNTH_ROWS]
    for doc in ({"experiments": [{"id": "exp-a", "title": "A", "tolerance": 0.15}], "rows": old}, old):
        (tmp_path / "reproduce.json").write_text(json.dumps(doc))
        page = report.render(str(tmp_path))
        assert "paper vs vcpulab" in page and 'id="claims"' not in page
        assert "no confidence intervals in this reproduce.json" in page
