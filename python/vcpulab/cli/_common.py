"""What the ``vcpulab`` commands share: output, option types, and how a failure ends a
command. A leaf module: it imports no command module and nothing of :mod:`vcpulab.cli`.

The command-line contract (exit statuses, failure lines, seed texts, OS error texts)
lives in the core (``vcpulab_core::contract``) and comes through :mod:`vcpulab._native`,
which the native ``vcpulab`` command links too: the two commands agree by construction.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Optional

from .. import _native

EXIT_OK: int = _native.EXIT_OK
EXIT_SIM_FAILED: int = _native.EXIT_SIM_FAILED
EXIT_USAGE: int = _native.EXIT_BAD_INPUT
EXIT_INTERRUPTED: int = _native.EXIT_INTERRUPTED

RAW = argparse.RawDescriptionHelpFormatter


class CliError(Exception):
    """A user error found by the CLI itself (exit status 2)."""


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")


def seed(text: str) -> int:
    """argparse type of a seed option: the contract's reading of the text."""
    try:
        return _native.parse_seed(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def fail(kind: str, detail: str = "") -> int:
    """Ends a command with a failure of ``kind`` ("bad-input", "sim-failed",
    "interrupted", "closed-output"): writes the contract's line for it and returns the
    exit status."""
    status, line = _native.cli_failure(kind, detail)
    if line is not None:
        err(line)
    return status


def os_error_text(e: OSError) -> str:
    """An OSError as the CLI prints it (the contract's wording: "FILE: reason" or
    "[Errno N] reason"); anything that is not an OS error with a reason, as ``str(e)``."""
    if e.filename is not None and e.strerror:
        return _native.os_error_text(None, str(e.strerror), str(e.filename))
    if e.filename is None and isinstance(e.errno, int) and isinstance(e.strerror, str):
        return _native.os_error_text(e.errno, e.strerror)
    return str(e)


def silence_stdout() -> None:
    """After the reader of stdout went away: nothing more is written there (not even at
    exit, where the flush would fail again)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def write_trace(tr: Any, path: str, fmt: Optional[str] = None) -> str:
    """Saves a trace (``run --trace``, ``trace --out``) in format ``fmt`` (None: from the
    file's extension, see ``pftrace.format_for``); returns the line that says so."""
    from ..tracing import describe

    # As --out does for its folder: the trace's folder is created if missing
    # (`run --out out_a --trace out_a/trace.json`).
    parent = os.path.dirname(path)
    if parent:
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError:
            pass  # e.g. a file in the way: the write below fails and names the trace file
    written = tr.save(path, fmt)
    d = describe(tr.events())
    inst = ", ".join(f"{n} {k}" for k, n in sorted(d["instants"].items())) or "none"
    lo, hi = tr.window
    hi_s = "end" if hi >= 2**64 - 1 else f"{hi / 1e9:g} s"
    kind = " (Perfetto)" if written == "perfetto" else ""
    return f"vcpulab: wrote {path}{kind}: {d['slices']} run slices, instants: {inst}; window {lo / 1e9:g} s to {hi_s}"
