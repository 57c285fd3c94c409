"""``vcpulab kvm``: the real-KVM harness (``kvm run``: guest microbenchmarks on real KVM
vCPUs; ``kvm compare``: matched real/simulated pairs of the validation cases)."""

from __future__ import annotations

import argparse
import json
import sys

from ._common import EXIT_OK, EXIT_SIM_FAILED, RAW

KVM_EPILOG = """\
examples:
  vcpulab kvm run scenarios/kvm/ticket-4.toml            real KVM guest, 3 repetitions, tables
  vcpulab kvm run scenarios/kvm/ticket-4.toml --json     the summary JSON
  vcpulab kvm run X.toml --duration 200ms --repetitions 1 --mode threads
  vcpulab kvm compare                                    every validation case, real vs simulated
  vcpulab kvm compare tas ticket-N4 --json               rows {case, metric, unit, real, real_spread,
                                                         real_modes, sim, sim_runs}: sim is the median of
                                                         seeds 1-5
  vcpulab kvm compare --list
  vcpulab kvm calibrate --out host.toml                  measure this host's costs as a host profile

Needs /dev/kvm (else the guest programs run as host threads, with a notice) and root for
RT classes, nice < 0 and cgroups. Host settings changed for a run are restored afterwards,
also on Ctrl-C.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    formatter = RAW
    k = sub.add_parser("kvm", help="real-KVM harness: run guest microbenchmarks, compare with the simulator",
                       epilog=KVM_EPILOG, formatter_class=formatter,
                       description="Run guest programs on real KVM vCPUs under host scheduling policies.")
    ks = k.add_subparsers(dest="kvm_command", metavar="KVMCOMMAND", title="kvm commands")
    ks.required = True
    r = ks.add_parser("run", help="run a KVM scenario", formatter_class=formatter, epilog=KVM_EPILOG)
    r.add_argument("scenario", metavar="KVMSCENARIO", help="KVM scenario file (TOML; see docs/kvm.md)")
    r.add_argument("--json", action="store_true", help="print the summary JSON on stdout")
    r.add_argument("--duration", metavar="D", help="override the scenario's duration (e.g. 200ms)")
    r.add_argument("--repetitions", type=int, metavar="N", help="override [kvm] repetitions")
    r.add_argument("--mode", choices=["auto", "kvm", "threads"], help="override [kvm] mode")
    r.set_defaults(func=cmd_kvm_run)
    c = ks.add_parser("compare", help="matched real/simulated pairs of the validation cases", formatter_class=formatter,
                      epilog=KVM_EPILOG)
    c.add_argument("cases", nargs="*", metavar="CASE", help="case ids or prefixes (default: all; see --list)")
    c.add_argument("--json", action="store_true", help="print rows as JSON on stdout")
    c.add_argument("--duration", default="1s", metavar="D", help="real run length (default 1s); the -steady cases run this plus their warm-up")
    c.add_argument("--repetitions", type=int, default=3, metavar="N", help="real repetitions per case (default 3)")
    c.add_argument("--mode", choices=["auto", "kvm", "threads"], help="harness mode")
    c.add_argument("--list", action="store_true", help="list the cases; run nothing")
    c.add_argument("--reference", action="store_true",
                   help="simulated side only, against the committed real reference of this machine "
                        "(vcpulab/kvm_reference.py); exit status 1 if a case leaves its band")
    c.add_argument("--profile", metavar="PROFILE",
                   help="host profile for the simulated side (a file, or a shipped profile's name; default: "
                        "the shipped profile of this machine if one matches, see docs/validation.md)")
    c.set_defaults(func=cmd_kvm_compare)
    cal = ks.add_parser("calibrate", help="measure this host's costs with the harness; write a host profile",
                        formatter_class=formatter, epilog=KVM_EPILOG,
                        description="Measure the exit round trip, the wake-up of a vCPU halted in the kernel by an "
                                    "interrupt (and that of the harness's own user-space halt), a cache-line handoff, the host's "
                                    "interruptions and kernel threads, and the slice of busy vCPUs with the KVM "
                                    "harness, and write them as a host profile ([host] profile = \"FILE\" in a "
                                    "scenario; docs/scenarios.md, 'Host profiles').")
    cal.add_argument("--out", metavar="PROFILE.toml", help="write the profile here (default: print it)")
    cal.add_argument("--name", metavar="NAME", help="the profile's name (default: the file name without .toml)")
    cal.add_argument("--duration", default="1s", metavar="D", help="length of each run (default 1s)")
    cal.add_argument("--repetitions", type=int, default=3, metavar="N", help="runs per measurement (default 3)")
    cal.add_argument("--json", action="store_true", help="print the measurements as JSON on stdout")
    cal.set_defaults(func=cmd_kvm_calibrate)


def cmd_kvm_run(args: argparse.Namespace) -> int:
    from .. import kvm

    if args.repetitions is not None and args.repetitions < 1:
        raise kvm.ScenarioError("--repetitions must be >= 1")
    s = kvm.run(args.scenario, repetitions=args.repetitions, duration=args.duration, mode=args.mode)
    if s.get("notice"):
        sys.stderr.write(f"vcpulab: notice: {s['notice']}\n")
    if args.json:
        sys.stdout.write(json.dumps(s, indent=2) + "\n")
    else:
        sys.stdout.write(kvm.summary_text(s) + "\n")
    return EXIT_OK


def cmd_kvm_compare(args: argparse.Namespace) -> int:
    from .. import kvm_compare as kc
    from .._format import num, table, wrap

    chosen = kc.select(args.cases)
    if args.list:
        for c in chosen:
            sys.stdout.write(f"{c['id']}: {', '.join(r[0] for r in c['rows'])}{'  (' + c['note'] + ')' if c['note'] else ''}\n")
        return EXIT_OK
    if args.reference:
        return _kvm_gate(args)
    sched, sim_note = kc.sim_scheduler(args.profile)
    sys.stderr.write(f"vcpulab: simulated host: {sim_note}\n")
    progress = (lambda m: sys.stderr.write(f"  {m}\n")) if sys.stderr.isatty() and not args.json else None
    rows = []
    for c in chosen:
        rows.extend(kc.run_case(c, sched, sim_note, args.duration, args.repetitions, args.mode, progress))
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    for held in (False, True):
        part = [r for r in rows if r["held_out"] == held]
        if not part:
            continue
        if held:
            sys.stdout.write("\nheld out (cases no model parameter was taken from):\n")
        body = [[r["case"], r["metric"], r["unit"], num(r["real"], 4), num(r["real_spread"], 2), num(r["sim"], 4),
                 num(r["sim_spread"], 2), num(r["ratio"], 3)] for r in part]
        sys.stdout.write(table(["case", "metric", "unit", "real (median)", "spread", "sim (median)", "spread", "sim/real"],
                               body, right=[False, False, False, True, True, True, True, True]) + "\n")
    runs = f"{args.repetitions} run{'s' if args.repetitions != 1 else ''}"
    sys.stdout.write(f"real: the median of {runs} of {args.duration}; sim: the median of seeds "
                     f"{', '.join(map(str, kc.SIM_SEEDS))}\nspread: (max - min) / median\n")
    sys.stdout.write(_within_line(rows) + "\n")
    modes = kc.two_mode_lines(rows)
    if modes:
        head = (f"real runs in two groups, 2x apart or more (the median of {runs} may land in either, "
                "so these rows' ratios can move from one comparison to the next; more runs: "
                "--repetitions 9):")
        sys.stdout.write("\n" + wrap(head, "", "  ") + "\n" + "".join(f"  {m}\n" for m in modes))
    notes = {r["case"]: r["note"] for r in rows if r["note"]}
    if notes:
        sys.stdout.write("\nnotes:\n" + "".join(wrap(f"{k}: {v}", "  ", "    ") + "\n" for k, v in notes.items()))
    if any(r["harness"] == "threads" for r in rows):
        sys.stdout.write("\nnotice: real side ran as host threads (no usable /dev/kvm)\n")
    return EXIT_OK


def _within_line(rows: list) -> str:
    """'N of M rows within 2x of real; held out: K of L'."""
    def within(rs: list) -> int:
        return sum(1 for r in rs if r["ratio"] is not None and 0.5 <= r["ratio"] <= 2.0)

    main = [r for r in rows if not r["held_out"]]
    held = [r for r in rows if r["held_out"]]
    line = f"{within(main)} of {len(main)} rows within 2x of real"
    return line + (f"; held out: {within(held)} of {len(held)}" if held else "")


def cmd_kvm_calibrate(args: argparse.Namespace) -> int:
    import os
    import shlex

    from .. import kvm_calibrate as kc
    from ..kvm import kvm_available
    from .._format import num, table

    ok, why = kvm_available()
    if not ok:
        raise kc.K.ScenarioError(f"kvm calibrate needs real KVM: {why}")
    progress = (lambda m: sys.stderr.write(f"  {m}\n")) if sys.stderr.isatty() and not args.json else None
    cal = kc.calibrate(args.duration, args.repetitions, "kvm", progress)
    def span(g: list[float]) -> str:
        return f"{g[0]:.3g}" if f"{g[0]:.3g}" == f"{g[-1]:.3g}" else f"{g[0]:.3g}-{g[-1]:.3g}"

    for key, e in cal["values"].items():
        groups = kc.two_groups(e["runs"])
        if groups:
            sys.stderr.write(f"vcpulab: notice: the runs of {key} fall in two groups ({span(groups[0])} and "
                             f"{span(groups[1])} {e['unit']}); its median of {len(e['runs'])} runs can land in "
                             f"either. Measure again with more runs (--repetitions 9) and look at them (docs/kvm.md)\n")
    name = args.name or (os.path.splitext(os.path.basename(args.out))[0] if args.out else "this-host")
    command = "vcpulab kvm calibrate" + "".join(f" {shlex.quote(a)}" for a in sys.argv[3:])
    text = kc.profile_toml(cal, command, name)
    if args.out:
        kc.write_profile(args.out, text)
    if args.json:
        sys.stdout.write(json.dumps(cal, indent=2) + "\n")
    elif args.out:
        body = [[k, f"{e['median']:.4g}" if e["median"] is not None else "-", e["unit"], num(e["spread"], 2), e["what"]]
                for k, e in cal["values"].items()]
        sys.stdout.write(table(["measurement", "median", "unit", "spread", "what"], body,
                               right=[False, True, False, True, False]) + "\n")
        sys.stdout.write(f"profile written to {args.out}\n")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _kvm_gate(args: argparse.Namespace) -> int:
    """``kvm compare --reference``: the validation gate (docs/validation.md)."""
    from .. import kvm_compare as kc
    from .. import kvm_reference as ref
    from .._format import num, table

    rows = kc.gate(args.cases, args.profile)
    referenced = kc.referenced_cases()
    unreferenced = [c["id"] for c in kc.select(args.cases) if c["id"] not in referenced]
    if unreferenced:
        sys.stderr.write(f"vcpulab: notice: no reference rows for {', '.join(unreferenced)} (cases added after the "
                         f"reference was measured); `vcpulab kvm compare {' '.join(unreferenced)}` measures them\n")
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        shown = {r["case"] for r in rows}
        for set_rows, set_profile, tick, kernel, measured, which in ref.SETS:
            if not any(row[0] in shown for row in set_rows):
                continue
            sys.stdout.write(f"real{which}: measured {measured[:10]} ({kernel})\n"
                             f"sim{which}: eevdf, tick {tick}, host profile {args.profile or set_profile}\n")
        body = [[r["case"] + (" *" if r["held_out"] else ""), r["metric"], num(r["real"], 4), num(r["sim"], 4),
                 num(r["sim_spread"], 2), num(r["ratio"], 3), f"{r['band'][0]:g}-{r['band'][1]:g}",
                 "yes" if r["in_band"] else "NO"] for r in rows]
        sys.stdout.write(table(["case", "metric", "real", "sim", "spread", "sim/real", "band", "in band"], body,
                               right=[False, False, True, True, True, True, True, False]) + "\n")
        sys.stdout.write(f"sim: the median of seeds {', '.join(map(str, kc.SIM_SEEDS))}; spread: (max - min) / median "
                         "over them\n" + ("* held out: no model parameter was taken from this case\n"
                                          if any(r["held_out"] for r in rows) else ""))
        out_ = [r for r in rows if not r["in_band"]]
        sys.stdout.write(f"{_within_line(rows)}; {len(out_)} outside their band\n")
        for r in out_:
            sys.stdout.write(f"  {r['case']} {r['metric']}: sim/real {num(r['ratio'], 3)} outside "
                             f"{r['band'][0]:g}-{r['band'][1]:g} ({r['why']})\n")
    return EXIT_SIM_FAILED if any(not r["in_band"] for r in rows) else EXIT_OK
