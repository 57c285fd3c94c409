"""The Python API: run/validate/schedulers/experiments/reproduce and the DataFrames."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pandas as pd
import pytest

import vcpulab

VM_COLUMNS = ["name", "vcpu_count", "weight", "cpu_time_s", "cpu_share", "wait_time_s", "halted_time_s",
              "spin_time_s", "throughput", "throughput_unit", "latency_count", "latency_mean_ms",
              "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms", "steal_pct_mean",
              "steal_pct_p95", "steal_pct_window_s"]
VCPU_COLUMNS = ["vm", "index", "cpu_time_s", "wait_time_s", "halted_time_s", "spin_time_s", "overhead_time_s",
                "dispatches", "preemptions", "halts", "migrations_total", "migrations_smt_sibling",
                "migrations_same_socket", "migrations_other_socket", "migrations_other_numa",
                "ple_exits", "yield_attempts", "yield_successes", "pv_waits", "pv_kicks",
                "ple_streaks", "ple_streak_median", "ple_streak_max", "boost_to_run_mean_ms",
                "boost_to_run_max_ms"]


def test_exports():
    assert isinstance(vcpulab.__version__, str) and vcpulab.__version__
    assert issubclass(vcpulab.ScenarioError, ValueError)
    assert issubclass(vcpulab.SimulationError, RuntimeError)
    assert issubclass(vcpulab.NotFoundError, LookupError)


def test_public_annotations_resolve_at_run_time():
    """typing.get_type_hints (Sphinx, typeguard) must resolve every public function's
    annotations: the names they use are imported at run time, not only for type checkers."""
    import typing

    import pandas as pd  # frames are pandas objects; pandas itself is imported lazily

    for name in vcpulab.__all__:
        obj = getattr(vcpulab, name)
        if callable(obj) and not isinstance(obj, type):
            typing.get_type_hints(obj, localns={"pd": pd})
    assert vcpulab.api.ScenarioLike is not None and vcpulab.tracing.TimeLike is not None


def test_run_path_and_frames(program_toml: Path):
    res = vcpulab.run(program_toml)
    assert isinstance(res, vcpulab.Result)
    assert res.summary == json.loads(res.to_json())
    vms = res.vms()
    assert isinstance(vms, pd.DataFrame)
    assert list(vms.columns) == VM_COLUMNS
    assert list(vms["name"]) == ["app", "hog"]
    vcpus = res.vcpus()
    assert list(vcpus.columns) == VCPU_COLUMNS
    assert len(vcpus) == 8
    assert list(vcpus.groupby("vm").size()) == [4, 4]
    wl = res.workloads()
    assert {"vm", "workload", "kind", "threads", "completed", "throughput", "throughput_unit"} <= set(wl.columns)
    assert list(wl["kind"]) == ["program", "stress-ng"]
    # the frames agree with the summary
    for vm, row in zip(res.summary["vms"], vms.itertuples()):
        assert row.cpu_time_s == vm["cpu_time_s"]
        assert sum(v["cpu_time_s"] for v in vm["vcpus"]) == pytest.approx(row.cpu_time_s)


def test_run_str_path(program_toml: Path):
    assert vcpulab.run(str(program_toml)).to_json() == vcpulab.run(program_toml).to_json()


def test_dict_input_matches_file(program_toml: Path, program: dict):
    a = vcpulab.run(program)
    b = vcpulab.run(program_toml)
    assert a.summary == b.summary


def test_seed_override(program: dict):
    a = vcpulab.run(program, seed=11)
    assert a.summary["seed"] == 11
    assert a.to_json() == vcpulab.run(program, seed=11).to_json()
    assert a.to_json() != vcpulab.run(program).to_json()


def test_dict_errors_say_dict(program: dict):
    bad = copy.deepcopy(program)
    bad["vm"][0]["vcpus"] = 0
    with pytest.raises(vcpulab.ScenarioError) as ei:
        vcpulab.run(bad)
    assert str(ei.value).startswith("<dict>: vm[0].vcpus: ")

    bad = copy.deepcopy(program)
    bad["vm"][1]["colour"] = "red"
    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: vm\[1\]\.colour: unknown key"):
        vcpulab.validate(bad)

    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: "):
        vcpulab.run({"duration": object()})


def test_dict_values_json_cannot_carry_are_named_by_key_path(program: dict):
    import datetime

    bad = copy.deepcopy(program)
    bad["vm"][1]["weight"] = float("nan")
    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: vm\[1\]\.weight: nan is not a finite number"):
        vcpulab.run(bad)
    bad["vm"][1]["weight"] = datetime.date(2026, 1, 1)
    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: vm\[1\]\.weight: a value of type date cannot be sent"):
        vcpulab.validate(bad)
    # json.dumps takes int keys: the NaN is still the one named.
    bad["vm"][1]["weight"] = {1: float("inf")}
    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: vm\[1\]\.weight\.1: inf is not a finite number"):
        vcpulab.run(bad)
    # A circular reference is named, not a RecursionError; a list used twice is not circular.
    bad = copy.deepcopy(program)
    bad["vm"][0]["x"] = bad
    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: vm\[0\]\.x: refers back"):
        vcpulab.run(bad)
    shared = copy.deepcopy(program)
    shared["vm"][1]["colour"] = shared["vm"][0]["workload"]
    with pytest.raises(vcpulab.ScenarioError, match=r"^<dict>: vm\[1\]\.colour: unknown key"):
        vcpulab.run(shared)


def test_a_file_with_carriage_return_line_ends_reads_as_before(program_toml: Path, tmp_path: Path):
    text = program_toml.read_text()
    for name, ending in (("crlf.toml", "\r\n"), ("cr.toml", "\r")):
        path = tmp_path / name
        path.write_bytes(text.replace("\n", ending).encode())
        assert vcpulab.validate(path)["name"] == "program-mix"


@pytest.mark.parametrize("seed, exc", [(-1, ValueError), (2**63, ValueError), (2**64, ValueError),
                                       (1.5, TypeError), (True, TypeError), ("7", TypeError)])
def test_seed_overrides_outside_the_scenario_range_are_refused(program: dict, seed, exc):
    with pytest.raises(exc, match="seed"):
        vcpulab.run(program, seed=seed)
    with pytest.raises(exc, match="seed"):
        vcpulab.trace(program, seed=seed)
    with pytest.raises(exc, match="seed"):
        vcpulab.reproduce(["hyperv-root"], seed=seed)


def test_the_largest_seed_is_accepted(program: dict):
    assert vcpulab.run(program, seed=2**63 - 1).summary["seed"] == 2**63 - 1


def test_validate_description(program_toml: Path):
    d = vcpulab.validate(program_toml)
    assert d["name"] == "program-mix"
    assert d["scheduler"] == "rr"
    assert d["pcpus"] == 8
    assert [v["name"] for v in d["vms"]] == ["app", "hog"]


def test_validate_unicode_names(program: dict):
    program["name"] = "zero\u200bwidth \u00e9t\u00e9 \U0001f600"
    assert vcpulab.validate(program)["name"] == program["name"]
    assert vcpulab.run(program).summary["scenario"] == program["name"]


def test_missing_file_is_oserror(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        vcpulab.run(tmp_path / "nope.toml")


def test_wrong_type():
    with pytest.raises(TypeError):
        vcpulab.run(42)  # type: ignore[arg-type]


def test_schedulers_and_experiments():
    names = [s["name"] for s in vcpulab.schedulers()]
    assert "rr" in names and "hyperv-root" in names
    exps = vcpulab.experiments()
    hv = next(e for e in exps if e["id"] == "hyperv-root")
    assert {"id", "title", "source", "notes", "metric", "unit", "value", "tolerance", "cases"} <= set(hv)
    assert len(hv["cases"]) == 9
    assert "[scheduler]" in vcpulab.experiment_scenario("hyperv-root")


def test_reproduce_rows_and_frame():
    rows = vcpulab.reproduce(["hyperv-root"])
    assert len(rows) == 9
    keys = {"experiment", "case", "metric", "unit", "paper", "sim", "ratio", "seeds", "ci_low", "ci_high", "regimes"}
    assert all(set(r) == keys for r in rows)
    for r in rows:
        assert math.isclose(r["ratio"], r["sim"] / r["paper"])
    df = vcpulab.reproduce_frame("hyperv-root")
    assert list(df.columns) == ["experiment", "case", "metric", "unit", "paper", "sim", "ratio", "seeds", "ci_low",
                                "ci_high"]
    assert list(df["case"]) == [r["case"] for r in rows]
    assert vcpulab.reproduce(["hyperv-root"]) == rows  # deterministic


def test_reproduce_unknown():
    with pytest.raises(vcpulab.NotFoundError, match="hyperv-root"):
        vcpulab.reproduce(["nope"])


def test_import_is_light():
    """`import vcpulab` (and the CLI module) must not import pandas or tqdm."""
    import sys

    from conftest import run_command

    code = "import sys, vcpulab, vcpulab.cli; print(sorted(m for m in ('pandas', 'tqdm') if m in sys.modules))"
    out = run_command([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"


def test_native_stub_matches_module():
    """python/vcpulab/_native.pyi declares exactly what the extension exports."""
    import ast
    import inspect

    from vcpulab import _native

    stub = Path(vcpulab.__file__).with_name("_native.pyi")
    tree = ast.parse(stub.read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign)}  # constants
    exported = {n for n in dir(_native) if not n.startswith("_")}
    assert declared == exported
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            sig = inspect.signature(getattr(_native, node.name))
            assert list(sig.parameters) == [a.arg for a in node.args.args], node.name
    assert (stub.parent / "py.typed").exists()


def _io_scenario(path: str) -> dict:
    vms = [{"name": "vm1", "vcpus": 1, "workload": [{"kind": "netperf"}, {"kind": "ping", "interval": "5ms"}]}]
    host = {"cores_per_socket": 2}
    if path == "split":
        host |= {"io_path": "split", "io_driver": "dom0"}
        vms.insert(0, {"name": "dom0", "vcpus": 1, "workload": [{"kind": "netback"}]})
    return {"name": f"io-{path}", "duration": "2s", "host": host, "scheduler": {"name": "cfs"}, "vm": vms}


def test_io_path_bandwidth_and_latency_columns():
    direct = vcpulab.run(_io_scenario("direct")).workloads().set_index(["vm", "kind"])
    split = vcpulab.run(_io_scenario("split")).workloads().set_index(["vm", "kind"])
    assert direct.loc[("vm1", "netperf"), "bandwidth_mbps"] > 1000
    # The backend pass costs bandwidth and adds latency.
    assert split.loc[("vm1", "netperf"), "bandwidth_mbps"] < direct.loc[("vm1", "netperf"), "bandwidth_mbps"]
    assert split.loc[("vm1", "ping"), "latency_mean_ms"] > direct.loc[("vm1", "ping"), "latency_mean_ms"]
    bad = _io_scenario("split")
    bad["host"]["io_driver"] = "vm1"
    with pytest.raises(vcpulab.ScenarioError, match=r"host\.io_driver.*runs no netback"):
        vcpulab.run(bad)


def _taken_scenario(latency: str | None, busy: bool) -> dict:
    """One pCPU; a VM serving a closed loop (1 ms think) with 200 us of work per request,
    and with `busy` a second VM that computes without end beside it."""
    arrivals = {"process": "closed", "clients": 1, "think": "1ms"}
    if latency is not None:
        arrivals["latency"] = latency
    vms = [{"name": "server", "vcpus": 1,
            "workload": [{"kind": "program", "ops": [{"op": "serve", "service": "200us"}], "arrivals": arrivals}]}]
    if busy:
        vms.append({"name": "hog", "vcpus": 1, "workload": [{"kind": "program", "ops": [{"op": "compute", "duration": "10us"}]}]})
    return {"name": "taken", "duration": "1s", "host": {"cores_per_socket": 1}, "scheduler": {"name": "eevdf"}, "vm": vms}


def test_latency_to_the_take_leaves_out_the_service():
    """`arrivals.latency = "taken"` ends a request's latency when a guest thread takes it
    (the KVM harness's wake-up measure), not at its response: on an idle host it is the
    wake-up alone, the 200 us of service only in the default; beside a CPU hog it is the
    wait for the pCPU, and the response adds the service (and its preemptions) on top."""
    def lat(latency: str | None, busy: bool, stat: str) -> float:
        s = vcpulab.run(_taken_scenario(latency, busy)).summary
        return s["vms"][0]["workloads"][0]["latency_ms"][stat]

    assert lat(None, False, "p50") == lat("response", False, "p50") >= 0.2
    assert lat("taken", False, "p50") < 0.01
    # Beside the hog: the same requests, the service (0.2 ms) apart on average.
    taken, response = lat("taken", True, "mean"), lat("response", True, "mean")
    assert taken > 0.05 and response >= taken + 0.19, (taken, response)
    with pytest.raises(vcpulab.ScenarioError, match=r'arrivals\.latency: unknown latency end "served".*"response".*"taken"'):
        vcpulab.run(_taken_scenario("served", False))


def _held_scenario(hold: str | None) -> dict:
    """Two pCPUs; a VM serving a closed loop through a split-driver backend host thread,
    its thread computing 1 ms after each response (so the backend has the other pCPU)."""
    respond = {"op": "respond"} if hold is None else {"op": "respond", "hold": hold}
    ops = [{"op": "wait_request"}, {"op": "compute", "duration": "10us"}, respond, {"op": "compute", "duration": "1ms"}]
    return {"name": "held", "duration": "1s", "host": {"cores_per_socket": 2, "io_path": "split", "io_driver": "backend"},
            "scheduler": {"name": "eevdf"},
            "vm": [{"name": "server", "vcpus": 1,
                    "workload": [{"kind": "program", "ops": ops,
                                  "arrivals": {"process": "closed", "clients": 1, "think": "5ms"}}]}],
            "host_thread": [{"name": "backend", "workload": {"kind": "netback", "per_packet": "5us", "per_kib": "0ns"}}]}


def test_a_held_response_keeps_the_backend_waiting_for_its_sender():
    """`respond` with `hold`: the backend, woken by the send, waits for the sender to run
    `hold` more before it can take the response (a sender that wakes its receiver before
    it unlocks). The response leaves no sooner than the hold after the send; without
    `hold` it leaves after the backend's pass."""
    def p50(hold: str | None) -> float:
        s = vcpulab.run(_held_scenario(hold)).summary
        return s["vms"][0]["workloads"][0]["latency_ms"]["p50"]

    plain, held = p50(None), p50("200us")
    assert plain < 0.1, plain
    assert held >= 0.2 + 0.01, held
    with pytest.raises(vcpulab.ScenarioError, match=r"hold"):
        vcpulab.run(_held_scenario("soon"))
    # Held responses are matched to their senders in the order sent: one backend thread.
    dom0 = _held_scenario("200us")
    dom0["host"]["io_driver"] = "dom0"
    dom0["host_thread"] = []
    dom0["vm"].insert(0, {"name": "dom0", "vcpus": 2, "workload": [{"kind": "netback"}]})
    with pytest.raises(vcpulab.ScenarioError, match=r'vm\[1\]\.workload\[0\]\.ops: a respond with hold needs a backend '
                                                  r'with one thread; the netback of io_driver "dom0" has 2'):
        vcpulab.run(dom0)


def test_a_signal_handler_s_exception_ends_a_run_at_once():
    """The extension releases the GIL for a run but lets the interpreter run its signal
    handlers every few ms of it: an exception a handler raises (KeyboardInterrupt on
    Ctrl-C) ends the run at once and propagates. Uninterrupted, this run takes ~20 s."""
    import os
    import signal
    import threading
    import time

    class Stopped(Exception):
        pass

    def raise_stopped(signum, frame):
        raise Stopped()

    scenario = {
        "duration": "30000s",
        "host": {"cores_per_socket": 4},
        "scheduler": {"name": "rr", "slice": "1ms"},
        "vm": [{"name": "g", "vcpus": 16, "workload": [{"kind": "program", "threads": 16, "ops": [
            {"op": "sleep", "duration": {"dist": "exp", "mean": "1ms"}},
            {"op": "compute", "duration": {"dist": "exp", "mean": "2ms"}},
        ]}]}],
    }
    previous = signal.signal(signal.SIGUSR1, raise_stopped)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        start = time.monotonic()
        timer.start()
        with pytest.raises(Stopped):
            vcpulab.run(scenario)
        elapsed = time.monotonic() - start
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert elapsed < 5.0, f"the run went on for {elapsed:.1f} s after the signal"


def test_an_interpreter_exits_cleanly_with_a_run_in_a_daemon_thread():
    """Only a run on the main thread takes the GIL back during the run (to run signal
    handlers): a daemon thread that asked for it while the interpreter exits would be
    ended by pthread_exit, unwinding through the engine (an abort, status 134)."""
    import sys

    from conftest import run_command

    code = """
import threading, time, vcpulab
scenario = {"duration": "30000s", "host": {"cores_per_socket": 4}, "scheduler": {"name": "rr"},
            "vm": [{"name": "g", "vcpus": 16, "workload": [{"kind": "program", "threads": 16, "ops": [
                {"op": "sleep", "duration": {"dist": "exp", "mean": "1ms"}},
                {"op": "compute", "duration": {"dist": "exp", "mean": "2ms"}}]}]}]}
threading.Thread(target=vcpulab.run, args=(scenario,), daemon=True).start()
time.sleep(0.5)
print("exiting", flush=True)
"""
    p = run_command([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, "exiting\n"), p.stderr
