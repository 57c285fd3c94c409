#!/usr/bin/env python3
"""How long a woken vCPU thread holds up the KVM harness's waker, from a `perf sched` trace.

The harness's vCPU thread asks the waker thread for its next wake-up through a
`std::sync::mpsc` channel, whose send wakes the waker before it unlocks the channel. A
waker that preempts the sender at once (a nice-19 vCPU beside busy ones) blocks on that
lock until the sender runs again. This script finds those inversions in a trace of one
vCPU (`vcpu0`, the woken one) and prints how long the vCPU ran, once back on a pCPU, before
it woke the waker again (the unlock): what a host profile's `[harness] send_hold` sets for
`vcpulab kvm compare` (`kvm_compare.HARNESS_SEND_HOLD` without one).

Record a run (needs root, /dev/kvm and tracefs at /sys/kernel/tracing):

  perf sched record -o run.perf -- vcpulab kvm run SCENARIO.toml --json > run.json
  python scripts/kvm_waker_inversion.py run.perf [more.perf ...]

With several traces it also prints the pooled holds, and with any, the line to put in a
host profile's `[harness]` table (`send_hold`), which `vcpulab kvm compare` then uses.

An inversion is the sequence: `vcpu0` switched out runnable with `vcpulab-waker` next (the
waker preempts it right after the send), the waker switched out to a thread other than
`vcpu0` (blocked on the lock), `vcpu0` switched in again; then the hold ends at `vcpu0`'s
next wake-up of the waker. docs/validation.md ("The harness's waker in the model") has the
runs of 2026-11-27 and -28 this was used on.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys

from vcpulab.kvm_calibrate import _lognormal

EVENT = re.compile(r"\s*(\S+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)")


def holds(path: str) -> tuple[list[float], int]:
    """The holds (us) of the inversions in the trace at `path` whose vCPU ran to the unlock
    in one piece, in order; and how many others it did not (preempted again first)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,cpu,time,event,trace"],
                         capture_output=True, text=True, check=True).stdout
    state, t_in, found, interrupted = None, 0.0, [], 0
    for line in out.splitlines():
        m = EVENT.match(line)
        if not m:
            continue
        comm, t, ev, rest = m.group(1), float(m.group(3)), m.group(4), m.group(5)
        if ev == "sched_switch":
            if "prev_comm=vcpu0 " in rest and "prev_state=R" in rest and "next_comm=vcpulab-waker" in rest:
                state = "preempted"
            elif "prev_comm=vcpulab-waker " in rest and state == "preempted":
                state = None if "next_comm=vcpu0 " in rest else "waker-blocked"
            elif "next_comm=vcpu0 " in rest and state == "waker-blocked":
                state, t_in = "resumed", t
            elif "prev_comm=vcpu0 " in rest and state == "resumed":
                # preempted again before the unlock: its hold is not one run; not counted
                state, interrupted = None, interrupted + 1
        elif ev == "sched_waking" and comm == "vcpu0" and "comm=vcpulab-waker" in rest and state == "resumed":
            found.append((t - t_in) * 1e6)
            state = None
    return found, interrupted


def main() -> int:
    paths = sys.argv[1:]
    if not paths:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: python scripts/kvm_waker_inversion.py TRACE.perf [TRACE.perf ...]", file=sys.stderr)
        return 2
    pooled: list[float] = []
    for path in paths:
        h, interrupted = holds(path)
        pooled += h
        if not h:
            print(f"{path}: no inversions held in one run (the waker never waited for vcpu0; "
                  f"{interrupted} preempted again)")
            continue
        print(f"{path}: {len(h)} inversions in one run: vcpu0 ran p50 {statistics.median(h):.1f} us, mean "
              f"{statistics.mean(h):.1f} us before it woke the waker; {interrupted} more preempted again before that")
    if len(paths) > 1 and pooled:
        print(f"pooled: {len(pooled)} inversions, p50 {statistics.median(pooled):.1f} us, "
              f"mean {statistics.mean(pooled):.1f} us")
    if pooled:
        # As a host profile's `[harness] send_hold` (docs/scenarios.md, "Host profiles"): the
        # log-normal of the pooled median whose mean is the pooled mean, fitted as
        # `vcpulab kvm calibrate` fits the profile's other latencies.
        fit = _lognormal(statistics.median(pooled) * 1e3, statistics.mean(pooled) * 1e3)
        if fit:
            print(f"send_hold = {fit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
