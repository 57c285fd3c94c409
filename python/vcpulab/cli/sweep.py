"""``vcpulab sweep``: every combination of a sweep file's axes, on local worker processes
or Ray; results as per-run JSON records and Parquet tables."""

from __future__ import annotations

import argparse
import json
import sys

from ._common import EXIT_OK, EXIT_SIM_FAILED, RAW, err, out, positive_int

SWEEP_EPILOG = """\
examples:
  vcpulab sweep overcommit-sweep.toml --out results/          local process pool, a progress bar
  vcpulab sweep overcommit-sweep.toml --out results/ --resume after a kill: skip finished runs
  vcpulab sweep overcommit-sweep.toml --out results/ --engine ray [--ray-address HOST:PORT]

Writes results/runs/<run_id>.json as each run finishes, then results/runs.parquet (a row
per run) and results/vms.parquet (a row per run and VM). Sweep file keys: docs/sweeps.md.
exit status: 0 all runs ok, 1 some runs failed, 2 bad sweep file or usage.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("sweep", help="run a grid of scenario variants (local processes or Ray)",
                       epilog=SWEEP_EPILOG, formatter_class=RAW,
                       description="Run every combination of a sweep file's axes; results go to a folder of "
                                   "per-run JSON records and Parquet tables.")
    s.add_argument("sweep", metavar="SWEEP.toml", help="sweep file (see docs/sweeps.md)")
    s.add_argument("--out", metavar="DIR", help="results folder (default: <sweep file name>-results)")
    s.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: a pool of worker processes (default); ray: Ray tasks (pip install 'ray>=2.9')")
    s.add_argument("--workers", type=positive_int, metavar="N",
                   help="worker processes (local; default: the number of CPUs) or CPUs of a started Ray instance")
    s.add_argument("--ray-address", metavar="ADDR",
                   help="join this Ray cluster (e.g. ray://head:10001 or auto); default: start a local Ray instance")
    s.add_argument("--resume", action="store_true", help="continue a sweep in DIR: skip the runs already recorded")
    s.add_argument("--progress", action="store_true", help="show the progress bar even if stderr is not a terminal")
    s.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown on a terminal)")
    s.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..sweep import run_sweep

    progress = not args.no_progress and (args.progress or sys.stderr.isatty())
    try:
        result = run_sweep(
            args.sweep,
            out_dir=args.out,
            engine=args.engine,
            workers=args.workers,
            ray_address=args.ray_address,
            resume=args.resume,
            progress=progress,
        )
    except KeyboardInterrupt:
        from ..sweep import default_out

        err(f"vcpulab: the finished runs are recorded in {args.out or default_out(args.sweep)}/runs/; "
            "continue with --resume")
        raise
    from .._format import plural, wrap

    rate = f" ({result.ran / result.elapsed_s:.0f} runs/s)" if result.ran and result.elapsed_s > 0 else ""
    out(wrap(
        f"{plural(result.total, 'run')}: {result.ran} ran, {result.skipped} skipped (already done), "
        f"{len(result.failed)} failed; {result.elapsed_s:.1f} s{rate}; engine {args.engine}; "
        f"results in {result.out_dir}/ (runs.parquet, vms.parquet)", "sweep: ", "  "
    ))
    for rec in result.failed[:20]:
        axes = ", ".join(f"{k}={json.dumps(v)}" for k, v in rec["axes"].items())
        err(f"failed {rec['run_id']} ({axes}): {rec['error']}")
    if len(result.failed) > 20:
        more = len(result.failed) - 20
        err(f"... and {more} more failed {'run' if more == 1 else 'runs'} (status = 'failed' in runs.parquet)")
    return EXIT_SIM_FAILED if result.failed else EXIT_OK
