"""``vcpulab schedulers``: the host schedulers and their parameters."""

from __future__ import annotations

import argparse
import json

from .. import api
from ._common import EXIT_OK, RAW, out


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("schedulers", help="list the host schedulers and their parameters", formatter_class=RAW,
                       epilog="examples:\n  vcpulab schedulers\n  vcpulab schedulers --json\n")
    s.add_argument("--json", action="store_true", help="print the list as JSON")
    s.set_defaults(func=cmd_schedulers)


def cmd_schedulers(args: argparse.Namespace) -> int:
    scheds = api.schedulers()
    if args.json:
        out(json.dumps(scheds, indent=2))
        return EXIT_OK
    from .._format import table

    rows = []
    for s in scheds:
        params = ", ".join(f"{p['name']}={p['default']}" for p in s["params"]) or "-"
        rows.append([s["name"], params, s["description"]])
    out(table(["name", "params (defaults)", "description"], rows))
    out()
    out("parameters (set them under [scheduler] in a scenario):")
    for s in scheds:
        for p in s["params"]:
            out(f"  {s['name']}.{p['name']} ({p['type']}, default {p['default']}): {p['help']}")
    return EXIT_OK
