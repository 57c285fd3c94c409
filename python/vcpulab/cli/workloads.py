"""``vcpulab workloads``: the guest workload kinds (the program and the presets) and the
keys each takes with their defaults, as the core's reader defines them."""

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
    from .._format import NBSP, table

    out(table(["kind", "model"], [[k["name"], k["description"]] for k in kinds]))
    out()
    out("keys of each kind and their defaults (set them under [[vm.workload]]; docs/scenarios.md):")
    out()

    def listing(keys: list[dict]) -> str:
        # "key = value" stays on one line when the cell wraps.
        return "; ".join(f"{key['name']}{NBSP}={NBSP}{key['default']}" for key in keys)

    rows = [[k["name"], listing([key for key in k.get("keys", []) if not key.get("common")])] for k in kinds]
    common = [key for key in (kinds[0].get("keys", []) if kinds else []) if key.get("common")]
    if common:
        rows.append(["(every kind)", listing(common)])
    out(table(["kind", "keys = defaults"], rows))
    return EXIT_OK
