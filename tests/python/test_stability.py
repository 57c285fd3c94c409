"""Stable by design (issue 27, part 3): no claim of a built-in reproduction is decided by
when its VMs start, or by which block of seeds it runs.

For every experiment, `vcpulab robustness --perturbation jitter-0 --perturbation
jitter-0.5ms --perturbation jitter-1ms --perturbation seeds+1000` judges each claim with
every VM's start_jitter set to 0, 0.5 ms and 1 ms, and at the experiment's own start with
the next block of seeds; five seeds each. The stated tolerance: a claim may move between
"holds" and "undecided", or between "fails" and "undecided" (each verdict is taken over
the five seeds with the claim's own margin, so "undecided" says the difference is too
small to call); it must not hold under one of these and fail under another. A claim that
does is a defect of the model, unless docs/models.md names the real bistable mechanism
behind it: in the table "Claims the start decides" when two start jitters disagree, in
"Claims the seeds decide" when only the other seeds do. A row of either table whose claim
no longer moves that way fails too, so the tables stay true.

Each experiment's check runs its cases 20 times (4 perturbations x 5 seeds); all twenty
experiments took 17 minutes on 2 cores beside other work. The runs are deterministic, so a failure
is not noise."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import vcpulab
from conftest import run_cli
from vcpulab.robustness import STABILITY_PERTURBATIONS, decided_by_seeds, decided_by_start

MODELS_MD = Path(__file__).resolve().parents[2] / "docs" / "models.md"
TABLE_HEADING = "#### Claims the start decides"
SEEDS_HEADING = "#### Claims the seeds decide"
EXPERIMENTS = [e["id"] for e in vcpulab.experiments()]


def documented(heading: str = TABLE_HEADING) -> dict[tuple[str, str], str]:
    """(experiment, claim) -> mechanism, from models.md's table under ``heading``."""
    text = MODELS_MD.read_text(encoding="utf-8")
    assert heading in text, f"{MODELS_MD}: no section {heading!r}"
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 4 or cells[0] in ("experiment", "") or set(cells[0]) <= set("-: "):
            continue
        experiment, claim, mechanism = cells[0], cells[1].strip("`"), cells[3]
        rows[(experiment, claim)] = mechanism
    return rows


@pytest.mark.parametrize("heading", [TABLE_HEADING, SEEDS_HEADING])
def test_the_table_names_real_claims_each_with_a_mechanism(heading: str):
    rows = documented(heading)
    claims = {(e["id"], c["id"]) for e in vcpulab.experiments() for c in e["claims"]}
    for (experiment, claim), mechanism in rows.items():
        assert (experiment, claim) in claims, f"models.md names {experiment}/{claim}, which is no claim"
        # A mechanism is a sentence or more, not a placeholder.
        assert len(re.findall(r"[A-Za-z]+", mechanism)) >= 12, f"{experiment}/{claim}: no mechanism given"


def test_a_claim_holding_at_one_start_and_failing_at_another_is_caught():
    def outcome(p: str, v: str) -> dict:
        return {"perturbation": p, "verdict": v}

    report = {"claims": [
        {"claim": "moves", "outcomes": [outcome("seeds+1000", "holds"), outcome("jitter-0", "holds"),
                                        outcome("jitter-0.5ms", "undecided"), outcome("jitter-1ms", "fails")]},
        {"claim": "within-margin", "outcomes": [outcome("jitter-0", "holds"), outcome("jitter-0.5ms", "undecided"),
                                                outcome("jitter-1ms", "holds")]},
        {"claim": "other-perturbation", "outcomes": [outcome("seeds+1000", "fails"), outcome("jitter-0", "holds"),
                                                     outcome("jitter-0.5ms", "holds"), outcome("jitter-1ms", "holds")]},
    ]}
    moved = decided_by_start(report)
    assert [m["claim"] for m in moved] == ["moves"]
    assert moved[0]["verdicts"] == {"jitter-0": "holds", "jitter-0.5ms": "undecided", "jitter-1ms": "fails"}
    # The other seeds: "other-perturbation" holds at every start and fails at seeds+1000;
    # "moves" is the start's, not counted twice; "within-margin" has no seeds+1000 outcome.
    by_seeds = decided_by_seeds(report)
    assert [m["claim"] for m in by_seeds] == ["other-perturbation"]
    assert by_seeds[0]["verdicts"]["seeds+1000"] == "fails"


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_no_claim_is_decided_by_the_start_or_the_seeds_alone(experiment: str, tmp_path: Path):
    args = ["robustness", experiment, "--json", "--out", str(tmp_path / "robust"), "--no-progress"]
    for p in STABILITY_PERTURBATIONS:
        args += ["--perturbation", p]
    proc = run_cli(*args, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    (report,) = json.loads(proc.stdout)
    assert sorted(p["id"] for p in report["perturbations"]) == sorted(STABILITY_PERTURBATIONS)
    problems = []
    for heading, moved_list in ((TABLE_HEADING, decided_by_start(report)), (SEEDS_HEADING, decided_by_seeds(report))):
        moved = {m["claim"]: m["verdicts"] for m in moved_list}
        named = {claim for (exp, claim) in documented(heading) if exp == experiment}
        unexplained = {c: v for c, v in moved.items() if c not in named}
        if unexplained:
            problems.append(f"these claims move (verdict per perturbation) and docs/models.md ({heading!r}) "
                            f"names no mechanism for them: {unexplained}")
        stale = sorted(named - set(moved))
        if stale:
            problems.append(f"docs/models.md ({heading!r}) names {stale}, but their verdicts no longer go "
                            "from holds to fails that way: remove the rows")
    assert not problems, f"{experiment}: " + "; ".join(problems)
