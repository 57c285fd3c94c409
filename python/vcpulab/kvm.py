"""``vcpulab kvm``: the real-KVM harness (crate ``vcpulab-kvm``) from Python.

A *KVM scenario* is a TOML file (or dict) that reuses the simulator's keys where they
mean the same — ``name``, ``duration``, ``seed``, ``[[vm]]`` with ``vcpus`` and
``[[vm.workload]]`` ``kind = "program"`` ``ops`` — plus host policies
(``[[vm.vcpu_policy]]``) and harness options (``[kvm]``). See docs/kvm.md.

Each repetition runs in its own process (``python -m vcpulab._kvm_worker``), which calls
the Rust harness with the GIL released. The summary has the simulator's shape
(``vms[].cpu_time_s``, ``wait_time_s``, ``throughput``, ``throughput_unit``, ``latency_ms``,
``vcpus[]``) plus harness fields (``harness``, ``metric`` with median and spread over the
repetitions, per-vCPU steal time, context switches and KVM stats).
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, Optional, Union

from ._native import ScenarioError, SimulationError
from .api import _plain

KvmScenarioLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000, "h": 3_600_000_000_000}
_DUR = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*(ns|us|ms|s|min|h)\s*$")

TOP_KEYS = {"name", "description", "duration", "seed", "kvm", "vm", "host", "scheduler", "warmup"}
KVM_KEYS = {"repetitions", "mode", "timeout", "ple", "waker", "cgroup", "halt"}
# [kvm] halt: how an `io` op's vCPU waits. "exit": an exit to the harness, which blocks the
# vCPU thread on an eventfd (no in-kernel halt, no halt polling). "kernel": `sti; hlt` at
# CPL0, a halt KVM handles in the kernel (with the host's halt polling), ended by an
# interrupt the harness sends through an irqfd (program irq-wake).
HALT_MODES = ("exit", "kernel")
VM_KEYS = {"name", "vcpus", "spinlock", "workload", "vcpu_policy", "weight", "affinity", "guest_timeslice"}
WORKLOAD_KEYS = {"kind", "threads", "ops", "unit", "arrivals"}
POLICY_KEYS = {"vcpus", "affinity", "nice", "sched", "priority", "slice", "deadline", "cgroup"}
CGROUP_KEYS = {"name", "shares", "quota", "period", "cpus"}
PLE_KEYS = {"window", "policy", "boost"}
PLE_POLICIES = ("none", "yield", "boost", "boost-fifo", "migrate")
SCHED_CLASSES = ("other", "batch", "idle", "fifo", "rr", "deadline")


class _Ctx:
    def __init__(self, origin: str):
        self.origin = origin

    def err(self, path: str, msg: str) -> ScenarioError:
        return ScenarioError(f"{self.origin}: {path}: {msg}" if path else f"{self.origin}: {msg}")

    def keys(self, table: Any, allowed: set[str], path: str) -> dict[str, Any]:
        if not isinstance(table, Mapping):
            raise self.err(path, f"expected a table, got {type(table).__name__}")
        for k in table:
            if k not in allowed:
                raise self.err(f"{path}.{k}" if path else k, f"unknown key; allowed keys here: {', '.join(sorted(allowed))}")
        return dict(table)

    def dur(self, v: Any, path: str) -> int:
        if isinstance(v, str):
            m = _DUR.match(v)
            if m:
                return int(round(float(m.group(1)) * _UNITS[m.group(2)]))
        raise self.err(path, f"expected a duration like \"30ns\", \"1ms\", \"1s\", got {v!r}")

    def dist(self, v: Any, path: str) -> dict[str, Any]:
        """A distribution → the harness's form (fixed / uniform / exp)."""
        if isinstance(v, str):
            return {"dist": "fixed", "value_ns": self.dur(v, path)}
        if isinstance(v, Mapping):
            kind = v.get("dist")
            if kind == "fixed":
                return {"dist": "fixed", "value_ns": self.dur(v.get("value"), f"{path}.value")}
            if kind == "uniform":
                return {"dist": "uniform", "min_ns": self.dur(v.get("min"), f"{path}.min"), "max_ns": self.dur(v.get("max"), f"{path}.max")}
            if kind == "exp":
                return {"dist": "exp", "mean_ns": self.dur(v.get("mean"), f"{path}.mean")}
            if kind == "normal":
                return {"dist": "fixed", "value_ns": self.dur(v.get("mean"), f"{path}.mean")}
            if kind == "lognormal":
                return {"dist": "fixed", "value_ns": self.dur(v.get("median"), f"{path}.median")}
        raise self.err(path, f"expected a duration or a distribution table, got {v!r}")

    def int_(self, v: Any, path: str, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(path, f"expected an integer, got {v!r}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise self.err(path, f"{v} is outside {lo}..{hi}")
        return v


def _mean_ns(d: dict[str, Any]) -> int:
    if d["dist"] == "fixed":
        return d["value_ns"]
    if d["dist"] == "uniform":
        return (d["min_ns"] + d["max_ns"]) // 2
    return d["mean_ns"]


def cpu_list(s: Any, ctx: _Ctx, path: str) -> list[int]:
    if isinstance(s, int) and not isinstance(s, bool):
        return [s]
    if not isinstance(s, str):
        raise ctx.err(path, f"expected a cpu-list string like \"0-3,6\", got {s!r}")
    out: list[int] = []
    for part in filter(None, (p.strip() for p in s.split(","))):
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                if a > b:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
        except ValueError:
            raise ctx.err(path, f"bad cpu-list {s!r}") from None
    if not out:
        raise ctx.err(path, "empty cpu-list")
    return out


def load(scenario: KvmScenarioLike) -> tuple[dict[str, Any], str]:
    """(the scenario as a dict, its origin for messages)."""
    if isinstance(scenario, Mapping):
        return dict(_plain(scenario)), "<dict>"
    path = os.fspath(scenario)
    with open(path, "rb") as f:
        data = f.read()
    if path.lower().endswith(".json"):
        return json.loads(data), path
    try:
        import tomllib  # type: ignore[import-not-found]
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(data.decode("utf-8")), path
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: invalid TOML: {e}") from None


def _policy(p: Mapping[str, Any], ctx: _Ctx, path: str, cgroups: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "affinity" in p:
        out["affinity"] = cpu_list(p["affinity"], ctx, f"{path}.affinity")
        ncpu = os.cpu_count() or 1
        bad = [c for c in out["affinity"] if c >= ncpu]
        if bad:
            raise ctx.err(f"{path}.affinity", f"names host CPU {bad[0]}, but this host has CPUs 0-{ncpu - 1}")
    if "nice" in p:
        out["nice"] = ctx.int_(p["nice"], f"{path}.nice", -20, 19)
    if "sched" in p:
        if p["sched"] not in SCHED_CLASSES:
            raise ctx.err(f"{path}.sched", f"{p['sched']!r}: expected one of {', '.join(SCHED_CLASSES)}")
        out["sched"] = p["sched"]
    if "priority" in p:
        out["priority"] = ctx.int_(p["priority"], f"{path}.priority", 1, 99)
        if out.get("sched") not in ("fifo", "rr"):
            raise ctx.err(f"{path}.priority", "applies to sched = \"fifo\" or \"rr\" only")
    if "slice" in p:
        out["slice_ns"] = ctx.dur(p["slice"], f"{path}.slice")
    if "deadline" in p:
        d = ctx.keys(p["deadline"], {"runtime", "deadline", "period"}, f"{path}.deadline")
        if "runtime" not in d:
            raise ctx.err(f"{path}.deadline.runtime", "required")
        out["sched"] = "deadline"
        out["dl_runtime_ns"] = ctx.dur(d["runtime"], f"{path}.deadline.runtime")
        if "deadline" in d:
            out["dl_deadline_ns"] = ctx.dur(d["deadline"], f"{path}.deadline.deadline")
        if "period" in d:
            out["dl_period_ns"] = ctx.dur(d["period"], f"{path}.deadline.period")
    elif out.get("sched") == "deadline":
        raise ctx.err(f"{path}.deadline", "sched = \"deadline\" needs deadline = { runtime = ..., period = ... }")
    if "cgroup" in p:
        if p["cgroup"] not in cgroups:
            raise ctx.err(f"{path}.cgroup", f"{p['cgroup']!r} is not defined under [[kvm.cgroup]] (defined: {', '.join(sorted(cgroups)) or 'none'})")
        out["cgroup"] = p["cgroup"]
    return out


def _program(ops: Any, ctx: _Ctx, path: str, spinlock: str) -> dict[str, Any]:
    """Maps a program's ops onto a guest program: [compute], [compute?, lock],
    [compute?, ipi], [compute?, io], [compute?, sleep]."""
    if not isinstance(ops, list) or not ops:
        raise ctx.err(path, "expected a non-empty array of ops")
    out: dict[str, Any] = {"ncs_ns": 0}
    rest = list(enumerate(ops))
    i0, first = rest[0]
    if not isinstance(first, Mapping):
        raise ctx.err(f"{path}[0]", "expected a table")
    if first.get("op") == "compute":
        ctx.keys(first, {"op", "duration", "mode", "cycles"}, f"{path}[0]")
        if "duration" not in first:
            raise ctx.err(f"{path}[0].duration", "required here (cycles are not supported by the harness)")
        out["ncs_ns"] = _mean_ns(ctx.dist(first["duration"], f"{path}[0].duration"))
        rest = rest[1:]
    if not rest:
        if out["ncs_ns"] <= 0:
            raise ctx.err(f"{path}[0].duration", "a compute-only program needs a duration > 0")
        out["program"] = "compute"
        return out
    if len(rest) > 1:
        raise ctx.err(path, "the harness runs [compute], or an optional compute followed by one of lock, ipi, io, sleep")
    i, op = rest[0]
    p = f"{path}[{i}]"
    if not isinstance(op, Mapping):
        raise ctx.err(p, "expected a table")
    kind = op.get("op")
    if kind == "lock":
        ctx.keys(op, {"op", "lock", "hold", "kind"}, p)
        k = op.get("kind", spinlock)
        if k not in ("ticket", "tas"):
            raise ctx.err(f"{p}.kind", f"{k!r}: expected \"ticket\" or \"tas\"")
        out["program"] = k
        out["cs_ns"] = _mean_ns(ctx.dist(op.get("hold", "0ns"), f"{p}.hold"))
    elif kind == "ipi":
        ctx.keys(op, {"op", "targets"}, p)
        if op.get("targets", "all") != "all":
            raise ctx.err(f"{p}.targets", "the harness supports targets = \"all\" (an all-vCPU barrier) only")
        out["program"] = "barrier"
    elif kind == "io":
        ctx.keys(op, {"op", "latency"}, p)
        out["program"] = "wake"
        out["io"] = ctx.dist(op.get("latency", "1ms"), f"{p}.latency")
    elif kind == "sleep":
        ctx.keys(op, {"op", "duration"}, p)
        out["program"] = "timer"
        out["sleep_ns"] = _mean_ns(ctx.dist(op.get("duration"), f"{p}.duration"))
    else:
        raise ctx.err(f"{p}.op", f"{kind!r} is not supported by the harness (compute, lock, ipi, io, sleep)")
    return out


def to_config(sc: Mapping[str, Any], origin: str = "<dict>", duration: Optional[str] = None,
              mode: Optional[str] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Validates a KVM scenario; returns (harness config, meta for the summary)."""
    ctx = _Ctx(origin)
    sc = ctx.keys(sc, TOP_KEYS, "")
    if duration is not None:
        # An override from the command line: blame the flag, not the scenario file.
        flag = _Ctx("--duration")
        dur_ns = flag.dur(duration, "")
        if dur_ns <= 0:
            raise flag.err("", "must be > 0")
    else:
        if "duration" not in sc:
            raise ctx.err("duration", "required")
        dur_ns = ctx.dur(sc["duration"], "duration")
        if dur_ns <= 0:
            raise ctx.err("duration", "must be > 0")
    kvm = ctx.keys(sc.get("kvm", {}), KVM_KEYS, "kvm")
    reps = ctx.int_(kvm.get("repetitions", 3), "kvm.repetitions", 1, 1000)
    cfg: dict[str, Any] = {"duration_ns": dur_ns, "seed": ctx.int_(sc.get("seed", 1), "seed", 0)}
    if "warmup" in sc:
        # As in the simulator: the op counts of the first `warmup` of the run are left out.
        warm_ns = ctx.dur(sc["warmup"], "warmup")
        if warm_ns >= dur_ns:
            if duration is not None:
                raise _Ctx("--duration").err("", f"({duration}) must be longer than the scenario's warmup "
                                                 f"({sc['warmup']}), which it includes")
            raise ctx.err("warmup", f"({sc['warmup']}) must be shorter than the duration ({dur_ns / 1e9:g} s)")
        if warm_ns > 0:
            cfg["warmup_ns"] = warm_ns
    m = mode or kvm.get("mode", "auto")
    if m not in ("auto", "kvm", "threads"):
        raise ctx.err("kvm.mode", f"{m!r}: expected auto, kvm or threads")
    cfg["mode"] = m
    cfg["timeout_ns"] = ctx.dur(kvm["timeout"], "kvm.timeout") if "timeout" in kvm else max(30 * 10**9, 3 * dur_ns + 10 * 10**9)
    if "ple" in kvm:
        ple = ctx.keys(kvm["ple"], PLE_KEYS, "kvm.ple")
        pol = ple.get("policy", "none")
        if pol not in PLE_POLICIES:
            raise ctx.err("kvm.ple.policy", f"{pol!r}: expected one of {', '.join(PLE_POLICIES)}")
        cfg["ple"] = {"window": ctx.int_(ple.get("window", 4096), "kvm.ple.window", 1), "policy": pol}
        if "boost" in ple:
            cfg["ple"]["boost_ns"] = ctx.dur(ple["boost"], "kvm.ple.boost")
    cgroups = []
    for gi, g in enumerate(kvm.get("cgroup", [])):
        p = f"kvm.cgroup[{gi}]"
        g = ctx.keys(g, CGROUP_KEYS, p)
        name = g.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ctx.err(f"{p}.name", "required: letters, digits, - and _")
        c: dict[str, Any] = {"name": name}
        if "shares" in g:
            c["shares"] = ctx.int_(g["shares"], f"{p}.shares", 2, 262144)
        if "quota" in g:
            c["quota_ns"] = ctx.dur(g["quota"], f"{p}.quota")
        if "period" in g:
            c["period_ns"] = ctx.dur(g["period"], f"{p}.period")
        if "cpus" in g:
            cpu_list(g["cpus"], ctx, f"{p}.cpus")
            c["cpus"] = str(g["cpus"])
        cgroups.append(c)
    cfg["cgroups"] = cgroups
    names = {c["name"] for c in cgroups}
    if "waker" in kvm:
        cfg["waker"] = _policy(ctx.keys(kvm["waker"], POLICY_KEYS - {"vcpus"}, "kvm.waker"), ctx, "kvm.waker", names)

    vms = sc.get("vm")
    if not isinstance(vms, list) or len(vms) != 1:
        raise ctx.err("vm", "exactly one [[vm]] is required (the harness runs one VM)")
    vm = ctx.keys(vms[0], VM_KEYS, "vm[0]")
    nv = ctx.int_(vm.get("vcpus"), "vm[0].vcpus", 1, 64)
    spinlock = vm.get("spinlock", "ticket")
    vcpus: list[dict[str, Any]] = []
    workloads = []
    halt = kvm.get("halt", "exit")
    if halt not in HALT_MODES:
        raise ctx.err("kvm.halt", f"{halt!r}: expected \"exit\" or \"kernel\"")
    for wi, w in enumerate(vm.get("workload", [])):
        p = f"vm[0].workload[{wi}]"
        w = ctx.keys(w, WORKLOAD_KEYS, p)
        if w.get("kind") != "program":
            raise ctx.err(f"{p}.kind", f"{w.get('kind')!r}: the harness runs kind = \"program\" workloads only")
        threads = ctx.int_(w.get("threads", 1), f"{p}.threads", 0)
        prog = _program(w.get("ops"), ctx, f"{p}.ops", spinlock)
        if prog["program"] == "wake" and halt == "kernel":
            prog["program"] = "irq-wake"
        workloads.append({"kind": "program", "program": prog["program"], "threads": threads, "unit": w.get("unit")})
        for _ in range(threads):
            vcpus.append({**prog, "group": wi, "policy": {}})
    if len(vcpus) > nv:
        raise ctx.err("vm[0].workload", f"{len(vcpus)} threads but {nv} vCPUs: the harness runs one thread per vCPU")
    while len(vcpus) < nv:
        vcpus.append({"program": "idle", "group": 63, "policy": {}})
    for pi, pol in enumerate(vm.get("vcpu_policy", [])):
        p = f"vm[0].vcpu_policy[{pi}]"
        pol = ctx.keys(pol, POLICY_KEYS, p)
        targets = cpu_list(pol["vcpus"], ctx, f"{p}.vcpus") if "vcpus" in pol else list(range(nv))
        for t in targets:
            if t >= nv:
                raise ctx.err(f"{p}.vcpus", f"names vCPU {t}, but the VM has vCPUs 0-{nv - 1}")
            vcpus[t]["policy"].update(_policy(pol, ctx, p, names))
    cfg["vcpus"] = vcpus
    meta = {"name": sc.get("name", "unnamed"), "vm": vm.get("name", "vm"), "repetitions": reps, "workloads": workloads}
    return cfg, meta


# ---------------------------------------------------------------------------- running


def run_config(cfg: Mapping[str, Any], timeout: Optional[float] = None) -> dict[str, Any]:
    """One harness run in a worker process; returns its result dict. Raises
    SimulationError with the harness's message on failure, KeyboardInterrupt after the
    worker has stopped and restored everything on Ctrl-C."""
    if timeout is None:
        timeout = cfg.get("timeout_ns", 60 * 10**9) / 1e9 + 30
    proc = subprocess.Popen([sys.executable, "-m", "vcpulab._kvm_worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(json.dumps(cfg), timeout=timeout)
    except KeyboardInterrupt:
        # The worker got the SIGINT too: it stops the guest and restores host settings.
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        except Exception:
            proc.kill()
        raise
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise SimulationError(f"KVM harness: no result after {timeout:.0f} s; the worker was stopped") from None
    try:
        res = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    except json.JSONDecodeError:
        res = None
    if res is None:
        raise SimulationError(f"KVM harness worker failed (exit {proc.returncode}): {err.strip()[-2000:] or 'no output'}")
    if "error" in res:
        e = res["error"]
        if e.get("kind") == "interrupted":
            raise KeyboardInterrupt
        raise SimulationError(f"KVM harness ({e.get('kind')}): {e.get('message')}")
    return res


def _quantiles(samples_ns: list[float]) -> Optional[dict[str, float]]:
    if not samples_ns:
        return None
    s = sorted(samples_ns)

    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))] / 1e6

    return {"count": len(s), "mean": sum(s) / len(s) / 1e6, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": s[-1] / 1e6}


def _jain(xs: list[float]) -> Optional[float]:
    xs = [x for x in xs]
    if not xs or sum(xs) <= 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


_UNIT = {"compute": "ops/s", "tas": "acquisitions/s", "ticket": "acquisitions/s", "barrier": "rounds/s",
         "wake": "wake-ups/s", "irq-wake": "wake-ups/s", "timer": "timer expiries/s", "idle": "ops/s"}


def missed_warmup(cfg: Mapping[str, Any], res: Mapping[str, Any]) -> bool:
    """Whether a run with a warm-up ended before it did (a vCPU finished early): its
    figures then cover the whole run."""
    return bool(cfg.get("warmup_ns")) and res.get("warm_wall_s") is None


def _measured_ops(res: dict[str, Any], v: dict[str, Any]) -> int:
    """A vCPU's ops in the measured interval: after the warm-up, if the run had one."""
    warm = v.get("warm_ops") if res.get("warm_wall_s") is not None else None
    return v["ops"] - warm if warm is not None else v["ops"]


def _measured_wall(res: dict[str, Any], v: dict[str, Any]) -> float:
    """The interval a vCPU's measured ops were done in."""
    warm = res.get("warm_wall_s")
    return warm if warm is not None else v["wall_s"]


def _workload_stats(res: dict[str, Any], group: int, program: str) -> dict[str, Any]:
    vs = [v for v in res["vcpus"] if v["group"] == group]
    wall = max((_measured_wall(res, v) for v in vs), default=0.0) or 1e-9
    ops = sum(_measured_ops(res, v) for v in vs)
    if program == "barrier":
        ops = max((_measured_ops(res, v) for v in vs), default=0)  # a round completes for everyone
    samples = [x for v in vs for x in v["samples_ns"]]
    out: dict[str, Any] = {"completed": ops, "throughput": ops / wall, "latency_ms": _quantiles(samples), "wall_s": wall}
    if program in ("tas", "ticket"):
        out["ns_per_op"] = wall * 1e9 / ops if ops else None
    elif program == "barrier":
        out["ns_per_round"] = wall * 1e9 / ops if ops else None
    if program == "compute":
        out["fairness_jain"] = _jain([_measured_ops(res, v) for v in vs])
    return out


def primary_metric(program: str, ws: dict[str, Any]) -> tuple[str, str, Optional[float]]:
    """The headline number of a workload: (metric, unit, value)."""
    if program in ("tas", "ticket"):
        return "ns_per_op", "ns", ws.get("ns_per_op")
    if program == "barrier":
        return "ns_per_round", "ns", ws.get("ns_per_round")
    if program in ("wake", "irq-wake", "timer"):
        lat = ws.get("latency_ms")
        return ("timer_lateness_p50" if program == "timer" else "wake_p50"), "us", (lat["p50"] * 1e3 if lat else None)
    return "throughput", "ops/s", ws.get("throughput")


def summarize(runs: list[dict[str, Any]], cfg: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The summary (simulator shape + harness fields) over the repetitions."""
    wl = meta["workloads"]
    first = next((i for i, w in enumerate(wl) if w["threads"] > 0), None)
    per_run = []
    for r in runs:
        ws = _workload_stats(r, first, wl[first]["program"]) if first is not None else {}
        per_run.append(primary_metric(wl[first]["program"], ws) if first is not None else ("none", "", None))
    values = [v for (_, _, v) in per_run if v is not None]
    med = statistics.median(values) if values else None
    # the repetition whose headline is the median gives the detailed tables
    pick = min(range(len(runs)), key=lambda i: abs((per_run[i][2] if per_run[i][2] is not None else 0) - (med or 0)))
    r = runs[pick]
    workloads = []
    for i, w in enumerate(wl):
        ws = _workload_stats(r, i, w["program"])
        workloads.append({"kind": "program", "program": w["program"], "threads": w["threads"], "completed": ws["completed"],
                          "throughput": ws["throughput"], "throughput_unit": w.get("unit") or _UNIT[w["program"]],
                          "latency_ms": ws["latency_ms"], **{k: ws[k] for k in ("ns_per_op", "ns_per_round", "fairness_jain") if k in ws}})
    vcpus = []
    for v in r["vcpus"]:
        ops, wall = _measured_ops(r, v), _measured_wall(r, v)
        vcpus.append({
            "index": v["index"], "program": v["program"], "cpu_time_s": v["cpu_time_s"], "wait_time_s": v["wait_time_s"],
            "steal_time_s": v["steal_time_s"], "ops": ops, "throughput": ops / wall if wall else 0.0,
            "spins": v["spins"], "ple_exits": v["ple_exits"], "dispatches": v["timeslices"],
            "voluntary_switches": v["voluntary_switches"], "involuntary_switches": v["involuntary_switches"],
            "policy": cfg["vcpus"][v["index"]].get("policy", {}), "kvm_stats": v["kvm_stats"],
        })
    wall = r["wall_s"] or 1e-9
    ncpu = os.cpu_count() or 1
    cpu = sum(v["cpu_time_s"] for v in vcpus)
    vm = {
        "name": meta["vm"], "vcpu_count": len(vcpus), "weight": None,
        "cpu_time_s": cpu, "cpu_share": cpu / (ncpu * wall), "wait_time_s": sum(v["wait_time_s"] for v in vcpus),
        "halted_time_s": None, "spin_time_s": None,
        "throughput": workloads[first]["throughput"] if first is not None else None,
        "throughput_unit": workloads[first]["throughput_unit"] if first is not None else None,
        "latency_ms": workloads[first]["latency_ms"] if first is not None else None,
        "workloads": workloads, "vcpus": vcpus,
    }
    name, unit, _ = per_run[0] if per_run else ("none", "", None)
    spread = (max(values) - min(values)) / med if values and med else None
    unwarmed = sum(missed_warmup(cfg, run) for run in runs)
    return {
        "scenario": meta["name"],
        "scheduler": f"linux {platform.release()} (real host)",
        "harness": r["mode"],
        "notice": r.get("notice"),
        "duration_s": cfg["duration_ns"] / 1e9,
        "warmup_s": cfg.get("warmup_ns", 0) / 1e9,
        "repetitions": len(runs),
        "metric": {"name": name, "unit": unit, "median": med, "min": min(values) if values else None,
                   "max": max(values) if values else None, "spread": spread, "values": [v for (_, _, v) in per_run]},
        "vms": [vm],
        "host": {"pcpus": ncpu, "kernel": platform.release(), "cgroup": r.get("cgroup_version"),
                 "tsc_hz": r["tsc_hz"], "ns_per_loop": r["ns_per_loop"]},
        "fairness": {"jain_vcpu_cpu_time": _jain([v["cpu_time_s"] for v in vcpus if v["program"] != "idle"])},
        "ple": r["ple"],
        "restored": [x for run in runs for x in run.get("restored", [])],
        "warnings": [x for run in runs for x in run.get("warnings", [])]
        + ([f"{unwarmed} of {len(runs)} repetitions ended before the warm-up did: their figures cover the whole run"]
           if unwarmed else []),
    }


def run(scenario: KvmScenarioLike, repetitions: Optional[int] = None, duration: Optional[str] = None,
        mode: Optional[str] = None) -> dict[str, Any]:
    """Runs a KVM scenario (repeated); returns the summary dict."""
    sc, origin = load(scenario)
    cfg, meta = to_config(sc, origin, duration=duration, mode=mode)
    if repetitions is not None:
        meta["repetitions"] = repetitions
    runs = [run_config(cfg) for _ in range(meta["repetitions"])]
    return summarize(runs, cfg, meta)


def kvm_available() -> tuple[bool, str]:
    """(usable, reason): whether /dev/kvm can be opened here."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False, f"the KVM harness needs Linux on x86-64 (this is {sys.platform}/{platform.machine()})"
    if not os.path.exists("/dev/kvm"):
        return False, "/dev/kvm does not exist"
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
        os.close(fd)
    except OSError as e:
        return False, f"/dev/kvm cannot be opened: {e.strerror}"
    return True, "ok"


def summary_text(s: Mapping[str, Any]) -> str:
    from ._format import num, pairs, table, wrap

    m = s["metric"]
    warm = f" (counted after a {s['warmup_s']:g} s warm-up)" if s.get("warmup_s") else ""
    lines = [wrap(f"{s['scenario']}: {s['scheduler']}, harness {s['harness']}, {s['duration_s']:g} s x {s['repetitions']}{warm}")]
    if s.get("notice"):
        lines.append(wrap(s["notice"], "notice: "))
    lines.append(wrap(f"{m['name']} ({m['unit']}): median {num(m['median'], 4)}, min {num(m['min'], 4)}, "
                      f"max {num(m['max'], 4)}, spread {num(m['spread'], 3)}  "
                      f"[runs: {', '.join(num(v, 4) for v in m['values'])}]"))
    vm = s["vms"][0]
    lines.append("")
    rows = [[w["program"], str(w["threads"]), num(w["throughput"], 4), w["throughput_unit"],
             num(w.get("ns_per_op") or w.get("ns_per_round"), 4),
             num(w["latency_ms"]["p50"] * 1e3, 4) if w["latency_ms"] else "-",
             num(w["latency_ms"]["p99"] * 1e3, 4) if w["latency_ms"] else "-"] for w in vm["workloads"]]
    lines.append(table(["workload", "threads", "throughput", "unit", "ns/op", "p50 us", "p99 us"], rows,
                       right=[False, True, True, False, True, True, True]))
    lines.append("")
    rows = [[str(v["index"]), v["program"], str(v["ops"]), num(v["cpu_time_s"], 3), num(v["wait_time_s"], 3),
             num(v["steal_time_s"], 3), str(v["involuntary_switches"]), str(v["ple_exits"]),
             str(v["kvm_stats"].get("exits", "-")), ",".join(f"{k}={x}" for k, x in v["policy"].items()) or "-"]
            for v in vm["vcpus"]]
    lines.append(table(["vcpu", "program", "ops", "cpu s", "wait s", "steal s", "invol", "ple", "exits", "policy"], rows,
                       right=[True, False, True, True, True, True, True, True, True, False]))
    if s["ple"]["exits"]:
        scalars = {k: v for k, v in s["ple"].items() if isinstance(v, (int, float, str))}
        lines += ["", wrap(pairs(scalars), "PLE: ")]
    if s["restored"]:
        more = " ..." if len(s["restored"]) > 4 else ""
        lines += ["", wrap(f"{len(s['restored'])} changes undone ({'; '.join(s['restored'][:4])}{more})", "restored: ")]
    for w in s["warnings"]:
        lines.append(wrap(w, "warning: "))
    return "\n".join(lines)
