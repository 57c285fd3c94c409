"""The ``vcpulab`` subcommands for exploring spaces: sweep, query, compare, report, trace
(and ``run --trace``, ``reproduce --out/--all``). :func:`register` adds them to the parser
built in :mod:`vcpulab.cli`; imports of pandas, tqdm, DuckDB, matplotlib and Ray happen
inside the commands that need them."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from ._native import ScenarioError
from ._format import json_text

SWEEP_EPILOG = """\
examples:
  vcpulab sweep overcommit-sweep.toml --out results/          local process pool, a progress bar
  vcpulab sweep overcommit-sweep.toml --out results/ --resume after a kill: skip finished runs
  vcpulab sweep overcommit-sweep.toml --out results/ --engine ray [--ray-address HOST:PORT]

Writes results/runs/<run_id>.json as each run finishes, then results/runs.parquet (a row
per run) and results/vms.parquet (a row per run and VM). Sweep file keys: docs/sweeps.md.
exit status: 0 all runs ok, 1 some runs failed, 2 bad sweep file or usage.
"""

QUERY_EPILOG = """\
examples:
  vcpulab query results/ "SELECT count(*), status FROM runs GROUP BY status"
  vcpulab query results/ 'SELECT "scheduler.name", avg("vm.web.latency_ms.p99") AS p99 FROM runs GROUP BY 1'
  vcpulab query results/ "SELECT * FROM vms WHERE vm = 'web' LIMIT 5" --csv

Tables: runs (a row per run) and vms (a row per run and VM). Quote column names that
hold dots or brackets with double quotes.
"""

COMPARE_EPILOG = """\
examples:
  vcpulab compare overcommit.toml --a scheduler.name=rr --b scheduler.name=hyperv-root
  vcpulab compare overcommit.toml --a 'vm[1].vcpus=4' --a 'vm[1].workload[0].threads=4' \\
      --b 'vm[1].vcpus=8' --b 'vm[1].workload[0].threads=8' --seeds 20 \\
      --metric vm.web.latency_ms.p99 --metric 'vm.*.throughput'

Both variants run with seeds 1..N; B-A is the mean per-seed difference with its 95% CI.
"""

REPORT_EPILOG = """\
examples:
  vcpulab report results/                 a sweep: metric-vs-axis plots with 95% CI bands
  vcpulab run s.toml --out one/ && vcpulab report one/      a single run
  vcpulab reproduce --all --out repro/ && vcpulab report repro/   paper vs vcpulab

Writes DIR/report.html: one self-contained file (inline SVG plots, no network).
"""

TRACE_EPILOG = """\
examples:
  vcpulab trace scenario.toml --out trace.json
  vcpulab trace scenario.toml --seed 3 --from 1s --to 1.2s --out trace.json

Open trace.json in https://ui.perfetto.dev (or chrome://tracing): a track per pCPU with
what ran there, a track per vCPU (and per host thread) with wake/halt/preempted/migrate/ipi
events.
"""


def _cli() -> Any:
    from . import cli

    return cli


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


# --------------------------------------------------------------------------- sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import run_sweep

    cli = _cli()
    progress = not args.no_progress and (args.progress or sys.stderr.isatty())
    try:
        out = run_sweep(
            args.sweep,
            out_dir=args.out,
            engine=args.engine,
            workers=args.workers,
            ray_address=args.ray_address,
            resume=args.resume,
            progress=progress,
        )
    except KeyboardInterrupt:
        from .sweep import default_out

        cli._err(f"vcpulab: the finished runs are recorded in {args.out or default_out(args.sweep)}/runs/; "
                 "continue with --resume")
        raise
    rate = f" ({out.ran / out.elapsed_s:.0f} runs/s)" if out.ran and out.elapsed_s > 0 else ""
    cli._out(
        f"sweep: {out.total} runs: {out.ran} ran, {out.skipped} skipped (already done), "
        f"{len(out.failed)} failed; {out.elapsed_s:.1f} s{rate}; engine {args.engine}; "
        f"results in {out.out_dir}/ (runs.parquet, vms.parquet)"
    )
    for rec in out.failed[:20]:
        axes = ", ".join(f"{k}={json.dumps(v)}" for k, v in rec["axes"].items())
        cli._err(f"failed {rec['run_id']} ({axes}): {rec['error']}")
    if len(out.failed) > 20:
        cli._err(f"... and {len(out.failed) - 20} more failed runs (status = 'failed' in runs.parquet)")
    return cli.EXIT_SIM_FAILED if out.failed else cli.EXIT_OK


# --------------------------------------------------------------------------- query


def cmd_query(args: argparse.Namespace) -> int:
    from .query import query

    cli = _cli()
    df = query(args.dir, args.sql)
    if args.json:
        cli._out(df.to_json(orient="records", indent=2))
    elif args.csv:
        sys.stdout.write(df.to_csv(index=False, lineterminator="\n"))
    else:
        from ._format import table

        def cell(v: Any) -> str:
            if v is None or (isinstance(v, float) and v != v):
                return "-"
            if isinstance(v, float):
                return f"{v:.6g}"
            return str(v)

        rows = [[cell(v) for v in r] for r in df.itertuples(index=False, name=None)]
        right = [df[c].dtype.kind in "iuf" for c in df.columns]
        cli._out(table([str(c) for c in df.columns], rows, right=right))
        cli._out(f"({len(df)} row{'s' if len(df) != 1 else ''})")
    return cli.EXIT_OK


# ------------------------------------------------------------------------- compare


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import DEFAULT_METRICS, compare, format_table

    cli = _cli()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    res = compare(args.scenario, args.a, args.b, seeds, args.metric or DEFAULT_METRICS, workers=args.workers)
    if args.json:
        cli._out(json_text(res))
    else:
        cli._out(format_table(res))
    return cli.EXIT_OK


# -------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    cli = _cli()
    path = write_report(args.dir, args.output)
    cli._err(f"vcpulab: wrote {path}")
    if args.open:
        import webbrowser

        webbrowser.open("file://" + os.path.abspath(path))
    return cli.EXIT_OK


# --------------------------------------------------------------------------- trace


def _write_trace(tr: Any, out: str) -> str:
    from .tracing import describe

    tr.save(out)
    d = describe(tr.events())
    inst = ", ".join(f"{n} {k}" for k, n in sorted(d["instants"].items())) or "none"
    lo, hi = tr.window
    hi_s = "end" if hi >= 2**64 - 1 else f"{hi / 1e9:g} s"
    return f"vcpulab: wrote {out}: {d['slices']} run slices, instants: {inst}; window {lo / 1e9:g} s to {hi_s}"


def cmd_trace(args: argparse.Namespace) -> int:
    from .tracing import trace

    cli = _cli()
    try:
        tr = trace(args.scenario, seed=args.seed, window=(args.from_, args.to))
    except ValueError as e:
        if isinstance(e, ScenarioError):
            raise
        raise cli.CliError(str(e)) from None
    cli._err(_write_trace(tr, args.out))
    return cli.EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """``vcpulab run`` with ``--trace FILE``: the same run with tracing on."""
    cli = _cli()
    if not args.trace:
        return cli.cmd_run(args)
    from ._format import summary_text
    from .tracing import trace

    tr = trace(args.scenario, seed=args.seed)
    result = tr.result
    cli._err(_write_trace(tr, args.trace))
    if args.out:
        written = cli.write_outputs(result, args.out)
        cli._err(f"vcpulab: wrote {', '.join(os.path.basename(p) for p in written)} to {args.out}")
    cli._out(result.to_json() if args.json else summary_text(result.summary))
    return cli.EXIT_OK


# ----------------------------------------------------------------------- reproduce


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``vcpulab reproduce`` with ``--all`` and ``--out DIR`` (writes DIR/reproduce.json)."""
    from . import api

    cli = _cli()
    if args.all and args.names:
        raise cli.CliError("reproduce: give experiment names or --all, not both")
    if args.scenario is None and args.metric is not None:
        raise cli.CliError("--metric selects the metric of the case --scenario prints; give --scenario CASE too")
    if args.scenario is not None and args.out:
        raise cli.CliError("--scenario prints a case's scenario; it does not go with --out")
    if not args.out or args.list:
        return cli.cmd_reproduce(args)
    exps = api._select(args.names or None)
    progress = not args.no_progress and sys.stderr.isatty()
    rows = api.reproduce([e["id"] for e in exps], seed=args.seed, progress=progress)
    from ._files import atomic_write_text

    os.makedirs(args.out, exist_ok=True)
    doc = {"experiments": exps, "rows": rows}
    path = os.path.join(args.out, "reproduce.json")
    atomic_write_text(path, json_text(doc) + "\n")
    cli._err(f"vcpulab: wrote {path}")
    if args.json:
        cli._out(json_text(rows))
        return cli.EXIT_OK
    for i, e in enumerate(exps):
        if i:
            cli._out()
        cli._out(cli._experiment_report(e, [r for r in rows if r["experiment"] == e["id"]]))
    return cli.EXIT_OK


# ------------------------------------------------------------------------ register


def register(sub: Any, wanted: Callable[[str], bool]) -> None:
    """Adds sweep, query, compare, report and trace to the subparsers ``sub``, and
    ``--trace`` to run, ``--all``/``--out`` to reproduce; only the commands ``wanted``
    accepts (see :func:`vcpulab.cli.build_parser`)."""
    raw = argparse.RawDescriptionHelpFormatter
    from .cli import _seed

    if wanted("sweep"):
        s = sub.add_parser("sweep", help="run a grid of scenario variants (local processes or Ray)",
                           epilog=SWEEP_EPILOG, formatter_class=raw,
                           description="Run every combination of a sweep file's axes; results go to a folder of "
                                       "per-run JSON records and Parquet tables.")
        s.add_argument("sweep", metavar="SWEEP.toml", help="sweep file (see docs/sweeps.md)")
        s.add_argument("--out", metavar="DIR", help="results folder (default: <sweep file name>-results)")
        s.add_argument("--engine", choices=["local", "ray"], default="local",
                       help="local: a pool of worker processes (default); ray: Ray tasks (pip install 'vcpulab[ray]')")
        s.add_argument("--workers", type=_positive_int, metavar="N",
                       help="worker processes (local; default: the number of CPUs) or CPUs of a started Ray instance")
        s.add_argument("--ray-address", metavar="ADDR",
                       help="join this Ray cluster (e.g. ray://head:10001 or auto); default: start a local Ray instance")
        s.add_argument("--resume", action="store_true", help="continue a sweep in DIR: skip the runs already recorded")
        s.add_argument("--progress", action="store_true", help="show the progress bar even if stderr is not a terminal")
        s.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown on a terminal)")
        s.set_defaults(func=cmd_sweep)

    if wanted("query"):
        q = sub.add_parser("query", help="SQL (DuckDB) over a sweep's results", epilog=QUERY_EPILOG, formatter_class=raw,
                           description="Run SQL over the tables runs and vms of a sweep's results folder.")
        q.add_argument("dir", metavar="DIR", help="a sweep's --out folder")
        q.add_argument("sql", metavar="SQL", help="the query")
        fmt = q.add_mutually_exclusive_group()
        fmt.add_argument("--json", action="store_true", help="print the rows as JSON records")
        fmt.add_argument("--csv", action="store_true", help="print CSV")
        q.set_defaults(func=cmd_query)

    if wanted("compare"):
        c = sub.add_parser("compare", help="compare two variants of a scenario over seeds (means, 95%% CI)",
                           epilog=COMPARE_EPILOG, formatter_class=raw,
                           description="Run a scenario as variant A and variant B (key path edits) with the same seeds; "
                                       "print each metric's mean for A and B and the difference with its 95% CI.")
        c.add_argument("scenario", metavar="SCENARIO", help="scenario file")
        c.add_argument("--a", action="append", default=[], metavar="KEY=VALUE", required=True,
                       help="an edit for variant A (repeatable), e.g. scheduler.name=rr")
        c.add_argument("--b", action="append", default=[], metavar="KEY=VALUE", required=True,
                       help="an edit for variant B (repeatable)")
        c.add_argument("--seeds", type=_positive_int, default=10, metavar="N", help="seeds per variant (default 10)")
        c.add_argument("--first-seed", type=_seed, default=1, metavar="S", help="seeds are S..S+N-1 (default 1)")
        c.add_argument("--metric", action="append", metavar="NAME",
                       help="a runs.parquet column or glob (vm.*.latency_ms.p99); repeatable; default: throughput, "
                            "latency p99, CPU share and wait per VM, host utilization, fairness")
        c.add_argument("--workers", type=_positive_int, metavar="N", help="worker processes (default: the number of CPUs)")
        c.add_argument("--json", action="store_true", help="print the comparison as JSON")
        c.set_defaults(func=cmd_compare)

    if wanted("report"):
        r = sub.add_parser("report", help="write a self-contained HTML report with plots", epilog=REPORT_EPILOG,
                           formatter_class=raw,
                           description="Write DIR/report.html for a sweep folder, a `run --out` folder or a "
                                       "`reproduce --out` folder.")
        r.add_argument("dir", metavar="DIR", help="results folder")
        r.add_argument("--output", metavar="FILE", help="where to write the page (default: DIR/report.html)")
        r.add_argument("--open", action="store_true", help="open the page in a web browser")
        r.set_defaults(func=cmd_report)

    if wanted("trace"):
        t = sub.add_parser("trace", help="run a scenario and write a Perfetto (Chrome JSON) trace", epilog=TRACE_EPILOG,
                           formatter_class=raw, description="Run a scenario with tracing on and write the trace.")
        t.add_argument("scenario", metavar="SCENARIO", help="scenario file")
        t.add_argument("--seed", type=_seed, metavar="N", help="override the scenario's seed")
        t.add_argument("--from", dest="from_", metavar="T", help="trace from this simulated time (e.g. 1s, 250ms)")
        t.add_argument("--to", metavar="T", help="trace until this simulated time")
        t.add_argument("--out", metavar="FILE", required=True, help="the trace file to write (e.g. trace.json)")
        t.set_defaults(func=cmd_trace)

    if wanted("run"):
        run = sub.choices["run"]
        run.add_argument("--trace", metavar="FILE", help="also write a Perfetto (Chrome JSON) trace of the run to FILE")
        run.set_defaults(func=cmd_run)
    if wanted("reproduce"):
        rep = sub.choices["reproduce"]
        rep.add_argument("--all", action="store_true", help="every experiment (the default when no NAME is given)")
        rep.add_argument("--out", metavar="DIR",
                         help="also write the rows (and the experiments) to DIR/reproduce.json, for `vcpulab report DIR`")
        rep.set_defaults(func=cmd_reproduce)
