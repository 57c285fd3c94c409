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
    from .._format import table, wrap

    rows = [[s["name"], str(len(s["params"])) if s["params"] else "-", s["description"]] for s in scheds]
    out(table(["name", "params", "description"], rows, right=[False, True, False]))
    out()
    out("parameters (set them under [scheduler] in a scenario; `--json` has them all):")
    for s in scheds:
        if not s["params"]:
            continue
        out()
        out(s["name"])
        for p in s["params"]:
            out(wrap(f"{p['name']} ({p['type']}, default {p['default']}): {p['help']}", "  ", "      "))
    return EXIT_OK
