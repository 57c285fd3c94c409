#!/usr/bin/env python3
"""How much of the noise `vcpulab kvm calibrate` measures is the harness's own monitor
thread: its noise runs (guest program `gaps`, one busy vCPU per CPU, 1 s each) with the
monitor waking every 500 us, as in every other run, and then ten times a second, as
calibrate's noise runs do since session 31 (`MONITOR_POLL_QUIET_NS`).

    python scripts/kvm_noise_monitor.py [REPETITIONS] [OUT.json]

Prints one line per run: the gaps' rate per vCPU and their median, mean and 90th
percentile (ns), and the kernel threads' runs (as calibrate reports them); OUT.json
(default kvm-noise-monitor.json) holds the same, by monitor period. Needs /dev/kvm.
docs/validation.md ("The monitor counted twice") used it.
"""

from __future__ import annotations

import json
import sys

from vcpulab import kvm_calibrate as C


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    out_path = sys.argv[2] if len(sys.argv) > 2 else "kvm-noise-monitor.json"
    out: dict[int, list[dict[str, float]]] = {}
    for poll in (500_000, C.MONITOR_POLL_QUIET_NS):
        rows = []
        for i in range(reps):
            row = C.noise_run(10**9, "kvm", poll)
            rows.append(row)
            print(poll, i, {k: round(v, 1) if v else v for k, v in row.items()}, flush=True)
        out[poll] = rows
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
