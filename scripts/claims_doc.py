#!/usr/bin/env python3
"""Writes the claims' verdicts and robustness shares into docs/models.md (between its
`claims:begin` and `claims:end` markers) from what `vcpulab reproduce --claims --json`
and `vcpulab robustness --all --json` printed, so the document cannot drift from the
claims the experiments declare:

    vcpulab reproduce --claims --json > /tmp/claims.json
    vcpulab robustness --all --json --out /tmp/robust > /tmp/robustness.json
    python3 scripts/claims_doc.py /tmp/claims.json /tmp/robustness.json

tests/python/test_claims.py checks that every declared claim is in the section, with a
share.
"""
from __future__ import annotations

import json
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


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    claims = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    reports = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    robust = {(r["experiment"], c["claim"]): c for r in reports for c in r["claims"]}
    seeds = sorted({r["seeds"] for r in reports})
    doc = DOC.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC}: the claims markers are missing")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    import datetime

    header = (f"Verdicts of `vcpulab reproduce --claims --json` (all experiments, adaptive seeds) and "
              f"robustness shares of `vcpulab robustness --all --json` ({'/'.join(map(str, seeds))} seeds "
              f"per perturbation; holds / applicable), written on {datetime.date.today().isoformat()}:")
    DOC.write_text(head + section(claims, header, robust) + tail, encoding="utf-8")
    print(f"wrote {len(claims)} claims into {DOC}")


if __name__ == "__main__":
    main()
