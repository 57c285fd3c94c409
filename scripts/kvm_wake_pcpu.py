#!/usr/bin/env python3
"""Where the woken vCPU of a real wake-up case runs, and how soon, from a `perf sched` trace.

For the `wake-busy*` cases (`vcpu0` halts and the harness's waker thread wakes it through
an eventfd; `vcpu1`-`vcpuN` are busy): for each wake-up of `vcpu0` by `vcpulab-waker`,
how many busy vCPU threads sat on the pCPU it then ran on (each busy thread is where it
last ran or migrated to), and how long it took from the wake-up to its run. Also the
share of the time `vcpu0`'s pCPU held 0, 1, 2, ... busy vCPU threads.

    perf sched record -o run.perf -- vcpulab kvm run scenarios/kvm/wake-busy3-nice19.toml --repetitions 1 --json
    python scripts/kvm_wake_pcpu.py run.perf

docs/validation.md ("Another Xeon machine") has the runs of 2026-12-05 it was used on: a
nice-19 vCPU woken on a pCPU with one busy vCPU ran 2 us later (p50), with two it waited
milliseconds.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict

from kvm_sched_trace import MIGRATE, SWITCH, WAKE, events

BUSY = re.compile(r"vcpu[1-9]\d*$")


def main(path: str) -> None:
    where: dict[str, int] = {}  # busy vCPU thread -> its pCPU
    running: dict[int, str] = {}  # pCPU -> the thread on it, from the switches so far
    woken_at = None
    waits: dict[int, list[float]] = defaultdict(list)  # busy threads on that pCPU -> wake->run (us)
    held: dict[int, float] = defaultdict(float)  # busy threads on vcpu0's pCPU -> seconds
    v0_cpu, last_t = None, None

    def busy_on(cpu: int) -> int:
        return sum(1 for c in where.values() if c == cpu)

    for t, cpu, event, rest in events(path):
        if last_t is not None and v0_cpu is not None:
            held[busy_on(v0_cpu)] += t - last_t
        last_t = t
        if event == "sched_migrate_task":
            m = MIGRATE.search(rest)
            who, dest = m.group(1), int(m.group(4))
            if BUSY.match(who):
                where[who] = dest
            elif who == "vcpu0":
                v0_cpu = dest
        elif event == "sched_waking":
            if WAKE.search(rest).group(1) == "vcpu0" and running.get(cpu, "").startswith("vcpulab-waker"):
                woken_at = t
        elif event == "sched_switch":
            nxt = SWITCH.search(rest).group(4)
            running[cpu] = nxt
            if BUSY.match(nxt):
                where[nxt] = cpu
            elif nxt == "vcpu0":
                v0_cpu = cpu
                if woken_at is not None:
                    waits[busy_on(cpu)].append((t - woken_at) * 1e6)
                    woken_at = None
    total = sum(held.values()) or 1.0
    print(f"{path}: share of the time vcpu0's pCPU held N busy vCPUs: "
          + ", ".join(f"N={n}: {s / total:.2f}" for n, s in sorted(held.items())))
    for n, xs in sorted(waits.items()):
        print(f"  woken by the waker with {n} busy vCPU(s) on that pCPU: {len(xs)} wake-ups, "
              f"wake -> run p50 {statistics.median(xs):.0f} us, mean {statistics.mean(xs):.0f} us")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
