"""``vcpulab run``: one scenario, summarised as tables or JSON; ``--out`` also writes
summary.json and CSV/Parquet tables, ``--trace`` a trace (Chrome JSON, or Perfetto
protobuf for a ``.pftrace`` file or ``--trace-format perfetto``).

The native ``vcpulab`` command runs ``run FILE --json`` itself (see crates/vcpulab-cli);
both go through the same core and the same contract."""

from __future__ import annotations

import argparse
import os

from .. import api
from ..pftrace import FORMATS
from ._common import EXIT_OK, RAW, err, out, seed, write_trace

RUN_EPILOG = """\
examples:
  vcpulab run scenario.toml
  vcpulab run scenario.toml --seed 42 --json > summary.json
  vcpulab run scenario.toml --out results/ --check-invariants
  vcpulab run scenario.toml --verbose      # with the scheduler's raw counters

The same scenario and seed always give byte-identical output.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("run", help="run one scenario and summarise it", epilog=RUN_EPILOG, formatter_class=RAW,
                       description="Run one scenario file (TOML, or JSON if it ends in .json).")
    r.add_argument("scenario", metavar="SCENARIO", help="scenario file")
    r.add_argument("--seed", type=seed, metavar="N", help="override the scenario's seed")
    r.add_argument("--json", action="store_true", help="print the summary JSON on stdout instead of tables")
    r.add_argument("--out", metavar="DIR",
                   help="also write summary.json, vms.csv, vcpus.csv, workloads.csv, steal.csv (steal%% per VM per 1 s "
                        "window), and .parquet if pyarrow is installed")
    r.add_argument("--check-invariants", action="store_true",
                   help="check the engine's invariants after every event (slower; for debugging)")
    r.add_argument("--force", action="store_true",
                   help="run even if the scenario is estimated to take hours (over 5e10 events)")
    r.add_argument("--verbose", "-v", action="store_true",
                   help="also print the scheduler's raw counters (one per decision branch) and the event breakdown")
    r.add_argument("--trace", metavar="FILE",
                   help="also write a trace of the run to FILE: Perfetto protobuf for .pftrace, else Chrome JSON")
    r.add_argument("--trace-format", choices=FORMATS, metavar="{json,perfetto}",
                   help="the --trace file's format, overriding its extension")
    r.set_defaults(func=cmd_run)


def write_outputs(result: api.Result, out_dir: str) -> list[str]:
    """Writes summary.json, vms.csv, vcpus.csv, workloads.csv, steal.csv (each VM's steal%
    per window) and .parquet twins if pyarrow is installed into ``out_dir``; returns the
    paths written."""
    import importlib.util

    from .._files import atomic_write, atomic_write_text

    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "summary.json")
    atomic_write_text(path, result.to_json() + "\n", durable=True)
    written.append(path)
    parquet = importlib.util.find_spec("pyarrow") is not None
    frames = {"vms": result.vms(), "vcpus": result.vcpus(), "workloads": result.workloads(), "steal": result.steal()}
    for name, df in frames.items():
        path = os.path.join(out_dir, f"{name}.csv")
        atomic_write(path, lambda tmp, df=df: df.to_csv(tmp, index=False, lineterminator="\n"), durable=True)
        written.append(path)
        if parquet:
            path = os.path.join(out_dir, f"{name}.parquet")
            atomic_write(path, lambda tmp, df=df: df.to_parquet(tmp, index=False), durable=True)
            written.append(path)
    return written


def cmd_run(args: argparse.Namespace) -> int:
    from .._format import summary_text

    if args.trace:
        from ..tracing import trace

        tr = trace(args.scenario, seed=args.seed, check_invariants=args.check_invariants, force=args.force)
        result = tr.result
        err(write_trace(tr, args.trace, args.trace_format))
    else:
        result = api.run(args.scenario, seed=args.seed, check_invariants=args.check_invariants, force=args.force)
    if args.out:
        written = write_outputs(result, args.out)
        err(f"vcpulab: wrote {', '.join(os.path.basename(p) for p in written)} to {args.out}")
    if args.json:
        out(result.to_json())
    else:
        out(summary_text(result.summary, verbose=args.verbose))
    return EXIT_OK
