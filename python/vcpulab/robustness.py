"""Robustness checks of the built-in reproductions' claims (``vcpulab robustness``).

Each claim is judged again under a family of plausible perturbations of its experiment's
setup (other seeds, a core per socket less and more, one VM more, SMT toggled, the noise
workload swapped, the KVM vendor); the family, the premise rules and the choice of the
worst counterexample are in ``crates/vcpulab-core/src/repro/robustness.rs``. The core
plans the runs and judges them; this module runs them on the sweep engine (a local
process pool, or Ray), so a check is resumable like a sweep: every run is written to
``<out>/<experiment>/runs/<run_id>.json`` as it finishes, atomically.

Layout of ``<out>`` (default ``robustness-results``)::

    manifest.json                         what was asked (experiments, seeds, seed)
    <experiment>/runs/<run_id>.json       one record per run (the sweep's record format)
    <experiment>/report.json              the experiment's report
    <experiment>/counterexamples/<claim>/<case>.toml   the worst counterexample's scenarios
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any, Callable, Iterable, Optional

from . import _native
from ._files import atomic_write_text
from ._native import ScenarioError

DEFAULT_SEEDS = 5
DEFAULT_OUT = "robustness-results"
MANIFEST = "manifest.json"


def _plan(experiment: str, seeds: int, seed: Optional[int], perturbations: Optional[list[str]]) -> dict[str, Any]:
    return json.loads(_native.robustness_plan(experiment, seeds, seed, perturbations))


def _plan_digest(plan: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for p in plan["perturbations"]:
        for r in p["runs"]:
            h.update(r["run_id"].encode())
            h.update(r["scenario"].encode())
    return h.hexdigest()


def _read(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and "status" in rec else None


def robustness(
    experiments: Iterable[str],
    out_dir: Optional[str] = None,
    seeds: int = DEFAULT_SEEDS,
    seed: Optional[int] = None,
    engine: str = "local",
    workers: Optional[int] = None,
    ray_address: Optional[str] = None,
    resume: bool = False,
    progress: bool = False,
    on_run: Optional[Callable[[str, str], None]] = None,
    perturbations: Optional[Iterable[str]] = None,
) -> list[dict[str, Any]]:
    """Runs the robustness check of each named experiment; returns one report per
    experiment (see the module doc and ``repro::robustness::Report``), with each worst
    counterexample's scenarios written under ``out_dir`` and named by path in the report.
    ``perturbations``: only these of the family (default: all of it)."""
    from .sweep import run_tasks

    names = list(dict.fromkeys(experiments))
    if not names:
        raise ScenarioError("robustness: name at least one experiment (vcpulab reproduce --list shows them)")
    out_dir = out_dir or DEFAULT_OUT
    only = list(dict.fromkeys(perturbations)) if perturbations else None
    plans = {name: _plan(name, seeds, seed, only) for name in names}
    manifest = {
        "experiments": names,
        "seeds": seeds,
        "seed": seed,
        "perturbations": only,
        "plans_sha256": {n: _plan_digest(p) for n, p in plans.items()},
        "version": _native.version(),
    }
    manifest_path = os.path.join(out_dir, MANIFEST)
    existing = any(
        os.path.isdir(os.path.join(out_dir, n, "runs")) and os.listdir(os.path.join(out_dir, n, "runs"))
        for n in names
    )
    if existing and not resume:
        raise ScenarioError(f"{out_dir}: already holds runs of a robustness check; pass --resume to "
                            "continue it, or choose another --out")
    if resume and os.path.exists(manifest_path):
        old = _read_json(manifest_path)
        if old.get("version") not in (None, manifest["version"]):
            raise ScenarioError(f"{out_dir}: its runs were made by {old.get('version')}, this is "
                                f"{manifest['version']}; resuming would mix them: choose another --out")
        for n in names:
            was = (old.get("plans_sha256") or {}).get(n)
            if was not in (None, manifest["plans_sha256"][n]):
                raise ScenarioError(f"{out_dir}: its runs of {n} were planned differently (other seeds, "
                                    "or another vcpulab); resuming would mix them: choose another --out")
        for n, d in (old.get("plans_sha256") or {}).items():
            manifest["plans_sha256"].setdefault(n, d)
        manifest["experiments"] = list(dict.fromkeys(list(old.get("experiments") or []) + names))
    os.makedirs(out_dir, exist_ok=True)
    atomic_write_text(manifest_path, json.dumps(manifest, indent=2) + "\n")

    todo: list[tuple[str, dict[str, Any], str, str]] = []
    records: dict[str, dict[str, str]] = {n: {} for n in names}
    for name, plan in plans.items():
        runs_dir = os.path.join(out_dir, name, "runs")
        os.makedirs(runs_dir, exist_ok=True)
        for p in plan["perturbations"]:
            for r in p["runs"]:
                path = os.path.join(runs_dir, f"{r['run_id']}.json")
                rec = _read(path) if resume else None
                if rec is not None and rec["status"] == "ok":
                    with open(path, encoding="utf-8") as f:
                        records[name][r["run_id"]] = f.read()
                    continue
                axes = {"experiment": name, "perturbation": r["perturbation"], "case": r["case"], "seed": r["seed"]}
                origin = f"robustness {name}: perturbation {r['perturbation']}, case {r['case']}"
                # The run id is unique per experiment; the task id must be unique overall.
                todo.append((f"{name}/{r['run_id']}", axes, r["scenario"], origin))

    total = sum(len(p["runs"]) for plan in plans.values() for p in plan["perturbations"])
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=total - len(todo), unit="run", dynamic_ncols=True, file=sys.stderr,
                   desc="robustness", smoothing=0.05)
    try:
        for task, record in run_tasks(todo, engine, workers, ray_address):
            name, run_id = task[0].split("/", 1)
            atomic_write_text(os.path.join(out_dir, name, "runs", f"{run_id}.json"), record)
            records[name][run_id] = record
            if on_run is not None:
                on_run(task[0], record)
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()

    reports = []
    for name in names:
        # The records name the task id; the core reads the run id.
        texts = []
        for run_id, text in sorted(records[name].items()):
            rec = json.loads(text)
            rec["run_id"] = run_id
            texts.append(json.dumps(rec))
        report = json.loads(_native.robustness_report(name, seeds, "[" + ",".join(texts) + "]", seed, only))
        _write_counterexamples(report, os.path.join(out_dir, name))
        atomic_write_text(os.path.join(out_dir, name, "report.json"), json.dumps(report, indent=2) + "\n")
        reports.append(report)
    return reports


#: The start-jitter perturbations: every VM's start_jitter set to 0, 0.5 ms and 1 ms.
START_PERTURBATIONS = ("jitter-0", "jitter-0.5ms", "jitter-1ms")
#: The other-seeds perturbation of the stability family: the next block of seeds, at the
#: experiment's own start.
SEED_PERTURBATIONS = ("seeds+1000",)
#: The whole stability family (issue 27, part 3); a report lists its perturbations in its own order.
STABILITY_PERTURBATIONS = START_PERTURBATIONS + SEED_PERTURBATIONS


def _split(report: dict[str, Any], among: tuple[str, ...]) -> list[dict[str, Any]]:
    """Claims judged "holds" under one of the perturbations ``among`` and "fails" under
    another; each ``{"claim", "verdicts": {perturbation: verdict}}``."""
    out = []
    for c in report["claims"]:
        verdicts = {o["perturbation"]: o["verdict"] for o in c["outcomes"] if o["perturbation"] in among}
        if "holds" in verdicts.values() and "fails" in verdicts.values():
            out.append({"claim": c["claim"], "verdicts": verdicts})
    return out


def decided_by_start(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims of a robustness report that the start alone decides: judged "holds" under
    one start jitter and "fails" under another (issue 27, part 3). A move to or from
    "undecided" is within the tolerance: each verdict is taken over the perturbation's seeds
    with the claim's own margin, so it says the difference is too small to call. Each item:
    ``{"claim", "verdicts": {perturbation: verdict}}``."""
    return _split(report, START_PERTURBATIONS)


def decided_by_seeds(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims the seeds decide and the start does not: the start jitters agree (no
    "holds" against "fails" among them), but the other block of seeds (``seeds+1000``)
    holds where a start fails, or fails where a start holds. Same tolerance and items as
    :func:`decided_by_start`."""
    by_start = {m["claim"] for m in decided_by_start(report)}
    return [m for m in _split(report, STABILITY_PERTURBATIONS) if m["claim"] not in by_start]


def _read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            v = json.load(f)
    except (OSError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


def _write_counterexamples(report: dict[str, Any], exp_dir: str) -> None:
    """Writes each worst counterexample's scenarios; replaces their texts by paths."""
    for c in report["claims"]:
        worst = c.get("worst")
        if not worst:
            continue
        d = os.path.join(exp_dir, "counterexamples", c["claim"])
        os.makedirs(d, exist_ok=True)
        for f in worst["files"]:
            path = os.path.join(d, f["name"])
            atomic_write_text(path, f.pop("text"))
            f["path"] = path


def format_report(report: dict[str, Any]) -> list[str]:
    """The lines ``vcpulab robustness`` prints for one experiment (at most 100 columns
    but for long paths)."""
    import textwrap

    perts = report["perturbations"]
    ran = [p for p in perts if p["status"] == "ran"]
    lines = [f"robustness of {report['experiment']}: {len(ran)} of {len(perts)} perturbations ran, "
             f"{report['seeds']} seeds each"]
    for p in perts:
        what = p["text"] if p["status"] == "ran" else f"{p['status']}: {p['reason']}"
        lines.extend(textwrap.wrap(f"{p['id']:<11} {what}", 98, initial_indent="  ",
                                   subsequent_indent=" " * 14))
    lines.append("")
    for c in report["claims"]:
        if c["share"] is None:
            head = "no perturbation applies"
        else:
            head = (f"holds in {c['holds']} of {c['applicable']} ({c['share']:.0%}); "
                    f"fails {c['fails']}, undecided {c['undecided']}")
        lines.append(f"  {c['claim']}: {head}")
        w = c.get("worst")
        if w:
            lines.extend(textwrap.wrap(f"worst: {w['perturbation']} {w['verdict']}: {w['detail']}", 94,
                                       initial_indent="      ", subsequent_indent="        "))
            for f in w["files"]:
                lines.append(f"        {f['path']}")
    return lines
