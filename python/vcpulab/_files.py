"""Atomic file writes, shared by the CLI's outputs, sweeps, traces and reports."""

from __future__ import annotations

import os
from typing import Callable


def atomic_write(path: str, write: Callable[[str], None], durable: bool = False) -> None:
    """Writes ``path`` by calling ``write(tmp)`` on a temporary file in the same directory,
    then ``os.replace``: readers (and a resumed sweep) see either the old file or the
    complete new one. ``durable`` also fsyncs the data before the rename (the CLI's
    outputs; a sweep's per-run records skip it: a lost record is simply run again). The
    temporary file is removed on failure, and an OSError names ``path``, not it."""
    import tempfile

    directory = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    os.close(fd)
    try:
        write(tmp)
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:
            raise OSError(e.errno, e.strerror, path) from None
        raise


def atomic_write_text(path: str, text: str, durable: bool = False) -> None:
    """``atomic_write`` of UTF-8 text with ``\\n`` line ends."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    atomic_write(path, write, durable)
