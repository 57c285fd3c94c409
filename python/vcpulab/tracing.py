"""Execution traces in the Chrome JSON trace format (open them in ui.perfetto.dev), or in
Perfetto's protobuf format (:meth:`Trace.save` with ``format="perfetto"``; see
:mod:`vcpulab.pftrace`).

Process 0 "pCPUs" has a track per pCPU with a slice (``ph: "X"``) named ``<vm>/vcpu<i>``
for every stretch a vCPU ran there (args vm, vcpu, task), or named after the host thread
for a ``[[host_thread]]`` (args host_thread, its vm if any, task); process 1 "vCPUs" has a
track per vCPU and per host thread with instant events (``ph: "i"``): wake, halt,
preempted, migrate, ipi (args vm, vcpu or host_thread, cpu, other). Timestamps are
microseconds of simulated time.
"""

from __future__ import annotations

import json
import re

from typing import Any, Optional, Union

from . import _native
from .api import Result, ScenarioLike, _scenario_text, check_seed

TimeLike = Union[int, str, None]

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000, "h": 3_600_000_000_000}
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ns|us|ms|s|min|h)\s*")
MAX_NS = 2**64 - 1


def parse_time(value: TimeLike, what: str = "time") -> Optional[int]:
    """Nanoseconds from an int (ns) or a duration string like ``"1.5s"`` or ``"250us"``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"invalid {what} {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"invalid {what} {value}: must be >= 0")
        return value
    if isinstance(value, str):
        m = _DURATION.fullmatch(value)
        if m is None:
            raise ValueError(
                f"invalid {what} {value!r}: expected a duration with a unit, like \"1s\", \"250ms\", \"10us\" "
                "(units ns, us, ms, s, min, h)"
            )
        return round(float(m.group(1)) * _UNITS[m.group(2)])
    raise ValueError(f"invalid {what} {value!r}: expected nanoseconds or a duration string")


class Trace:
    """A run's summary and its trace. ``text`` is the Chrome JSON; :meth:`events` parses it."""

    __slots__ = ("result", "text", "window")

    def __init__(self, summary_json: str, trace_json: str, window: tuple[int, int]) -> None:
        self.result = Result(summary_json)
        self.text = trace_json
        self.window = window

    def __repr__(self) -> str:
        return f"<vcpulab.Trace {self.result!r} window={self.window} bytes={len(self.text)}>"

    def events(self) -> list[dict[str, Any]]:
        return json.loads(self.text)["traceEvents"]

    def save(self, path: str, format: Optional[str] = None) -> str:
        """Writes the trace to ``path`` as Chrome JSON (``format="json"``) or as a Perfetto
        protobuf trace (``"perfetto"``); None: Perfetto for a ``.pftrace`` file, else JSON.
        Returns the format written."""
        from . import pftrace
        from ._files import atomic_write, atomic_write_text

        fmt = pftrace.format_for(path, format)
        if fmt == "json":
            atomic_write_text(path, self.text)
        else:
            events = self.events()

            def write(tmp: str) -> None:
                with open(tmp, "wb") as f:
                    pftrace.write(events, f)

            atomic_write(path, write)
        return fmt


def trace(
    scenario: ScenarioLike,
    seed: Optional[int] = None,
    window: Optional[tuple[TimeLike, TimeLike]] = None,
    check_invariants: bool = False,
    force: bool = False,
) -> Trace:
    """Runs a scenario with tracing on; ``window = (from, to)`` (ns or duration strings such as
    ``("1s", "1.2s")``, either may be None) limits what is recorded. The summary is the
    same as :func:`vcpulab.run` gives; ``check_invariants`` and ``force`` as there."""
    seed = check_seed(seed)
    lo, hi = window if window is not None else (None, None)
    from_ns = parse_time(lo, "window start")
    to_ns = parse_time(hi, "window end")
    from_ns = 0 if from_ns is None else from_ns
    to_ns = MAX_NS if to_ns is None else to_ns
    if to_ns <= from_ns:
        raise ValueError(f"empty trace window: end ({hi}) is not after start ({lo})")
    text, origin, fmt = _scenario_text(scenario)
    summary, tr = _native.trace_text(text, origin, fmt, seed, from_ns, to_ns, check_invariants, force)
    return Trace(summary, tr, (from_ns, to_ns))


def describe(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts for a one-line report: slices, instants by name, tracks."""
    slices = sum(1 for e in events if e.get("ph") == "X")
    instants: dict[str, int] = {}
    for e in events:
        if e.get("ph") == "i":
            instants[e["name"]] = instants.get(e["name"], 0) + 1
    return {"slices": slices, "instants": instants}
