"""The Python API: run scenarios, validate them, list schedulers and reproduce experiments.

All heavy lifting happens in :mod:`vcpulab._native` (Rust). pandas and tqdm are imported
lazily, inside the functions that need them, so ``import vcpulab`` stays fast.
"""

from __future__ import annotations

import json
import math
import operator
import os
from collections.abc import Iterable, Mapping

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _native
from ._native import NotFoundError, ScenarioError

# The public API keeps its annotations resolvable at run time (typing.get_type_hints,
# Sphinx, typeguard), so this module imports typing although the CLI's start pays ~3 ms.
if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

ScenarioLike = Union[str, os.PathLike[str], Mapping[str, Any]]

DICT_ORIGIN = "<dict>"

# The fields of a latency summary (`latency_ms` in the summary JSON), in column order.
_LATENCY_KEYS = ("count", "mean", "p50", "p90", "p99", "max")


SEED_MAX: int = _native.SEED_MAX


def check_seed(seed: Any) -> Optional[int]:
    """A seed override as the core takes it: None, or an integer from 0 to 2**63-1 (the
    range scenario files and the CLI accept)."""
    if seed is None:
        return None
    if isinstance(seed, bool):
        raise TypeError("seed must be an integer, not a bool")
    try:
        value = operator.index(seed)
    except TypeError:
        raise TypeError(f"seed must be an integer, not {type(seed).__name__}") from None
    if not 0 <= value <= SEED_MAX:
        shown = str(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
        raise ValueError(f"seed must be from 0 to 2**63-1, got {shown}")
    return value


_JSON_KEY_TYPES = (str, int, float, bool, type(None))


def _json_key_path(value: Any, path: str = "", enclosing: Optional[set[int]] = None) -> Optional[tuple[str, str]]:
    """The key path of the first value ``json.dumps(allow_nan=False)`` refuses, and why."""
    where = path or "(top level)"
    if not isinstance(value, (Mapping, list, tuple)):
        return _json_scalar_problem(value, where)
    enclosing = set() if enclosing is None else enclosing
    if id(value) in enclosing:
        return where, "refers back to a dict or list that contains it (a circular reference)"
    enclosing.add(id(value))
    try:
        return _json_container_problem(value, path, where, enclosing)
    finally:
        enclosing.discard(id(value))


def _json_container_problem(value: Any, path: str, where: str, enclosing: set[int]) -> Optional[tuple[str, str]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            k = _numpy_value(k)
            if not isinstance(k, _JSON_KEY_TYPES) or (isinstance(k, float) and not math.isfinite(k)):
                return where, f"key {k!r} cannot be sent as JSON; use a string"
            found = _json_key_path(v, f"{path}.{k}" if path else str(k), enclosing)
            if found:
                return found
        return None
    for i, v in enumerate(value):
        found = _json_key_path(v, f"{path}[{i}]", enclosing)
        if found:
            return found
    return None


def _numpy_value(value: Any) -> Any:
    """A numpy scalar (int64, float32, bool_, ...) or array as the plain Python value
    (``.item()``, ``.tolist()``): a scenario built from DataFrame rows holds them. Anything
    else is returned as it is. numpy is not imported: if it is not loaded, no value is
    one of its."""
    import sys

    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.generic, np.ndarray)):
        return value.tolist() if isinstance(value, np.ndarray) else value.item()
    return value


def to_json(value: Any, **kw: Any) -> str:
    """``json.dumps(value, allow_nan=False)`` that also takes numpy integers, floats, bools
    and arrays (0-d or not), as their ``.item()``/``.tolist()``: how a dict scenario, and
    the scenarios a sweep or a comparison edits, are sent to the core."""
    return json.dumps(_plain(value), allow_nan=False, **kw)


def _plain(value: Any, enclosing: Optional[set[int]] = None) -> Any:
    """``value`` with numpy values (and numpy dict keys) replaced by plain Python ones.
    Containers are copied only when something in them changes; a circular one is left
    for json to report."""
    import sys

    if sys.modules.get("numpy") is None:
        return value
    if isinstance(value, (Mapping, list, tuple)):
        enclosing = set() if enclosing is None else enclosing
        if id(value) in enclosing:
            return value
        enclosing.add(id(value))
        try:
            if isinstance(value, Mapping):
                pairs = list(value.items())
                items = [(_numpy_value(k), _plain(v, enclosing)) for k, v in pairs]
                if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, pairs)):
                    return value
                return dict(items)
            elems = [_plain(v, enclosing) for v in value]
            return value if all(a is b for a, b in zip(elems, value)) else elems
        finally:
            enclosing.discard(id(value))
    return _numpy_value(value)


def _json_scalar_problem(value: Any, where: str) -> Optional[tuple[str, str]]:
    value = _numpy_value(value)
    if isinstance(value, (list, dict)):
        return _json_key_path(value, "" if where == "(top level)" else where)
    if isinstance(value, float) and not math.isfinite(value):
        return where, f"{value} is not a finite number"
    if value is None or isinstance(value, (str, int, float)):
        return None
    return where, (f"a value of type {type(value).__name__} cannot be sent as JSON; convert it to a str, "
                   "int, float, bool, list or dict")


def _scenario_text(scenario: ScenarioLike) -> tuple[str, str, str]:
    """(text, origin, format) of a scenario given as a path or a dict."""
    if isinstance(scenario, Mapping):
        try:
            text = to_json(scenario)
        except (TypeError, ValueError) as e:
            found = _json_key_path(scenario)
            if found:
                raise ScenarioError(f"{DICT_ORIGIN}: {found[0]}: {found[1]}") from None
            raise ScenarioError(f"{DICT_ORIGIN}: cannot be sent as JSON: {e}") from None
        return text, DICT_ORIGIN, "json"
    if isinstance(scenario, (str, os.PathLike)):
        # UTF-8, any line end, TOML or JSON by the name: the CLIs' contract, in the core.
        return _native.read_scenario_file(scenario)
    raise TypeError(
        f"scenario must be a path (str or os.PathLike) or a dict, not {type(scenario).__name__}"
    )


def _flatten(record: Mapping[str, Any], skip: Iterable[str] = ()) -> dict[str, Any]:
    """One flat row from a summary record: nested dicts become ``<key>_<sub>`` columns and
    ``latency_ms`` (null or a dict) becomes ``latency_count``, ``latency_<q>_ms`` columns."""
    skip = set(skip)
    row: dict[str, Any] = {}
    for key, value in record.items():
        if key in skip:
            continue
        if key == "latency_ms":
            lat = value or {}
            for k in _LATENCY_KEYS:
                v = lat.get(k)
                if k == "count":
                    row["latency_count"] = 0 if v is None else v
                else:
                    row[f"latency_{k}_ms"] = float("nan") if v is None else v
        elif key == "ple" and value is None:
            continue  # no [kvm] in the scenario: no PLE columns
        elif isinstance(value, Mapping):
            _flatten_into(row, key, value)
        else:
            row[key] = value
    return row


def _flatten_into(row: dict[str, Any], prefix: str, value: Mapping[str, Any]) -> None:
    """Nested tables become ``<prefix>_<key>`` columns (``ple_streaks_median``); lists (the
    streak CDF) are left out of the frames."""
    for sub, v in value.items():
        if isinstance(v, Mapping):
            _flatten_into(row, f"{prefix}_{sub}", v)
        elif v is None and sub == "boost_to_run_ms":
            continue  # null when no boosted vCPU ran: the columns come from the runs that had one
        elif not isinstance(v, list):
            row[f"{prefix}_{sub}"] = v


# Columns of the frames that hold text (or null): every other column is numeric.
_TEXT_COLUMNS = frozenset({"name", "vm", "helper", "kind", "throughput_unit"})


def _frame(rows: list[dict[str, Any]]) -> "pd.DataFrame":
    """A DataFrame of summary rows whose numeric columns are numeric even when the
    summary has null for them in every row (``boost_to_run_mean_ms`` without ``[kvm]``,
    a VM's ``throughput`` without workloads, ``jobs`` of workload host threads): float
    with NaN, not ``object`` columns of None."""
    import pandas as pd

    df = pd.DataFrame(rows)
    for c in df.columns:
        if c in _TEXT_COLUMNS or df[c].dtype != object:
            continue
        values = df[c].dropna()
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            df[c] = df[c].astype("float64")
    return df


def steal_window_ends(summary: Mapping[str, Any], steal: Mapping[str, Any]) -> list[float]:
    """Where each of a VM's steal windows (``vms[].steal_pct``) ends, in simulated seconds:
    windows of ``window_s`` from the end of the warm-up, the last cut at the run's end."""
    start, end = float(summary.get("warmup_s", 0.0)), float(summary["duration_s"])
    width = float(steal["window_s"])
    return [min(start + (k + 1) * width, end) for k in range(len(steal["windows"]))]


class Result:
    """The outcome of one simulation run.

    ``summary`` is the summary JSON as a dict (exactly what ``vcpulab run --json`` prints);
    :meth:`vms`, :meth:`vcpus` and :meth:`workloads` give tidy pandas DataFrames.
    """

    __slots__ = ("_summary", "_json")

    def __init__(self, summary_json: str) -> None:
        self._json = summary_json
        # Parsed on first use: `vcpulab run --json` prints the text as it came and never
        # needs the dict (6.5 MB of JSON for 8,192 vCPUs takes ~45 ms to parse).
        self._summary: Optional[dict[str, Any]] = None

    @property
    def summary(self) -> dict[str, Any]:
        """The summary JSON as a dict (parsed once, on first access)."""
        if self._summary is None:
            self._summary = json.loads(self._json)
        return self._summary

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<vcpulab.Result scenario={s.get('scenario')!r} scheduler={s.get('scheduler')!r} "
            f"seed={s.get('seed')} vms={len(s.get('vms', []))}>"
        )

    def to_json(self) -> str:
        """The summary JSON text, byte for byte as the core produced it."""
        return self._json

    def vms(self) -> "pd.DataFrame":
        """One row per VM: name, vcpu_count, weight, cpu_time_s, cpu_share, wait/halted/spin
        times, throughput (+unit), latency_count / latency_{mean,p50,p90,p99,max}_ms, and
        steal_pct_mean, steal_pct_p95, steal_pct_window_s (the windows: :meth:`steal`)."""
        rows = [_flatten(vm, skip=("vcpus", "workloads")) for vm in self.summary["vms"]]
        return _frame(rows)

    def host_threads(self) -> "pd.DataFrame":
        """One row per ``[[host_thread]]``: name, vm, helper, cpu/wait time, migrations_*,
        jobs and job_latency_{count,mean,p50,p90,p99,max}_ms (empty without host threads)."""
        rows = []
        for h in self.summary.get("host_threads", []):
            row = _flatten({k: v for k, v in h.items() if k != "job_latency_ms"})
            lat = h.get("job_latency_ms") or {}
            for k in _LATENCY_KEYS:
                v = lat.get(k)
                if k == "count":
                    row["job_latency_count"] = 0 if v is None else v
                else:
                    row[f"job_latency_{k}_ms"] = float("nan") if v is None else v
            rows.append(row)
        return _frame(rows)

    def vcpus(self) -> "pd.DataFrame":
        """One row per vCPU: vm, index, times, dispatches, preemptions, halts,
        migrations_{total,smt_sibling,same_socket,other_socket,other_numa}, the PLE
        columns (ple_exits, yield_attempts, yield_successes, ple_streaks,
        ple_streak_median, ple_streak_max, boost_to_run_mean_ms, boost_to_run_max_ms), the
        paravirtual-spinlock counters pv_waits and pv_kicks, and with ``[kvm]`` the
        halt-polling columns halt_poll_{polls,successful_polls,poll_time_s,guest_polls,
        guest_successful_polls,guest_poll_time_s}."""
        rows = [
            {"vm": vm["name"], **_flatten(v)} for vm in self.summary["vms"] for v in vm["vcpus"]
        ]
        return _frame(rows)

    def workloads(self) -> "pd.DataFrame":
        """One row per workload: vm, workload (index in the VM), kind, threads, completed,
        throughput (+unit) and latency columns as in :meth:`vms`."""
        rows = [
            {"vm": vm["name"], "workload": i, **_flatten(w)}
            for vm in self.summary["vms"]
            for i, w in enumerate(vm["workloads"])
        ]
        return _frame(rows)

    def steal(self) -> "pd.DataFrame":
        """Steal time as each VM's guests see it, one row per VM and window: vm, window
        (0, 1, ... from the end of the warm-up), start_s, end_s (simulated seconds; the
        last window ends with the run) and steal_pct (time the VM's vCPUs were runnable
        but not running, over vCPUs x the window, in percent). The summary's
        ``steal_pct.mean`` is these windows weighted by their length."""
        rows = []
        for vm in self.summary["vms"]:
            st = vm.get("steal_pct")
            if not st:
                continue
            ends = steal_window_ends(self.summary, st)
            starts = [float(self.summary.get("warmup_s", 0.0))] + ends[:-1]
            rows += [{"vm": vm["name"], "window": k, "start_s": a, "end_s": b, "steal_pct": x}
                     for k, (a, b, x) in enumerate(zip(starts, ends, st["windows"]))]
        if not rows:
            import pandas as pd

            return pd.DataFrame(columns=["vm", "window", "start_s", "end_s", "steal_pct"])
        return _frame(rows)

    def host(self) -> dict[str, Any]:
        """The host section of the summary."""
        return self.summary["host"]


def run(scenario: ScenarioLike, seed: Optional[int] = None, check_invariants: bool = False,
        force: bool = False) -> Result:
    """Runs a scenario: a path to a TOML (or ``.json``) file, or a dict of the same schema.

    ``seed`` overrides the scenario's seed. Raises :class:`ScenarioError` for invalid input
    (the message names the file, or ``<dict>``, and the key path), :class:`OSError` if the
    file cannot be read and :class:`SimulationError` if the simulation fails. Ctrl-C (any
    exception a signal handler raises) ends the run within milliseconds and propagates.

    Scenarios estimated to take more than 5e10 events (hours) are refused with a
    :class:`ScenarioError` naming the estimate and its dominant part; ``force=True`` runs
    them anyway.
    """
    seed = check_seed(seed)
    text, origin, fmt = _scenario_text(scenario)
    return Result(_native.run_text(text, origin, fmt, seed, check_invariants, force))


def validate(scenario: ScenarioLike, force: bool = False) -> dict[str, Any]:
    """Checks a scenario without running it; returns a short description
    (name, scheduler, duration_s, seed, pcpus, estimated_events, vms[{name, vcpus,
    workloads}]). Gives :func:`run`'s verdict: a scenario estimated over the event limit
    raises :class:`ScenarioError` unless ``force=True``."""
    text, origin, fmt = _scenario_text(scenario)
    return json.loads(_native.validate_text(text, origin, fmt, force))


def schedulers() -> list[dict[str, Any]]:
    """The host schedulers: ``{name, description, params: [{name, type, default, help}]}``."""
    return json.loads(_native.schedulers_json())


def workload_kinds() -> list[dict[str, Any]]:
    """The workload kinds of ``[[vm.workload]] kind``: ``{name, description, keys}``, where
    ``keys`` is ``[{name, default, common}]``: the keys the kind takes with their defaults in
    words (``common``: taken by every kind). The model behind each: docs/scenarios.md."""
    return json.loads(_native.workload_kinds_json())


def experiments() -> list[dict[str, Any]]:
    """The built-in experiments (id, title, source, notes, metric, unit, value, tolerance,
    cases[{id, paper, note}])."""
    return json.loads(_native.experiments_json())


def experiment_scenario(experiment: str, case: Optional[str] = None, metric: Optional[str] = None) -> str:
    """The scenario (TOML text) a built-in experiment derives its cases from; with `case`,
    that case's scenario with its edits applied (as run for `metric`, default the first),
    ready for :func:`run` or ``vcpulab run``."""
    return _native.experiment_scenario(experiment, case, metric)


def _select(names: Optional[Iterable[str]]) -> list[dict[str, Any]]:
    exps = experiments()
    if names is None:
        return exps
    if isinstance(names, str):
        names = [names]
    by_id = {e["id"]: e for e in exps}
    chosen = []
    for n in names:
        if n not in by_id:
            raise NotFoundError(f"unknown experiment {json.dumps(n)}; available: {', '.join(by_id)}")
        if by_id[n] not in chosen:
            chosen.append(by_id[n])
    return chosen


def reproduce(
    names: Optional[Iterable[str]] = None,
    seed: Optional[int] = None,
    progress: bool = False,
    on_row: Optional[Callable[[dict[str, Any]], None]] = None,
    workers: Optional[int] = None,
) -> list[dict[str, Any]]:
    """Runs built-in reproductions with each experiment's own seeds; returns one row per
    case and metric: ``{experiment, case, metric, unit, paper, sim, ratio, seeds, ci_low,
    ci_high, regimes}`` (``ci_low``/``ci_high``: the 95 % bootstrap interval of ``sim``
    over its seeds; ``regimes``: ``None``, or the split when the seeds fall into two
    regimes).

    ``names`` are experiment ids (default: all). ``progress=True`` shows a tqdm bar on
    stderr once the run has taken more than two seconds. ``on_row`` is called with each
    row as soon as its experiment finishes (normalised metrics need the whole experiment).
    ``workers`` threads share the runs (default: 1); the rows do not depend on it. For
    the claims' verdicts (with seeds added where a verdict is undecided), see
    :func:`reproduce_claims`.
    """
    result = _reproduce(names, seed, progress, workers, adaptive=False, on_row=on_row)
    return result["rows"]


def reproduce_claims(
    names: Optional[Iterable[str]] = None,
    seed: Optional[int] = None,
    progress: bool = False,
    workers: Optional[int] = None,
    adaptive: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Runs built-in reproductions and judges their papers' claims: ``{"rows": [...],
    "claims": [...]}``. Each claim is ``{experiment, claim, text, source, premise,
    verdict, value, ci_low, ci_high, threshold, seeds, detail}`` with ``verdict`` one of
    ``holds``, ``fails``, ``undecided`` (its 95 % interval straddles the claim's line).
    With ``adaptive`` (the default), an undecided claim's cases get more seeds, up to
    three times the experiment's count (at least 15), before it is reported undecided;
    rows are then the means over every seed their case ran."""
    return _reproduce(names, seed, progress, workers, adaptive=adaptive)


def _reproduce(
    names: Optional[Iterable[str]],
    seed: Optional[int],
    progress: bool,
    workers: Optional[int],
    adaptive: bool,
    on_row: Optional[Callable[[dict[str, Any]], None]] = None,
) -> dict[str, list[dict[str, Any]]]:
    seed = check_seed(seed)
    workers = 1 if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    exps = _select(names)
    bar = None
    if progress and exps:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="run", delay=2.0, leave=False, dynamic_ncols=True)
    rows: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    try:
        for e in exps:
            base = bar.n if bar is not None else 0

            def tick(done: int, total: int, base: int = base) -> None:
                if bar is not None:
                    bar.total = base + total  # grows when seeds are added
                    bar.update(base + done - bar.n)  # update() keeps the bar's delay

            if bar is not None:
                bar.set_description(e["id"], refresh=False)
            result = json.loads(
                _native.reproduce_experiment(e["id"], seed, workers, adaptive, tick if bar is not None else None)
            )
            for row in result["rows"]:
                rows.append(row)
                if on_row is not None:
                    on_row(row)
            claims.extend(result["claims"])
    finally:
        if bar is not None:
            bar.close()
    return {"rows": rows, "claims": claims}


def reproduce_frame(
    names: Optional[Iterable[str]] = None, seed: Optional[int] = None, progress: bool = False
) -> "pd.DataFrame":
    """:func:`reproduce` as a DataFrame with columns experiment, case, metric, unit,
    paper, sim, ratio, seeds, ci_low, ci_high (the 95 % interval of sim)."""
    import pandas as pd

    rows = reproduce(names, seed=seed, progress=progress)
    cols = ["experiment", "case", "metric", "unit", "paper", "sim", "ratio", "seeds", "ci_low", "ci_high"]
    return pd.DataFrame(rows, columns=cols)
