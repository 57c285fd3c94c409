"""Scenario key paths (``vm[1].workload[0].threads``): parsing and editing a scenario dict.

The same 0-based dotted paths that scenario error messages print. Editing creates missing
tables on the way (``scheduler.quantum`` on a scenario without it) but never array
entries: ``vm[5]`` on a scenario with two VMs is an error.
"""

from __future__ import annotations

import re
from typing import Any, Union

Segment = Union[str, int]

_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[[0-9]+\])*)")
_INDEX = re.compile(r"\[([0-9]+)\]")


class KeyPathError(ValueError):
    """A key path that does not parse or does not fit the scenario (message without origin)."""


def parse(path: str) -> list[Segment]:
    """``"vm[1].workload[0].threads"`` -> ``["vm", 1, "workload", 0, "threads"]``."""
    if not isinstance(path, str) or not path:
        raise KeyPathError(f"invalid key path {path!r}: expected e.g. \"vm[1].vcpus\"")
    segs: list[Segment] = []
    for part in path.split("."):
        m = _PART.fullmatch(part)
        if m is None:
            raise KeyPathError(
                f"invalid key path {path!r}: {part!r} is not a key name with optional [index] "
                "(key paths look like \"scheduler.name\" or \"vm[1].workload[0].threads\")"
            )
        segs.append(m.group(1))
        segs.extend(int(i) for i in _INDEX.findall(m.group(2)))
    return segs


def render(segs: list[Segment]) -> str:
    out = ""
    for s in segs:
        if isinstance(s, int):
            out += f"[{s}]"
        else:
            out += ("." if out else "") + s
    return out


def set_value(doc: dict[str, Any], path: str, value: Any) -> None:
    """Sets ``path`` in ``doc`` (in place) to ``value``; creates missing tables."""
    segs = parse(path)
    cur: Any = doc
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        here = render(segs[:i]) or "the scenario"
        if isinstance(seg, str):
            if not isinstance(cur, dict):
                raise KeyPathError(f"{path}: {here} is not a table (it is {_kind(cur)}), so it has no key {seg!r}")
            if last:
                cur[seg] = value
                return
            if seg not in cur:
                if isinstance(segs[i + 1], int):
                    raise KeyPathError(f"{path}: {render(segs[: i + 1])} does not exist, so it cannot be indexed")
                cur[seg] = {}
            cur = cur[seg]
        else:
            if not isinstance(cur, list):
                raise KeyPathError(f"{path}: {here} is not an array (it is {_kind(cur)}), so it cannot be indexed")
            if seg >= len(cur):
                raise KeyPathError(
                    f"{path}: index {seg} is out of range: {here} has {len(cur)} "
                    f"entr{'y' if len(cur) == 1 else 'ies'} (indices are 0-based)"
                )
            if last:
                cur[seg] = value
                return
            cur = cur[seg]


def _kind(v: Any) -> str:
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, bool):
        return "a boolean"
    return "a number" if isinstance(v, (int, float)) else type(v).__name__
