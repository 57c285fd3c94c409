"""``vcpulab validate``: check a scenario as ``run`` would, without running it."""

from __future__ import annotations

import argparse

from .. import api
from ._common import EXIT_OK, RAW, out


def add_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("validate", help="check a scenario without running it", formatter_class=RAW,
                       description="Check a scenario file as run would (including its refusal of runs estimated "
                                   "over 5e10 events); print OK and a short description, or the error (exit 2).",
                       epilog="example:\n  vcpulab validate scenario.toml\n")
    v.add_argument("scenario", metavar="SCENARIO", help="scenario file")
    v.add_argument("--force", action="store_true",
                   help="accept a scenario estimated to take hours (over 5e10 events), as run --force does")
    v.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    d = api.validate(args.scenario, force=args.force)
    from .._format import plural, wrap

    vms = "; ".join(f"{v['name']}: {plural(v['vcpus'], 'vCPU')}, {plural(v['workloads'], 'workload')}" for v in d["vms"])
    out(wrap(
        f"{args.scenario}: {d['name']!r}, scheduler {d['scheduler']}, {d['duration_s']:g} s, "
        f"seed {d['seed']}, {plural(d['pcpus'], 'pCPU')}, {plural(len(d['vms']), 'VM')} ({vms})", "OK ", "  "
    ))
    return EXIT_OK
