"""``vcpulab robustness``: every claim of a built-in reproduction judged again under
perturbations of its setup, with the share of perturbations in which it holds and its
worst counterexample as a runnable scenario file."""

from __future__ import annotations

import argparse
import json
import sys

from ._common import EXIT_OK, RAW, err, out, positive_int, seed

ROBUSTNESS_EPILOG = """\
examples:
  vcpulab robustness kvm-ple-short                 each claim's share and worst counterexample
  vcpulab robustness kvm-ple-short --json          the reports as JSON on stdout
  vcpulab robustness --all --out robust/           every experiment (long: about 8x reproduce)
  vcpulab robustness flms-io --resume --out robust/  after a kill: skip the finished runs
  vcpulab robustness --all --perturbation jitter-0 --perturbation jitter-1ms   only these
  vcpulab robustness flms-io --engine ray [--ray-address HOST:PORT]

The perturbations: seeds+1000 and seeds+2000 (other seeds), host-1 and host+1 (a core per
socket less, more), vm+1 (a copy of the noise VM), smt (SMT toggled), noise-swap (the noise
workload replaced), vendor (KVM intel <-> amd), jitter-0, jitter-0.5ms and jitter-1ms (every
VM's start_jitter set to 0, 0.5 ms, 1 ms). A perturbation that changes whether a case
the claim reads is overcommitted does not count for that claim; experiments exclude others
in their [robustness] table. docs/models.md ("Robustness") says more.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("robustness", help="judge the reproductions' claims under perturbations of their setup",
                       epilog=ROBUSTNESS_EPILOG, formatter_class=RAW,
                       description="Re-evaluate every claim of an experiment over a family of plausible "
                                   "perturbations of its setup; report the share in which it holds.")
    x.add_argument("names", nargs="*", metavar="EXPERIMENT", help="experiment ids (see vcpulab reproduce --list)")
    x.add_argument("--all", action="store_true", help="every built-in experiment")
    x.add_argument("--json", action="store_true", help="print the reports as a JSON list on stdout (and nothing else)")
    x.add_argument("--out", metavar="DIR", help="runs, reports and counterexamples (default: robustness-results)")
    x.add_argument("--seeds", type=positive_int, metavar="N", default=5,
                   help="seeds per case and perturbation (default and least: 5)")
    x.add_argument("--seed", type=seed, metavar="N", help="the first seed (default: each scenario's)")
    x.add_argument("--perturbation", action="append", metavar="ID",
                   help="only this perturbation (repeatable; default: the whole family, listed below)")
    x.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: a pool of worker processes (default); ray: Ray tasks (pip install 'vcpulab[ray]')")
    x.add_argument("--workers", type=positive_int, metavar="N",
                   help="worker processes (local; default: the number of CPUs) or CPUs of a started Ray instance")
    x.add_argument("--ray-address", metavar="ADDR", help="join this Ray cluster; default: start a local Ray instance")
    x.add_argument("--resume", action="store_true", help="continue a check in DIR: skip the runs already recorded")
    x.add_argument("--progress", action="store_true", help="show the progress bar even if stderr is not a terminal")
    x.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown on a terminal)")
    x.set_defaults(func=cmd_robustness)


def cmd_robustness(args: argparse.Namespace) -> int:
    from .. import api
    from ..robustness import DEFAULT_OUT, format_report, robustness
    from ._common import CliError

    known = [e["id"] for e in api.experiments()]
    if args.all:
        names = known
    elif args.names:
        names = args.names
        for n in names:
            if n not in known:
                raise CliError(f"unknown experiment {n!r}; available: {', '.join(known)}")
    else:
        raise CliError("name an experiment (or --all); available: " + ", ".join(known))
    progress = not args.no_progress and (args.progress or sys.stderr.isatty())
    try:
        reports = robustness(names, out_dir=args.out, seeds=args.seeds, seed=args.seed, engine=args.engine,
                             workers=args.workers, ray_address=args.ray_address, resume=args.resume,
                             progress=progress, perturbations=args.perturbation)
    except KeyboardInterrupt:
        err(f"vcpulab: the finished runs are recorded in {args.out or DEFAULT_OUT}/; continue with --resume")
        raise
    if args.json:
        out(json.dumps(reports, indent=2))
        return EXIT_OK
    claims = 0
    full = 0
    for i, rep in enumerate(reports):
        if i:
            out()
        for line in format_report(rep):
            out(line)
        claims += len(rep["claims"])
        full += sum(1 for c in rep["claims"] if c["share"] == 1.0)
    out()
    out(f"robustness: {claims} claims; {full} hold in every perturbation that applies; reports and "
        f"counterexamples in {args.out or DEFAULT_OUT}/")
    return EXIT_OK
