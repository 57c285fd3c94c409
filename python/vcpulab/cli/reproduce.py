"""``vcpulab reproduce``: the built-in reproductions of published measurements, case by
case against the papers' figures; ``--out DIR`` also writes DIR/reproduce.json (for
``vcpulab report``), ``--scenario CASE`` prints one case's scenario file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .. import api
from .._format import json_text
from ._common import EXIT_OK, RAW, CliError, err, out, seed

REPRODUCE_EPILOG = """\
examples:
  vcpulab reproduce                     every experiment, one table each
  vcpulab reproduce --list              the experiments and their cases
  vcpulab reproduce hyperv-root --json  rows {experiment, case, metric, unit, paper, sim, ratio}
  vcpulab reproduce flms-io --scenario vturbo > vturbo.toml   one case as a scenario file
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("reproduce", help="run the built-in reproductions of published measurements",
                       epilog=REPRODUCE_EPILOG, formatter_class=RAW,
                       description="Run built-in experiments case by case and compare with the published figures.")
    x.add_argument("names", nargs="*", metavar="NAME", help="experiment ids (default: all; see --list)")
    x.add_argument("--json", action="store_true", help="print the rows as JSON on stdout (and nothing else)")
    x.add_argument("--seed", type=seed, metavar="N", help="override every case's seed")
    x.add_argument("--list", action="store_true", help="list the experiments and their cases; run nothing")
    x.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown on a terminal)")
    x.add_argument("--scenario", metavar="CASE",
                   help="print the scenario file of one case of one experiment (its edits applied) and run nothing")
    x.add_argument("--metric", metavar="NAME",
                   help="with --scenario: the run of this metric (for metrics measured in their own run)")
    x.add_argument("--all", action="store_true", help="every experiment (the default when no NAME is given)")
    x.add_argument("--out", metavar="DIR",
                   help="also write the rows (and the experiments) to DIR/reproduce.json, for `vcpulab report DIR`")
    x.set_defaults(func=cmd_reproduce)


def _experiment_report(exp: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    from .._format import num, table

    notes_by_case = {c["id"]: c.get("note", "") for c in exp["cases"]}
    tol = exp.get("tolerance")
    lines = [f"== {exp['id']}: {exp['title']}", f"source: {exp['source']}"]
    metrics = exp.get("metrics") or [{"name": exp["metric"], "unit": exp["unit"]}]
    for m in metrics:
        mrows = [r for r in rows if r["metric"] == m["name"]]
        body = [
            [r["case"], num(r["paper"], 2), num(r["sim"], 2), num(r["ratio"], 3), notes_by_case.get(r["case"], "")]
            for r in mrows
        ]
        lines += [
            "",
            f"metric: {m['name']} ({m['unit']})" + (f", tolerance {100 * tol:g}%" if tol is not None else ""),
            table(["case", "paper", "vcpulab", "ratio", "note"], body, right=[False, True, True, True, False]),
        ]
    if exp.get("notes"):
        lines += ["", f"notes: {exp['notes']}"]
    return "\n".join(lines)


def _list(exps: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        out(json.dumps(exps, indent=2))
        return
    from .._format import num, table

    for i, e in enumerate(exps):
        if i:
            out()
        out(f"{e['id']}: {e['title']}")
        out(f"metric {e['metric']} ({e['unit']}), {len(e['cases'])} cases:")
        rows = [
            [c["id"], ", ".join(f"{m} {num(v, 3)}" for m, v in c.get("paper", [])), c.get("note", "")]
            for c in e["cases"]
        ]
        out(table(["case", "paper", "note"], rows, right=[False, False, False]))


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.all and args.names:
        raise CliError("reproduce: give experiment names or --all, not both")
    if args.scenario is None and args.metric is not None:
        raise CliError("--metric selects the metric of the case --scenario prints; give --scenario CASE too")
    if args.scenario is not None and args.out:
        raise CliError("--scenario prints a case's scenario; it does not go with --out")
    if args.scenario is not None:
        if len(args.names) != 1:
            raise api.NotFoundError("--scenario CASE needs exactly one experiment id")
        sys.stdout.write(api.experiment_scenario(args.names[0], args.scenario, args.metric))
        return EXIT_OK
    exps = api._select(args.names or None)
    if args.list:
        _list(exps, args.json)
        return EXIT_OK
    progress = not args.no_progress and sys.stderr.isatty()
    rows = api.reproduce([e["id"] for e in exps], seed=args.seed, progress=progress)
    if args.out:
        from .._files import atomic_write_text

        os.makedirs(args.out, exist_ok=True)
        doc = {"experiments": exps, "rows": rows}
        path = os.path.join(args.out, "reproduce.json")
        atomic_write_text(path, json_text(doc) + "\n")
        err(f"vcpulab: wrote {path}")
    if args.json:
        out(json_text(rows))
        return EXIT_OK
    for i, e in enumerate(exps):
        if i:
            out()
        out(_experiment_report(e, [r for r in rows if r["experiment"] == e["id"]]))
    return EXIT_OK
