"""The user-space PLE handlers of `[kvm] ple_handler` (engine/ple.rs: the vcpulab harness's
none, yield and nice-boost policies; sched/fair/reweight.rs: the nice change) and the world
switch a vCPU switched out in the guest pays (`[kvm] world_switch_cost`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import vcpulab
from vcpulab import api


def _ticket(handler: str, sched: str = "eevdf", **kvm: Any) -> dict[str, Any]:
    """Ticket lock N=4 on 2 pCPUs with user-mode spins and a fixed window (the harness's
    ple-* cases, without a host profile)."""
    return {"name": f"ple-{handler}", "duration": "300ms", "seed": 3,
            "host": {"cores_per_socket": 2, "noise": {"enabled": False}},
            "scheduler": {"name": sched},
            "vm": [{"name": "g", "vcpus": 4, "workload": [{"kind": "program", "threads": 4, "ops": [
                {"op": "compute", "duration": "30ns"},
                {"op": "lock", "lock": "l", "kind": "ticket", "hold": "12ns", "mode": "user"}]}]}],
            "kvm": {"vendor": "amd", "ple": True, "ple_window": 47104, "ple_window_grow": 1,
                    "ple_exit_cost": "20us", "ple_handler": handler, **kvm}}


def _counters(s: dict[str, Any]) -> dict[str, int]:
    return dict(s["scheduler_counters"]) if isinstance(s["scheduler_counters"], dict) else \
        {k: v for k, v in s["scheduler_counters"]}


def _vcpus(s: dict[str, Any], key: str) -> int:
    return sum(v[key] for v in s["vms"][0]["vcpus"])


def test_nice_boost_reweighs_a_candidate_and_yields_at_every_exit():
    sc = _ticket("nice-boost")
    s = vcpulab.run(sc, check_invariants=True).summary
    c = _counters(s)
    exits = _vcpus(s, "ple_exits")
    assert exits > 100
    # Every exit yields once (sched_yield, which the fair class always takes).
    assert _vcpus(s, "yield_attempts") == _vcpus(s, "yield_successes") == exits == c["sched_yield"]
    # Each exit ends the last boost and starts one: about two nice changes per exit, of
    # queued, running and sleeping vCPUs alike (a few boosts end by their 1 ms).
    changes = sum(v for k, v in c.items() if k.startswith("reweight_") and k not in ("reweight_lag_clamped",))
    assert exits <= changes <= 2 * exits + 1
    assert c["reweight_queued_preempt"] + c["reweight_queued_no_preempt"] > 0
    assert c["reweight_running_raised"] > 0
    # Deterministic; and a boost that ends at once is another policy.
    assert vcpulab.run(copy.deepcopy(sc)).summary == vcpulab.run(copy.deepcopy(sc)).summary
    brief = vcpulab.run(_ticket("nice-boost", ple_boost="1us")).summary
    assert brief["vms"][0]["throughput"] != s["vms"][0]["throughput"]


@pytest.mark.parametrize("handler,instant", [("nice-boost", "nice_boost"), ("migrate", "migrate_boost")])
def test_boosts_go_round_robin_past_the_spinner_and_end_on_time(handler, instant):
    """As the harness's `Ple::on_spin`: each exit boosts the next vCPU after the last
    boosted one, never the spinner itself; a boost that outlives its `ple_boost` ends."""
    trace = vcpulab.trace({**_ticket(handler), "duration": "50ms"}, check_invariants=True)
    boosts = [(e["args"]["vcpu"], e["args"]["other"]) for e in trace.events() if e.get("name") == instant]
    assert len(boosts) > 20
    last = -1
    for spinner, target in boosts:
        expect = next(c for c in ((last + k) % 4 for k in range(1, 5)) if c != spinner)
        assert target == expect, (spinner, target, last)
        last = target
    # Boosts end at the next exit's boost; none of 1 ms lasts to its end here...
    assert not [e for e in trace.events() if e.get("name") == "boost_end"]
    # ... and 1 us boosts all end on time, before the next exit: each boost is undone by
    # its own end.
    brief = list(vcpulab.trace({**_ticket(handler, ple_boost="1us"), "duration": "50ms"},
                               check_invariants=True).events())
    ns = lambda e: round(e["ts"] * 1000)  # noqa: E731 (trace times are in us)
    starts = [(ns(e), e["args"]["other"]) for e in brief if e.get("name") == instant]
    ends = {(ns(e), e["args"]["vcpu"]) for e in brief if e.get("name") == "boost_end"}
    superseded = 0
    for (t, v), nxt in zip(starts, starts[1:] + [(None, None)]):
        if nxt[0] is not None and nxt[0] < t + 1000:
            superseded += 1  # the next exit's boost came first
        else:
            assert (t + 1000, v) in ends, (t, v)
    assert len(ends) == len(starts) - superseded > len(starts) // 2
    s = vcpulab.run(_ticket(handler, ple_boost="1us"), check_invariants=True).summary
    c, exits = _counters(s), _vcpus(s, "ple_exits")
    if handler == "nice-boost":
        changes = sum(v for k, v in c.items() if k.startswith("reweight_") and k not in ("reweight_lag_clamped", "reweight_unchanged"))
    else:
        changes = sum(v for k, v in c.items() if k.startswith("affinity_"))
    assert 2 * exits - 1 <= changes <= 2 * exits


def test_migrate_pins_the_candidate_to_the_spinners_pcpu():
    """A running candidate on the other pCPU moves there when its pCPU reschedules, a queued
    one at once (the engine checks every dispatch against the affinity)."""
    s = vcpulab.run(_ticket("migrate"), check_invariants=True).summary
    c = _counters(s)
    assert c["affinity_moved_running"] > 0 and c["affinity_moved_queued"] > 0
    assert _vcpus(s, "yield_attempts") == _vcpus(s, "ple_exits") == c["sched_yield"]
    assert not any(k.startswith("reweight_") for k in c)


def test_the_none_handler_exits_without_yielding_and_yield_yields():
    none = vcpulab.run(_ticket("none"), check_invariants=True).summary
    assert _vcpus(none, "ple_exits") > 0 and _vcpus(none, "yield_attempts") == 0
    assert "sched_yield" not in _counters(none)
    yld = vcpulab.run(_ticket("yield"), check_invariants=True).summary
    assert _vcpus(yld, "yield_attempts") == _vcpus(yld, "ple_exits") == _counters(yld)["sched_yield"]
    assert not any(k.startswith("reweight_") for k in _counters(yld))


def test_a_handler_needs_what_it_calls_from_the_host_scheduler():
    with pytest.raises(api.ScenarioError) as e:
        vcpulab.run(_ticket("nice-boost", sched="cfs"))
    assert "kvm.ple_handler" in str(e.value) and "eevdf" in str(e.value)
    with pytest.raises(api.ScenarioError) as e:
        vcpulab.run(_ticket("yield", sched="rr"))
    assert "kvm.ple_handler" in str(e.value) and "sched_yield" in str(e.value)
    with pytest.raises(api.ScenarioError) as e:
        vcpulab.run(_ticket("migrate", sched="credit"))
    assert "kvm.ple_handler" in str(e.value) and "affinity" in str(e.value)
    assert vcpulab.run(_ticket("yield", sched="cfs")).summary["vms"][0]["throughput"] > 0
    assert vcpulab.run(_ticket("migrate", sched="cfs"), check_invariants=True).summary["vms"][0]["throughput"] > 0


def test_a_vcpu_switched_out_in_the_guest_pays_the_world_switch_on_its_way_back():
    """Four compute vCPUs on 2 pCPUs: every switch-out is a preemption in the guest, so
    each vCPU pays the cost once per dispatch after its first (the run's last may be cut)."""
    def run(cost: str) -> dict[str, Any]:
        return vcpulab.run({"name": "ws", "duration": "200ms", "seed": 1,
                            "host": {"cores_per_socket": 2, "noise": {"enabled": False}},
                            "scheduler": {"name": "eevdf"},
                            "vm": [{"name": "g", "vcpus": 4, "workload": [{"kind": "program", "threads": 4,
                                                                           "ops": [{"op": "compute", "duration": "10us"}]}]}],
                            "kvm": {"ple": False, "world_switch_cost": cost}}, check_invariants=True).summary

    plain, paid = run("0ns"), run("50us")
    for a, b in zip(plain["vms"][0]["vcpus"], paid["vms"][0]["vcpus"]):
        owed = (b["dispatches"] - 1) * 50e-6
        assert owed - 50e-6 <= b["overhead_time_s"] - a["overhead_time_s"] <= owed + 1e-9, (a, b)
    assert paid["vms"][0]["throughput"] < plain["vms"][0]["throughput"]
