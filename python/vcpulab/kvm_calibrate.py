"""``vcpulab kvm calibrate``: measure this host's costs with the real-KVM harness and write
them as a *host profile* (issue 27, part 4).

A profile is a TOML file a scenario names with ``[host] profile = "FILE"`` (or the name of
a profile shipped with vcpulab). Its ``[host.costs]`` and ``[kvm]`` values stand in for the
defaults of those keys; a key the scenario sets itself wins. ``[profile]`` records where
the numbers come from: date, kernel, CPUs, load and the command. docs/scenarios.md
("Host profiles") has the format, docs/validation.md what each value does to the
comparison.

What is measured, each with its own guest program (none of them is a comparison case):

- ``exit_round_trip``: one exit from guest code to the VMM in user space and straight back
  (``out`` to a port the harness resumes at once; guest program ``null-exit``, 1 vCPU).
  Under PVM this is the world switch the notes put at ~32 us from CPL3. It is what the
  harness's user-space pause-loop exit costs the spinning vCPU: ``[kvm] ple_exit_cost``.
  The guest stamps the TSC around every exit, so each is also a sample
  (``exit_round_trip_p50``, ``_mean``, ``_p90``, ``_p99``): the profile gives the cost as
  a log-normal of that median whose mean is the samples' mean (sigma = sqrt(2 ln(mean /
  median)), as for the noise below), drawn per exit, instead of a constant (issue 27
  part 1: latencies as distributions).
- ``halt_wakeup``: from the moment the harness wakes a vCPU blocked in a halt exit (its
  eventfd write) to guest code running again, median over wake-ups 200 us after each halt
  (guest program ``wake``, 1 vCPU, nothing else running). The harness's halt is an exit to
  user space: the woken thread goes back to the VMM and enters the guest with KVM_RUN
  again. Only the harness halts that way, so this is ``[harness] halt_wakeup_cost``, which
  ``vcpulab kvm compare`` gives its wake-up cases' simulated side, a log-normal fitted to
  the samples the same way (``halt_wakeup_p50`` = the median above, ``_mean``, ``_p90``,
  ``_p99``), drawn per wake-up.
- ``interrupt_wakeup``: the wake-up of a guest's own halt (since session 23): the vCPU
  halts in the kernel (`sti; hlt` at CPL0, guest program ``irq-wake``) and the harness
  sends it an MSI through an irqfd 1 ms after each halt (longer than KVM's 200 us halt
  polling, so the vCPU thread blocks), to guest code running after the handler: the
  receive side of an IPI or a device interrupt to a halted vCPU, which stays in the kernel.
  That is what the model's ``[kvm] halt_wakeup_cost`` stands for (a wake-up from a real
  block: schedule in, VM entry, the interrupt's delivery), so it is that key since
  2026-12-05 (session 31), fitted like the others. Until then the key took ``halt_wakeup``,
  and every in-kernel halt of a scenario with the profile paid the harness's user-space
  path instead. The two differ by machine, in both directions: 12.2 against 36.9 us on the
  Xeon of 2026-12-05 (``pvm-xeon-2cpu-v1252``), 32.0 against 22.0 us on the EPYC of
  2026-11-27 (``pvm-epyc-2cpu``).
- ``cacheline_handoff``: one handoff of a cache line between two vCPUs that poll it with
  PAUSE (guest program ``ping-pong``, 2 vCPUs on the 2 CPUs): the lock word's trip from a
  releasing vCPU to a spinning one: ``[host.costs] cacheline_transfer``, which the
  simulator charges on a lock taken last on another core and twice on an IPI round trip.
- ``spin``: one iteration of the lock programs' wait loop (PAUSE, the spin count, the stop
  check and the count towards the window), from a vCPU that waits on a lock word nobody
  writes and stamps the TSC every ``SPIN_WINDOW`` spins, where a lock program would take its
  user-space PLE exit (guest program ``spin``, 1 vCPU): the median window over
  ``SPIN_WINDOW``. How long the harness's PLE window lasts follows from it; written as
  ``[harness] spin_ns``, which ``vcpulab kvm compare`` reads to size the simulated window.
  PAUSE's latency differs between CPU generations by several times (24.7 ns on the machine of
  the KVM notes, ~11.5 ns on the Xeon of 2026-12-05), so this is a property of the host.
- ``slice``: the mean run length of 4 busy vCPU threads on the host's CPUs (schedstat run
  time over time slices): the tick and slice the host scheduler really gives. Recorded in
  ``[profile]`` (the tick of a scenario is its scheduler's own key).
- ``noise_*``: the time a running vCPU loses to its host without being descheduled by
  another vCPU (guest program ``gaps``: a tight TSC loop recording every gap of 1 us or
  more, one vCPU per CPU, all CPUs busy): interruptions per second per vCPU
  (``noise_rate``) and the median, mean and 90th percentile of their durations. They
  become ``[host.noise]``: ``interrupt_rate``, and a log-normal ``interrupt_duration`` with
  that median and the sigma that gives it that mean (sigma = sqrt(2 ln(mean / median))),
  so that the time lost to noise (rate x mean) is the measured one; the measured p90 is
  recorded beside it (the gaps are a mixture of short interrupts and ~60-120 us world
  switches, which one log-normal does not follow in its tail). The gaps hold the tick, device and timer
  interrupts, softirq work and kernel threads that ran on the CPU, each with the world
  switch it costs on this host; they are measured together, not apart. Not the harness's
  own monitor thread, since session 31 (below).
- ``housekeeping_*``: the host's kernel threads (kworker, ksoftirqd, RCU, migration,
  kdamond, ...), from /proc/PID/schedstat of every child of kthreadd before and after the
  same runs: runs per second per CPU, their mean run, and the median of the runs' per-thread
  mean. They become ``[host.noise] housekeeping_rate`` and a log-normal
  ``housekeeping_run`` (that median, and the sigma that gives that mean): a kernel thread
  per pCPU that the host scheduler schedules like any other thread. Unlike an
  interruption, such a thread takes part in the scheduler's fairness, so it can move which
  vCPU runs when.

Every run keeps the harness's monitor thread quiet (since session 31): it wakes every 500
us in other runs, preempting a vCPU thread each time when every CPU is busy, so calibrate's
runs wake it ten times a second (``MONITOR_POLL_QUIET_NS``). Before, its wake-ups were part
of the measured noise (about three fifths of the gaps, four fifths of the time they took,
on the Xeon of 2026-12-05), and of the ping-pong and slice runs, and `vcpulab kvm compare`,
which models the monitor as a host thread of its own, counted them twice.

Not measured: the context-switch cost (at the host's few hundred switches a second it is
below what these runs resolve; the model's 2 us stays) and an IPI between vCPUs (the
harness's guest code runs at CPL3, where interrupts go through emulated CPL0 handlers).
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from typing import Any, Callable, Optional

from . import kvm as K
from ._files import atomic_write_text

WAKE_GAP_NS = 200_000  # 200 us after each halt (the comparison's wake cases use 1-3 ms)
IRQ_GAP_NS = 1_000_000  # past KVM's 200 us halt polling: the interrupt wakes a blocked thread
SPIN_WINDOW = 4096  # spins per sample: the user-space PLE window of `vcpulab kvm compare`
GAP_THRESHOLD_NS = 1_000  # a TSC loop iteration is ~10-30 ns; 1 us is far above its jitter
# The harness's monitor thread wakes every 500 us in a run (its config's `monitor_poll_ns`),
# and with every CPU busy each wake-up preempts a vCPU thread: the harness's own noise, not
# the host's. Calibrate's runs wake it ten times a second instead (it then only ends the
# run; none of them boosts under PLE, which would need it sooner).
MONITOR_POLL_QUIET_NS = 100_000_000


def _cfg(vcpus: list[dict[str, Any]], duration_ns: int, mode: str) -> dict[str, Any]:
    cfg = {"duration_ns": duration_ns, "mode": mode, "seed": 1, "timeout_ns": max(30 * 10**9, 3 * duration_ns + 10**10),
           "vcpus": vcpus, "cgroups": [], "monitor_poll_ns": MONITOR_POLL_QUIET_NS}
    if any(v["program"] == "spin" for v in vcpus):
        cfg["ple"] = {"window": SPIN_WINDOW}  # the spin program's sample period; it takes no exit
    return cfg


def _v(program: str, group: int = 0, **kw: Any) -> dict[str, Any]:
    return {"program": program, "group": group, "policy": {}, **kw}


def _per_op_ns(res: dict[str, Any]) -> Optional[float]:
    ops = sum(v["ops"] for v in res["vcpus"])
    wall = max(v["wall_s"] for v in res["vcpus"])
    return wall * 1e9 / ops if ops else None


def _sample_p50_ns(res: dict[str, Any]) -> Optional[float]:
    """The median of a run's samples (its wake-ups, or its spin windows), ns."""
    s = sorted(x for v in res["vcpus"] for x in v["samples_ns"])
    return s[len(s) // 2] if s else None


def _spin_ns(res: dict[str, Any]) -> Optional[float]:
    window = _sample_p50_ns(res)
    return window / SPIN_WINDOW if window is not None else None


def _slice_ns(res: dict[str, Any]) -> Optional[float]:
    xs = [v["cpu_time_s"] / v["timeslices"] * 1e9 for v in res["vcpus"] if v["timeslices"]]
    return statistics.median(xs) if xs else None


# (key, what, harness vCPUs, measure: a run's result -> ns)
MEASUREMENTS: list[tuple[str, str, list[dict[str, Any]], Callable[[dict[str, Any]], Optional[float]]]] = [
    ("exit_round_trip", "guest -> VMM in user space -> guest (null-exit, 1 vCPU)", [_v("null-exit")], _per_op_ns),
    ("halt_wakeup", "wake of a halted vCPU -> its guest code runs (wake, 1 vCPU, 200 us gaps)",
     [_v("wake", io={"dist": "fixed", "value_ns": WAKE_GAP_NS})], _sample_p50_ns),
    ("interrupt_wakeup", "an MSI through an irqfd wakes a vCPU halted in the kernel -> its guest code runs "
                         "(irq-wake, 1 vCPU, 1 ms gaps)",
     [_v("irq-wake", io={"dist": "fixed", "value_ns": IRQ_GAP_NS})], _sample_p50_ns),
    ("cacheline_handoff", "one cache-line handoff between two PAUSE-polling vCPUs (ping-pong, 2 vCPUs)",
     [_v("ping-pong"), _v("ping-pong")], _per_op_ns),
    ("spin", f"one spin of the lock programs' wait loop (spin, 1 vCPU; median of {SPIN_WINDOW}-spin windows)",
     [_v("spin")], _spin_ns),
    ("slice", "run length of 4 busy vCPU threads (compute, 4 vCPUs; schedstat)",
     [_v("compute", ncs_ns=10_000) for _ in range(4)], _slice_ns),
]


# Measurements whose every event is also a sample (the guest stamps the TSC around each
# exit or wake-up): their percentiles and mean become a distribution in the profile.
LATENCY_DISTRIBUTIONS = {"exit_round_trip": "exit round trip (null-exit samples)",
                         "halt_wakeup": "halt wake-up (wake samples)",
                         "interrupt_wakeup": "interrupt wake-up (irq-wake samples)"}


def _quantile(s: list[float], p: float) -> float:
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


def _latency_stats(key: str, res: dict[str, Any]) -> dict[str, Optional[float]]:
    """One run's samples of a latency: median, mean, 90th and 99th percentiles (ns)."""
    s = sorted(x for v in res["vcpus"] for x in v["samples_ns"])
    if not s:
        return {}
    return {f"{key}_p50": _quantile(s, 0.5), f"{key}_mean": statistics.mean(s),
            f"{key}_p90": _quantile(s, 0.9), f"{key}_p99": _quantile(s, 0.99)}


def _lognormal(median: Optional[float], mean: Optional[float]) -> Optional[str]:
    """The log-normal of this median whose mean is this mean, as a profile's TOML value:
    sigma = sqrt(2 ln(mean / median)), so the time the events cost in all (count x mean)
    is the measured one. None without both."""
    if not median or not mean:
        return None
    import math

    sigma = math.sqrt(2 * math.log(mean / median)) if mean > median else 0.0
    return f'{{ dist = "lognormal", median = "{_dur(median)}", sigma = {sigma:.3g} }}'


def _gaps(res: dict[str, Any]) -> dict[str, Optional[float]]:
    """One gaps run: interruptions per second per vCPU, and the gaps' median, mean and
    90th percentile (ns), over all its vCPUs."""
    rates = [v["ops"] / v["wall_s"] for v in res["vcpus"] if v["wall_s"] > 0]
    s = sorted(x for v in res["vcpus"] for x in v["samples_ns"])
    return {"noise_rate": statistics.mean(rates) if rates else None, "noise_p50": _quantile(s, 0.5) if s else None,
            "noise_mean": statistics.mean(s) if s else None, "noise_p90": _quantile(s, 0.9) if s else None}


def _kthreads() -> dict[int, tuple[int, int]]:
    """Every kernel thread (a child of kthreadd, pid 2): pid -> (run ns, time slices),
    from /proc/PID/schedstat."""
    out: dict[int, tuple[int, int]] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != 2:
                continue
            with open(f"/proc/{pid}/schedstat") as f:
                run, _wait, slices = (int(x) for x in f.read().split()[:3])
            out[int(pid)] = (run, slices)
        except (OSError, ValueError, IndexError):
            continue
    return out


def _housekeeping(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], seconds: float,
                  ncpus: int) -> dict[str, Optional[float]]:
    """Kernel-thread runs per second per CPU, their mean run, and the median of the runs'
    per-thread mean (schedstat counts runs, not each run's length)."""
    runs: list[tuple[float, int]] = []  # (that thread's mean run, its runs)
    for pid, (run, n) in after.items():
        if pid in before and n > before[pid][1]:
            dn = n - before[pid][1]
            runs.append(((run - before[pid][0]) / dn, dn))
    total = sum(dn for _, dn in runs)
    if not total or seconds <= 0:
        return {"housekeeping_rate": None, "housekeeping_p50": None, "housekeeping_mean": None}
    runs.sort()
    half, seen, p50 = total / 2, 0, runs[-1][0]
    for mean, dn in runs:
        seen += dn
        if seen >= half:
            p50 = mean
            break
    return {"housekeeping_rate": total / seconds / ncpus, "housekeeping_p50": p50,
            "housekeeping_mean": sum(m * dn for m, dn in runs) / total}


def _ncpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


NOISE_WHAT = {"housekeeping_rate": ("kernel-thread runs per second per CPU (schedstat, during gaps)", "1/s"),
              "housekeeping_p50": ("median of the kernel-thread runs' per-thread mean (schedstat)", "ns"),
              "housekeeping_mean": ("mean kernel-thread run (schedstat)", "ns"),
              "noise_rate": ("interruptions per second of a busy vCPU (gaps, one vCPU per CPU)", "1/s"),
              "noise_p50": ("median interruption (gaps)", "ns"),
              "noise_mean": ("mean interruption (gaps)", "ns"),
              "noise_p90": ("90th percentile interruption (gaps)", "ns")}


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unreadable"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        return f"{len(names)} x {names[0]}" if names else platform.processor() or "unknown"
    except OSError:
        return "unknown"


def _value(what: str, unit: str, runs: list[float]) -> dict[str, Any]:
    """One measurement over its runs: median and spread ((max - min) / median)."""
    med = statistics.median(runs) if runs else None
    return {"what": what, "unit": unit, "median": med, "runs": runs,
            "spread": (max(runs) - min(runs)) / med if runs and med else None}


# Two neighbouring runs of one measurement (in value order) this far apart, the larger over
# the smaller, put its runs in two groups. The EPYC machine's cache-line handoff of
# 2026-11-27 was ~36 or ~175 ns from one run to the next (docs/validation.md, "Re-run, and
# the handoff re-calibrated"); in some of that day's calibrations the noise, housekeeping
# and slice measurements split too (one long kernel-thread run, one quiet second).
MODE_GAP = 2.0


def two_groups(runs: list[float]) -> Optional[tuple[list[float], list[float]]]:
    """The runs split at the widest gap between neighbours in value order, if the upper
    neighbour is at least `MODE_GAP` times the lower; else None. A median of a few such
    runs lands in either group, so one calibration can take either mode."""
    vals = sorted(r for r in runs if r is not None and r > 0)
    if len(vals) < 2:
        return None
    i = max(range(1, len(vals)), key=lambda k: vals[k] / vals[k - 1])
    if vals[i] / vals[i - 1] < MODE_GAP:
        return None
    return vals[:i], vals[i:]


def noise_run(duration_ns: int, mode: str, monitor_poll_ns: int = MONITOR_POLL_QUIET_NS) -> dict[str, Optional[float]]:
    """One noise run: a busy `gaps` vCPU per CPU for `duration_ns`, the monitor waking every
    `monitor_poll_ns`; the gaps' rate and durations and the kernel threads' runs over it
    (the `noise_*` and `housekeeping_*` values of one run)."""
    ncpus = _ncpus()
    cfg = {**_cfg([_v("gaps", sleep_ns=GAP_THRESHOLD_NS) for _ in range(ncpus)], duration_ns, mode),
           "monitor_poll_ns": monitor_poll_ns}
    before, t0 = _kthreads(), time.monotonic()
    res = K.run_config(cfg)
    return {**_gaps(res), **_housekeeping(before, _kthreads(), time.monotonic() - t0, ncpus)}


def calibrate(duration: str = "1s", repetitions: int = 3, mode: str = "kvm",
              progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Runs every measurement ``repetitions`` times; returns {"meta", "values"} where each
    value has its unit, the median, the spread ((max - min) / median) and the runs."""
    dur_ns = K._Ctx("--duration").dur(duration, "")
    if dur_ns <= 0:
        raise K.ScenarioError("--duration: must be > 0")
    if repetitions < 1:
        raise K.ScenarioError("--repetitions: must be >= 1")
    load_before = _loadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    values: dict[str, Any] = {}
    harness = None
    for key, what, vcpus, measure in MEASUREMENTS:
        runs = []
        dist_runs: dict[str, list[float]] = {}
        for i in range(repetitions):
            if progress:
                progress(f"{key}: run {i + 1}/{repetitions}")
            res = K.run_config(_cfg(vcpus, dur_ns, mode))
            harness = res["mode"]
            v = measure(res)
            if v is not None:
                runs.append(v)
            if key in LATENCY_DISTRIBUTIONS:
                for k, x in _latency_stats(key, res).items():
                    if x is not None:
                        dist_runs.setdefault(k, []).append(x)
        values[key] = _value(what, "ns", runs)
        for k, xs in dist_runs.items():
            values[k] = _value(f"{k.rsplit('_', 1)[1]} of one {LATENCY_DISTRIBUTIONS[key]}", "ns", xs)
    gap_runs: dict[str, list[float]] = {k: [] for k in NOISE_WHAT}
    for i in range(repetitions):
        if progress:
            progress(f"noise: run {i + 1}/{repetitions}")
        for k, x in noise_run(dur_ns, mode).items():
            if x is not None:
                gap_runs[k].append(x)
    for key, runs in gap_runs.items():
        values[key] = _value(NOISE_WHAT[key][0], NOISE_WHAT[key][1], runs)
    hz = None
    try:
        from .kvm_compare import kernel_hz
        hz = kernel_hz()
    except Exception:  # pragma: no cover - best effort
        pass
    meta = {
        "measured": started.strftime("%Y-%m-%d %H:%M UTC"),
        "kernel": " ".join(os.uname()[2:4]),
        "cpus": _cpu_model(),
        "config_hz": hz,
        "harness": harness,
        "load": f"/proc/loadavg {load_before} before, {_loadavg()} after",
        "runs": f"{repetitions} x {duration} per measurement",
    }
    return {"meta": meta, "values": values}


def _dur(ns: float) -> str:
    """A duration string the scenario reader takes, to 3 significant figures."""
    if ns >= 1000:
        return f"{float(f'{ns / 1000:.3g}'):g}us"
    return f"{round(ns)}ns"


def profile_toml(cal: dict[str, Any], command: str, name: str) -> str:
    """The profile file for a calibration (see the module docstring)."""
    m, v = cal["meta"], cal["values"]

    def q(s: Any) -> str:
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'

    def val(key: str) -> Optional[float]:
        return v.get(key, {}).get("median")

    lines = [f"# vcpulab host profile {name}: written by `{command}`.",
             "# [host.costs], [host.noise] and [kvm] values stand in for those keys' defaults in a scenario with",
             "# [host] profile = \"<this file>\"; the scenario's own keys win. docs/scenarios.md, \"Host profiles\".",
             "", "[profile]", f"name = {q(name)}", f"measured = {q(m['measured'])}", f"command = {q(command)}",
             f"kernel = {q(m['kernel'])}", f"cpus = {q(m['cpus'])}"]
    if m.get("config_hz"):
        lines.append(f"config_hz = {m['config_hz']}")
    lines += [f"harness = {q(m['harness'])}", f"load = {q(m['load'])}", f"runs = {q(m['runs'])}"]
    if val("slice") is not None:
        lines.append(f"slice = {q(_dur(val('slice')))}  # measured run length of busy vCPU threads")
    lines += ["", "# every measurement: its unit, median, spread (max - min) / median and runs"]
    for key, e in v.items():
        if e["median"] is None:
            continue
        runs = ", ".join(f"{x:.4g}" for x in e["runs"])
        lines.append(f"[profile.measurements.{key}]")
        lines.append(f"what = {q(e['what'])}")
        lines.append(f"unit = {q(e['unit'])}")
        lines.append(f"median = {e['median']:.6g}")
        lines.append(f"spread = {e['spread']:.3g}")
        lines.append(f"runs = [{runs}]")
    lines.append("")
    if val("cacheline_handoff") is not None:
        lines += ["[host.costs]", f"cacheline_transfer = {q(_dur(val('cacheline_handoff')))}  # cacheline_handoff", ""]
    rate, duration = val("noise_rate"), _lognormal(val("noise_p50"), val("noise_mean"))
    if rate and duration:
        lines += ["[host.noise]", f"interrupt_rate = {rate:.4g}  # noise_rate",
                  f"interrupt_duration = {duration}  # noise_p50; sqrt(2 ln(noise_mean / noise_p50))"]
        hr, run = val("housekeeping_rate"), _lognormal(val("housekeeping_p50"), val("housekeeping_mean"))
        if hr and run:
            lines += [f"housekeeping_rate = {hr:.4g}  # housekeeping_rate",
                      f"housekeeping_run = {run}  # housekeeping_p50; sqrt(2 ln(housekeeping_mean / housekeeping_p50))"]
        lines.append("")

    def cost(out_key: str, key: str) -> list[str]:
        fit = _lognormal(val(f"{key}_p50"), val(f"{key}_mean"))
        if fit is not None:
            return [f"{out_key} = {fit}  # {key}_p50; sqrt(2 ln({key}_mean / {key}_p50)); {key}_p90 and _p99 above"]
        if val(key) is not None:
            return [f"{out_key} = {q(_dur(val(key)))}  # {key}"]
        return []

    # A guest's halt is in the kernel and an interrupt ends it: that wake-up is the model's
    # halt_wakeup_cost. The harness's user-space halt (its `wake` program) goes back to the
    # VMM and through KVM_RUN instead; only `vcpulab kvm compare` models that halt.
    # A vCPU switched out in the guest leaves guest mode and re-enters it as an exit does:
    # its world switch is the same round trip (which also holds the short trip through the
    # VMM in user space, ~1 us of syscalls, an upper bound under hardware virtualization).
    kv = (cost("ple_exit_cost", "exit_round_trip") + cost("halt_wakeup_cost", "interrupt_wakeup")
          + cost("world_switch_cost", "exit_round_trip"))
    if kv:
        lines += ["[kvm]", *kv, ""]
    harness = cost("halt_wakeup_cost", "halt_wakeup")
    spin = val("spin")
    if spin is not None:
        harness.append(f"spin_ns = {spin:.3g}  # spin")
    if harness:
        lines += ["[harness]", *harness, ""]
    return "\n".join(lines)


def write_profile(path: str, text: str) -> None:
    atomic_write_text(path, text, durable=True)
