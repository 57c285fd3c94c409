"""``vcpulab trace``: run a scenario with tracing on and write a trace of a window of it,
as Chrome JSON or Perfetto protobuf (``--format``, else from the file's extension)."""

from __future__ import annotations

import argparse

from .._native import ScenarioError
from ..pftrace import FORMATS
from ._common import EXIT_OK, RAW, CliError, err, seed, write_trace

TRACE_EPILOG = """\
examples:
  vcpulab trace scenario.toml --out trace.json
  vcpulab trace scenario.toml --seed 3 --from 1s --to 1.2s --out trace.json
  vcpulab trace scenario.toml --out trace.pftrace      # Perfetto protobuf (smaller)

Open the trace in https://ui.perfetto.dev (JSON also in chrome://tracing): a track per pCPU
with what ran there, a track per vCPU (and per host thread) with wake/halt/preempted/
migrate/ipi/ple_exit/yield_to events; the Perfetto format also draws flows from IPI senders
and yielders to their targets. The format follows --format, else the extension (.pftrace:
Perfetto; anything else: Chrome JSON).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("trace", help="run a scenario and write a trace (Chrome JSON or Perfetto)", epilog=TRACE_EPILOG,
                       formatter_class=RAW, description="Run a scenario with tracing on and write the trace.")
    t.add_argument("scenario", metavar="SCENARIO", help="scenario file")
    t.add_argument("--seed", type=seed, metavar="N", help="override the scenario's seed")
    t.add_argument("--from", dest="from_", metavar="T", help="trace from this simulated time (e.g. 1s, 250ms)")
    t.add_argument("--to", metavar="T", help="trace until this simulated time")
    t.add_argument("--out", metavar="FILE", required=True, help="the trace file to write (e.g. trace.json)")
    t.add_argument("--format", choices=FORMATS, metavar="{json,perfetto}",
                   help="json: Chrome JSON; perfetto: Perfetto protobuf (default: from --out's extension, "
                        ".pftrace is perfetto, else json)")
    t.set_defaults(func=cmd_trace)


def cmd_trace(args: argparse.Namespace) -> int:
    from ..tracing import trace

    try:
        tr = trace(args.scenario, seed=args.seed, window=(args.from_, args.to))
    except ValueError as e:
        if isinstance(e, ScenarioError):
            raise
        raise CliError(str(e)) from None
    err(write_trace(tr, args.out, args.format))
    return EXIT_OK
