"""Claims and verdicts (issue 26): `vcpulab reproduce` judges every claim of the papers,
`--claims --json` lists them, the output does not depend on `--workers`, and a failed
claim is a finding (exit 0) unless `--strict`. The verdict logic itself is tested on
synthetic rows in crates/vcpulab-core/src/repro/claims.rs and stats.rs."""

from __future__ import annotations

import json
import re

import vcpulab
from conftest import run_cli

CLAIM_KEYS = {"experiment", "claim", "text", "source", "premise", "verdict", "value", "ci_low", "ci_high",
              "threshold", "seeds", "detail"}


def test_every_experiment_declares_claims_with_a_source_and_a_premise():
    for e in vcpulab.experiments():
        assert e["claims"], e["id"]
        for c in e["claims"]:
            assert c["text"] and c["source"] and c["premise"], (e["id"], c["id"])


def test_claims_json_gives_every_claim_a_verdict_with_its_interval():
    p = run_cli("reproduce", "hyperv-root", "--claims", "--json", "--workers", "2")
    assert p.returncode == 0, p.stderr
    claims = json.loads(p.stdout)
    declared = next(e for e in vcpulab.experiments() if e["id"] == "hyperv-root")["claims"]
    assert [c["claim"] for c in claims] == [c["id"] for c in declared]
    for c in claims:
        assert set(c) == CLAIM_KEYS
        assert c["verdict"] in ("holds", "fails", "undecided")
        assert c["seeds"] >= 5, "a verdict rests on at least 5 seeds"
        if c["value"] is not None:
            assert c["ci_low"] <= c["value"] <= c["ci_high"]


def test_the_output_does_not_depend_on_the_number_of_workers():
    one = run_cli("reproduce", "flms-webbench", "--json", "--workers", "1")
    two = run_cli("reproduce", "flms-webbench", "--json", "--workers", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert one.stdout == two.stdout
    rows = json.loads(one.stdout)
    assert all(r["seeds"] >= 3 and r["ci_low"] <= r["sim"] <= r["ci_high"] for r in rows)


def test_tables_end_with_the_claims_and_a_summary():
    p = run_cli("reproduce", "flms-iozone", "--no-progress")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.rstrip("\n").splitlines()
    assert any(line.startswith("claims (") for line in lines)
    summary = next(i for i, line in enumerate(lines) if " claims: " in line)
    n = len(next(e for e in vcpulab.experiments() if e["id"] == "flms-iozone")["claims"])
    assert lines[summary].startswith(f"{n} claims: ")


def test_a_failed_claim_is_a_finding_unless_strict():
    claims = json.loads(run_cli("reproduce", "xen-credit2", "--claims", "--json").stdout)
    failed = [c for c in claims if c["verdict"] == "fails"]
    assert failed, "xen-credit2's new-rule-3x-slower-2vcpu-1pcpu fails (models.md); this test needs one failure"
    strict = run_cli("reproduce", "xen-credit2", "--claims", "--strict")
    assert strict.returncode == 1
    assert f"{len(failed)} claim(s) fail" in strict.stderr


def test_models_md_lists_every_declared_claim():
    """docs/models.md's verdict table is generated from the claims (scripts/claims_doc.py):
    every claim an experiment declares is in it, under its experiment, with its
    robustness share."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
    begin = doc.index("<!-- claims:begin")
    section = doc[begin:doc.index("<!-- claims:end -->")]
    for e in vcpulab.experiments():
        part = section.split(f"#### `{e['id']}`\n", 1)
        assert len(part) == 2, f"{e['id']} has no table in docs/models.md"
        table = part[1].split("####", 1)[0]
        rows = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| `")}
        for c in e["claims"]:
            row = rows.get(f"| `{c['id']}`")
            assert row is not None, (e["id"], c["id"])
            # Its robustness share (vcpulab robustness): holds/applicable, or n/a.
            cells = [x.strip() for x in row.strip("|").split(" | ")]
            assert re.fullmatch(r"\d+/\d+|n/a", cells[5]), (e["id"], c["id"], cells[5])


def test_claims_doc_reads_back_the_robustness_cells_it_writes():
    """scripts/claims_doc.py --keep-other-robustness keeps experiments' robustness cells by
    parsing the section it wrote earlier: what `section` writes, `kept_robustness` and
    `robustness_dates` must read back unchanged (a share, n/a, no report, a two-word
    verdict, a `|` in a claim's text)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "claims_doc.py"
    spec = importlib.util.spec_from_file_location("claims_doc", path)
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)

    def claim(exp, cid, text="a claim"):
        return {"experiment": exp, "claim": cid, "verdict": "holds", "value": 1.5, "ci_low": 1.2,
                "ci_high": 1.8, "threshold": 1.0, "seeds": 5, "detail": "ratio > 1", "text": text}

    claims = [claim("exp-a", "faster"), claim("exp-a", "no-report"), claim("exp-a", "never-applies"),
              claim("exp-b", "piped", text="a | b, with a pipe")]
    robust = {
        ("exp-a", "faster"): {"holds": 7, "applicable": 9, "share": 7 / 9,
                              "worst": {"perturbation": "jitter-1ms", "verdict": "not applicable"}},
        ("exp-a", "never-applies"): {"holds": 0, "applicable": 0, "share": None, "worst": None},
        ("exp-b", "piped"): {"holds": 3, "applicable": 3, "share": 1.0,
                             "worst": {"perturbation": "seeds+10", "verdict": "holds"}},
    }
    dates = {"exp-a": "2026-11-28", "exp-b": "2026-12-05"}
    text = doc.section(claims, "header\n\n" + doc.dates_comment(dates), robust)
    kept = doc.kept_robustness(text, {"exp-a", "exp-b"})
    assert kept == robust, kept
    assert doc.robustness_dates(text, {"exp-a", "exp-b"}) == dates
    # Only the experiments asked for are kept.
    assert set(doc.kept_robustness(text, {"exp-b"})) == {("exp-b", "piped")}
