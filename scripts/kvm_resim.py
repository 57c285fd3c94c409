#!/usr/bin/env python3
"""The simulated side of a saved `vcpulab kvm compare --json` run again, with another host
profile, against the same real runs: what a calibration would have given.

    vcpulab kvm compare --json > compare.json
    python scripts/kvm_resim.py compare.json PROFILE [--out OUT.json]

PROFILE is a profile file or a shipped profile's name. The simulated host is the one
`vcpulab kvm compare` builds on this machine (`eevdf`, the tick of this kernel's
CONFIG_HZ, the running kernel's features), so run it on the machine the real side was
measured on. It prints each row (real, sim, sim / real, whether within 2x) and the counts
within 2x, held-out cases apart; `--out` writes the rows, as `vcpulab kvm compare --json`
does, with the new simulated side. docs/validation.md ("Another Xeon machine") used it.
"""

from __future__ import annotations

import argparse
import json
import platform

from vcpulab import kvm_compare as KC
from vcpulab.cli.kvm import _within_line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("compare", help="the JSON of `vcpulab kvm compare --json`")
    ap.add_argument("profile", help="a host profile: a file, or a shipped profile's name")
    ap.add_argument("--out", help="write the rows with the new simulated side here")
    args = ap.parse_args()
    with open(args.compare, encoding="utf-8") as f:
        rows = json.load(f)
    tick = f"{1000 / KC.host_model()['hz']:g}ms"
    sched = KC._eevdf_sched(tick, args.profile, platform.release())
    cases = {c["id"]: c for c in KC.cases()}
    out = []
    for cid in dict.fromkeys(r["case"] for r in rows):
        sims = KC.simulate(cases[cid], tick, args.profile, sched)
        for r in (r for r in rows if r["case"] == cid):
            sim, runs = sims.get(r["metric"], (None, []))
            ratio = sim / r["real"] if sim is not None and r["real"] else None
            out.append(dict(r, sim=sim, sim_runs=runs, sim_spread=KC._spread(runs), ratio=ratio))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)

    def within(r: dict) -> bool:
        return r["ratio"] is not None and 0.5 <= r["ratio"] <= 2

    def fmt(x) -> str:
        return "-" if x is None else f"{x:.4g}"

    for r in out:
        flag = "" if within(r) else "  out"
        held = " (held out)" if r["held_out"] else ""
        print(f"{r['case'] + held:32s} {r['metric']:17s} real {fmt(r['real']):>10s}  sim {fmt(r['sim']):>10s}"
              f"  sim/real {fmt(r['ratio'])}{flag}")
    print(_within_line(out))


if __name__ == "__main__":
    main()
