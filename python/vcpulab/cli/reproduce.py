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
from ._common import EXIT_OK, EXIT_SIM_FAILED, RAW, CliError, err, out, positive_int, seed

REPRODUCE_EPILOG = """\
examples:
  vcpulab reproduce                     every experiment: its table, its claims' verdicts, a summary
  vcpulab reproduce --list              the experiments and their cases
  vcpulab reproduce hyperv-root --json  rows {experiment, case, metric, unit, paper, sim, ratio,
                                        seeds, ci_low, ci_high, regimes}
  vcpulab reproduce kvm-ple --claims --json   each claim with its verdict, value and 95% interval
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
                   help="also write the rows, claims and experiments to DIR/reproduce.json, for `vcpulab report DIR`")
    x.add_argument("--claims", action="store_true",
                   help="print the claims' verdicts only (with --json: a list of claims)")
    x.add_argument("--workers", type=positive_int, metavar="N", default=None,
                   help="runs in parallel (default: the machine's cores); the output does not depend on it")
    x.add_argument("--no-adaptive", action="store_true",
                   help="judge claims on each experiment's own seeds only (default: add seeds, up to 3x and at "
                        "least 15, while a claim is undecided)")
    x.add_argument("--strict", action="store_true",
                   help="exit with status 1 when a claim fails (default: 0; a failed claim is a finding)")
    x.set_defaults(func=cmd_reproduce)


def _interval(r: dict[str, Any]) -> str:
    from .._format import num

    if r.get("ci_low") is None or r.get("ci_high") is None:
        return ""
    return f"{num(r['ci_low'], 2)} .. {num(r['ci_high'], 2)}"


def _experiment_report(exp: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    from .._format import num, table, wrap

    notes_by_case = {c["id"]: c.get("note", "") for c in exp["cases"]}
    tol = exp.get("tolerance")
    lines = [wrap(f"{exp['id']}: {exp['title']}", "== "), wrap(exp["source"], "source: ")]
    metrics = exp.get("metrics") or [{"name": exp["metric"], "unit": exp["unit"]}]
    for m in metrics:
        mrows = [r for r in rows if r["metric"] == m["name"]]
        body = [
            [r["case"], num(r["paper"], 2), num(r["sim"], 2), _interval(r), str(r.get("seeds", "")),
             num(r["ratio"], 3), notes_by_case.get(r["case"], "")]
            for r in mrows
        ]
        lines += [
            "",
            wrap(f"{m['name']} ({m['unit']})" + (f", tolerance {100 * tol:g}%" if tol is not None else ""), "metric: "),
            table(["case", "paper", "vcpulab", "95% CI", "seeds", "ratio", "note"], body,
                  right=[False, True, True, True, True, True, False]),
        ]
        split = [r for r in mrows if r.get("regimes")]
        if split:
            lines += ["regimes (seeds in two distinct groups):"]
            lines += [wrap(f"{r['case']}: {r['regimes']['text']}", "  ", "    ") for r in split]
    if exp.get("notes"):
        lines += ["", wrap(exp["notes"], "notes: ")]
    return "\n".join(lines)


_MARK = {"holds": "holds    ", "fails": "FAILS    ", "undecided": "undecided"}


def _claims_report(claims: list[dict[str, Any]]) -> str:
    from .._format import wrap

    lines = [f"claims ({len(claims)}):"]
    indent = " " * 13
    for c in claims:
        lines.append(wrap(f"{c['claim']}: {c['text']}", f"  {_MARK.get(c['verdict'], c['verdict'])}  ", indent))
        lines.append(wrap(f"{c['detail']}; {c['seeds']} seeds; {c['source']}", indent))
    return "\n".join(lines)


def _summary(claims: list[dict[str, Any]]) -> str:
    from .._format import wrap

    n = {v: sum(1 for c in claims if c["verdict"] == v) for v in ("holds", "fails", "undecided")}
    lines = [f"{len(claims)} claims: {n['holds']} hold, {n['fails']} fail, {n['undecided']} undecided"]
    for v in ("fails", "undecided"):
        ids = [f"{c['experiment']}/{c['claim']}" for c in claims if c["verdict"] == v]
        if ids:
            lines.append(wrap(", ".join(ids), f"{v}: "))
    return "\n".join(lines)


def _list(exps: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        out(json.dumps(exps, indent=2))
        return
    from .._format import num, table, wrap

    for i, e in enumerate(exps):
        if i:
            out()
        out(wrap(f"{e['id']}: {e['title']}"))
        out(wrap(f"metric {e['metric']} ({e['unit']}), {len(e['cases'])} cases:"))
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
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    result = api.reproduce_claims([e["id"] for e in exps], seed=args.seed, progress=progress,
                                  workers=workers, adaptive=not args.no_adaptive)
    rows, claims = result["rows"], result["claims"]
    if args.out:
        from .._files import atomic_write_text

        os.makedirs(args.out, exist_ok=True)
        doc = {"experiments": exps, "rows": rows, "claims": claims}
        path = os.path.join(args.out, "reproduce.json")
        atomic_write_text(path, json_text(doc) + "\n")
        err(f"vcpulab: wrote {path}")
    if args.json:
        out(json_text(claims if args.claims else rows))
    else:
        for i, e in enumerate(exps):
            mine = [c for c in claims if c["experiment"] == e["id"]]
            if args.claims:
                from .._format import wrap

                out(wrap(f"{e['id']}: {e['title']}", "== "))
            else:
                if i:
                    out()
                out(_experiment_report(e, [r for r in rows if r["experiment"] == e["id"]]))
                out()
            if mine:
                out(_claims_report(mine))
        out()
        out(_summary(claims))
    failed = sum(1 for c in claims if c["verdict"] == "fails")
    if args.strict and failed:
        err(f"vcpulab: {failed} claim(s) fail (--strict)")
        return EXIT_SIM_FAILED
    return EXIT_OK
