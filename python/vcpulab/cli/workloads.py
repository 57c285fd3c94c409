"""``vcpulab workloads``: the guest workload kinds (the program and the presets)."""

from __future__ import annotations

import argparse
import json

from .. import api
from ._common import EXIT_OK, RAW, out


def add_parser(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser("workloads", help="list the guest workload kinds (program and presets)", formatter_class=RAW,
                       epilog="examples:\n  vcpulab workloads\n  vcpulab workloads --json\n")
    w.add_argument("--json", action="store_true", help="print the list as JSON")
    w.set_defaults(func=cmd_workloads)


def cmd_workloads(args: argparse.Namespace) -> int:
    kinds = api.workload_kinds()
    if args.json:
        out(json.dumps(kinds, indent=2))
        return EXIT_OK
    from .._format import table

    out(table(["kind", "model"], [[k["name"], k["description"]] for k in kinds]))
    out()
    out("set one under [[vm.workload]] kind = ...; each kind's keys: docs/scenarios.md")
    return EXIT_OK
