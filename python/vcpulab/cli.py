"""The ``vcpulab`` command.

Startup is kept fast: this module imports only the standard library and the native
extension at start; pandas (for ``run --out``) and tqdm (for progress bars) are imported
only by the subcommands that need them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional, Sequence

from . import __version__, api
from ._native import NotFoundError, ScenarioError, SimulationError
from ._format import json_text

EXIT_OK = 0
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a program Ctrl-C ended
EXIT_SIM_FAILED = 1
EXIT_USAGE = 2

MAIN_EPILOG = """\
examples:
  vcpulab run scenario.toml                 readable summary of one run
  vcpulab run scenario.toml --json          the summary as JSON on stdout
  vcpulab run scenario.toml --out results/  summary.json, vms.csv, vcpus.csv (+ .parquet)
  vcpulab validate scenario.toml            check a scenario without running it
  vcpulab schedulers                        the host schedulers and their parameters
  vcpulab workloads                         the guest workload kinds (presets)
  vcpulab reproduce                         run every built-in reproduction
  vcpulab reproduce hyperv-root --json      one experiment, rows as JSON

exit status: 0 ok, 1 a simulation failed, 2 bad input (scenario, name, file, usage),
130 interrupted (Ctrl-C stops a run within milliseconds).
"""

RUN_EPILOG = """\
examples:
  vcpulab run scenario.toml
  vcpulab run scenario.toml --seed 42 --json > summary.json
  vcpulab run scenario.toml --out results/ --check-invariants

The same scenario and seed always give byte-identical output.
"""

REPRODUCE_EPILOG = """\
examples:
  vcpulab reproduce                     every experiment, one table each
  vcpulab reproduce --list              the experiments and their cases
  vcpulab reproduce hyperv-root --json  rows {experiment, case, metric, unit, paper, sim, ratio}
  vcpulab reproduce flms-io --scenario vturbo > vturbo.toml   one case as a scenario file
"""


class CliError(Exception):
    """A user error found by the CLI itself (exit status 2)."""


def _seed(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: expected a non-negative integer") from None
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: must be in 0..2^63-1")
    return v


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


# ---------------------------------------------------------------------------- run


def write_outputs(result: api.Result, out_dir: str) -> list[str]:
    """Writes summary.json, vms.csv, vcpus.csv, workloads.csv (and .parquet twins if
    pyarrow is installed) into ``out_dir``; returns the paths written."""
    import importlib.util

    from ._files import atomic_write, atomic_write_text

    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "summary.json")
    atomic_write_text(path, result.to_json() + "\n", durable=True)
    written.append(path)
    parquet = importlib.util.find_spec("pyarrow") is not None
    frames = {"vms": result.vms(), "vcpus": result.vcpus(), "workloads": result.workloads()}
    for name, df in frames.items():
        path = os.path.join(out_dir, f"{name}.csv")
        atomic_write(path, lambda tmp, df=df: df.to_csv(tmp, index=False, lineterminator="\n"), durable=True)
        written.append(path)
        if parquet:
            path = os.path.join(out_dir, f"{name}.parquet")
            atomic_write(path, lambda tmp, df=df: df.to_parquet(tmp, index=False), durable=True)
            written.append(path)
    return written


def cmd_run(args: argparse.Namespace) -> int:
    from ._format import summary_text

    result = api.run(args.scenario, seed=args.seed, check_invariants=args.check_invariants, force=args.force)
    if args.out:
        written = write_outputs(result, args.out)
        _err(f"vcpulab: wrote {', '.join(os.path.basename(p) for p in written)} to {args.out}")
    if args.json:
        _out(result.to_json())
    else:
        _out(summary_text(result.summary))
    return EXIT_OK


# ----------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace) -> int:
    d = api.validate(args.scenario, force=args.force)
    from ._format import plural

    vms = "; ".join(f"{v['name']}: {plural(v['vcpus'], 'vCPU')}, {plural(v['workloads'], 'workload')}" for v in d["vms"])
    _out(
        f"OK {args.scenario}: {d['name']!r}, scheduler {d['scheduler']}, {d['duration_s']:g} s, "
        f"seed {d['seed']}, {plural(d['pcpus'], 'pCPU')}, {plural(len(d['vms']), 'VM')} ({vms})"
    )
    return EXIT_OK


# --------------------------------------------------------------------- schedulers


def cmd_schedulers(args: argparse.Namespace) -> int:
    scheds = api.schedulers()
    if args.json:
        _out(json.dumps(scheds, indent=2))
        return EXIT_OK
    from ._format import table

    rows = []
    for s in scheds:
        params = ", ".join(f"{p['name']}={p['default']}" for p in s["params"]) or "-"
        rows.append([s["name"], params, s["description"]])
    _out(table(["name", "params (defaults)", "description"], rows))
    _out()
    _out("parameters (set them under [scheduler] in a scenario):")
    for s in scheds:
        for p in s["params"]:
            _out(f"  {s['name']}.{p['name']} ({p['type']}, default {p['default']}): {p['help']}")
    return EXIT_OK


def cmd_workloads(args: argparse.Namespace) -> int:
    kinds = api.workload_kinds()
    if args.json:
        _out(json.dumps(kinds, indent=2))
        return EXIT_OK
    from ._format import table

    _out(table(["kind", "model"], [[k["name"], k["description"]] for k in kinds]))
    _out()
    _out("set one under [[vm.workload]] kind = ...; each kind's keys: docs/scenarios.md")
    return EXIT_OK


# ---------------------------------------------------------------------- reproduce


def _experiment_report(exp: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    from ._format import num, table

    notes_by_case = {c["id"]: c.get("note", "") for c in exp["cases"]}
    tol = exp.get("tolerance")
    lines = [f"== {exp['id']}: {exp['title']}", f"source: {exp['source']}"]
    metrics = exp.get("metrics") or [{"name": exp["metric"], "unit": exp["unit"]}]
    for m in metrics:
        mrows = [r for r in rows if r["metric"] == m["name"]]
        body = [
            [r["case"], num(r["paper"], 2), num(r["sim"], 2), num(r["ratio"], 3), notes_by_case.get(r["case"], "")]
            for r in mrows
        ]
        lines += [
            "",
            f"metric: {m['name']} ({m['unit']})" + (f", tolerance {100 * tol:g}%" if tol is not None else ""),
            table(["case", "paper", "vcpulab", "ratio", "note"], body, right=[False, True, True, True, False]),
        ]
    if exp.get("notes"):
        lines += ["", f"notes: {exp['notes']}"]
    return "\n".join(lines)


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.scenario is not None:
        if len(args.names) != 1:
            raise api.NotFoundError("--scenario CASE needs exactly one experiment id")
        sys.stdout.write(api.experiment_scenario(args.names[0], args.scenario, args.metric))
        return EXIT_OK
    if args.metric is not None:
        raise CliError("--metric selects the metric of the case --scenario prints; give --scenario CASE too")
    exps = api._select(args.names or None)
    if args.list:
        if args.json:
            _out(json.dumps(exps, indent=2))
            return EXIT_OK
        from ._format import num, table

        for i, e in enumerate(exps):
            if i:
                _out()
            _out(f"{e['id']}: {e['title']}")
            _out(f"metric {e['metric']} ({e['unit']}), {len(e['cases'])} cases:")
            rows = [
                [c["id"], ", ".join(f"{m} {num(v, 3)}" for m, v in c.get("paper", [])), c.get("note", "")]
                for c in e["cases"]
            ]
            _out(table(["case", "paper", "note"], rows, right=[False, False, False]))
        return EXIT_OK
    progress = not args.no_progress and sys.stderr.isatty()
    rows = api.reproduce([e["id"] for e in exps], seed=args.seed, progress=progress)
    if args.json:
        _out(json_text(rows))
        return EXIT_OK
    for i, e in enumerate(exps):
        if i:
            _out()
        _out(_experiment_report(e, [r for r in rows if r["experiment"] == e["id"]]))
    return EXIT_OK


# ------------------------------------------------------------------------- parser


# Every subcommand, in the order `vcpulab --help` lists them.
COMMANDS = ("run", "validate", "schedulers", "workloads", "reproduce",
            "sweep", "query", "compare", "report", "trace", "kvm")


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The ``vcpulab`` parser. With ``only``, the subparser of that command alone: argparse
    spends ~10 ms building all eleven (it looks up translations and the terminal width
    for every argument), about a quarter of what ``vcpulab run`` took to start."""
    raw = argparse.RawDescriptionHelpFormatter

    def wanted(name: str) -> bool:
        return only is None or only == name

    p = argparse.ArgumentParser(
        prog="vcpulab",
        description="vcpulab: a deterministic vCPU-scheduling simulator.",
        epilog=MAIN_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("--version", action="version", version=f"vcpulab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True

    if wanted("run"):
        r = sub.add_parser("run", help="run one scenario and summarise it", epilog=RUN_EPILOG, formatter_class=raw,
                           description="Run one scenario file (TOML, or JSON if it ends in .json).")
        r.add_argument("scenario", metavar="SCENARIO", help="scenario file")
        r.add_argument("--seed", type=_seed, metavar="N", help="override the scenario's seed")
        r.add_argument("--json", action="store_true", help="print the summary JSON on stdout instead of tables")
        r.add_argument("--out", metavar="DIR",
                       help="also write summary.json, vms.csv, vcpus.csv, workloads.csv (and .parquet if pyarrow is installed)")
        r.add_argument("--check-invariants", action="store_true",
                       help="check the engine's invariants after every event (slower; for debugging)")
        r.add_argument("--force", action="store_true",
                       help="run even if the scenario is estimated to take hours (over 5e10 events)")
        r.set_defaults(func=cmd_run)

    if wanted("validate"):
        v = sub.add_parser("validate", help="check a scenario without running it", formatter_class=raw,
                           description="Check a scenario file as run would (including its refusal of runs estimated "
                                       "over 5e10 events); print OK and a short description, or the error (exit 2).",
                           epilog="example:\n  vcpulab validate scenario.toml\n")
        v.add_argument("scenario", metavar="SCENARIO", help="scenario file")
        v.add_argument("--force", action="store_true",
                       help="accept a scenario estimated to take hours (over 5e10 events), as run --force does")
        v.set_defaults(func=cmd_validate)

    if wanted("schedulers"):
        s = sub.add_parser("schedulers", help="list the host schedulers and their parameters", formatter_class=raw,
                           epilog="examples:\n  vcpulab schedulers\n  vcpulab schedulers --json\n")
        s.add_argument("--json", action="store_true", help="print the list as JSON")
        s.set_defaults(func=cmd_schedulers)

    if wanted("workloads"):
        w = sub.add_parser("workloads", help="list the guest workload kinds (program and presets)", formatter_class=raw,
                           epilog="examples:\n  vcpulab workloads\n  vcpulab workloads --json\n")
        w.add_argument("--json", action="store_true", help="print the list as JSON")
        w.set_defaults(func=cmd_workloads)

    if wanted("reproduce"):
        x = sub.add_parser("reproduce", help="run the built-in reproductions of published measurements",
                           epilog=REPRODUCE_EPILOG, formatter_class=raw,
                           description="Run built-in experiments case by case and compare with the published figures.")
        x.add_argument("names", nargs="*", metavar="NAME", help="experiment ids (default: all; see --list)")
        x.add_argument("--json", action="store_true", help="print the rows as JSON on stdout (and nothing else)")
        x.add_argument("--seed", type=_seed, metavar="N", help="override every case's seed")
        x.add_argument("--list", action="store_true", help="list the experiments and their cases; run nothing")
        x.add_argument("--no-progress", action="store_true", help="no progress bar (default: shown on a terminal)")
        x.add_argument("--scenario", metavar="CASE",
                       help="print the scenario file of one case of one experiment (its edits applied) and run nothing")
        x.add_argument("--metric", metavar="NAME",
                       help="with --scenario: the run of this metric (for metrics measured in their own run)")
        x.set_defaults(func=cmd_reproduce)

    from . import commands  # sweep, query, compare, report, trace; run --trace, reproduce --out

    commands.register(sub, wanted)

    if wanted("kvm"):
        from .kvm_cli import add_parser as add_kvm_parser

        add_kvm_parser(sub, raw)
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


def _os_error_message(e: OSError) -> str:
    if e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e)


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=_command_named(argv))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`vcpulab ... | head`): not an error worth a message.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_SIM_FAILED
    except (ScenarioError, NotFoundError, CliError) as e:
        _err(f"vcpulab: error: {e}")
        return EXIT_USAGE
    except OSError as e:
        _err(f"vcpulab: error: {_os_error_message(e)}")
        return EXIT_USAGE
    except SimulationError as e:
        _err(f"vcpulab: error: {e}")
        return EXIT_SIM_FAILED
    except KeyboardInterrupt:
        _err("vcpulab: interrupted")
        return EXIT_INTERRUPTED


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


if __name__ == "__main__":  # pragma: no cover
    exit_with(main())
