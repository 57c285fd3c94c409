"""``vcpulab import-trace``: turn a host scheduling trace of vCPU threads into a scenario
that replays their demand, and (``--compare``) set the simulated vCPUs against the real
ones."""

from __future__ import annotations

import argparse
import os

from ._common import EXIT_OK, RAW, CliError, err, out, positive_int, seed

IMPORT_EPILOG = """\
examples:
  perf sched record -o X.data -- vcpulab kvm run scenarios/kvm/wake-busy3-nice19.toml \\
      --duration 200ms --repetitions 1
  perf sched script -i X.data > X.txt
  vcpulab import-trace X.txt --out X.toml                 the scenario
  vcpulab import-trace X.txt --out X.toml --compare       ... run and compared
  vcpulab import-trace X.pftrace --threads 'CPU \\d+/KVM' --out X.toml   a QEMU guest, Perfetto

FILE is `perf sched script` text or a Perfetto protobuf trace with the ftrace events
sched_switch and sched_waking. Each matched thread becomes a vCPU whose program replays
its run bursts (CPU time between a wake-up and the next block) and its sleeps (block to
next wake-up); the host scheduler of the scenario decides again when and where they run.
--compare prints per vCPU the real and simulated run-queue waits and run-slice lengths
(median/p95 and the two-sample Kolmogorov-Smirnov distance) and migrations, and a
realism score (docs/validation.md, "Real traces").
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-trace", help="a scenario replaying a host trace of vCPU threads (+ --compare)",
                       epilog=IMPORT_EPILOG, formatter_class=RAW,
                       description="Write a scenario that replays the vCPU threads of a host scheduling trace.")
    from ..realtrace import DEFAULT_THREADS

    p.add_argument("trace", metavar="FILE", help="`perf sched script` text or a Perfetto protobuf trace")
    p.add_argument("--threads", metavar="REGEX", default=DEFAULT_THREADS,
                   help=f"thread names (comm) to import, a full match (default {DEFAULT_THREADS})")
    p.add_argument("--out", metavar="SCENARIO.toml", help="the scenario to write (required unless --to-perfetto)")
    p.add_argument("--cpus", type=positive_int, metavar="N",
                   help="the host's CPU count (default: highest CPU in the trace + 1)")
    p.add_argument("--affinity", default="seen", metavar="seen|all|CPULIST",
                   help="vCPU affinity: the CPUs each thread ran on in the trace (default), every CPU, "
                        "or a cpu-list for all")
    p.add_argument("--others", choices=("per-cpu", "per-task", "none"), default="per-cpu",
                   help="the trace's other tasks: their CPU time replayed per CPU by one pinned host thread "
                        "(default), each task's own demand by a host thread of its own, or left out")
    p.add_argument("--scheduler", default="eevdf", metavar="NAME",
                   help="the simulated host scheduler (default eevdf, Linux 6.6+)")
    p.add_argument("--seed", type=seed, default=1, metavar="N", help="the scenario's seed (default 1)")
    p.add_argument("--compare", action="store_true", help="run the scenario and compare it with the trace")
    p.add_argument("--to-perfetto", metavar="FILE.pftrace",
                   help="also write the trace's scheduling events as a Perfetto protobuf trace")
    p.set_defaults(func=cmd_import_trace)


def cmd_import_trace(args: argparse.Namespace) -> int:
    from .. import realtrace as rt

    if args.out is None and args.to_perfetto is None:
        raise CliError("import-trace: --out SCENARIO.toml is required (or --to-perfetto FILE)")
    if args.compare and args.out is None:
        raise CliError("import-trace: --compare needs --out SCENARIO.toml")
    try:
        events = rt.read_events(args.trace)
        if args.to_perfetto is not None:
            from .._files import atomic_write

            data = rt.perfetto_bytes(events)

            def write(tmp: str) -> None:
                with open(tmp, "wb") as f:
                    f.write(data)

            atomic_write(args.to_perfetto, write)
            err(f"vcpulab: wrote {args.to_perfetto}: {len(events)} scheduling events")
        if args.out is None:
            return EXIT_OK
        tls = rt.timelines(events, args.threads, path=args.trace)
    except rt.TraceFormatError as e:
        raise CliError(str(e)) from None
    names = [x.comm for x in tls]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        err(f"vcpulab: note: several threads are named {', '.join(twice)} (several runs in one trace?); "
            "each becomes a vCPU of its own")
    seen_cpus = rt.host_cpus(events)
    cpus = args.cpus if args.cpus is not None else seen_cpus
    if cpus < seen_cpus:
        raise CliError(f"--cpus {cpus}: the trace has events on CPU {seen_cpus - 1}")
    text = rt.scenario_text(tls, source=args.trace, cpus=cpus, affinity=args.affinity,
                            scheduler=args.scheduler, threads=args.threads, seed=args.seed,
                            others=rt.other_load(events, tls) if args.others == "per-cpu" else None,
                            other_threads=rt.other_timelines(events, tls) if args.others == "per-task" else (),
                            end=max(e.t_ns for e in events))
    from .. import _native

    # Checked before anything is written: a bad --scheduler or --affinity is reported with
    # the key it went to, and leaves no scenario behind. Its size is not checked here (a
    # long trace may give a run over the event limit; `run --force` still runs it).
    try:
        _native.validate_text(text, args.out, "toml", True)
    except _native.ScenarioError as e:
        raise CliError(f"{e} (nothing written)") from None
    parent = os.path.dirname(args.out)
    if parent:
        os.makedirs(parent, exist_ok=True)
    from .._files import atomic_write_text

    atomic_write_text(args.out, text)
    span = max(e.t_ns for e in events) - min(x.start for x in tls)
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    err(f"vcpulab: wrote {args.out}: {len(tls)} vCPU(s) ({shown}), {cpus} pCPU(s), {span / 1e6:.1f} ms")
    if not args.compare:
        return EXIT_OK
    from ..tracing import trace

    tr = trace(args.out)
    sim = rt.sim_timelines(tr.events(), rt.vcpu_slots(tls))
    rows = rt.compare(tls, sim)
    out(rt.format_table(rows, rt.realism(rows)))
    return EXIT_OK
