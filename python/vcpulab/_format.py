"""Plain-text rendering for the CLI: aligned tables and number formats (ASCII only)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] = ()) -> str:
    """An aligned table; ``right[i]`` right-aligns column i (numbers)."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    ralign = list(right) + [False] * (len(headers) - len(right))

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if ra else c.ljust(w) for c, w, ra in zip(cells, widths, ralign)]
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _finite_or_none(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {k: _finite_or_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_or_none(v) for v in x]
    return x


def json_text(doc: Any) -> str:
    """``doc`` as indented JSON that every parser accepts: a value that is not a finite
    number (the CI of a single seed, a missing percentile) becomes ``null``, since
    ``json.dumps`` would write ``NaN``, which is not JSON."""
    import json

    return json.dumps(_finite_or_none(doc), indent=2, allow_nan=False)


def num(x: Optional[float], digits: int = 3) -> str:
    """A float with ``digits`` decimals; ``-`` for a missing value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}%"


def secs(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:g} s"


def pairs(d: Mapping[str, Any], skip: Sequence[str] = ()) -> str:
    """``k v, k v`` for a dict of counters."""
    return ", ".join(f"{k} {v}" for k, v in d.items() if k not in skip)


def summary_text(s: Mapping[str, Any]) -> str:
    """The human-readable report of one run (``vcpulab run`` without ``--json``)."""
    out = [
        f"scenario   {s['scenario']}",
        f"scheduler  {s['scheduler']}, seed {s['seed']}, {secs(s['duration_s'])} simulated"
        f" (warmup {secs(s['warmup_s'])}), {s['events']} events",
        "",
    ]
    headers = ["VM", "vCPUs", "weight", "cpu s", "share", "wait s", "halted s", "spin s",
               "throughput", "unit", "p50 ms", "p99 ms"]
    rows = []
    for vm in s["vms"]:
        lat = vm.get("latency_ms") or {}
        rows.append([
            vm["name"], str(vm["vcpu_count"]), str(vm["weight"]),
            num(vm["cpu_time_s"]), pct(vm["cpu_share"]), num(vm["wait_time_s"]),
            num(vm["halted_time_s"]), num(vm["spin_time_s"]),
            num(vm["throughput"], 1), vm["throughput_unit"],
            num(lat.get("p50")), num(lat.get("p99")),
        ])
    out.append(table(headers, rows, right=[False] + [True] * 8 + [False, True, True]))
    h = s["host"]
    mig = h.get("migrations", {})
    jain = (s.get("fairness") or {}).get("jain_vm")
    out += [
        "",
        f"host        {plural(h['pcpus'], 'pCPU')}, utilization {pct(h['utilization'])}, "
        f"busy {num(h['busy_time_s'])} s, idle {num(h['idle_time_s'])} s, "
        f"overhead {num(h['overhead_time_s'])} s, {h['context_switches']} context switches",
        f"migrations  {mig.get('total', 0)} ({pairs(mig, skip=('total',)) or 'none'})",
        f"fairness    Jain index over VMs {'-' if jain is None else f'{jain:.4f}'}",
        f"events      {s['events']} processed; {pairs(s.get('event_counts', {}))}",
    ]
    if s.get("scheduler_counters"):
        out.append(f"scheduler   {pairs(s['scheduler_counters'])}")
    return "\n".join(out)
