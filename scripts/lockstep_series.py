#!/usr/bin/env python3
"""App throughput and directed yields of scenarios/examples/lockstep.toml per time window,
at start jitters 0 and 1 ms (docs/models.md, "Noise and lockstep").

usage: scripts/lockstep_series.py SEED [SEED ...]

Runs the file for 0.125, 0.25, 0.5, 1, 2 and 4 s with `vcpulab run --json` (a run's first
T seconds do not depend on its duration) and prints, per window between those times,
loops/s and directed yields/s of the app VM, as "loops/yields" in thousands."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "examples" / "lockstep.toml"
ENDS = [0.125, 0.25, 0.5, 1, 2, 4]


def run(text: str, seed: int) -> tuple[int, int]:
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(text)
        f.flush()
        p = subprocess.run(["vcpulab", "run", f.name, "--json", "--seed", str(seed)],
                           capture_output=True, text=True, check=True)
    app = json.loads(p.stdout)["vms"][0]
    return app["workloads"][0]["completed"], app["ple"]["yield_successes"]


def main() -> None:
    src = SCENARIO.read_text()
    for seed in map(int, sys.argv[1:]):
        for jitter in ["0s", "1ms"]:
            row, prev, start = [], (0, 0), 0.0
            for end in ENDS:
                text = src.replace('duration = "2s"', f'duration = "{end}s"')
                text = text.replace("vcpus = 8\n", f'vcpus = 8\nstart_jitter = "{jitter}"\n')
                loops, yields = run(text, seed)
                span = end - start
                row.append(f"{(loops - prev[0]) / span / 1e3:5.1f}/{(yields - prev[1]) / span / 1e3:5.1f}")
                prev, start = (loops, yields), end
            print(f"seed {seed} jitter {jitter:>4}  " + "  ".join(row), flush=True)


if __name__ == "__main__":
    main()
