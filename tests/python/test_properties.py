"""Property-based tests: random small scenarios must run, be deterministic and keep the
summary's accounting identities (time conservation, sums, ranges)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vcpulab

REL = 1e-6


def _dur_us(lo: int, hi: int):
    return st.integers(lo, hi).map(lambda us: f"{us}us")


_compute = st.fixed_dictionaries({"op": st.just("compute"), "duration": _dur_us(1, 3000)})
_lock = st.fixed_dictionaries({"op": st.just("lock"), "lock": st.sampled_from(["a", "b"]),
                               "hold": _dur_us(1, 200), "kind": st.sampled_from(["ticket", "tas"])})
_ipi = st.one_of(
    st.fixed_dictionaries({"op": st.just("ipi")}),
    # vCPU indices 0-3 are kept valid by the generator (every VM has at least that many
    # vCPUs when it uses them; see `scenarios`).
    st.fixed_dictionaries({"op": st.just("ipi"), "targets": st.lists(st.integers(0, 0), min_size=1, max_size=2)}),
)
_dist = st.one_of(
    _dur_us(1, 3000),
    _dur_us(1, 3000).map(lambda m: {"dist": "exp", "mean": m}),
    st.tuples(st.integers(1, 1000), st.integers(0, 2000)).map(
        lambda t: {"dist": "uniform", "min": f"{t[0]}us", "max": f"{t[0] + t[1]}us"}),
    st.tuples(_dur_us(1, 2000), _dur_us(0, 500)).map(lambda t: {"dist": "normal", "mean": t[0], "sd": t[1]}),
    st.tuples(_dur_us(1, 1000), st.floats(0.0, 1.5)).map(lambda t: {"dist": "lognormal", "median": t[0], "sigma": t[1]}),
)
_compute_dist = st.fixed_dictionaries({"op": st.just("compute"), "duration": _dist,
                                       "mode": st.sampled_from(["user", "kernel"])})
_cycles = st.fixed_dictionaries({"op": st.just("compute"), "cycles": st.integers(1000, 5_000_000)})
_io = st.fixed_dictionaries({"op": st.just("io"), "latency": _dur_us(1, 2000)})
_sleep = st.fixed_dictionaries({"op": st.just("sleep"), "duration": _dur_us(1, 2000)})

_program = st.fixed_dictionaries({
    "kind": st.just("program"),
    "threads": st.integers(1, 6),
    "ops": st.lists(st.one_of(_compute, _compute_dist, _cycles, _lock, _ipi, _io, _sleep), min_size=1, max_size=5)
             .filter(lambda ops: any(o["op"] in ("compute", "sleep", "io", "lock") for o in ops)),
})
_server = st.fixed_dictionaries({
    "kind": st.just("program"),
    "threads": st.integers(1, 4),
    "arrivals": st.one_of(
        st.fixed_dictionaries({"process": st.just("poisson"), "rate": st.integers(10, 5000)}),
        st.fixed_dictionaries({"process": st.just("periodic"), "interval": _dur_us(50, 5000)}),
        st.fixed_dictionaries({"process": st.just("closed"), "clients": st.integers(1, 8), "think": _dur_us(0, 2000)}),
    ),
    "ops": st.lists(st.one_of(_compute, _io), max_size=2).map(
        lambda ops: [{"op": "serve", "service": "100us"}, *ops]),
})
_presets = st.one_of(
    st.fixed_dictionaries({"kind": st.just("stress-ng"), "threads": st.integers(1, 4)}),
    st.fixed_dictionaries({"kind": st.just("sysbench-cpu"), "threads": st.integers(1, 4)}),
    st.fixed_dictionaries({"kind": st.just("lookbusy"), "threads": st.integers(1, 4),
                           "utilization": st.integers(0, 100)}),
    st.fixed_dictionaries({"kind": st.sampled_from(["ebizzy", "pbzip2", "hackbench", "dbench", "vips", "raytrace"]),
                           "work": st.sampled_from([0.1, 0.5, 1.0])}),
)
# Parameter ranges per scheduler, chosen to keep the rules between its parameters. Every
# registered scheduler takes part (`vcpulab.schedulers()`); one without ranges here runs
# with its defaults.
_HYPERV_TYPE1 = {"timeslice": _dur_us(500, 20000), "wakeup_granularity": _dur_us(100, 5000)}
_PARAM_RANGES = {
    "rr": {"slice": _dur_us(50, 5000)},
    "hyperv-classic": _HYPERV_TYPE1,
    "hyperv-core": _HYPERV_TYPE1,
    "cfs": {"tick": _dur_us(500, 4000), "group_per_vm": st.booleans(), "wakeup_preemption": st.booleans()},
    "eevdf": {"base_slice": _dur_us(100, 3000), "group_per_vm": st.booleans(),
              "buddy_rule": st.sampled_from(["6.14", "6.6", "6.19"])},
    "credit": {"tslice_ms": st.integers(3, 60), "ratelimit_us": st.sampled_from([0, 100, 1000])},
    # FLMS: the rate limit may not exceed the short slice (1000 us at most here).
    "flms": {"tslice_ms": st.integers(3, 60), "ratelimit_us": st.sampled_from([0, 100]),
             "short_slice_us": st.sampled_from([100, 500, 1000]),
             "balance_a": st.integers(0, 100), "balance_b": st.integers(0, 200)},
    # Micro slices (tslice_ms / slicing_factor >= 1 ms) never shorter than the rate limit.
    "vslicer": {"tslice_ms": st.integers(6, 60), "slicing_factor": st.integers(1, 6),
                "ratelimit_us": st.sampled_from([0, 100, 1000])},
    "vturbo": {"tslice_ms": st.integers(3, 60), "ratelimit_us": st.sampled_from([0, 100, 1000]),
               "turbo_slice_us": st.integers(1, 3000)},
    "io-bound": {"tslice_ms": st.integers(3, 60), "ratelimit_us": st.sampled_from([0, 100, 1000])},
    "credit2": {"ratelimit_us": st.sampled_from([0, 100, 1000]),
                "runqueue": st.sampled_from(["cpu", "core", "socket", "node", "all"]),
                "runtime_rule": st.sampled_from(["4.19", "2025"]),
                "migrate_resist_us": st.integers(0, 1000), "cap_period_ms": st.integers(1, 50)},
    # The budget at most the period.
    "rtds": {"period": _dur_us(4000, 20000), "budget": _dur_us(10, 4000), "extratime": st.booleans()},
}
_REGISTERED = vcpulab.schedulers()
_schedulers = st.one_of([
    st.fixed_dictionaries({"name": st.just(s["name"]), **_PARAM_RANGES.get(s["name"], {})})
    for s in _REGISTERED
])
# Schedulers that reserve pCPUs (one by default) for latency vCPUs need a host of two.
_RESERVING = {s["name"] for s in _REGISTERED if s["properties"]["pools"] == "reserved"}
_kvm = st.one_of(
    st.none(),
    st.tuples(st.fixed_dictionaries({
        "vendor": st.sampled_from(["intel", "amd"]),
        "version": st.sampled_from(["4.15", "6.6"]),
        "ple_window_grow": st.sampled_from([1, 2]),
        "features": st.fixed_dictionaries({
            "boost_user_mode_candidates": st.booleans(),
            "boost_ignores_vcpu_fairness": st.booleans(),
            "migrate_boosted_to_spinner": st.booleans(),
        }),
    }), st.booleans()).map(
        # The 2024 last_boosted_vcpu bug exists only in the single-loop (5.3+ rules) handler.
        lambda kb: {**kb[0], **({"last_boosted_rule": "2024-bug"} if kb[1] and kb[0]["version"] != "4.15" else {})}),
)


@st.composite
def scenarios(draw):
    sockets = draw(st.integers(1, 2))
    cores = draw(st.integers(1, 3))
    threads = draw(st.integers(1, 2))
    numa = draw(st.sampled_from([n for n in (1, 2) if sockets % n == 0 or (n % sockets == 0 and cores % (n // sockets) == 0)]))
    sched = draw(_schedulers)
    if sched["name"] in _RESERVING and sockets * cores * threads < 2:
        threads = 2
    duration_ms = draw(st.integers(5, 60))
    warmup_ms = draw(st.sampled_from([0, 0, duration_ms // 4]))
    vms = []
    for i in range(draw(st.integers(1, 3))):
        vm = {"name": f"vm{i}", "vcpus": draw(st.integers(1, 4)), "weight": draw(st.integers(1, 1000)),
              "workload": draw(st.lists(st.one_of(_program, _server, _presets), max_size=2))}
        # FLMS classes (other schedulers ignore them); a MixVM needs 2 vCPUs or more.
        vm_class = draw(st.sampled_from([None, "lsvm", "nlsvm", "mixvm"]))
        if vm_class == "mixvm" and vm["vcpus"] < 2:
            vm_class = "lsvm"
        if vm_class is not None:
            vm["class"] = vm_class
        if draw(st.booleans()):
            ncpus = sockets * cores * threads
            vm["affinity"] = f"0-{draw(st.integers(0, ncpus - 1))}"
        if draw(st.booleans()):
            # FLMS classes: latency vCPUs for flms, vslicer, vturbo and io-bound.
            vm["class"] = draw(st.sampled_from(["lsvm", "nlsvm", "mixvm"] if vm["vcpus"] >= 2 else ["lsvm", "nlsvm"]))
        if draw(st.booleans()):
            vm["start_jitter"] = f"{draw(st.integers(0, 500))}us"
            vm["guest_timeslice"] = f"{draw(st.integers(100, 5000))}us"
            vm["spinlock"] = draw(st.sampled_from(["ticket", "tas"]))
            # A spinning idle loop (idle=poll, DPDK): the vCPU never halts. Not beside
            # lookbusy, which the scenario refuses (its controller reads guest busy time).
            if not any(w.get("kind") == "lookbusy" for w in vm["workload"]):
                vm["idle"] = draw(st.sampled_from(["halt", "poll"]))
        vms.append(vm)
    kvm = draw(_kvm)
    extra = {"kvm": kvm} if kvm is not None else {}
    return {
        **extra,
        "name": "prop",
        "duration": f"{duration_ms}ms",
        "warmup": f"{warmup_ms}ms",
        "seed": draw(st.integers(0, 2**32)),
        "host": {"sockets": sockets, "cores_per_socket": cores, "threads_per_core": threads, "numa_nodes": numa,
                 **draw(st.sampled_from([{}, {"turbo_ghz": [3.9, 3.7, 3.5]}]))},
        "scheduler": sched,
        "vm": vms,
    }


def check_latency(lat) -> None:
    if lat is None:
        return
    if lat["count"] == 0:  # a request-serving workload that completed none in the window
        return
    assert 0.0 <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] + 1e-12
    assert lat["mean"] <= lat["max"] + 1e-12


def check_steal(vm: dict, measured: float) -> None:
    """Steal time (docs/models.md): one window per started second of the measured time, each
    a share of the VM's vCPU time; the mean is the wait time over the vCPU time, so it lies
    within the windows; p95 is the nearest-rank 95th percentile of the windows."""
    steal = vm["steal_pct"]
    windows = steal["windows"]
    assert len(windows) == math.ceil(round(measured / steal["window_s"], 9))
    assert all(-1e-9 <= w <= 100.0 + 1e-9 for w in windows), windows
    assert steal["mean"] == pytest.approx(100.0 * vm["wait_time_s"] / (vm["vcpu_count"] * measured), rel=REL, abs=1e-6)
    assert min(windows) - 1e-9 <= steal["mean"] <= max(windows) + 1e-9
    assert steal["p95"] == sorted(windows)[math.ceil(0.95 * len(windows)) - 1]


def check_identities(s: dict) -> None:
    measured = s["duration_s"] - s["warmup_s"]
    host = s["host"]
    approx = lambda x: pytest.approx(x, rel=REL, abs=1e-6)  # noqa: E731
    assert host["busy_time_s"] + host["idle_time_s"] == approx(host["pcpus"] * measured)
    assert 0.0 <= host["utilization"] <= 1.0 + REL
    total_cpu = 0.0
    counts = ("total", "smt_sibling", "same_socket", "other_socket", "other_numa")
    host_migr = {k: 0 for k in counts}
    for vm in s["vms"]:
        assert vm["vcpu_count"] == len(vm["vcpus"])
        assert vm["cpu_time_s"] == approx(sum(v["cpu_time_s"] for v in vm["vcpus"]))
        assert vm["wait_time_s"] == approx(sum(v["wait_time_s"] for v in vm["vcpus"]))
        assert vm["halted_time_s"] == approx(sum(v["halted_time_s"] for v in vm["vcpus"]))
        assert vm["spin_time_s"] == approx(sum(v["spin_time_s"] for v in vm["vcpus"]))
        assert 0.0 <= vm["cpu_share"] <= 1.0 + REL
        check_steal(vm, measured)
        total_cpu += vm["cpu_time_s"]
        for v in vm["vcpus"]:
            for k in ("cpu_time_s", "wait_time_s", "halted_time_s", "spin_time_s", "overhead_time_s"):
                assert v[k] >= 0.0, (vm["name"], v["index"], k, v[k])
            # a vCPU is always running, waiting for a pCPU, or halted
            assert v["cpu_time_s"] + v["wait_time_s"] + v["halted_time_s"] == approx(measured), (vm["name"], v)
            assert v["spin_time_s"] <= v["cpu_time_s"] + 1e-9
            m = v["migrations"]
            assert m["total"] == sum(x for k, x in m.items() if k not in ("total", "cross_socket_share"))
            if m["total"]:
                assert m["cross_socket_share"] == approx((m["other_socket"] + m["other_numa"]) / m["total"])
            else:
                assert "cross_socket_share" not in m
            for k in host_migr:
                host_migr[k] += m[k]
        for w in vm["workloads"]:
            assert w["completed"] >= 0
            assert w["throughput"] == approx(w["completed"] / measured)
            check_latency(w["latency_ms"])
        check_latency(vm["latency_ms"])
    assert sum(vm["cpu_share"] for vm in s["vms"]) <= 1.0 + 1e-6
    # The pCPUs ran vCPUs or host threads (the default noise's kernel threads among them).
    threads_cpu = sum(h["cpu_time_s"] for h in s.get("host_threads", []))
    assert total_cpu + threads_cpu == approx(host["busy_time_s"])
    assert host_migr == {k: host["migrations"][k] for k in counts}
    jain = s["fairness"]["jain_vm"]
    assert jain is None or 0.0 < jain <= 1.0 + REL


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_scenarios_keep_identities(sc):
    res = vcpulab.run(sc, check_invariants=True)
    check_identities(res.summary)
    assert vcpulab.run(sc).to_json() == res.to_json(), "not deterministic (or invariant checks change results)"


CONSTANT_LATENCY = {
    "name": "constant-latency",
    "duration": "1s",
    # No host noise: an interruption would lengthen the requests it lands in.
    "host": {"cores_per_socket": 1, "costs": {"context_switch": "0us"}, "noise": {"enabled": False}},
    "scheduler": {"name": "rr"},
    "vm": [{
        "name": "srv",
        "vcpus": 1,
        "workload": [{
            "kind": "program",
            "arrivals": {"process": "periodic", "interval": "10ms"},
            "ops": [{"op": "serve", "service": "1003us"}],
        }],
    }],
}


def test_constant_latency_has_exact_quantiles():
    lat = vcpulab.run(CONSTANT_LATENCY).summary["vms"][0]["latency_ms"]
    assert lat["count"] > 0
    assert lat["mean"] == pytest.approx(1.003)
    assert lat["max"] == pytest.approx(1.003)
    # quantiles of identical samples must equal that sample (at least not fall below the minimum)
    assert lat["p50"] == pytest.approx(1.003, rel=1e-6)
    assert lat["p99"] == pytest.approx(1.003, rel=1e-6)


# ------------------------------------------------------------- order independence
#
# Under `rr` (per-pCPU round robin, vCPUs fixed on home pCPUs) VMs pinned to disjoint
# pCPUs do not interact: without turbo or SMT the clock of one pCPU does not depend on
# another, and every random stream is derived from the VM's name, not its position. So
# the order of the [[vm]] entries must not change any VM's figures. Without host noise:
# its streams are the pCPUs', and rr's home pCPU of a vCPU depends on its position.


@st.composite
def disjoint_rr_scenarios(draw):
    nvms = draw(st.integers(2, 4))
    # each VM gets 1-2 pCPUs of its own, consecutive
    widths = [draw(st.integers(1, 2)) for _ in range(nvms)]
    ncpus = sum(widths)
    vms, first = [], 0
    for i, w in enumerate(widths):
        cpus = f"{first}-{first + w - 1}" if w > 1 else f"{first}"
        vm = {"name": f"vm{i}", "vcpus": draw(st.integers(1, 4)), "affinity": cpus,
              "workload": draw(st.lists(st.one_of(_program, _server, _presets), min_size=1, max_size=2))}
        if draw(st.booleans()):
            vm["start_jitter"] = f"{draw(st.integers(1, 500))}us"
        vms.append(vm)
        first += w
    return {
        "name": "order",
        "duration": f"{draw(st.integers(5, 40))}ms",
        "seed": draw(st.integers(0, 2**32)),
        "host": {"cores_per_socket": ncpus, "noise": {"enabled": False}},
        "scheduler": {"name": "rr", "slice": f"{draw(st.integers(100, 3000))}us"},
        "vm": vms,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(disjoint_rr_scenarios(), st.randoms(use_true_random=False))
def test_vm_order_does_not_matter_with_disjoint_affinities_under_rr(sc, rnd):
    base = {vm["name"]: vm for vm in vcpulab.run(sc, check_invariants=True).summary["vms"]}
    shuffled = dict(sc, vm=list(sc["vm"]))
    rnd.shuffle(shuffled["vm"])
    other = {vm["name"]: vm for vm in vcpulab.run(shuffled, check_invariants=True).summary["vms"]}
    assert base.keys() == other.keys()
    for name in base:
        assert other[name] == base[name], f"{name} changed when the VMs were listed as {[v['name'] for v in shuffled['vm']]}"


# ------------------------------------------------------------- every scheduler
#
# The random scenarios above draw from every registered scheduler; these make sure each
# one runs at least once, whatever the draws.


def test_parameter_ranges_name_registered_schedulers_and_parameters():
    params = {s["name"]: {p["name"] for p in s["params"]} for s in _REGISTERED}
    for name, ranges in _PARAM_RANGES.items():
        assert name in params, f"{name} is not a registered scheduler"
        assert set(ranges) <= params[name], (name, set(ranges) - params[name])


@pytest.mark.parametrize("name", [s["name"] for s in _REGISTERED])
def test_every_registered_scheduler_keeps_the_identities(name):
    # 6 vCPUs on 4 pCPUs (two for schedulers that reserve one), latency vCPUs included.
    sc = {
        "name": "each", "duration": "60ms", "warmup": "10ms", "seed": 5,
        "host": {"cores_per_socket": 2, "threads_per_core": 2},
        "scheduler": {"name": name},
        "vm": [
            {"name": "lat", "vcpus": 2, "class": "mixvm", "workload": [
                {"kind": "program", "threads": 2,
                 "ops": [{"op": "compute", "duration": "200us"}, {"op": "io", "latency": "300us"}]}]},
            {"name": "hog", "vcpus": 4, "workload": [{"kind": "stress-ng", "threads": 4}]},
        ],
    }
    res = vcpulab.run(sc, check_invariants=True)
    check_identities(res.summary)
