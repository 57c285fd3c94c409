"""`vcpulab robustness` (issue 26, part 4): every claim of an experiment judged again under
perturbations of its setup, on the sweep engine, resumable, with each claim's share and
its worst counterexample as runnable scenario files. The perturbation family, the premise
rule and the choice of the worst counterexample are tested on hand-made experiments in
crates/vcpulab-core/src/repro/robustness.rs."""

from __future__ import annotations

import json
from pathlib import Path

import vcpulab
from conftest import run_cli

EXPERIMENT = "hyperv-root"
FAMILY = ["seeds+1000", "seeds+2000", "host-1", "host+1", "vm+1", "smt", "noise-swap", "vendor",
          "jitter-0", "jitter-0.5ms", "jitter-1ms"]


def test_each_claim_gets_a_share_and_its_worst_counterexample_runs(tmp_path: Path):
    out = tmp_path / "robust"
    p = run_cli("robustness", EXPERIMENT, "--json", "--out", str(out), "--workers", "2", timeout=600)
    assert p.returncode == 0, p.stderr
    (report,) = json.loads(p.stdout)
    assert report["experiment"] == EXPERIMENT and report["seeds"] == 5
    assert [x["id"] for x in report["perturbations"]] == FAMILY
    status = {x["id"]: x for x in report["perturbations"]}
    assert status["vendor"]["status"] == "skipped" and "[kvm]" in status["vendor"]["reason"]
    assert status["host+1"]["status"] == "ran" and "4 -> 5" in status["host+1"]["text"]
    declared = next(e for e in vcpulab.experiments() if e["id"] == EXPERIMENT)["claims"]
    assert [c["claim"] for c in report["claims"]] == [c["id"] for c in declared]
    for c in report["claims"]:
        verdicts = [o["verdict"] for o in c["outcomes"]]
        assert len(verdicts) == len(FAMILY)
        assert c["applicable"] == c["holds"] + c["fails"] + c["undecided"] == sum(v != "not applicable" for v in verdicts)
        assert c["holds"] == verdicts.count("holds")
        if c["applicable"]:
            assert c["share"] == c["holds"] / c["applicable"]
        if c["fails"] or c["undecided"]:
            w = c["worst"]
            assert w is not None and w["verdict"] in ("fails", "undecided")
            assert w["verdict"] == "fails" or not c["fails"], "a failing perturbation is worse than an undecided one"
            for f in w["files"]:
                path = Path(f["path"])
                assert path.parent == out / EXPERIMENT / "counterexamples" / c["claim"]
                head = path.read_text(encoding="utf-8")
                assert c["claim"] in head and w["perturbation"] in head
                v = run_cli("validate", str(path))
                assert v.returncode == 0, v.stderr
        else:
            assert c["worst"] is None
    assert json.loads((out / EXPERIMENT / "report.json").read_text(encoding="utf-8")) == report
    runs = list((out / EXPERIMENT / "runs").glob("*.json"))
    planned = sum(1 for x in report["perturbations"] if x["status"] == "ran")
    assert runs and len(runs) % planned == 0

    # The same folder again: refused without --resume; with it, nothing runs again and the
    # report is the same, byte for byte.
    again = run_cli("robustness", EXPERIMENT, "--json", "--out", str(out))
    assert again.returncode == 2 and "--resume" in again.stderr, again.stderr
    before = {r.name: r.stat().st_mtime_ns for r in runs}
    resumed = run_cli("robustness", EXPERIMENT, "--json", "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == p.stdout
    assert {r.name: r.stat().st_mtime_ns for r in (out / EXPERIMENT / "runs").glob("*.json")} == before

    # The text form: one line per perturbation and per claim, within 100 columns but for paths.
    text = run_cli("robustness", EXPERIMENT, "--out", str(out), "--resume")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"robustness of {EXPERIMENT}: ")
    for c in report["claims"]:
        assert any(line.startswith(f"  {c['claim']}: ") for line in lines), c["claim"]
    assert all(len(line) <= 100 for line in lines if str(tmp_path) not in line)
    assert lines[-1].startswith(f"robustness: {len(report['claims'])} claims; ")


def test_bad_requests_say_what_is_allowed(tmp_path: Path):
    p = run_cli("robustness", "no-such-experiment", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "unknown experiment 'no-such-experiment'" in p.stderr and "hyperv-root" in p.stderr
    p = run_cli("robustness", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "name an experiment (or --all)" in p.stderr
    p = run_cli("robustness", EXPERIMENT, "--engine", "spark")
    assert p.returncode == 2 and "invalid choice" in p.stderr
    assert "Traceback" not in p.stderr
    p = run_cli("robustness", EXPERIMENT, "--perturbation", "jitter-2", "--out", str(tmp_path / "y"))
    assert p.returncode == 2 and 'unknown perturbation "jitter-2"' in p.stderr and "jitter-0.5ms" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "y").exists()


def test_perturbation_picks_a_part_of_the_family(tmp_path: Path):
    out = tmp_path / "robust"
    p = run_cli("robustness", EXPERIMENT, "--json", "--out", str(out), "--workers", "2",
                "--perturbation", "jitter-1ms", "--perturbation", "seeds+1000", timeout=600)
    assert p.returncode == 0, p.stderr
    (report,) = json.loads(p.stdout)
    # In the family's order, whatever the order asked.
    assert [x["id"] for x in report["perturbations"]] == ["seeds+1000", "jitter-1ms"]
    for c in report["claims"]:
        assert [o["perturbation"] for o in c["outcomes"]] == ["seeds+1000", "jitter-1ms"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["perturbations"] == ["jitter-1ms", "seeds+1000"]
    # Resuming with another part of the family would mix two plans.
    p = run_cli("robustness", EXPERIMENT, "--out", str(out), "--resume", "--perturbation", "jitter-0")
    assert p.returncode == 2 and "planned differently" in p.stderr
