"""The ``vcpulab`` command.

One module per command (``run``, ``validate``, ..., ``kvm``), each with ``add_parser(sub)``
and the function that runs it; shared helpers in :mod:`._common`, a leaf. This module
builds the parser from them and ends every command as the command-line contract says
(exit statuses, failure lines: ``vcpulab_core::contract``, shared with the native
``vcpulab`` command).

Start-up is kept fast: only the standard library, the native extension and the named
command's module are imported at start; pandas (for ``run --out``) and tqdm (for progress
bars) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Optional, Sequence

from .. import _native
from .._native import NotFoundError, ScenarioError, SimulationError
from ._common import EXIT_INTERRUPTED, RAW, CliError, fail, os_error_text, silence_stdout

__all__ = ["COMMANDS", "CliError", "build_parser", "exit_with", "main"]

MAIN_EPILOG = """\
examples:
  vcpulab run scenario.toml                 readable summary of one run
  vcpulab run scenario.toml --json          the summary as JSON on stdout
  vcpulab run scenario.toml --out results/  summary.json, vms.csv, vcpus.csv, steal.csv (+ .parquet)
  vcpulab validate scenario.toml            check a scenario without running it
  vcpulab schedulers                        the host schedulers and their parameters
  vcpulab workloads                         the guest workload kinds (presets)
  vcpulab reproduce                         run every built-in reproduction
  vcpulab reproduce hyperv-root --json      one experiment, rows as JSON
  vcpulab robustness hyperv-root            its claims under perturbations of the setup

""" + _native.EXIT_STATUS_HELP

# Every subcommand, in the order `vcpulab --help` lists them; each is the module
# vcpulab.cli.<name> (with `_` for `-`).
COMMANDS = ("run", "validate", "schedulers", "workloads", "reproduce", "robustness",
            "sweep", "query", "compare", "report", "trace", "kvm", "import-trace")


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The ``vcpulab`` parser. With ``only``, the subparser of that command alone: argparse
    spends ~10 ms building all eleven (it looks up translations and the terminal width
    for every argument), about a quarter of what ``vcpulab run`` took to start."""
    p = argparse.ArgumentParser(
        prog="vcpulab",
        description="vcpulab: a deterministic vCPU-scheduling simulator.",
        epilog=MAIN_EPILOG,
        formatter_class=RAW,
    )
    p.add_argument("--version", action="version", version=_native.VERSION_LINE)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True
    for name in COMMANDS:
        if only is None or only == name:
            importlib.import_module(f"{__name__}.{name.replace('-', '_')}").add_parser(sub)
    return p


def _command_named(argv: Sequence[str]) -> Optional[str]:
    """The subcommand a command line names, if it is the first argument and a known one;
    "" (no subparser at all) for ``--version``; None (every subparser: ``--help`` lists
    them, an unknown name's error names them) otherwise."""
    if argv and argv[0] in COMMANDS:
        return argv[0]
    if list(argv[:1]) == ["--version"]:
        return ""
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=_command_named(argv))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`vcpulab ... | head`).
        silence_stdout()
        return fail("closed-output")
    except (ScenarioError, NotFoundError, CliError) as e:
        return fail("bad-input", str(e))
    except OSError as e:
        return fail("bad-input", os_error_text(e))
    except SimulationError as e:
        return fail("sim-failed", str(e))
    except KeyboardInterrupt:
        return fail("interrupted")


def exit_with(status: int) -> None:
    """Ends the process with ``status``, as the command-line entry points do. An
    interrupted run ends by SIGINT's default action rather than by ``exit(130)`` (the
    shell still reports 130), so that a calling shell sees the Ctrl-C and stops too: a
    loop ``for s in 1 2 3; do vcpulab run ...; done`` ends instead of going on to its
    next run, as it would for a program that exits normally."""
    if status == EXIT_INTERRUPTED and os.name == "posix":
        import atexit
        import signal

        sys.stdout.flush()
        sys.stderr.flush()
        # What Python's own exit does before it ends by SIGINT on an unhandled
        # KeyboardInterrupt: the exit handlers (multiprocessing's among them) run first.
        atexit._run_exitfuncs()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(status)
