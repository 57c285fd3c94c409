"""Sweeps: a base scenario, edits on a grid of axes, many runs on a process pool or Ray.

A sweep file (TOML; the keys are a contract, see docs/sweeps.md)::

    base = "overcommit.toml"               # scenario, relative to the sweep file
    [set]                                   # fixed edits applied to the base first
    duration = "2s"
    [axes]                                  # the grid: every combination runs
    "scheduler.name" = ["rr", "hyperv-root"]
    "vm[1].vcpus" = [2, 4, 8]
    seed = { range = [1, 10] }              # 1..10 inclusive
    [zip]                                   # lists that advance together: one more grid axis
    "vm[1].vcpus" = [2, 4, 8]
    "vm[1].workload[0].threads" = [2, 4, 8]

A run is a pure function of (scenario, seed): workers get JSON text and return JSON text,
no PyO3 object crosses a process. Each run's record is written atomically to
``OUT/runs/<run_id>.json`` as soon as it finishes; ``run_id`` is a hash of the run's axis
values, so ``--resume`` skips the runs already on disk. ``runs.parquet`` and
``vms.parquet`` are rebuilt from the records at the end of every invocation.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _native, keypath
from ._files import atomic_write, atomic_write_text
from ._native import ScenarioError
from .api import to_json

SWEEP_KEYS = ("name", "description", "base", "set", "axes", "zip")
RUNS_DIR = "runs"
MANIFEST = "sweep.json"

# Test hook (not an API): a comma-separated list; ``RUN_ID`` makes the local worker running
# that run die on its first attempt, ``RUN_ID:always`` on every attempt. Lets tests kill a
# worker deterministically.
_CRASH_ENV = "_VCPULAB_SWEEP_CRASH"


def load_toml(path: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    with open(path, "rb") as f:
        data = f.read()
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ScenarioError(f"{path}: invalid TOML: {e}") from None


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): hashing and column values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def run_id_of(assign: Mapping[str, Any]) -> str:
    """A stable id of a run: a hash of its axis values (independent of axis order)."""
    return hashlib.sha256(canonical(dict(assign)).encode("utf-8")).hexdigest()[:16]


def _fmt_value(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else canonical(v)


@dataclass
class Run:
    run_id: str
    assign: dict[str, Any]  # axis key path -> value, in column order


@dataclass
class Sweep:
    path: str
    name: str
    base_path: str
    base: dict[str, Any]  # base scenario after [set]
    dims: list[list[dict[str, Any]]]  # grid dimensions: each a list of {key: value} assignments
    columns: list[str]  # the axis key paths, in file order
    axes_spec: dict[str, Any] = field(default_factory=dict)
    zip_spec: list[dict[str, Any]] = field(default_factory=list)

    def runs(self) -> list[Run]:
        out = []
        for combo in itertools.product(*self.dims):
            assign: dict[str, Any] = {}
            for part in combo:
                assign.update(part)
            assign = {k: assign[k] for k in self.columns}
            out.append(Run(run_id_of(assign), assign))
        return out

    def scenario(self, assign: Mapping[str, Any]) -> dict[str, Any]:
        doc = copy.deepcopy(self.base)
        for key, value in assign.items():
            try:
                keypath.set_value(doc, key, copy.deepcopy(value))
            except keypath.KeyPathError as e:
                raise ScenarioError(f"{self.path}: axis {json.dumps(key)}: {e}") from None
        return doc

    def base_hash(self) -> str:
        return hashlib.sha256(canonical(self.base).encode("utf-8")).hexdigest()

    def manifest(self) -> dict[str, Any]:
        return {
            "sweep": os.path.abspath(self.path),
            "name": self.name,
            "base": os.path.abspath(self.base_path),
            "base_sha256": self.base_hash(),
            "columns": self.columns,
            "axes": self.axes_spec,
            "zip": self.zip_spec,
            "runs": len(self.runs()),
        }


def _axis_values(path: str, where: str, spec: Any) -> list[Any]:
    if isinstance(spec, list):
        if not spec:
            raise ScenarioError(f"{path}: {where}: empty list; an axis needs at least one value")
        return spec
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"range", "step"})
        if unknown or "range" not in spec:
            raise ScenarioError(
                f"{path}: {where}: expected a list of values or {{ range = [FIRST, LAST] }} "
                f"(optional step = N); got keys {', '.join(sorted(spec)) or 'none'}"
            )
        r, step = spec["range"], spec.get("step", 1)
        if (
            not isinstance(r, list)
            or len(r) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in r)
        ):
            raise ScenarioError(f"{path}: {where}.range: expected two integers [FIRST, LAST], got {canonical(r)}")
        if not isinstance(step, int) or isinstance(step, bool) or step < 1:
            raise ScenarioError(f"{path}: {where}.step: expected a positive integer, got {canonical(step)}")
        if r[0] > r[1]:
            raise ScenarioError(f"{path}: {where}.range: FIRST ({r[0]}) is greater than LAST ({r[1]})")
        return list(range(r[0], r[1] + 1, step))
    raise ScenarioError(
        f"{path}: {where}: expected a list of values or {{ range = [FIRST, LAST] }}, got {canonical(spec)}"
    )


def _check_key(path: str, where: str, key: str) -> None:
    try:
        keypath.parse(key)
    except keypath.KeyPathError as e:
        raise ScenarioError(f"{path}: {where}: {e}") from None


def load(path: str) -> Sweep:
    """Reads and checks a sweep file (not yet the scenarios: see :func:`check`)."""
    doc = load_toml(path)
    unknown = [k for k in doc if k not in SWEEP_KEYS]
    if unknown:
        raise ScenarioError(f"{path}: {unknown[0]}: unknown key; allowed keys: {', '.join(SWEEP_KEYS)}")
    base_rel = doc.get("base")
    if not isinstance(base_rel, str):
        raise ScenarioError(f"{path}: base: required: the scenario file to sweep, relative to the sweep file")
    base_path = os.path.join(os.path.dirname(os.path.abspath(path)), base_rel)
    try:
        if base_path.lower().endswith(".json"):
            with open(base_path, encoding="utf-8") as f:
                base = json.load(f)
        else:
            base = load_toml(base_path)
    except OSError as e:
        raise ScenarioError(f"{path}: base: cannot read {base_rel!r}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{path}: base: {base_rel!r} is not valid JSON: {e}") from None

    fixed = doc.get("set", {})
    if not isinstance(fixed, dict):
        raise ScenarioError(f"{path}: set: expected a table of key path = value")
    for key, value in fixed.items():
        _check_key(path, f"set.{json.dumps(key)}", key)
        try:
            keypath.set_value(base, key, value)
        except keypath.KeyPathError as e:
            raise ScenarioError(f"{path}: set.{json.dumps(key)}: {e}") from None

    axes = doc.get("axes", {})
    if not isinstance(axes, dict):
        raise ScenarioError(f"{path}: axes: expected a table of key path = [values]")
    zips = doc.get("zip", [])
    if isinstance(zips, dict):
        zips = [zips]
    if not isinstance(zips, list) or not all(isinstance(z, dict) for z in zips):
        raise ScenarioError(f"{path}: zip: expected a table ([zip]) or an array of tables ([[zip]])")

    dims: list[list[dict[str, Any]]] = []
    columns: list[str] = []
    axes_spec: dict[str, Any] = {}
    for key, spec in axes.items():
        where = f"axes.{json.dumps(key)}"
        _check_key(path, where, key)
        values = _axis_values(path, where, spec)
        columns.append(key)
        axes_spec[key] = values
        dims.append([{key: v} for v in values])
    zip_spec = []
    for zi, group in enumerate(zips):
        if not group:
            raise ScenarioError(f"{path}: zip[{zi}]: empty; list the key paths whose values advance together")
        lists = {}
        for key, spec in group.items():
            where = f"zip[{zi}].{json.dumps(key)}"
            _check_key(path, where, key)
            if key in columns:
                raise ScenarioError(f"{path}: {where}: key path already swept (in [axes] or another [zip])")
            lists[key] = _axis_values(path, where, spec)
            columns.append(key)
        lengths = {k: len(v) for k, v in lists.items()}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{json.dumps(k)} has {n}" for k, n in lengths.items())
            raise ScenarioError(f"{path}: zip[{zi}]: the lists of a zip advance together and must have equal lengths: {detail}")
        n = next(iter(lengths.values()))
        dims.append([{k: v[i] for k, v in lists.items()} for i in range(n)])
        zip_spec.append(lists)
    name = doc.get("name") or os.path.splitext(os.path.basename(path))[0]
    return Sweep(path, str(name), base_path, base, dims, columns, axes_spec, zip_spec)


def _blame(sweep: Sweep, assign: Mapping[str, Any], err: str) -> str:
    """Turns a core error about one run's scenario into one naming the sweep and the axis."""
    prefix = f"{sweep.path}: "
    rest = err[len(prefix):] if err.startswith(prefix) else err
    errpath = rest.split(": ", 1)[0]
    for key, value in assign.items():
        if errpath == key or errpath.startswith(key + ".") or errpath.startswith(key + "["):
            others = ", ".join(f"{k} = {_fmt_value(v)}" for k, v in assign.items() if k not in (key, "seed"))
            return f"{sweep.path}: axis {json.dumps(key)} = {_fmt_value(value)}: {rest}" + (
                f" (in the run with {others})" if others else ""
            )
    if not assign:
        return f"{sweep.path}: base {os.path.basename(sweep.base_path)}: {rest}"
    run = ", ".join(f"{k} = {_fmt_value(v)}" for k, v in assign.items())
    return f"{sweep.path}: in the run with {run}: {rest}"


def check(sweep: Sweep, runs: Optional[list[Run]] = None) -> None:
    """Validates the scenario of every distinct combination of non-seed axis values (and
    every seed value once) without running anything; raises ScenarioError naming the
    sweep file and the axis."""
    runs = sweep.runs() if runs is None else runs
    seen: set[str] = set()
    seeds_seen: set[str] = set()
    for run in runs:
        rest = {k: v for k, v in run.assign.items() if k != "seed"}
        key = canonical(rest)
        skey = canonical(run.assign.get("seed"))
        if key in seen and skey in seeds_seen:
            continue
        seen.add(key)
        seeds_seen.add(skey)
        scenario = sweep.scenario(run.assign)
        try:
            # force: a point estimated over the run-length limit is not a bad sweep file; it
            # is refused when it runs and recorded as a failed run, like any run error.
            _native.validate_text(to_json(scenario), sweep.path, "json", True)
        except ScenarioError as e:
            raise ScenarioError(_blame(sweep, run.assign, str(e))) from None
        except (TypeError, ValueError) as e:
            raise ScenarioError(_blame(sweep, run.assign, f"{sweep.path}: cannot be sent as JSON: {e}")) from None


# --------------------------------------------------------------------------- running

# A task is (run_id, axis values, scenario JSON text, origin); a record is the JSON text
# written to runs/<run_id>.json: {"run_id", "axes", "status", "error", "summary"}.
Task = tuple[str, dict[str, Any], str, str]


def make_record(run_id: str, assign: Mapping[str, Any], summary_json: Optional[str], error: Optional[str]) -> str:
    head = json.dumps({"run_id": run_id, "axes": dict(assign)}, ensure_ascii=False)[:-1]
    if error is None:
        return f'{head}, "status": "ok", "error": null, "summary": {summary_json}}}\n'
    return f'{head}, "status": "failed", "error": {json.dumps(error, ensure_ascii=False)}, "summary": null}}\n'


def execute(task: Task, attempt: int = 0) -> str:
    """Runs one task; returns its record text. Never raises for a failed simulation."""
    run_id, assign, text, origin = task
    for crash in filter(None, os.environ.get(_CRASH_ENV, "").split(",")):
        if crash.split(":")[0] == run_id and (attempt == 0 or crash.endswith(":always")):
            os._exit(86)
    try:
        summary = _native.run_text(text, origin, "json", None)
    except Exception as e:  # noqa: BLE001 - every failure becomes the run's error
        return make_record(run_id, assign, None, f"{type(e).__name__}: {e}")
    return make_record(run_id, assign, summary, None)


def _ray_execute(task: Task) -> str:
    return execute(task)


def worker_loop(stdin: Any = None, stdout: Any = None) -> None:
    """The loop of a local worker process (``python -m vcpulab._worker``): reads one task a
    line as JSON ``[task, attempt]`` on stdin, writes its record as one JSON string line."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    try:
        for line in stdin:
            task, attempt = json.loads(line)
            record = execute(tuple(task), attempt)  # type: ignore[arg-type]
            stdout.write(json.dumps(record).encode("utf-8") + b"\n")
            stdout.flush()
    except (BrokenPipeError, OSError):
        pass  # the parent went away (interrupted): nothing to report to


class _Proc:
    """A worker: ``python -m vcpulab._worker`` with pipes. A subprocess (not
    multiprocessing) so nothing of the caller's ``__main__`` is re-imported or pickled."""

    def __init__(self) -> None:
        import subprocess

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vcpulab._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self.task: Optional[Task] = None

    def send(self, task: Task, attempt: int) -> bool:
        try:
            self.proc.stdin.write(json.dumps([list(task), attempt]).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def stop(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


def run_local(tasks: Iterable[Task], workers: int, retries: int = 1) -> Iterator[tuple[Task, str]]:
    """Runs tasks on ``workers`` processes; yields (task, record text) as runs finish.

    Each worker holds one run at a time, so a worker that dies (killed, crashed) loses
    exactly its run: it is retried ``retries`` times on a fresh worker, then reported as
    failed with the worker's exit status.
    """
    import selectors

    pending = deque(tasks)
    if not pending:
        return
    attempts: dict[str, int] = {}
    procs = [_Proc() for _ in range(max(1, min(workers, len(pending))))]
    sel = selectors.DefaultSelector()
    try:
        while True:
            for p in procs:
                if p.task is None and pending:
                    p.task = pending.popleft()
                    p.send(p.task, attempts.get(p.task[0], 0))  # a dead worker shows as EOF below
                    sel.register(p.proc.stdout, selectors.EVENT_READ, p)
            if not any(p.task is not None for p in procs):
                break
            for key, _ in sel.select():
                p = key.data
                sel.unregister(p.proc.stdout)
                task, line = p.task, p.proc.stdout.readline()
                p.task = None
                if line:
                    yield task, json.loads(line)
                    continue
                # EOF: the worker died while holding `task`.
                p.stop()
                code = p.proc.wait()
                procs[procs.index(p)] = _Proc()
                n = attempts[task[0]] = attempts.get(task[0], 0) + 1
                if n <= retries:
                    pending.appendleft(task)
                else:
                    how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
                    err = f"WorkerDied: the worker process died ({how}) on each of {n} attempts"
                    yield task, make_record(task[0], task[1], None, err)
    finally:
        sel.close()
        for p in procs:
            p.stop()
        for p in procs:
            try:
                p.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                p.proc.kill()


def run_ray(tasks: Iterable[Task], workers: Optional[int], address: Optional[str]) -> Iterator[tuple[Task, str]]:
    """Runs tasks as Ray tasks (one per run, retried once if its worker dies); yields
    (task, record text) as runs finish. Starts a local Ray instance unless ``address``."""
    try:
        import ray
    except ImportError:
        raise ScenarioError("--engine ray needs Ray: pip install 'ray>=2.9' (vcpulab's [ray] extra)") from None
    tasks = list(tasks)
    if not tasks:
        return
    started = not ray.is_initialized()
    if started:
        kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["include_dashboard"] = False
            if workers:
                kwargs["num_cpus"] = workers
        ray.init(**kwargs)
    try:
        remote = ray.remote(num_cpus=1, max_retries=1)(_ray_execute)
        refs = {remote.remote(t): t for t in tasks}
        todo = list(refs)
        while todo:
            done, todo = ray.wait(todo, num_returns=min(len(todo), 64), timeout=0.2)
            for ref in done:
                task = refs.pop(ref)
                try:
                    record = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - a worker that died twice, ...
                    err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                    record = make_record(task[0], task[1], None, err)
                yield task, record
    finally:
        if started:
            ray.shutdown()


def run_tasks(tasks: list[Task], engine: str, workers: Optional[int],
              ray_address: Optional[str]) -> Iterator[tuple[Task, str]]:
    """Runs tasks on the named engine (``local`` or ``ray``); yields (task, record text) as
    runs finish. Sweeps and robustness checks (vcpulab.robustness) both run on it."""
    if engine == "local":
        return run_local(tasks, workers or os.cpu_count() or 1)
    if engine == "ray":
        return run_ray(tasks, workers, ray_address)
    raise ScenarioError(f"unknown engine {engine!r}; available: local, ray")


# ---------------------------------------------------------------------------- store


def read_record(path: str) -> Optional[dict[str, Any]]:
    """A run record, or None if missing or unreadable (then the run is run again)."""
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("status") in ("ok", "failed") else None


_NULL_TABLES = ("ple", "boost_to_run_ms")


def flatten_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The run's metrics as flat columns: ``vm.<name>.<metric>`` (``latency_ms.p99``,
    ``ple.exits``, ``ple.streaks.median`` etc.; lists such as the streak CDF are left out),
    ``host.*`` (``host.migrations.total`` ...), ``fairness.jain_vm``, ``events``."""
    row: dict[str, Any] = {}

    def put(prefix: str, value: Any) -> None:
        if value is None and prefix.rsplit(".", 1)[-1] in _NULL_TABLES:
            return  # a table that is null when absent (no [kvm]): no column
        if isinstance(value, Mapping):
            for k, v in value.items():
                put(f"{prefix}.{k}", v)
        elif isinstance(value, list):
            return
        else:
            row[prefix] = value

    for vm in summary.get("vms", []):
        name = vm["name"]
        for k, v in vm.items():
            if k in ("name", "vcpus", "workloads"):
                continue
            if k == "latency_ms" and v is None:
                for q in ("count", "mean", "p50", "p90", "p99", "max"):
                    row[f"vm.{name}.latency_ms.{q}"] = 0 if q == "count" else None
                continue
            put(f"vm.{name}.{k}", v)
    put("host", summary.get("host", {}))
    put("fairness", summary.get("fairness", {}))
    row["events"] = summary.get("events")
    return row


def _column_value(v: Any) -> Any:
    return canonical(v) if isinstance(v, (dict, list)) else v


def build_tables(records: list[dict[str, Any]], columns: list[str]) -> tuple[Any, Any]:
    """(runs DataFrame, vms DataFrame) from run records."""
    import pandas as pd

    from .api import _flatten

    run_rows, vm_rows = [], []
    for rec in records:
        axes = {c: _column_value(rec["axes"].get(c)) for c in columns}
        row = {"run_id": rec["run_id"], **axes, "status": rec["status"], "error": rec.get("error")}
        s = rec.get("summary")
        if s:
            row.update(flatten_summary(s))
            for vm in s["vms"]:
                vm_rows.append({"run_id": rec["run_id"], **axes, "vm": vm["name"], **_flatten(vm, skip=("name", "vcpus", "workloads"))})
        run_rows.append(row)
    runs = pd.DataFrame(run_rows)
    for c in columns:  # an axis with mixed value types (2 and "auto") becomes text
        if c in runs and runs[c].map(type).nunique() > 1:
            runs[c] = runs[c].map(lambda v: None if v is None else _fmt_value(v))
    vms = pd.DataFrame(vm_rows)
    if vms.empty:
        vms = pd.DataFrame(columns=["run_id", *columns, "vm"])
    for c in columns:
        if c in vms and vms[c].map(type).nunique() > 1:
            vms[c] = vms[c].map(lambda v: None if v is None else _fmt_value(v))
    return runs, vms


def write_store(out_dir: str, runs: list[Run], columns: list[str]) -> tuple[int, list[dict[str, Any]]]:
    """Rebuilds runs.parquet and vms.parquet from the records of ``runs`` on disk; returns
    (records found, failed records)."""
    records = []
    for run in runs:
        rec = read_record(os.path.join(out_dir, RUNS_DIR, f"{run.run_id}.json"))
        if rec is not None:
            records.append(rec)
    runs_df, vms_df = build_tables(records, columns)
    for name, df in (("runs", runs_df), ("vms", vms_df)):
        path = os.path.join(out_dir, f"{name}.parquet")
        atomic_write(path, lambda tmp, df=df: df.to_parquet(tmp, index=False))
    return len(records), [r for r in records if r["status"] != "ok"]


# --------------------------------------------------------------------------- driver


@dataclass
class SweepOutcome:
    total: int
    ran: int
    skipped: int
    failed: list[dict[str, Any]]
    elapsed_s: float
    out_dir: str


def default_out(sweep_path: str) -> str:
    return os.path.splitext(os.path.basename(sweep_path))[0] + "-results"


def run_sweep(
    sweep_path: str,
    out_dir: Optional[str] = None,
    engine: str = "local",
    workers: Optional[int] = None,
    ray_address: Optional[str] = None,
    resume: bool = False,
    progress: bool = False,
    on_record: Optional[Callable[[str, str], None]] = None,
) -> SweepOutcome:
    """Runs a sweep file into ``out_dir`` (default ``<sweep name>-results``); see the module doc."""
    import importlib.util

    # Checked first: the results tables are written after every run has finished.
    if importlib.util.find_spec("pyarrow") is None:
        raise ScenarioError("vcpulab sweep writes its results as Parquet and needs pyarrow, a dependency of "
                            "vcpulab missing from this Python (uninstalled since?): pip install 'pyarrow>=10'")
    sweep = load(sweep_path)
    runs = sweep.runs()
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        raise ScenarioError(f"{sweep_path}: some axis lists repeat a value, so some runs would be identical")
    check(sweep, runs)
    out_dir = out_dir or default_out(sweep_path)
    runs_dir = os.path.join(out_dir, RUNS_DIR)
    manifest_path = os.path.join(out_dir, MANIFEST)
    manifest = sweep.manifest()
    existing = os.path.isdir(runs_dir) and any(n.endswith(".json") for n in os.listdir(runs_dir))
    if existing and not resume:
        raise ScenarioError(f"{out_dir}: already holds runs of a sweep; pass --resume to continue it, or choose another --out")
    if resume and os.path.exists(manifest_path):
        try:
            with open(manifest_path, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
        if old.get("base_sha256") not in (None, manifest["base_sha256"]):
            raise ScenarioError(
                f"{out_dir}: its runs are of a different base scenario (the base file or [set] changed "
                "since); resuming would mix results: choose another --out"
            )
    os.makedirs(runs_dir, exist_ok=True)
    atomic_write_text(manifest_path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")

    todo: list[Task] = []
    skipped = 0
    for run in runs:
        rec = read_record(os.path.join(runs_dir, f"{run.run_id}.json")) if resume else None
        if rec is not None and rec["status"] == "ok":
            skipped += 1
            continue
        text = to_json(sweep.scenario(run.assign))
        origin = f"{sweep_path} run {run.run_id}"
        todo.append((run.run_id, run.assign, text, origin))

    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(runs), initial=skipped, unit="run", dynamic_ncols=True, file=sys.stderr,
                   desc=sweep.name, smoothing=0.05)
    start = time.perf_counter()
    ran = 0
    try:
        for task, record in run_tasks(todo, engine, workers, ray_address):
            atomic_write_text(os.path.join(runs_dir, f"{task[0]}.json"), record)
            ran += 1
            if on_record is not None:
                on_record(task[0], record)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - start
    _, failed = write_store(out_dir, runs, sweep.columns)
    return SweepOutcome(len(runs), ran, skipped, failed, elapsed, out_dir)
