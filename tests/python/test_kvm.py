"""`vcpulab kvm`: the real-KVM harness on short runs (0.2 s, 1 repetition).

Tests that need KVM skip with the reason when /dev/kvm is unusable; the host-thread
fallback is tested everywhere the harness builds (Linux x86-64)."""

from __future__ import annotations

import json
import os
import platform
import sys

import pytest

import vcpulab
from vcpulab import _native, cli, kvm

KVM_OK, KVM_WHY = kvm.kvm_available()
needs_kvm = pytest.mark.skipif(not KVM_OK, reason=f"needs KVM: {KVM_WHY}")
needs_linux = pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64",
                                 reason="the harness is built for Linux x86-64 only")
is_root = hasattr(os, "geteuid") and os.geteuid() == 0

PROGRAMS = {
    "compute": [{"op": "compute", "duration": "10us"}],
    "tas": [{"op": "compute", "duration": "30ns"}, {"op": "lock", "lock": "l", "kind": "tas", "hold": "12ns"}],
    "ticket": [{"op": "compute", "duration": "30ns"}, {"op": "lock", "lock": "l", "kind": "ticket", "hold": "12ns"}],
    "barrier": [{"op": "compute", "duration": "30ns"}, {"op": "ipi", "targets": "all"}],
    "wake": [{"op": "io", "latency": {"dist": "uniform", "min": "1ms", "max": "2ms"}}],
    "timer": [{"op": "sleep", "duration": "1ms"}],
}


def scenario(tmp_path, ops, vcpus=2, threads=None, extra_vm=None, kvm_table=None, name="t"):
    sc = {"name": name, "duration": "200ms", "kvm": {"repetitions": 1, **(kvm_table or {})},
          "vm": [{"name": "g", "vcpus": vcpus, "workload": [{"kind": "program", "threads": threads or vcpus, "ops": ops}], **(extra_vm or {})}]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(sc))
    return str(path)


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@needs_kvm
@pytest.mark.parametrize("prog", list(PROGRAMS))
def test_each_program_runs_on_kvm(tmp_path, capsys, prog):
    path = scenario(tmp_path, PROGRAMS[prog], vcpus=1 if prog in ("wake", "timer") else 2, name=prog)
    code, out, err = run_cli(capsys, "kvm", "run", path, "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["harness"] == "kvm" and s["notice"] is None
    vm = s["vms"][0]
    assert vm["cpu_time_s"] > 0 and vm["throughput"] > 0 and vm["throughput_unit"]
    assert {"index", "cpu_time_s", "wait_time_s", "steal_time_s", "kvm_stats", "involuntary_switches"} <= set(vm["vcpus"][0])
    assert s["metric"]["median"] is not None
    if prog in ("wake", "timer"):
        lat = vm["latency_ms"]
        assert lat["count"] >= 20 and 0 < lat["p50"] < 50  # ms; the floor is ~30 us
    else:
        assert vm["latency_ms"] is None
        # measured loops make no exits beyond host interrupts: far fewer exits than ops
        v0 = vm["vcpus"][0]
        assert v0["kvm_stats"].get("insn_emulation", 0) <= 2


@needs_kvm
def test_text_output(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "kvm", "run", scenario(tmp_path, PROGRAMS["tas"]))
    assert code == 0
    assert "ns_per_op (ns): median" in out and "steal s" in out


@needs_linux
def test_thread_fallback(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "kvm", "run", scenario(tmp_path, PROGRAMS["ticket"]), "--json", "--mode", "threads")
    assert code == 0
    s = json.loads(out)
    assert s["harness"] == "threads"
    assert s["vms"][0]["workloads"][0]["ns_per_op"] > 0
    assert s["vms"][0]["vcpus"][0]["steal_time_s"] is None


@needs_kvm
def test_policies_and_restore(tmp_path, capsys):
    """nice + affinity on vCPU threads, and (as root) cgroup shares and a cpuset: the run
    works and afterwards no cgroup remains and this process's affinity is unchanged."""
    aff_before = os.sched_getaffinity(0)
    pols = [{"vcpus": "0", "nice": 5, "affinity": "0"}]
    kt = {}
    if is_root and _native.kvm_cgroup_leftovers() == []:
        pols.append({"vcpus": "1", "cgroup": "lo"})
        kt = {"cgroup": [{"name": "lo", "shares": 128, "cpus": "0"}]}
    path = scenario(tmp_path, PROGRAMS["compute"], extra_vm={"vcpu_policy": pols}, kvm_table=kt)
    code, out, err = run_cli(capsys, "kvm", "run", path, "--json")
    assert code == 0, err
    s = json.loads(out)
    v = s["vms"][0]["vcpus"]
    assert v[0]["policy"] == {"nice": 5, "affinity": [0]}
    if kt:
        assert any("created" in r for r in s["restored"]) and any("removed" in r for r in s["restored"])
    assert _native.kvm_cgroup_leftovers() == []
    assert os.sched_getaffinity(0) == aff_before


@needs_kvm
@pytest.mark.skipif(not is_root, reason="boosting another thread to nice -20 needs root")
def test_user_space_ple_boost(tmp_path, capsys):
    path = scenario(tmp_path, PROGRAMS["ticket"], vcpus=4, kvm_table={"ple": {"window": 256, "policy": "boost"}})
    code, out, err = run_cli(capsys, "kvm", "run", path, "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["ple"]["exits"] > 0 and s["ple"]["boosts"] > 0
    assert sum(v["ple_exits"] for v in s["vms"][0]["vcpus"]) == s["ple"]["exits"]


@needs_linux
@pytest.mark.parametrize("policy", ["migrate", "boost"])
def test_a_ple_run_with_boosts_makes_no_failed_call(policy):
    """Four ticket-lock vCPUs as host threads on the machine's CPUs, with a short window:
    every exit boosts (or moves) a candidate and ends the previous boost, with the calls
    made outside the handler's lock. None of the calls fails and the run has no warning,
    and the calling thread's own affinity is untouched. (That every thread is as the state
    says is the Rust test `ple_calls_leave_every_thread_as_the_state_says`.)"""
    if policy == "boost" and os.geteuid() != 0:
        pytest.skip("boosting another thread to nice -20 needs root")
    sc = {"name": "p", "duration": "300ms", "kvm": {"repetitions": 1, "mode": "threads",
                                                    "ple": {"window": 256, "policy": policy, "boost": "200us"}},
          "vm": [{"name": "g", "vcpus": 4, "workload": [{"kind": "program", "threads": 4, "ops": PROGRAMS["ticket"]}]}]}
    aff_before = os.sched_getaffinity(0)
    s = kvm.run(sc, repetitions=1)
    counted = s["ple"]["migrations" if policy == "migrate" else "boosts"]
    assert s["ple"]["exits"] > 100 and counted > 0, s["ple"]
    assert s["ple"]["errors"] == 0 and not s["warnings"], (s["ple"], s["warnings"])
    assert os.sched_getaffinity(0) == aff_before


@needs_linux
def test_the_spin_program_samples_each_window_and_never_exits():
    """`spin` (the calibration of one spin of the wait loop): one sample per window of
    `ple.window` spins, no PLE exit, and every spin counted."""
    from vcpulab import kvm_calibrate

    cfg = kvm_calibrate._cfg([kvm_calibrate._v("spin")], 50_000_000, "threads")
    assert cfg["ple"] == {"window": 4096}
    res = kvm.run_config(cfg)
    v = res["vcpus"][0]
    assert v["ops"] > 10 and v["ple_exits"] == 0
    assert len(v["samples_ns"]) == v["ops"]  # 50 ms of ~50 us windows: far below the buffer
    assert v["ops"] * 4096 <= v["spins"] <= (v["ops"] + 1) * 4096
    assert all(x > 0 for x in v["samples_ns"])


def test_bad_scenarios_exit_2(tmp_path, capsys):
    bad = {"name": "b", "duration": "1s", "vm": [{"name": "g", "vcpus": 1, "workload": [{"kind": "program", "ops": [{"op": "serve"}]}]}]}
    p = tmp_path / "b.json"
    p.write_text(json.dumps(bad))
    code, _, err = run_cli(capsys, "kvm", "run", str(p))
    assert code == 2 and "vm[0].workload[0].ops[0].op" in err
    bad["vm"][0]["workload"][0]["ops"] = [{"op": "compute", "duration": "1us"}]
    bad["vm"][0]["vcpu_policy"] = [{"nice": 30}]
    p.write_text(json.dumps(bad))
    code, _, err = run_cli(capsys, "kvm", "run", str(p))
    assert code == 2 and "vcpu_policy[0].nice" in err
    bad["vm"][0].pop("vcpu_policy")
    bad["colour"] = 1
    p.write_text(json.dumps(bad))
    code, _, err = run_cli(capsys, "kvm", "run", str(p))
    assert code == 2 and "colour: unknown key" in err


def test_kvm_halt_kernel_runs_io_as_an_interrupt_wake_and_a_bad_value_is_named():
    sc = {"name": "h", "duration": "1s", "kvm": {"halt": "kernel"},
          "vm": [{"name": "g", "vcpus": 2, "workload": [{"kind": "program", "threads": 1, "ops": PROGRAMS["wake"]},
                                                        {"kind": "program", "threads": 1, "ops": PROGRAMS["compute"]}]}]}
    cfg, _ = kvm.to_config(sc)
    assert [v["program"] for v in cfg["vcpus"]] == ["irq-wake", "compute"]
    assert [v["program"] for v in kvm.to_config({**sc, "kvm": {}})[0]["vcpus"]] == ["wake", "compute"]
    with pytest.raises(kvm.ScenarioError) as e:
        kvm.to_config({**sc, "kvm": {"halt": "guest"}})
    assert "kvm.halt" in str(e.value) and "exit" in str(e.value) and "kernel" in str(e.value)


@needs_kvm
def test_an_interrupt_wakes_a_vcpu_halted_in_the_kernel(tmp_path, capsys):
    """[kvm] halt = "kernel": the vCPU halts at CPL0 (`sti; hlt`, a halt KVM handles in the
    kernel) and the harness's MSI through an irqfd wakes it; every op is one such halt."""
    path = scenario(tmp_path, PROGRAMS["wake"], vcpus=1, kvm_table={"halt": "kernel"}, name="irq")
    code, out, err = run_cli(capsys, "kvm", "run", path, "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["harness"] == "kvm"
    v0 = s["vms"][0]["vcpus"][0]
    lat = s["vms"][0]["latency_ms"]
    assert lat["count"] >= 20 and 0 < lat["p50"] < 50, lat  # ms; the floor is tens of us
    # in-kernel halts (not exits to the harness) and wake-ups, one per op at least
    assert v0["kvm_stats"].get("halt_exits", 0) >= lat["count"] and v0["kvm_stats"].get("halt_wakeup", 0) >= lat["count"]


def test_a_bad_duration_override_blames_the_flag():
    sc = {"name": "b", "duration": "1s", "vm": [{"name": "g", "vcpus": 1}]}
    with pytest.raises(vcpulab.ScenarioError, match=r"^--duration: expected a duration .* got '5'"):
        kvm.to_config(sc, "b.toml", duration="5")
    with pytest.raises(vcpulab.ScenarioError, match=r"^--duration: must be > 0"):
        kvm.to_config(sc, "b.toml", duration="0s")
    with pytest.raises(vcpulab.ScenarioError, match=r"^b\.toml: duration: expected a duration"):
        kvm.to_config(dict(sc, duration="5"), "b.toml")


@needs_linux
@pytest.mark.parametrize("mode", ["threads", "kvm"])
def test_a_warmup_s_ops_are_left_out_of_the_figures(mode):
    """With `warmup`, the harness reads every vCPU's op count at the warm-up's end and the
    figures cover only the ops after it (the start-up burst of the ticket cases lies in
    it: docs/validation.md); without one, nothing changes."""
    if mode == "kvm" and not KVM_OK:
        pytest.skip(f"needs KVM: {KVM_WHY}")
    sc = {"name": "w", "duration": "300ms", "warmup": "100ms", "kvm": {"repetitions": 1, "mode": mode},
          "vm": [{"name": "g", "vcpus": 2, "workload": [{"kind": "program", "threads": 2, "ops": PROGRAMS["ticket"]}]}]}
    cfg, meta = kvm.to_config(sc, "w.toml")
    assert cfg["warmup_ns"] == 100_000_000
    res = kvm.run_config(cfg)
    assert 0.1 < res["warm_wall_s"] <= 0.25  # the mark and the stop are taken by a sleeping thread
    for v in res["vcpus"]:
        assert 0 < v["warm_ops"] < v["ops"]
    s = kvm.summarize([res], cfg, meta)
    measured = [v["ops"] - v["warm_ops"] for v in res["vcpus"]]
    assert [v["ops"] for v in s["vms"][0]["vcpus"]] == measured
    assert s["vms"][0]["workloads"][0]["ns_per_op"] == pytest.approx(res["warm_wall_s"] * 1e9 / sum(measured))
    assert s["warmup_s"] == 0.1
    assert "(counted after a 0.1 s warm-up)" in " ".join(kvm.summary_text(s).split())
    plain, _ = kvm.to_config({k: v for k, v in sc.items() if k != "warmup"}, "w.toml")
    res = kvm.run_config(plain)
    assert res["warm_wall_s"] is None and all(v["warm_ops"] is None for v in res["vcpus"])
    assert not kvm.summarize([res], plain, meta)["warnings"]
    # a run that ended before its warm-up did is said to cover the whole run
    assert "1 of 1 repetitions ended before the warm-up did" in kvm.summarize([res], cfg, meta)["warnings"][0]
    with pytest.raises(vcpulab.ScenarioError, match=r"^w\.toml: warmup: \(300ms\) must be shorter than the duration"):
        kvm.to_config({**sc, "warmup": "300ms"}, "w.toml")
    with pytest.raises(vcpulab.ScenarioError, match=r"^--duration: \(100ms\) must be longer than the scenario's warmup \(100ms\)"):
        kvm.to_config(sc, "w.toml", duration="100ms")


@needs_linux
@pytest.mark.parametrize("mode", ["threads", "kvm"])
def test_a_spare_vcpu_does_not_end_the_run(mode):
    """A VM with more vCPUs than workload threads runs its spare vCPUs as `idle`, which
    finish right after the start barrier. The run still lasts its duration: until
    2026-12-05 the first vCPU to finish ended every run, so a spare vCPU cut it to ~0 s."""
    if mode == "kvm" and not KVM_OK:
        pytest.skip(f"needs KVM: {KVM_WHY}")
    sc = {"name": "spare", "duration": "200ms", "kvm": {"repetitions": 1, "mode": mode},
          "vm": [{"name": "g", "vcpus": 3, "workload": [{"kind": "program", "threads": 2, "ops": PROGRAMS["compute"]}]}]}
    cfg, meta = kvm.to_config(sc, "spare.toml")
    assert [v["program"] for v in cfg["vcpus"]] == ["compute", "compute", "idle"]
    res = kvm.run_config(cfg)
    busy = [v for v in res["vcpus"] if v["program"] != "idle"]
    assert all(0.15 < v["wall_s"] < 1.0 for v in busy), [v["wall_s"] for v in res["vcpus"]]


def test_compare_runs_a_steady_case_for_its_duration_plus_its_warmup(monkeypatch):
    """`vcpulab kvm compare --duration D` measures D in every case: a steady case's real run
    lasts D plus its warm-up, as its simulated side (1 s + 200 ms)."""
    from vcpulab import kvm_compare

    class Seen(Exception):
        pass

    seen: list[dict] = []
    to_config = kvm.to_config

    def capture(*a, **kw):
        seen.append(to_config(*a, **kw)[0])
        raise Seen

    monkeypatch.setattr(kvm_compare.K, "to_config", capture)
    case = kvm_compare.select(["ple-boost-steady"])[0]
    for duration in ("1s", "200ms"):
        with pytest.raises(Seen):
            kvm_compare.run_case(case, None, "", duration, 1)
    assert [(c["duration_ns"], c["warmup_ns"]) for c in seen] == [(1_200_000_000, 200_000_000), (400_000_000, 200_000_000)]
    with pytest.raises(vcpulab.ScenarioError, match=r"^--duration: must be > 0"):
        kvm_compare.run_case(case, None, "", "0s", 1)
    assert case["sim"]({"name": "eevdf"})["duration"] == "1.2s"


def test_shipped_kvm_scenarios_validate():
    root = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios", "kvm")
    files = sorted(f for f in os.listdir(root) if f.endswith(".toml"))
    assert files
    for f in files:
        sc, origin = kvm.load(os.path.join(root, f))
        kvm.to_config(sc, origin)


def test_compare_list(capsys):
    code, out, _ = run_cli(capsys, "kvm", "compare", "--list")
    assert code == 0
    for cid in ("compute-N8", "tas-N8", "ticket-N4", "barrier-N4", "wake-busy7-nice19", "shares-8192-vs-128", "ple-migrate",
                "irq-wake", "halt-poll"):
        assert cid in out


@needs_kvm
def test_compare_rows(capsys):
    from vcpulab import kvm_compare

    code, out, err = run_cli(capsys, "kvm", "compare", "compute-N2", "tas-N1", "--duration", "200ms", "--repetitions", "1", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["case"], r["metric"]) for r in rows] == [("compute-N2", "throughput"), ("compute-N2", "fairness_jain"), ("tas-N1", "ns_per_op")]
    for r in rows:
        assert {"case", "metric", "unit", "real", "real_spread", "real_modes", "sim"} <= set(r)
        assert r["real"] > 0
    sched, why = kvm_compare.sim_scheduler()
    if sched is None:
        assert all(r["sim"] is None for r in rows) and why in rows[0]["note"]
        pytest.skip(f"sim assertions skipped: {why}")
    assert all(r["sim"] is not None and len(r["sim_runs"]) == len(kvm_compare.SIM_SEEDS) for r in rows)


def test_ple_cases_map_onto_the_sim_ple_model():
    """Every ple-<policy> case has a simulated counterpart (see kvm_compare.PLE_SIM) that the
    simulator runs: user-mode ticket lock on AMD, fixed window, the harness's own handler for
    none, yield, boost and migrate (`[kvm] ple_handler`), fix (b) and its buddy rule for boost-fifo."""
    from vcpulab import api, kvm_compare

    sched, why = kvm_compare.sim_scheduler()
    if sched is None:
        pytest.skip(why)
    # policy -> (ple_handler, features, buddy_rule, yields at its exits)
    expect = {"none": ("none", None, None, False), "yield": ("yield", None, None, True),
              "boost": ("nice-boost", None, None, True),
              "boost-fifo": (None, {"boost_ignores_vcpu_fairness": True}, "6.14", True),
              "migrate": ("migrate", None, None, True)}
    # The window's spin as the machine's profile writes it (its `[harness] spin_ns`), else
    # the KVM notes' 24.7 ns.
    import tomllib

    profile_text = dict(_native.shipped_profiles()).get(sched.get("_profile") or "", "")
    spin_ns = tomllib.loads(profile_text).get("harness", {}).get("spin_ns", 24.7)
    every = kvm_compare.select(["ple-"])
    cases = [c for c in every if not c["id"].endswith("-steady")]
    assert [c["id"] for c in cases] == [f"ple-{p}" for p in kvm.PLE_POLICIES]
    # each has a steady-state twin: the same scenarios, longer, counted after a warm-up
    for c, twin in zip(cases, [c for c in every if c["id"].endswith("-steady")]):
        assert twin["id"] == c["id"] + "-steady" and twin["held_out"]
        assert {**twin["real"], "name": c["id"], "duration": "1s"} == {**c["real"], "warmup": "200ms"}
        assert twin["real"]["duration"] == twin["sim"](sched)["duration"] == "1.2s"
        assert twin["sim"](sched) == {**c["sim"](sched), "duration": "1.2s", "warmup": "200ms"}
    for c in cases:
        handler, feats, buddy, yields = expect[c["id"][4:]]
        sc = c["sim"](sched)
        assert sc["kvm"]["vendor"] == "amd" and sc["kvm"]["ple"] is True
        assert sc["kvm"].get("ple_handler") == handler and sc["kvm"].get("features") == feats
        assert sc["kvm"]["ple_window_grow"] == 1
        assert sc["kvm"]["ple_window"] == round(4096 * spin_ns)
        assert sc["vm"][0]["workload"][0]["ops"][1]["mode"] == "user"
        assert sc["scheduler"].get("buddy_rule") == buddy
        sc["scheduler"] = {k: v for k, v in sc["scheduler"].items() if not k.startswith("_")}
        s = api.run(sc).summary
        assert s["vms"][0]["throughput"] > 0
        assert s["vms"][0]["ple"]["exits"] > 0
        assert (s["vms"][0]["ple"]["yield_successes"] > 0) is yields
        assert c["rows"][0][3](s) == pytest.approx(1e9 / s["vms"][0]["throughput"])


def test_compare_names_the_rows_whose_real_runs_fall_in_two_groups():
    """A real row whose runs fall in two groups (the nice-19 wake-up's 41, 32 and 1,158 us on
    the EPYC machine) gets its groups in `real_modes` and a line under the table: its
    median of three runs can land in either, so its ratio can flip between comparisons.
    Runs close together get neither."""
    from vcpulab import kvm_compare as kc

    assert kc.two_groups([41.0, 32.0, 1158.0]) == ([32.0, 41.0], [1158.0])
    assert kc.two_groups([37.0, 38.0, 37.5]) is None
    rows = [{"case": "wake-busy3-nice19", "metric": "wake_p50", "unit": "us",
             "real_modes": [[32.0, 41.0], [1158.0]]},
            {"case": "wake-busy0", "metric": "wake_p50", "unit": "us", "real_modes": None}]
    assert kc.two_mode_lines(rows) == ["wake-busy3-nice19 wake_p50: 32-41 or 1,158 us"]
