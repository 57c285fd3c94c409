#!/usr/bin/env python3
"""Where the vCPU threads of a real `vcpulab kvm run` waited, from a `perf sched` trace.

Record a run (needs root, /dev/kvm and tracefs at /sys/kernel/tracing):

  perf sched record -o run.perf -- vcpulab kvm run SCENARIO.toml --json > run.json
  python scripts/kvm_sched_trace.py run.perf [--hi 0,1 --lo 2,3]

From the trace's `sched_switch`, `sched_waking` and `sched_migrate_task` events it prints,
over the window from the first vCPU thread's first run to the last vCPU switch:
  - per vCPU thread (threads named `vcpuN`): run time, run-queue wait (woken or preempted
    until it runs again), and the pCPUs it sat on over time; then its wake-ups and how
    soon each ran, its runs, its blocks, and its preemptions with the wait after each
    (where a woken vCPU's wait falls: before its first run, or after a preemption);
  - the ratio of the `--lo` vCPUs' wait to the `--hi` vCPUs' (the `shares-8192-vs-128`
    metric);
  - every other thread that ran in the window, by run time, with its switch-ins;
  - for the busiest of them, its wake-up to run latency and run lengths.
The harness's schedstat deltas start before the window (at the start barrier), so its own
wait figures are slightly larger. docs/models.md ("Cgroup shares against the root cgroup")
has the runs of 2026-11-27 that this script analysed.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
from collections import defaultdict

LINE = re.compile(r"^\s*(.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")
SWITCH = re.compile(r"prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
                    r"next_comm=(.*?) next_pid=(\d+)")
WAKE = re.compile(r"comm=(.*?) pid=(\d+) prio=\d+ target_cpu=(\d+)")
MIGRATE = re.compile(r"comm=(.*?) pid=(\d+) prio=\d+ orig_cpu=(\d+) dest_cpu=(\d+)")
VCPU = re.compile(r"^vcpu(\d+)$")


def events(path: str) -> list[tuple[float, int, str, str]]:
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,cpu,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    evs = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            evs.append((float(m.group(4)), int(m.group(3)), m.group(5), m.group(6)))
    return evs


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[int(q * (len(s) - 1))]


def analyse(path: str, hi: list[int], lo: list[int]) -> None:
    evs = events(path)
    names: dict[int, str] = {}
    vcpus: dict[int, int] = {}  # tid -> vCPU index
    for _, _, ev, rest in evs:
        if ev == "sched_switch":
            m = SWITCH.search(rest)
            for comm, tid in ((m.group(1), int(m.group(2))), (m.group(4), int(m.group(5)))):
                names[tid] = comm
                v = VCPU.match(comm)
                if v:
                    vcpus[tid] = int(v.group(1))
    starts = [t for t, _, ev, rest in evs if ev == "sched_switch" and int(SWITCH.search(rest).group(5)) in vcpus]
    ends = [t for t, _, ev, rest in evs if ev == "sched_switch" and int(SWITCH.search(rest).group(2)) in vcpus]
    t0, t1 = min(starts), max(ends)

    def clip(a: float, b: float) -> float:
        return max(0.0, min(b, t1) - max(a, t0))

    running: dict[int, tuple[int, float]] = {}
    run: dict[int, float] = defaultdict(float)
    switch_ins: dict[int, int] = defaultdict(int)
    queued: dict[int, float] = {}
    wait: dict[int, float] = defaultdict(float)
    placement: dict[int, list[tuple[float, int]]] = defaultdict(list)
    woke: dict[int, float] = {}
    latency: dict[int, list[float]] = defaultdict(list)
    lengths: dict[int, list[float]] = defaultdict(list)
    preempted: dict[int, float] = {}
    after_preempt: dict[int, list[float]] = defaultdict(list)
    blocks: dict[int, int] = defaultdict(int)
    for t, cpu, ev, rest in evs:
        if ev == "sched_switch":
            m = SWITCH.search(rest)
            prev, state, nxt = int(m.group(2)), m.group(3), int(m.group(5))
            if cpu in running:
                tid, since = running[cpu]
                run[tid] += clip(since, t)
                if t0 <= since <= t1:
                    lengths[tid].append(t - since)
            if state.startswith("R") and prev in vcpus:
                queued[prev] = t
                preempted[prev] = t
            elif prev in vcpus and t0 <= t <= t1:
                blocks[prev] += 1
            if nxt in preempted:
                if t0 <= t <= t1:
                    after_preempt[nxt].append(t - preempted[nxt])
                del preempted[nxt]
            if nxt in queued:
                wait[nxt] += clip(queued.pop(nxt), t)
            if nxt in woke:
                if t0 <= t <= t1:
                    latency[nxt].append(t - woke[nxt])
                del woke[nxt]
            if t0 <= t <= t1:
                switch_ins[nxt] += 1
            running[cpu] = (nxt, t)
            if nxt in vcpus and (not placement[nxt] or placement[nxt][-1][1] != cpu):
                placement[nxt].append((t, cpu))
        elif ev in ("sched_waking", "sched_wakeup_new"):
            tid = int(WAKE.search(rest).group(2))
            woke[tid] = t
            if tid in vcpus:
                queued.setdefault(tid, t)
        elif ev == "sched_migrate_task":
            m = MIGRATE.search(rest)
            tid = int(m.group(2))
            if tid in vcpus:
                placement[tid].append((t, int(m.group(4))))
    print(f"window {t1 - t0:.3f} s")
    for tid in sorted(vcpus, key=lambda x: vcpus[x]):
        where = " ".join(f"{p[0] - t0:+.3f}s:cpu{p[1]}" for p in placement[tid][:10])
        print(f"vcpu{vcpus[tid]}: run {run[tid]:.4f} s, wait {wait[tid]:.4f} s; on {where}")
        lat, ln, ap = latency[tid], lengths[tid], after_preempt[tid]
        if lat and ln:
            line = (f"  {len(lat)} wake-ups, to run p50 {quantile(lat, .5) * 1e6:.0f} us, mean "
                    f"{statistics.mean(lat) * 1e6:.0f} us; {len(ln)} runs, p50 {quantile(ln, .5) * 1e6:.0f} us; "
                    f"{blocks[tid]} blocks; {len(ap)} preemptions")
            if ap:
                line += (f", each followed by a wait of p50 {quantile(ap, .5) * 1e6:.0f} us, mean "
                         f"{statistics.mean(ap) * 1e6:.0f} us, {sum(ap) * 1e3:.1f} ms in all")
            print(line)
    by_index = {vcpus[tid]: wait[tid] for tid in vcpus}
    w_hi = sum(by_index.get(i, 0.0) for i in hi)
    w_lo = sum(by_index.get(i, 0.0) for i in lo)
    if w_hi:
        print(f"wait lo/hi = {w_lo:.4f} / {w_hi:.4f} = {w_lo / w_hi:.2f}")
    others = sorted((tid for tid in run if tid not in vcpus and tid != 0), key=lambda x: -run[x])
    print("other threads in the window:")
    for tid in others[:12]:
        print(f"  {names.get(tid, '?'):20} {tid:7} {run[tid] * 1e3:8.1f} ms  {switch_ins[tid]} switch-ins")
    if others and latency[others[0]]:
        top = others[0]
        lat, ln = latency[top], lengths[top]
        print(f"{names[top]} {top}: wake-up to run p50 {quantile(lat, .5) * 1e6:.0f} us, "
              f"p90 {quantile(lat, .9) * 1e6:.0f} us, mean {statistics.mean(lat) * 1e6:.0f} us; "
              f"runs p50 {quantile(ln, .5) * 1e6:.0f} us over {len(ln)} runs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="perf.data of `perf sched record`")
    ap.add_argument("--hi", default="0,1", help="vCPU indices of the ratio's denominator (default 0,1)")
    ap.add_argument("--lo", default="2,3", help="vCPU indices of the ratio's numerator (default 2,3)")
    a = ap.parse_args()
    analyse(a.trace, [int(x) for x in a.hi.split(",")], [int(x) for x in a.lo.split(",")])


if __name__ == "__main__":
    main()
