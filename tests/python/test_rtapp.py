"""rt-app JSON use cases as workloads (`kind = "rt-app"`): the shipped example, timer
semantics against sleep, and refusals through the CLI. The mapping of each event to its
operation is tested in the core (crates/vcpulab-core/src/workload/rtapp.rs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "scenarios" / "examples" / "rt-app.toml"

# No host noise: the timing checks below are arithmetic on the use case's own durations.
ONE_VCPU = """\
name = "rt-app timing"
duration = "{duration}"
seed = 1
[host]
cores_per_socket = 1
[host.noise]
enabled = false
[scheduler]
name = "cfs"
[[vm]]
name = "g"
vcpus = 1
[[vm.workload]]
kind = "rt-app"
file = "{file}"
"""


def scenario(tmp_path: Path, rtapp: str, duration: str = "2s") -> Path:
    (tmp_path / "use-case.json").write_text(rtapp)
    sc = tmp_path / "s.toml"
    sc.write_text(ONE_VCPU.format(duration=duration, file="use-case.json"))
    return sc


def workloads(res) -> dict:
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    return {w["kind"]: w for vm in summary["vms"] for w in vm["workloads"]}


def test_the_example_runs_deterministically():
    a = run_cli("run", str(EXAMPLE), "--json")
    b = run_cli("run", str(EXAMPLE), "--json")
    assert a.stdout == b.stdout
    w = workloads(a)
    assert set(w) == {"rt-app:small", "rt-app:video", "rt-app:locker", "stress-ng"}
    assert (w["rt-app:small"]["threads"], w["rt-app:locker"]["threads"]) == (2, 2)
    # "small": two instances each woken every 16 ms by its own timer, 1 ms of work each
    # time: 125 loops/s unless the guest falls a whole period behind
    assert w["rt-app:small"]["throughput"] == pytest.approx(125, rel=0.02)
    # "video": 5 light and 5 heavy frames on a 10 ms timer, a loop per 100 ms on a vCPU of
    # its own; here vCPU 0 shares the pCPUs (6 vCPUs on 2), heavy frames (7 ms of work)
    # end late and its relative timer restarts from there, so loops take longer
    assert 0 < w["rt-app:video"]["throughput"] < 10
    assert w["rt-app:locker"]["throughput"] > 0
    other_seed = run_cli("run", str(EXAMPLE), "--json", "--seed", "2")
    assert other_seed.returncode == 0 and other_seed.stdout != a.stdout


def test_a_timer_keeps_its_period_where_sleep_adds_the_run(tmp_path):
    w = workloads(run_cli("run", str(scenario(tmp_path, """{
        "tasks": {
            "timed": { "run": 1000, "timer": { "ref": "unique", "period": 10000 } },
            "slept": { "run": 1000, "sleep": 10000 }
        }
    }""")), "--json"))
    assert w["rt-app:timed"]["throughput"] == pytest.approx(100, rel=0.01)
    assert w["rt-app:slept"]["throughput"] == pytest.approx(1000 / 11, rel=0.01)


@pytest.mark.parametrize("mode, loops_per_s", [
    # rt-app.c: late, a relative timer restarts from now; an absolute one catches up.
    # One loop: a 25 ms frame then 7 frames of 1 ms on a 10 ms timer. Absolute: 8 periods,
    # 80 ms. Relative: the late frame restarts the timer at its end, 25 + 7 x 10 = 95 ms.
    ("absolute", 1000 / 80),
    ("relative", 1000 / 95),
])
def test_a_late_timer_catches_up_only_when_absolute(tmp_path, mode, loops_per_s):
    rtapp = """{ "tasks": { "t": { "phases": {
        "heavy": { "run": 25000, "timer": { "ref": "unique", "period": 10000, "mode": "%s" } },
        "light": { "loop": 7, "run": 1000, "timer": { "ref": "unique", "period": 10000, "mode": "%s" } }
    } } } }""" % (mode, mode)
    w = workloads(run_cli("run", str(scenario(tmp_path, rtapp, "4s")), "--json"))
    assert w["rt-app:t"]["throughput"] == pytest.approx(loops_per_s, rel=0.03)


def test_refusals_name_the_file_task_and_event(tmp_path):
    sc = scenario(tmp_path, """{
        /* the tutorial's example 5 uses condition variables */
        "tasks": { "thread1": { "lock": "mutex", "wait": { "ref": "queue", "mutex": "mutex" },
                                "unlock": "mutex", "run": 10000 } }
    }""")
    res = run_cli("run", str(sc))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"{sc}: vm[0].workload[0].file: {tmp_path / 'use-case.json'}: task \"thread1\", \"wait\"" in res.stderr
    assert "only run events may come between lock \"mutex\" and its unlock" in res.stderr
    (tmp_path / "use-case.json").write_text('{"tasks": {"t": {"barrier": "b"}}}')
    res = run_cli("run", str(sc))
    assert res.returncode == 2 and "the barrier event has no counterpart in vcpulab's guest model" in res.stderr
    assert "events that map: run, sleep, timer, lock/unlock around runs" in res.stderr
    sc.write_text(sc.read_text().replace('file = "use-case.json"', 'file = "nope.json"'))
    res = run_cli("run", str(sc))
    assert res.returncode == 2 and "cannot read the rt-app file" in res.stderr and "nope.json" in res.stderr
