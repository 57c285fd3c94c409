#!/usr/bin/env python3
"""Sweep throughput with N workers, and whole-process speed of the KVM PLE / Xen shapes.

Two measurements (issue 6), each interleaved (A B C A B C ...) and reported as medians
with min..max, as Markdown tables:

sweep   Runs per wall second of a sweep of R equal runs (the benches/rr-overcommit
        P=64/V=512 model, `--sweep-duration` simulated seconds each, one run per seed
        1..R) for every engine x N (default: local and ray, N = 1 and 2). Each sweep is a
        child process calling vcpulab.sweep.run_sweep, the function behind
            vcpulab sweep SWEEP.toml --engine E --workers N --out DIR --no-progress
        (a child Python process so that, like the CLI, it pays interpreter start, imports,
        pool or Ray start, the runs, writing records and the Parquet tables). Reported:
          whole runs/s   R / whole-process wall time,
          runs-phase     R / the sweep's own elapsed time (what `vcpulab sweep` prints:
                         from starting the pool or Ray to the last record; pool start included),
          start-up       the runs-phase time of a sweep of N runs of 1 us simulated (no events;
                         one per worker): starting N worker processes, or a local Ray instance
                         with N CPUs, and getting a first result from each,
          steady runs/s  R / (runs-phase - start-up),
        and the ratios throughput(N=2) / throughput(N=1) per engine. A serial reference is
        one `vcpulab run` of one such run, whole-process.
        Without --ray-address, the ray engine starts (and stops) a local Ray instance per
        sweep; if Ray is missing or cannot start, the error is printed and only local rows
        are reported.

shapes  `vcpulab run FILE --json` whole-process on the scenario files of benches/ple and
        benches/xen: the criterion shapes of crates/vcpulab-core/benches/engine.rs
        (eevdf-ple P=6/24/64, credit-io and flms-io P=8/32/64) with longer durations.
        Reported: the summary's events, wall s, events/s, simulated s per wall s, peak
        RSS (GNU time %M), and the cost per event: whole (wall / events) and net of the
        fixed cost (wall minus the wall of the same file cut to 1 us simulated, which has
        no events: start, parsing, setup, output), against the number of vCPUs.

instructions
        The same shapes under valgrind (callgrind): instructions executed per event,
        counted, not timed, so it does not depend on the machine's load. Each file runs at
        a tenth and at a fifth of its duration; the marginal cost (instructions(2) -
        instructions(1)) / (events(2) - events(1)) cancels start-up and setup. Needs
        valgrind on PATH; reported against the number of vCPUs like the timed cost.

  python scripts/bench_scale.py                          # sweep and shapes, 3 repetitions
  python scripts/bench_scale.py --mode instructions      # counted cost per event (~2-3 min)
  python scripts/bench_scale.py --mode sweep --reps 5 --runs 24 --sweep-duration 30
  python scripts/bench_scale.py --mode shapes --reps 5
  python scripts/bench_scale.py --mode sweep --engines local --workers 1,2,4
  python scripts/bench_scale.py --smoke                  # tiny, once, local only (CI)
  python scripts/bench_scale.py --save run.json          # keep the results
  python scripts/bench_scale.py --wait-idle 300          # wait for a quiet machine before each repetition

Timings on shared machines are noisy: compare ratios measured side by side in one run.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import fmt_num, machine, median, run_child, vcpulab_cmd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SWEEP_BASE = ROOT / "benches" / "rr-overcommit" / "p64-v512.toml"
SHAPE_FILES = [
    "ple/eevdf-p6.toml", "ple/eevdf-p24.toml", "ple/eevdf-p64.toml",
    "xen/credit-p8.toml", "xen/credit-p32.toml", "xen/credit-p64.toml",
    "xen/flms-p8.toml", "xen/flms-p32.toml", "xen/flms-p64.toml",
]
SMOKE_SHAPE_T = {"ple": "2ms", "xen": "20ms"}
TINY_T = "1us"

# The sweep child: run_sweep (what `vcpulab sweep` calls), one JSON line of timings.
DRIVER = r"""
import json, sys, time
t0 = time.perf_counter()
from vcpulab.sweep import run_sweep
t_import = time.perf_counter() - t0
sweep, out, engine, workers, address = sys.argv[1:6]
o = run_sweep(sweep, out_dir=out, engine=engine, workers=int(workers), ray_address=address or None)
t1 = time.perf_counter()
print(json.dumps({"ran": o.ran, "failed": len(o.failed), "elapsed_s": o.elapsed_s, "import_s": t_import,
                  "in_process_s": t1 - t0}))
"""


def set_duration(text: str, dur: str) -> str:
    return re.sub(r'(?m)^duration = "[^"]*"', f'duration = "{dur}"', text, count=1)


def sweep_toml(base: Path, runs: int, dur: str) -> str:
    return (f'name = "bench-sweep"\nbase = {json.dumps(str(base))}\n[set]\nduration = "{dur}"\n'
            f'[axes]\nseed = {{ range = [1, {runs}] }}\n')


def busy_fraction(interval: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over `interval` s (from /proc/stat), None off Linux."""
    def sample():
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(f), f[3] + (f[4] if len(f) > 4 else 0)  # total, idle + iowait
    try:
        t0, i0 = sample()
        time.sleep(interval)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return 1 - (i1 - i0) / (t1 - t0) if t1 > t0 else None


def wait_idle(a, what: str) -> None:
    """With --wait-idle S: before a repetition, wait (up to S s) until the machine is idle
    (< 20 % of the CPUs busy over 1 s): other work on a shared host (builds) skews timings."""
    if not a.wait_idle:
        return
    start = time.monotonic()
    while True:
        b = busy_fraction()
        if b is None or b < 0.2:
            break
        if time.monotonic() - start > a.wait_idle:
            print(f"  {what}: machine still {b:.0%} busy after {a.wait_idle:g} s; measuring anyway",
                  file=sys.stderr, flush=True)
            break
        time.sleep(4)
    waited = time.monotonic() - start
    if waited > 1.5:
        print(f"  {what}: waited {waited:.0f} s for other work to finish", file=sys.stderr, flush=True)


def spread(xs: list[float]) -> str:
    return f"{fmt_num(min(xs))}..{fmt_num(max(xs))}" if xs else "n/a"


def opt(x: float | None, spec: str, suffix: str = "") -> str:
    return "n/a" if x is None else f"{x:{spec}}{suffix}"


# ----------------------------------------------------------------------------- sweep


def ray_check(address: str | None) -> str | None:
    """None if Ray can be imported; else why not (a missing module is the common case;
    a failing start shows up as the sweep child's error)."""
    import subprocess

    r = subprocess.run([sys.executable, "-c", "import ray; print(ray.__version__)"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"import ray failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


def run_sweep_child(sweep: Path, out: Path, engine: str, n: int, address: str | None) -> dict:
    wall, rss, stdout = run_child([sys.executable, "-c", DRIVER, str(sweep), str(out), engine, str(n), address or ""])
    d = json.loads(stdout.strip().splitlines()[-1])
    if d["failed"]:
        raise RuntimeError(f"sweep {engine} N={n}: {d['failed']} runs failed (records in {out})")
    d["wall_s"] = wall
    return d


def bench_sweep(a, tmp: Path, notes: list[str]) -> dict:
    dur, runs = (f"{a.sweep_duration:g}s", a.runs)
    full = tmp / "sweep.toml"
    full.write_text(sweep_toml(SWEEP_BASE, runs, dur))
    combos = []
    for e in a.engines:
        if e == "ray":
            why = ray_check(a.ray_address)
            if why:
                notes.append(f"ray engine skipped: {why}")
                continue
        combos += [(e, n) for n in a.workers]
    tiny = {}
    for n in a.workers:
        tiny[n] = tmp / f"tiny-{n}.toml"
        tiny[n].write_text(sweep_toml(SWEEP_BASE, n, TINY_T))
    single = tmp / "single.toml"
    single.write_text(set_duration(SWEEP_BASE.read_text(), dur))

    res = {c: {"full": [], "tiny": []} for c in combos}
    serial = []
    k = 0
    dead = set()
    for rep in range(a.reps):
        wait_idle(a, f"sweep rep {rep + 1}")
        w, _, out = run_child(vcpulab_cmd() + ["run", str(single), "--json"])
        serial.append({"wall_s": w, "events": json.loads(out)["events"]})
        print(f"  serial   vcpulab run x1 rep {rep + 1}/{a.reps}: {w:7.3f} s", file=sys.stderr, flush=True)
        # Interleaved: every engine x N once per repetition, the order rotated by one each
        # repetition (so no case always follows a Ray instance's shutdown).
        for c in combos[rep % len(combos):] + combos[:rep % len(combos)] if combos else []:
            if c in dead:
                continue
            e, n = c
            try:
                k += 1
                t = run_sweep_child(tiny[n], tmp / f"out{k}", e, n, a.ray_address)
                k += 1
                f = run_sweep_child(full, tmp / f"out{k}", e, n, a.ray_address)
            except RuntimeError as err:
                if e != "ray":
                    raise
                dead.add(c)
                notes.append(f"ray engine N={n} failed: {str(err).strip()[-600:]}")
                continue
            res[c]["tiny"].append(t)
            res[c]["full"].append(f)
            print(f"  {e:5s} N={n} rep {rep + 1}/{a.reps}: {runs} runs wall {f['wall_s']:7.3f} s "
                  f"(runs phase {f['elapsed_s']:.3f} s); start-up {t['elapsed_s']:.3f} s, "
                  f"tiny sweep wall {t['wall_s']:.3f} s", file=sys.stderr, flush=True)
    rows = {}
    for (e, n), r in res.items():
        if not r["full"]:
            continue
        whole = [runs / x["wall_s"] for x in r["full"]]
        phase = [runs / x["elapsed_s"] for x in r["full"]]
        start = median([x["elapsed_s"] for x in r["tiny"]])
        steady = [runs / (x["elapsed_s"] - start) for x in r["full"] if x["elapsed_s"] > start]
        rows[f"{e}/{n}"] = {
            "engine": e, "workers": n, "n": len(r["full"]), "runs": runs,
            "wall_s": median([x["wall_s"] for x in r["full"]]),
            "runs_per_s": median(whole), "runs_per_s_all": whole,
            "phase_s": median([x["elapsed_s"] for x in r["full"]]),
            "phase_runs_per_s": median(phase), "phase_runs_per_s_all": phase,
            "startup_s": start, "startup_s_all": [x["elapsed_s"] for x in r["tiny"]],
            "tiny_wall_s": median([x["wall_s"] for x in r["tiny"]]),
            "tiny_wall_s_all": [x["wall_s"] for x in r["tiny"]],
            "steady_runs_per_s": median(steady) if steady else None, "steady_runs_per_s_all": steady,
            "samples": r,
        }
    ratios = {}
    for e in a.engines:
        one = rows.get(f"{e}/1")
        for n in a.workers:
            rn = rows.get(f"{e}/{n}")
            if one and rn and n != 1:
                ratios[f"{e} N={n}/N=1"] = {m: rn[m] / one[m] if rn[m] and one[m] else None
                                            for m in ("runs_per_s", "phase_runs_per_s", "steady_runs_per_s")}
    sw = [x["wall_s"] for x in serial]
    return {"runs": runs, "duration": dur, "base": str(SWEEP_BASE.relative_to(ROOT)), "rows": rows, "ratios": ratios,
            "serial": {"wall_s": median(sw), "wall_s_all": sw, "events": serial[0]["events"],
                       "runs_per_s": 1 / median(sw)}}


def sweep_table(s: dict) -> str:
    lines = [f"Sweep: {s['runs']} runs of {s['base']} at {s['duration']} simulated, seeds 1..{s['runs']} "
             f"(one run: {s['serial']['events']:,} events; `vcpulab run` of one alone: "
             f"{s['serial']['wall_s']:.3f} s whole-process, min..max {spread(s['serial']['wall_s_all'])} s).",
             "",
             "| engine | N | n | wall s (median) | runs/s whole-process (median) | min..max | runs-phase s | "
             "runs/s runs-phase | min..max | start-up s (N runs of 1 us) | min..max | tiny sweep wall s | "
             "steady runs/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["rows"].values():
        lines.append(
            f"| {r['engine']} | {r['workers']} | {r['n']} | {r['wall_s']:.2f} | {r['runs_per_s']:.2f} | "
            f"{spread(r['runs_per_s_all'])} | {r['phase_s']:.2f} | {r['phase_runs_per_s']:.2f} | "
            f"{spread(r['phase_runs_per_s_all'])} | {r['startup_s']:.2f} | {spread(r['startup_s_all'])} | "
            f"{r['tiny_wall_s']:.2f} | {opt(r['steady_runs_per_s'], '.2f')} |")
    lines += ["", "| ratio | whole-process | runs-phase | steady |", "|---|---|---|---|"]
    for k, v in s["ratios"].items():
        lines.append(f"| {k} | {opt(v['runs_per_s'], '.2f', 'x')} | {opt(v['phase_runs_per_s'], '.2f', 'x')} "
                     f"| {opt(v['steady_runs_per_s'], '.2f', 'x')} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- shapes


def shape_info(text: str) -> dict:
    def num(pat, default=0):
        m = re.search(pat, text, re.M)
        return int(m.group(1)) if m else default
    vcpus = sum(int(x) for x in re.findall(r"(?m)^vcpus = (\d+)", text))
    cores = num(r"^cores_per_socket = (\d+)")
    threads = num(r"^threads_per_core = (\d+)", 1)
    dur = re.search(r'(?m)^duration = "([\d.]+)(ms|s)"', text)
    secs = float(dur.group(1)) / (1000 if dur.group(2) == "ms" else 1)
    name = re.search(r'(?m)^name = "([^"]*)"', text).group(1)
    return {"name": name, "pcpus": cores * threads, "vcpus": vcpus, "sim_s": secs}


def bench_shapes(a, tmp: Path) -> dict:
    files = {}
    for rel in a.shape_files:
        src = ROOT / "benches" / rel
        text = src.read_text()
        if a.smoke:
            text = set_duration(text, SMOKE_SHAPE_T[rel.split("/")[0]])
        full = tmp / rel.replace("/", "-")
        full.write_text(text)
        tiny = tmp / ("tiny-" + rel.replace("/", "-"))
        tiny.write_text(set_duration(text, TINY_T))
        files[rel] = {"full": full, "tiny": tiny, **shape_info(text)}
    runs = {rel: {"full": [], "tiny": []} for rel in files}
    for rep in range(a.reps):
        wait_idle(a, f"shapes rep {rep + 1}")
        for rel, f in files.items():  # interleaved: every file, then again
            for kind in ("tiny", "full"):
                wall, rss, out = run_child(vcpulab_cmd() + ["run", str(f[kind]), "--json"])
                runs[rel][kind].append({"wall_s": wall, "rss_mib": rss, "events": json.loads(out)["events"]})
            r = runs[rel]["full"][-1]
            print(f"  {rel:20s} rep {rep + 1}/{a.reps}: {r['events']:>10,} events {r['wall_s']:7.3f} s "
                  f"{r['rss_mib']:6.1f} MiB (1 us: {runs[rel]['tiny'][-1]['wall_s']:.3f} s)", file=sys.stderr, flush=True)
    rows = {}
    for rel, f in files.items():
        full, tiny = runs[rel]["full"], runs[rel]["tiny"]
        ev, ev0 = full[0]["events"], tiny[0]["events"]
        eps = [r["events"] / r["wall_s"] for r in full]
        wall, wall0 = median([r["wall_s"] for r in full]), median([r["wall_s"] for r in tiny])
        rows[rel] = {
            "file": f"benches/{rel}", "name": f["name"], "pcpus": f["pcpus"], "vcpus": f["vcpus"], "sim_s": f["sim_s"],
            "n": len(full), "events": ev, "wall_s": wall, "events_per_s": median(eps), "events_per_s_all": eps,
            "sim_s_per_wall_s": f["sim_s"] / wall, "rss_mib": max(r["rss_mib"] for r in full),
            "ns_per_event": wall / ev * 1e9, "tiny_wall_s": wall0, "tiny_events": ev0,
            "net_ns_per_event": (wall - wall0) / (ev - ev0) * 1e9 if ev > ev0 else None,
            "runs": runs[rel],
        }
    return {"rows": rows}


def count_instructions(cmd: list[str]) -> tuple[int, str]:
    """(instructions, stdout) of one run under callgrind."""
    import shutil
    import subprocess

    if not shutil.which("valgrind"):
        raise SystemExit("--mode instructions needs valgrind on PATH")
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                       capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or not m:
        raise SystemExit(f"valgrind run failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return int(m.group(1)), p.stdout


def bench_instructions(a, tmp: Path) -> dict:
    rows = {}
    for rel in a.shape_files:
        text = (ROOT / "benches" / rel).read_text()
        info = shape_info(text)
        base = info["sim_s"] / (100 if a.smoke else 10)
        counts = []
        for k in (1, 2):
            f = tmp / f"ir{k}-{rel.replace('/', '-')}"
            f.write_text(set_duration(text, f"{base * k:g}s"))
            ir, out = count_instructions(vcpulab_cmd() + ["run", str(f), "--json"])
            counts.append((ir, json.loads(out)["events"]))
        (i1, e1), (i2, e2) = counts
        marginal = (i2 - i1) / (e2 - e1) if e2 > e1 else None
        print(f"  {rel:20s} {e1:>9,} / {e2:>9,} events, {i1:,} / {i2:,} instructions, "
              f"{marginal or 0:,.0f} per event", file=sys.stderr, flush=True)
        rows[rel] = {"file": f"benches/{rel}", "name": info["name"], "vcpus": info["vcpus"],
                     "sim_s": [base, 2 * base], "events": [e1, e2], "instructions": [i1, i2],
                     "per_event": marginal}
    return {"rows": rows}


def families(rows: dict) -> dict[str, list]:
    """Rows by shape family (file stem without its size: eevdf, credit, flms), smallest first."""
    fams: dict[str, list] = {}
    for rel, r in rows.items():
        fams.setdefault(Path(rel).stem.rsplit("-", 1)[0], []).append(r)
    for rs in fams.values():
        rs.sort(key=lambda r: r["vcpus"])
    return fams


def instructions_table(s: dict) -> str:
    lines = ["| family | vCPUs | events (1x / 2x) | instructions per event (marginal) | x smallest | log2 ratio |",
             "|---|---|---|---|---|---|"]
    for fam, rs in families(s["rows"]).items():
        b = rs[0]
        for r in rs:
            pe, pb = r["per_event"], b["per_event"]
            lines.append(
                f"| {fam} | {r['vcpus']} | {r['events'][0]:,} / {r['events'][1]:,} | "
                f"{f'{pe:,.0f}' if pe else 'n/a'} | {f'{pe / pb:.2f}x' if pe and pb else 'n/a'} | "
                f"{math.log2(r['vcpus']) / math.log2(b['vcpus']):.2f}x |")
    return "\n".join(lines)


def shapes_table(s: dict) -> str:
    lines = ["| shape | P | vCPUs | sim s | n | events | wall s (median) | events/s (median) | min..max events/s "
             "| sim-s per wall-s | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["rows"].values():
        lines.append(
            f"| {r['name']} | {r['pcpus']} | {r['vcpus']} | {r['sim_s']:g} | {r['n']} | {r['events']:,} | "
            f"{r['wall_s']:.3f} | {r['events_per_s']:,.0f} | {min(r['events_per_s_all']) / 1e6:.3g}.."
            f"{max(r['events_per_s_all']) / 1e6:.3g} M | {fmt_num(r['sim_s_per_wall_s'])} | {r['rss_mib']:.1f} |")
    lines += ["", "Cost per event against vCPUs (ratios to the family's smallest size; log2 ratio = "
              "log2(vCPUs) / log2(smallest vCPUs), the bound of logarithmic growth):", "",
              "| family | vCPUs | ns/event whole | x smallest | 1 us run wall s | ns/event net of it | x smallest "
              "| log2 ratio |", "|---|---|---|---|---|---|---|---|"]
    for fam, rs in families(s["rows"]).items():
        b = rs[0]
        for r in rs:
            net = r["net_ns_per_event"]
            xnet = f"{net / b['net_ns_per_event']:.2f}x" if net and b["net_ns_per_event"] else "n/a"
            lines.append(
                f"| {fam} | {r['vcpus']} | {r['ns_per_event']:.0f} | {r['ns_per_event'] / b['ns_per_event']:.2f}x | "
                f"{r['tiny_wall_s']:.3f} | {f'{net:.0f}' if net else 'n/a'} | {xnet} | "
                f"{math.log2(r['vcpus']) / math.log2(b['vcpus']):.2f}x |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ main


def csv_ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--mode", choices=["sweep", "shapes", "instructions", "all"], default="all",
                    help="what to measure (default all: sweep and shapes)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions, interleaved (default 3)")
    ap.add_argument("--runs", type=int, default=24, help="runs per sweep (default 24)")
    ap.add_argument("--sweep-duration", type=float, default=30.0,
                    help="simulated seconds per sweep run (default 30: ~3.4 M events, ~0.45 s of simulation here)")
    ap.add_argument("--workers", type=csv_ints, default=[1, 2], help="comma-separated N (default 1,2)")
    ap.add_argument("--engines", default="local,ray", help="comma-separated subset of local,ray (default both)")
    ap.add_argument("--ray-address", help="join this Ray cluster instead of starting a local instance per sweep")
    ap.add_argument("--shapes", dest="shape_files", default=",".join(SHAPE_FILES),
                    help="comma-separated scenario files under benches/ (default: the 9 PLE and Xen shapes)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, one repetition, local engine only, 4 runs per sweep (CI; a few seconds)")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="before each repetition wait up to S s until other work leaves the CPUs idle (default 0: off)")
    ap.add_argument("--save", type=Path, help="write the results as JSON")
    a = ap.parse_args(argv)
    a.engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    bad = [e for e in a.engines if e not in ("local", "ray")]
    if bad:
        ap.error(f"unknown engine(s) {bad}; choose from local, ray")
    a.shape_files = [s.strip() for s in a.shape_files.split(",") if s.strip()]
    if a.smoke:
        a.reps, a.runs, a.sweep_duration = 1, 4, 0.01
        if "--engines" not in (sys.argv[1:] if argv is None else argv):
            a.engines = ["local"]

    notes: list[str] = []
    results = {"command": "python scripts/bench_scale.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "machine": machine(), "reps": a.reps, "notes": notes}
    with tempfile.TemporaryDirectory(prefix="vcpulab-bench-scale-") as tmp:
        if a.mode in ("sweep", "all"):
            results["sweep"] = bench_sweep(a, Path(tmp), notes)
        if a.mode in ("shapes", "all"):
            results["shapes"] = bench_shapes(a, Path(tmp))
        if a.mode == "instructions":
            results["instructions"] = bench_instructions(a, Path(tmp))
    results["machine"]["loadavg_end"] = machine().get("loadavg_start")

    print(f"load average at start {' '.join(results['machine'].get('loadavg_start') or [])}, "
          f"at end {' '.join(results['machine'].get('loadavg_end') or [])}\n")
    if "sweep" in results:
        print(sweep_table(results["sweep"]) + "\n")
    if "shapes" in results:
        print(shapes_table(results["shapes"]) + "\n")
    if "instructions" in results:
        print(instructions_table(results["instructions"]) + "\n")
    for n in notes:
        print(f"note: {n}")
    if a.save:
        a.save.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
