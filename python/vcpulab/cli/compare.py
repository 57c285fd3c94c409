"""``vcpulab compare``: two variants of a scenario (key path edits) over the same seeds;
each metric's means and the difference with its 95% CI."""

from __future__ import annotations

import argparse

from .._format import json_text
from ._common import EXIT_OK, RAW, out, positive_int, seed

COMPARE_EPILOG = """\
examples:
  vcpulab compare overcommit.toml --a scheduler.name=rr --b scheduler.name=hyperv-root
  vcpulab compare overcommit.toml --a 'vm[1].vcpus=4' --a 'vm[1].workload[0].threads=4' \\
      --b 'vm[1].vcpus=8' --b 'vm[1].workload[0].threads=8' --seeds 20 \\
      --metric vm.web.latency_ms.p99 --metric 'vm.*.throughput'

Both variants run with seeds 1..N; B-A is the mean per-seed difference with its 95% CI.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compare", help="compare two variants of a scenario over seeds (means, 95%% CI)",
                       epilog=COMPARE_EPILOG, formatter_class=RAW,
                       description="Run a scenario as variant A and variant B (key path edits) with the same seeds; "
                                   "print each metric's mean for A and B and the difference with its 95% CI.")
    c.add_argument("scenario", metavar="SCENARIO", help="scenario file")
    c.add_argument("--a", action="append", default=[], metavar="KEY=VALUE", required=True,
                   help="an edit for variant A (repeatable), e.g. scheduler.name=rr")
    c.add_argument("--b", action="append", default=[], metavar="KEY=VALUE", required=True,
                   help="an edit for variant B (repeatable)")
    c.add_argument("--seeds", type=positive_int, default=10, metavar="N", help="seeds per variant (default 10)")
    c.add_argument("--first-seed", type=seed, default=1, metavar="S", help="seeds are S..S+N-1 (default 1)")
    c.add_argument("--metric", action="append", metavar="NAME",
                   help="a runs.parquet column or glob (vm.*.latency_ms.p99); repeatable; default: throughput, "
                        "latency p99, CPU share and wait per VM, host utilization, fairness")
    c.add_argument("--workers", type=positive_int, metavar="N", help="worker processes (default: the number of CPUs)")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..compare import DEFAULT_METRICS, compare, format_table

    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    res = compare(args.scenario, args.a, args.b, seeds, args.metric or DEFAULT_METRICS, workers=args.workers)
    if args.json:
        out(json_text(res))
    else:
        out(format_table(res))
    return EXIT_OK
