"""Compare two variants of one scenario (schedulers, parameters, feature sets) over seeds.

Variant A and B are the scenario with edits (``scheduler.name=rr``); both run with the
same seeds 1..N, so each metric's difference B - A is estimated from per-seed pairs, with
a 95% t confidence interval.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from . import keypath, stats
from ._native import ScenarioError
from .api import to_json
from .sweep import flatten_summary, load_toml, run_local

DEFAULT_METRICS = (
    "vm.*.throughput",
    "vm.*.latency_ms.p99",
    "vm.*.cpu_share",
    "vm.*.wait_time_s",
    "host.utilization",
    "fairness.jain_vm",
)


def parse_edit(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as a TOML value (``8``, ``"10ms"``, ``true``, ``[1, 2]``);
    a bare word that is not TOML (``rr``, ``10ms``) is taken as a string."""
    if "=" not in text:
        raise ScenarioError(f"invalid edit {text!r}: expected KEY=VALUE, e.g. scheduler.name=rr")
    key, raw = (s.strip() for s in text.split("=", 1))
    try:
        keypath.parse(key)
    except keypath.KeyPathError as e:
        raise ScenarioError(f"invalid edit {text!r}: {e}") from None
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def _load_scenario(path: str) -> dict[str, Any]:
    if path.lower().endswith(".json"):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return load_toml(path)


def compare(
    scenario: str,
    a: Sequence[str],
    b: Sequence[str],
    seeds: Sequence[int],
    metrics: Sequence[str] = DEFAULT_METRICS,
    workers: Optional[int] = None,
) -> dict[str, Any]:
    """Runs A and B for every seed; returns ``{"a", "b", "seeds", "metrics": [{metric, a:
    Estimate dict, b, diff, rel_change}]}``. ``metrics`` are column names of ``runs.parquet``
    or glob patterns over them (``vm.*.latency_ms.p99``)."""
    base = _load_scenario(scenario)
    variants = {"a": [parse_edit(e) for e in a], "b": [parse_edit(e) for e in b]}
    tasks = []
    for label, edits in variants.items():
        for seed in seeds:
            doc = json.loads(json.dumps(base))
            for key, value in edits:
                try:
                    keypath.set_value(doc, key, value)
                except keypath.KeyPathError as e:
                    raise ScenarioError(f"{scenario}: --{label} {key}: {e}") from None
            doc["seed"] = seed
            run_id = f"{label}-{seed}"
            text = to_json(doc)
            tasks.append((run_id, {"variant": label, "seed": seed}, text, f"{scenario} (--{label})"))
    # Fail fast on invalid edits, naming the variant.
    from . import _native

    for label in variants:
        t = next(t for t in tasks if t[1]["variant"] == label)
        try:
            _native.validate_text(t[2], f"{scenario} (--{label})", "json")
        except ScenarioError as e:
            raise ScenarioError(str(e)) from None
    rows: dict[str, dict[int, dict[str, Any]]] = {"a": {}, "b": {}}
    failures = []
    for task, record in run_local(tasks, workers or os.cpu_count() or 1):
        rec = json.loads(record)
        if rec["status"] != "ok":
            failures.append(f"--{task[1]['variant']} seed {task[1]['seed']}: {rec['error']}")
            continue
        rows[task[1]["variant"]][task[1]["seed"]] = flatten_summary(rec["summary"])
    if failures:
        from ._native import SimulationError

        raise SimulationError("compare: runs failed:\n  " + "\n  ".join(failures))
    columns: list[str] = []
    for r in list(rows["a"].values())[:1] + list(rows["b"].values())[:1]:
        for c in r:
            if c not in columns and isinstance(r[c], (int, float)) and not isinstance(r[c], bool):
                columns.append(c)
    chosen: list[str] = []
    for pat in metrics:
        matched = [c for c in columns if fnmatch.fnmatchcase(c, pat)]
        if not matched and not any(ch in pat for ch in "*?["):
            raise ScenarioError(f"unknown metric {pat!r}; metrics look like: {', '.join(columns[:8])}, ...")
        chosen += [c for c in matched if c not in chosen]
    out = []
    for m in chosen:
        va = [rows["a"][s].get(m) for s in seeds]
        vb = [rows["b"][s].get(m) for s in seeds]
        ea, eb = stats.mean_ci(va), stats.mean_ci(vb)
        if ea.n == 0 and eb.n == 0:
            continue
        d = stats.paired_diff_ci(va, vb)
        rel = d.mean / ea.mean if ea.n and ea.mean else float("nan")
        out.append({"metric": m, "a": ea.as_dict(), "b": eb.as_dict(), "diff": d.as_dict(), "rel_change": rel})
    return {"scenario": scenario, "a": list(a), "b": list(b), "seeds": list(seeds), "metrics": out}


def _seeds_text(seeds: Sequence[int]) -> str:
    """``10 seeds each (1..10)``, ``1 seed each (seed 1)``, ``3 seeds each (2, 5, 9)``."""
    seeds = list(seeds)
    if not seeds:
        return "no seeds"
    if len(seeds) == 1:
        return f"1 seed each (seed {seeds[0]})"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        which = f"{seeds[0]}..{seeds[-1]}"
    else:
        which = ", ".join(str(s) for s in seeds)
    return f"{len(seeds)} seeds each ({which})"


def format_table(res: Mapping[str, Any]) -> str:
    from ._format import table, wrap

    def est(e: Mapping[str, Any]) -> str:
        m, lo, hi = e["mean"], e["ci_lo"], e["ci_hi"]
        if e["n"] == 0:
            return "-"
        if lo != lo:  # NaN: a single sample
            return f"{m:.4g}"
        return f"{m:.4g} ± {(hi - lo) / 2:.2g}"

    rows = []
    for r in res["metrics"]:
        d = r["diff"]
        sig = d["n"] > 1 and (d["ci_lo"] > 0 or d["ci_hi"] < 0)
        if d["n"] == 0:
            diff = "-"
        elif d["ci_lo"] != d["ci_lo"]:  # NaN: one seed gives no interval
            diff = f"{d['mean']:+.4g}"
        else:
            diff = f"{d['mean']:+.4g} [{d['ci_lo']:+.3g}, {d['ci_hi']:+.3g}]"
        rel = r["rel_change"]
        rows.append([r["metric"], est(r["a"]), est(r["b"]), diff, "-" if rel != rel else f"{100 * rel:+.1f}%", "*" if sig else ""])
    head = "\n".join([
        wrap(" ".join(res["a"]), "A: "),
        wrap(" ".join(res["b"]), "B: "),
        wrap(f"{_seeds_text(res['seeds'])}; mean ± 95% CI half-width; "
             "B-A: paired mean difference [95% CI]; * = CI excludes 0"),
    ]) + "\n\n"
    return head + table(["metric", "A", "B", "B-A [95% CI]", "change", ""], rows, right=[False, True, True, True, True, False])
