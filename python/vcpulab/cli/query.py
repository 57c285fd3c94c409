"""``vcpulab query``: SQL (DuckDB) over the tables of a sweep's results folder."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import EXIT_OK, RAW, out

QUERY_EPILOG = """\
examples:
  vcpulab query results/ "SELECT count(*), status FROM runs GROUP BY status"
  vcpulab query results/ 'SELECT "scheduler.name", avg("vm.web.latency_ms.p99") AS p99 FROM runs GROUP BY 1'
  vcpulab query results/ "SELECT * FROM vms WHERE vm = 'web' LIMIT 5" --csv

Tables: runs (a row per run) and vms (a row per run and VM). Quote column names that
hold dots or brackets with double quotes.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser("query", help="SQL (DuckDB) over a sweep's results", epilog=QUERY_EPILOG, formatter_class=RAW,
                       description="Run SQL over the tables runs and vms of a sweep's results folder.")
    q.add_argument("dir", metavar="DIR", help="a sweep's --out folder")
    q.add_argument("sql", metavar="SQL", help="the query")
    fmt = q.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the rows as JSON records")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    q.set_defaults(func=cmd_query)


def cmd_query(args: argparse.Namespace) -> int:
    from ..query import query

    df = query(args.dir, args.sql)
    if args.json:
        out(df.to_json(orient="records", indent=2))
    elif args.csv:
        sys.stdout.write(df.to_csv(index=False, lineterminator="\n"))
    else:
        from .._format import table

        def cell(v: Any) -> str:
            if v is None or (isinstance(v, float) and v != v):
                return "-"
            if isinstance(v, float):
                return f"{v:.6g}"
            return str(v)

        rows = [[cell(v) for v in r] for r in df.itertuples(index=False, name=None)]
        right = [df[c].dtype.kind in "iuf" for c in df.columns]
        out(table([str(c) for c in df.columns], rows, right=right))
        out(f"({len(df)} row{'s' if len(df) != 1 else ''})")
    return EXIT_OK
