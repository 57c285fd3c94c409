#!/usr/bin/env python3
"""App throughput and directed yields of scenarios/examples/lockstep.toml at start
jitters 0, 0.5 and 1 ms, on three hosts: no noise, the default noise (seeds 1-20) and the
shipped profile `pvm-xeon-2cpu` (seeds 1-10); docs/models.md, "Noise and lockstep".

usage: scripts/lockstep_starts.py

Prints per host and start: the mean and standard deviation of the app's loops/s over the
seeds, the mean of seeds 1-10 (what tests/host_costs.rs compares), the fewest directed
yields of any seed, and seed 1's PLE exits and yields."""
import statistics
import tomllib
from pathlib import Path

from vcpulab import api

SCENARIO = (Path(__file__).resolve().parents[1] / "scenarios" / "examples" / "lockstep.toml").read_text(
    encoding="utf-8")
HOSTS = {"quiet": "[host.noise]\nenabled = false\n", "default": "", "profile": 'profile = "pvm-xeon-2cpu"\n'}


def scenario(jitter: str, host: str) -> dict:
    text = SCENARIO.replace("[host]\ncores_per_socket = 8\n", "[host]\ncores_per_socket = 8\n" + HOSTS[host])
    for vm in ("app", "hog"):
        text = text.replace(f'name = "{vm}"\nvcpus = 8\n', f'name = "{vm}"\nvcpus = 8\nstart_jitter = "{jitter}"\n')
    return tomllib.loads(text)


def one(jitter: str, host: str, seed: int) -> tuple[float, int, int]:
    app = api.run(scenario(jitter, host), seed=seed).summary["vms"][0]
    return app["throughput"], app["ple"]["yield_successes"], app["ple"]["exits"]


def main() -> None:
    for host, seeds in (("quiet", range(1, 2)), ("default", range(1, 21)), ("profile", range(1, 11))):
        for jitter in ("0s", "0.5ms", "1ms"):
            runs = [one(jitter, host, s) for s in seeds]
            loops = [r[0] for r in runs]
            print(f"{host:8} {jitter:6} loops/s {statistics.mean(loops):,.0f} +- {statistics.pstdev(loops):,.0f}"
                  f" (seeds 1-10: {statistics.mean(loops[:10]):,.0f}); fewest yields {min(r[1] for r in runs):,};"
                  f" seed 1: {runs[0][2]:,} exits, {runs[0][1]:,} yields", flush=True)


if __name__ == "__main__":
    main()
