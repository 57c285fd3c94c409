#!/usr/bin/env python3
"""Writes the claims' verdicts and robustness shares into docs/models.md (between its
`claims:begin` and `claims:end` markers) from what `vcpulab reproduce --claims --json`
and `vcpulab robustness --all --json` printed, so the document cannot drift from the
claims the experiments declare:

    vcpulab reproduce --claims --json > /tmp/claims.json
    vcpulab robustness --all --json --out /tmp/robust > /tmp/robustness.json
    python3 scripts/claims_doc.py /tmp/claims.json /tmp/robustness.json

A robustness check of every experiment takes over an hour, so after a change that moves
only some experiments, their check alone may be re-run:

    vcpulab robustness EXP1 EXP2 --json --out /tmp/robust > /tmp/robustness.json
    python3 scripts/claims_doc.py /tmp/claims.json /tmp/robustness.json --keep-other-robustness

The other experiments' robustness cells are then kept from the table as it stands, and
the header says which experiments' shares were written on which day (the section keeps
the days in a comment, `robustness-dates`). Without the flag, a robustness report that
lacks an experiment is refused.

tests/python/test_claims.py checks that every declared claim is in the section, with a
share.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "models.md"
BEGIN = "<!-- claims:begin (written by scripts/claims_doc.py; do not edit by hand) -->"
END = "<!-- claims:end -->"


def fmt(x) -> str:
    if x is None:
        return "-"
    a = abs(x)
    if a != 0 and (a >= 1e5 or a < 1e-3):
        return f"{x:.3g}"
    return f"{x:.4g}"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def share(r: dict | None) -> str:
    if r is None:
        return "-"
    if r["share"] is None:
        return "n/a"
    return f"{r['holds']}/{r['applicable']}"


def section(claims: list[dict], header: str, robust: dict | None = None) -> str:
    robust = robust or {}
    lines = [BEGIN, "", header, ""]
    n = {v: sum(c["verdict"] == v for c in claims) for v in ("holds", "fails", "undecided")}
    lines.append(f"{len(claims)} claims: {n['holds']} hold, {n['fails']} fail, {n['undecided']} undecided.")
    for exp in dict.fromkeys(c["experiment"] for c in claims):
        mine = [c for c in claims if c["experiment"] == exp]
        lines += ["", f"#### `{exp}`", "",
                  "| claim | verdict | value [95% CI] | line | seeds | robust | worst perturbation | text |",
                  "|---|---|---|---|---|---|---|---|"]
        order = {"fails": 0, "undecided": 1, "holds": 2}
        for c in sorted(mine, key=lambda c: order.get(c["verdict"], 3)):
            op = c["detail"].rsplit(" ", 2)[-2] if c["detail"].count(" ") >= 2 else ""
            value = f"{fmt(c['value'])} [{fmt(c['ci_low'])}, {fmt(c['ci_high'])}]"
            r = robust.get((c["experiment"], c["claim"]))
            worst = (r or {}).get("worst") or {}
            worst_text = f"{worst['perturbation']} ({worst['verdict']})" if worst else "-"
            lines.append(f"| `{c['claim']}` | {c['verdict']} | {value} | {cell(op)} {fmt(c['threshold'])} "
                         f"| {c['seeds']} | {share(r)} | {worst_text} | {cell(c['text'])} |")
    lines += ["", END]
    return "\n".join(lines)


# Which day each experiment's robustness shares were written, kept in the section so that
# a partial re-run can say it: "<!-- robustness-dates: exp=YYYY-MM-DD ... -->".
DATES = re.compile(r"<!-- robustness-dates: (.*?) -->")
# A section written before the dates were kept: every experiment's from one `--all` run.
ALL_RUN = re.compile(r"`vcpulab robustness --all --json` \(.*?\), written on (\d{4}-\d\d-\d\d)")


def dates_comment(dates: dict[str, str]) -> str:
    """The comment `robustness_dates` reads back."""
    return f"<!-- robustness-dates: {' '.join(f'{e}={d}' for e, d in dates.items())} -->"


def robustness_dates(old_section: str, experiments: set[str]) -> dict[str, str]:
    """experiment -> the day its robustness shares in the section were written."""
    m = DATES.search(old_section)
    if m:
        return dict(pair.split("=", 1) for pair in m.group(1).split())
    m = ALL_RUN.search(old_section)
    if not m:
        raise SystemExit(f"{DOC}: the claims section does not say when its robustness shares were written")
    return {e: m.group(1) for e in experiments}


def kept_robustness(old_section: str, experiments: set[str]) -> dict:
    """The robustness cells of `experiments` from the section as it stands:
    (experiment, claim) -> {"holds", "applicable", "share", "worst"} as `share` and the
    worst-perturbation cell read them."""
    kept, exp = {}, None
    for line in old_section.splitlines():
        if line.startswith("#### `"):
            exp = line[len("#### `"):].rstrip("`")
        elif exp in experiments and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            claim, robust, worst = cells[0].strip("`"), cells[5], cells[6]
            r: dict = {"worst": None}
            if robust == "n/a":
                r.update(holds=0, applicable=0, share=None)
            elif "/" in robust:
                h, a = robust.split("/")
                r.update(holds=int(h), applicable=int(a), share=int(h) / max(int(a), 1))
            else:
                continue
            m = re.fullmatch(r"(\S+) \(([\w ]+)\)", worst)
            if m:
                r["worst"] = {"perturbation": m.group(1), "verdict": m.group(2)}
            kept[(exp, claim)] = r
    return kept


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--keep-other-robustness"]
    keep_other = len(args) != len(sys.argv) - 1
    if len(args) != 2:
        raise SystemExit(__doc__)
    claims = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    reports = json.loads(Path(args[1]).read_text(encoding="utf-8"))
    robust = {(r["experiment"], c["claim"]): c for r in reports for c in r["claims"]}
    seeds = sorted({r["seeds"] for r in reports})
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC}: the claims markers are missing")
    head, rest = doc.split(BEGIN, 1)
    old_section, tail = rest.split(END, 1)
    import datetime

    today = datetime.date.today().isoformat()
    rerun = list(dict.fromkeys(r["experiment"] for r in reports))
    experiments = list(dict.fromkeys(c["experiment"] for c in claims))
    others = set(experiments) - set(rerun)
    seeds_text = "/".join(map(str, seeds))
    dates = {e: today for e in rerun}
    if others and not keep_other:
        raise SystemExit(f"{args[1]} has no robustness report of {', '.join(sorted(others))}: run "
                         "`vcpulab robustness --all`, or pass --keep-other-robustness to keep their "
                         "shares from the table as it stands")
    if others:
        robust.update(kept_robustness(old_section, others))
        old_dates = robustness_dates(old_section, others)
        dates.update({e: old_dates[e] for e in others})
    by_day: dict[str, list[str]] = {}
    for e in experiments:
        by_day.setdefault(dates[e], []).append(e)
    if len(by_day) == 1:
        when = f"every experiment's written on {next(iter(by_day))}"
    else:
        # The smaller groups by name, the largest last as "the other N".
        groups = sorted(by_day.items(), key=lambda g: (len(g[1]), g[0]))
        named = [f"{', '.join(f'`{e}`' for e in es)}'s written on {day}" for day, es in groups[:-1]]
        day, es = groups[-1]
        when = "; ".join(named + [f"the other {len(es)} experiments' on {day}"])
    header = (f"Verdicts of `vcpulab reproduce --claims --json` (all experiments, adaptive seeds), written "
              f"on {today}; robustness shares of `vcpulab robustness` ({seeds_text} seeds per perturbation; "
              f"holds / applicable): {when}:\n\n"
              + dates_comment({e: dates[e] for e in experiments}))
    DOC.write_text(head + section(claims, header, robust) + tail, encoding="utf-8")
    print(f"wrote {len(claims)} claims into {DOC}")


if __name__ == "__main__":
    main()
