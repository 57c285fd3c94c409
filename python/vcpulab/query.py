"""SQL over a sweep's results with DuckDB: tables ``runs`` and ``vms`` (the Parquet files).

Column names with dots or brackets need double quotes in SQL::

    SELECT "scheduler.name", avg("vm.web.latency_ms.p99") FROM runs GROUP BY 1
"""

from __future__ import annotations

import os
from typing import Any

from ._native import ScenarioError

TABLES = ("runs", "vms")


def connect(out_dir: str) -> Any:
    """A DuckDB connection with views ``runs`` and ``vms`` over ``out_dir``'s Parquet files."""
    try:
        import duckdb
    except ImportError:
        raise ScenarioError("vcpulab query needs DuckDB, a dependency of vcpulab missing from this "
                           "Python (uninstalled since?): pip install 'duckdb>=0.9'") from None
    found = {t: os.path.join(out_dir, f"{t}.parquet") for t in TABLES}
    if not os.path.exists(found["runs"]):
        raise ScenarioError(f"{out_dir}: no runs.parquet here; is it the --out folder of a `vcpulab sweep`?")
    con = duckdb.connect()
    for table, path in found.items():
        if os.path.exists(path):
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{_sql_str(path)}')")
    return con


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


def query(out_dir: str, sql: str) -> Any:
    """Runs ``sql`` over the sweep in ``out_dir``; returns a pandas DataFrame."""
    con = connect(out_dir)
    import duckdb

    try:
        return con.execute(sql).df()
    except duckdb.Error as e:
        raise ScenarioError(f"query: {e}") from None
    finally:
        con.close()
