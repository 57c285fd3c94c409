"""``vcpulab trace``: run a scenario with tracing on and write a Perfetto (Chrome JSON)
trace of a window of it."""

from __future__ import annotations

import argparse

from .._native import ScenarioError
from ._common import EXIT_OK, RAW, CliError, err, seed, write_trace

TRACE_EPILOG = """\
examples:
  vcpulab trace scenario.toml --out trace.json
  vcpulab trace scenario.toml --seed 3 --from 1s --to 1.2s --out trace.json

Open trace.json in https://ui.perfetto.dev (or chrome://tracing): a track per pCPU with
what ran there, a track per vCPU (and per host thread) with wake/halt/preempted/migrate/ipi
events.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("trace", help="run a scenario and write a Perfetto (Chrome JSON) trace", epilog=TRACE_EPILOG,
                       formatter_class=RAW, description="Run a scenario with tracing on and write the trace.")
    t.add_argument("scenario", metavar="SCENARIO", help="scenario file")
    t.add_argument("--seed", type=seed, metavar="N", help="override the scenario's seed")
    t.add_argument("--from", dest="from_", metavar="T", help="trace from this simulated time (e.g. 1s, 250ms)")
    t.add_argument("--to", metavar="T", help="trace until this simulated time")
    t.add_argument("--out", metavar="FILE", required=True, help="the trace file to write (e.g. trace.json)")
    t.set_defaults(func=cmd_trace)


def cmd_trace(args: argparse.Namespace) -> int:
    from ..tracing import trace

    try:
        tr = trace(args.scenario, seed=args.seed, window=(args.from_, args.to))
    except ValueError as e:
        if isinstance(e, ScenarioError):
            raise
        raise CliError(str(e)) from None
    err(write_trace(tr, args.out))
    return EXIT_OK
