#!/usr/bin/env python3
"""Run-length variance of a fixed guest-style compute burst on this CPU (issue 27, part 1).

usage: scripts/compute_runlen.py CPU

Compiles scripts/compute_runlen.c (a dependent xorshift chain, no memory traffic) and times
bursts of about 5 us, 50 us, 500 us and 5 ms on the given CPU (taskset). For each length it
prints the robust spread of log(duration / median) (MAD x 1.4826, insensitive to the few
bursts an interrupt or a preemption lengthens), the coefficient of variation of the bursts
under 1.2x the median, their 1st and 99th percentiles over the median, and the share of
bursts over 1.2x the median (interrupted ones). Needs gcc and taskset."""
import math
import statistics as st
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().with_suffix(".c")


def main() -> None:
    cpu = sys.argv[1] if len(sys.argv) > 1 else "0"
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(Path(tmp) / "compute_runlen")
        subprocess.run(["gcc", "-O2", "-o", exe, str(SOURCE)], check=True)
        for iters, n in [(2500, 200000), (25000, 40000), (250000, 4000), (2500000, 400)]:
            out = subprocess.run(["taskset", "-c", cpu, exe, str(iters), str(n)], capture_output=True, text=True,
                                 check=True).stdout
            d = [int(x) for x in out.split()][n // 10:]  # the first 10 % warm the caches up
            med = st.median(d)
            mad = st.median([abs(math.log(x / med)) for x in d]) * 1.4826
            core = sorted(x for x in d if x < 1.2 * med)
            cv = st.pstdev(core) / st.mean(core)
            print(f"burst {med / 1000:9.1f} us  n={len(d)}  sigma_MAD={mad:.4f}  cv_core={cv:.4f}  "
                  f"p1={core[len(core) // 100] / med:.4f}  p99={core[len(core) * 99 // 100] / med:.4f}  "
                  f"over_1.2x={1 - len(core) / len(d):.4f}")


if __name__ == "__main__":
    main()
