#!/usr/bin/env python3
"""Whole-process speed of vcpulab against the rr-overcommit reference programs.

Runs, side by side and interleaved (A B C A B C ...), for each size:
  vcpulab   `vcpulab run SCENARIO --json` on benches/rr-overcommit (duration rewritten),
  rust      the plain-Rust reference `rr_rust P V T` (../shared/bench/rr-overcommit/rr_rust),
  simpy     the SimPy reference `rr_simpy.py P V T`,
and prints a Markdown table of medians: events, wall s, events/s, simulated s per wall s,
peak RSS, and the ratios vcpulab/rust and vcpulab/simpy of median events/s.

Timings are of the whole process (what a user waits for: process start, scenario
parsing, the run, the JSON output; `vcpulab run --json` is the native command, which
starts no Python, see crates/vcpulab-cli); peak RSS is the child's own ru_maxrss (os.wait4).

  python scripts/bench.py                        # 3 sizes x 3 engines x 3 repetitions
  python scripts/bench.py --reps 5 --no-simpy --sizes 4/16/60,64/512/10
  python scripts/bench.py --save run.json        # keep the results
  python scripts/bench.py --baseline run.json    # flag > 10 % regressions against them
  python scripts/bench.py --smoke --no-simpy     # tiny durations, once (CI)

A size is P/V/T (T in simulated seconds) or one of small, mid, large. Scenarios for sizes
without a committed file are generated from the committed P=4/V=16 one (same model).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benches" / "rr-overcommit"
DEFAULT_REF = ROOT.parent / "shared" / "bench" / "rr-overcommit"

# The sizes (P, V, T seconds).
NAMED = {"small": (4, 16, 60.0), "mid": (64, 512, 10.0), "large": (1024, 8192, 1.0)}
DEFAULT_SIZES = ["small", "mid", "large"]
SMOKE_T = {(4, 16): 0.5, (64, 512): 0.05, (1024, 8192): 0.005}
ENGINES = ["vcpulab", "rust", "simpy"]
REGRESSION = 0.10


def parse_size(tok: str, smoke: bool) -> tuple[int, int, float]:
    tok = tok.strip()
    if tok in NAMED:
        p, v, t = NAMED[tok]
    else:
        parts = tok.split("/")
        if len(parts) not in (2, 3):
            raise SystemExit(f"bench.py: size {tok!r}: expected P/V/T or small|mid|large")
        p, v = int(parts[0]), int(parts[1])
        t = float(parts[2].rstrip("s")) if len(parts) == 3 else 1.0
    if smoke:
        t = SMOKE_T.get((p, v), min(t, 0.01))
    return p, v, t


def fmt_t(t: float) -> str:
    return f"{t:g}"


def scenario_text(p: int, v: int, t: float) -> str:
    committed = BENCH_DIR / f"p{p}-v{v}.toml"
    src = committed if committed.exists() else BENCH_DIR / "p4-v16.toml"
    text = src.read_text()
    text = re.sub(r'(?m)^duration = "[^"]*"', f'duration = "{fmt_t(t)}s"', text)
    if not committed.exists():
        text = re.sub(r'(?m)^name = "[^"]*"', f'name = "rr-overcommit P={p} V={v}"', text, count=1)
        text = re.sub(r"(?m)^cores_per_socket = \d+", f"cores_per_socket = {p}", text)
        text = re.sub(r"(?m)^vcpus = \d+", f"vcpus = {v}", text)
        text = re.sub(r"(?m)^threads = \d+", f"threads = {v}", text)
    return text


GNU_TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run_child(cmd: list[str], cwd: str | None = None) -> tuple[float, float, str]:
    """Runs cmd; returns (wall s, peak RSS MiB of that child, stdout).

    Peak RSS comes from GNU time (%M) when /usr/bin/time exists: Linux keeps the forking
    parent's high-water mark in a child's ru_maxrss across exec, so os.wait4 on a child
    forked from this Python process would report at least this process's RSS (~16 MiB).
    Without GNU time, that inflated ru_maxrss is used (a floor of this script's RSS)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rssf:
        full = [GNU_TIME, "-f", "%M", "-o", rssf.name] + cmd if GNU_TIME else cmd
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode()
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.read().decode()[-2000:]}")
        rss_kib = None
        if GNU_TIME:
            try:
                rss_kib = float(rssf.read().strip().splitlines()[-1])
            except (ValueError, IndexError):
                rss_kib = None
        if rss_kib is None:
            rss_kib = ru.ru_maxrss if sys.platform != "darwin" else ru.ru_maxrss / 1024
    return wall, rss_kib / 1024.0, stdout


def build_rust(ref_dir: Path, build_dir: Path) -> tuple[str | None, str]:
    """Returns (binary path or None, reason)."""
    env_bin = os.environ.get("RR_RUST")
    if env_bin:
        return (env_bin, "RR_RUST") if os.access(env_bin, os.X_OK) else (None, f"RR_RUST={env_bin} not executable")
    src = ref_dir / "rr_rust"
    if not (src / "Cargo.toml").exists():
        return None, f"no reference sources at {src}"
    if shutil.which("cargo") is None:
        return None, "cargo not found"
    copy = build_dir / "rr_rust"
    binary = copy / "target" / "release" / "rr_rust"
    if not binary.exists() or (src / "src" / "main.rs").stat().st_mtime > binary.stat().st_mtime:
        copy.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / "Cargo.toml", copy / "Cargo.toml")
        shutil.copytree(src / "src", copy / "src", dirs_exist_ok=True)
        r = subprocess.run(["cargo", "build", "--release", "--offline", "--quiet"], cwd=copy,
                           capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=copy,
                               capture_output=True, text=True)
        if r.returncode != 0 or not binary.exists():
            return None, f"cargo build of the reference failed: {r.stderr.strip()[-300:]}"
    return str(binary), "built"


def simpy_available(ref_dir: Path) -> tuple[bool, str]:
    if not (ref_dir / "rr_simpy.py").exists():
        return False, f"no {ref_dir / 'rr_simpy.py'}"
    r = subprocess.run([sys.executable, "-c", "import simpy; print(simpy.__version__)"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return False, "simpy is not installed (pip install simpy==4.1.2)"
    return True, f"simpy {r.stdout.strip()}"


def vcpulab_cmd() -> list[str]:
    exe = shutil.which("vcpulab")
    return [exe] if exe else [sys.executable, "-m", "vcpulab"]


def one_run(engine: str, p: int, v: int, t: float, ctx: dict) -> dict:
    if engine == "vcpulab":
        wall, rss, out = run_child(vcpulab_cmd() + ["run", ctx["scenarios"][(p, v, t)], "--json"])
        events = json.loads(out)["events"]
        inner = None
    elif engine == "rust":
        wall, rss, out = run_child([ctx["rust_bin"], str(p), str(v), fmt_t(t)])
        d = json.loads(out.strip().splitlines()[-1])
        events, inner = d["events"], d["wall_s"]
    else:
        wall, rss, out = run_child([sys.executable, str(ctx["ref_dir"] / "rr_simpy.py"), str(p), str(v), fmt_t(t)])
        d = json.loads(out.strip().splitlines()[-1])
        events, inner = d["events"], d["wall_s"]
    return {"wall_s": wall, "rss_mib": rss, "events": events, "loop_wall_s": inner}


def median(xs):
    return statistics.median(xs) if xs else None


def summarize(runs: list[dict], t: float) -> dict:
    walls = [r["wall_s"] for r in runs]
    eps = [r["events"] / r["wall_s"] for r in runs]
    return {
        "n": len(runs),
        "events": runs[0]["events"],
        "wall_s": median(walls),
        "events_per_s": median(eps),
        "events_per_s_min": min(eps),
        "events_per_s_max": max(eps),
        "sim_s_per_wall_s": t / median(walls),
        "rss_mib": max(r["rss_mib"] for r in runs),
        "runs": runs,
    }


def key(p, v, t):
    return f"{p}/{v}/{fmt_t(t)}s"


def fmt_num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def table(results: dict, sizes, engines) -> str:
    lines = ["| engine | P/V/T | n | events | wall s (median) | events/s (median) | min..max events/s "
             "| sim-s per wall-s | peak RSS MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p, v, t in sizes:
        k = key(p, v, t)
        for e in engines:
            s = results["sizes"].get(k, {}).get(e)
            if not s:
                continue
            lines.append(
                f"| {e} | {k} | {s['n']} | {s['events']:,} | {s['wall_s']:.3f} | {s['events_per_s']:,.0f} "
                f"| {s['events_per_s_min'] / 1e6:.3g}..{s['events_per_s_max'] / 1e6:.3g} M "
                f"| {fmt_num(s['sim_s_per_wall_s'])} | {s['rss_mib']:.1f} |")
    lines.append("")
    lines.append("| P/V/T | vcpulab / plain Rust (events/s) | vcpulab / SimPy (events/s) | plain Rust / SimPy |")
    lines.append("|---|---|---|---|")
    for p, v, t in sizes:
        k = key(p, v, t)
        r = results["ratios"].get(k, {})
        cell = lambda name, suffix: f"{r[name]:.3g}{suffix}" if r.get(name) is not None else "n/a"
        lines.append(f"| {k} | {cell('vcpulab/rust', 'x')} | {cell('vcpulab/simpy', 'x')} | {cell('rust/simpy', 'x')} |")
    return "\n".join(lines)


def ratios(sz: dict) -> dict:
    def eps(e):
        return sz[e]["events_per_s"] if e in sz else None
    out = {}
    for a, b in (("vcpulab", "rust"), ("vcpulab", "simpy"), ("rust", "simpy")):
        out[f"{a}/{b}"] = eps(a) / eps(b) if eps(a) and eps(b) else None
    return out


def compare(results: dict, baseline: dict) -> list[str]:
    flags = []
    for k, engines in results["sizes"].items():
        for e, s in engines.items():
            b = baseline.get("sizes", {}).get(k, {}).get(e)
            if not b:
                continue
            r = s["events_per_s"] / b["events_per_s"]
            m = s["rss_mib"] / b["rss_mib"] if b["rss_mib"] else 1.0
            status = []
            if r < 1 - REGRESSION:
                status.append(f"REGRESSION events/s {r:.2f}x")
            if m > 1 + REGRESSION:
                status.append(f"REGRESSION peak RSS {m:.2f}x")
            flags.append(f"| {e} | {k} | {b['events_per_s']:,.0f} | {s['events_per_s']:,.0f} | {r:.2f}x "
                         f"| {b['rss_mib']:.1f} | {s['rss_mib']:.1f} | {'; '.join(status) or 'ok'} |")
    return flags


def machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["loadavg_start"] = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        pass
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--reps", type=int, default=3, help="repetitions per engine and size (default 3)")
    ap.add_argument("--sizes", default=",".join(DEFAULT_SIZES),
                    help="comma-separated P/V/T or small|mid|large (default: the issue's three)")
    ap.add_argument("--no-simpy", action="store_true", help="skip the SimPy reference")
    ap.add_argument("--no-rust", action="store_true", help="skip the plain-Rust reference")
    ap.add_argument("--engines", help="comma-separated subset of vcpulab,rust,simpy")
    ap.add_argument("--ref-dir", type=Path, default=DEFAULT_REF, help=f"reference programs (default {DEFAULT_REF})")
    ap.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "vcpulab-bench",
                    help="where the plain-Rust reference is copied and built")
    ap.add_argument("--smoke", action="store_true", help="tiny durations, one repetition (CI)")
    ap.add_argument("--save", type=Path, help="write the results as JSON")
    ap.add_argument("--baseline", type=Path, help="compare with a saved run; flag > 10%% regressions")
    ap.add_argument("--fail-on-regression", action="store_true", help="exit 1 when --baseline flags one")
    a = ap.parse_args(argv)
    if a.smoke:
        a.reps = 1

    sizes = [parse_size(s, a.smoke) for s in a.sizes.split(",") if s.strip()]
    engines = a.engines.split(",") if a.engines else list(ENGINES)
    if a.no_simpy and "simpy" in engines:
        engines.remove("simpy")
    if a.no_rust and "rust" in engines:
        engines.remove("rust")
    notes = []
    ctx: dict = {"ref_dir": a.ref_dir}
    if "rust" in engines:
        binary, why = build_rust(a.ref_dir, a.build_dir)
        if binary is None:
            engines.remove("rust")
            hint = (" (the reference programs are not part of this repository: point --ref-dir at a copy "
                    "of rr-overcommit)") if why.startswith("no reference sources") else ""
            notes.append(f"plain-Rust reference skipped: {why}{hint}")
        ctx["rust_bin"] = binary
    if "simpy" in engines:
        ok, why = simpy_available(a.ref_dir)
        if not ok:
            engines.remove("simpy")
            hint = " (point --ref-dir at a copy of rr-overcommit)" if why.startswith("no ") else ""
            notes.append(f"SimPy reference skipped: {why}{hint}")

    results = {"command": "python scripts/bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "machine": machine(), "reps": a.reps, "engines": engines, "sizes": {}, "ratios": {}, "notes": notes}
    with tempfile.TemporaryDirectory(prefix="vcpulab-bench-") as tmp:
        ctx["scenarios"] = {}
        for p, v, t in sizes:
            path = Path(tmp) / f"p{p}-v{v}-t{fmt_t(t)}.toml"
            path.write_text(scenario_text(p, v, t))
            ctx["scenarios"][(p, v, t)] = str(path)
        for p, v, t in sizes:
            runs = {e: [] for e in engines}
            for rep in range(a.reps):
                for e in engines:  # interleaved: A B C A B C ...
                    r = one_run(e, p, v, t, ctx)
                    runs[e].append(r)
                    print(f"  {e:8s} {key(p, v, t):16s} rep {rep + 1}/{a.reps}: {r['events']:>10,} events "
                          f"{r['wall_s']:7.3f} s {r['rss_mib']:6.1f} MiB", file=sys.stderr, flush=True)
            k = key(p, v, t)
            results["sizes"][k] = {e: summarize(rs, t) for e, rs in runs.items()}
            results["ratios"][k] = ratios(results["sizes"][k])
    results["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None

    print(table(results, sizes, engines))
    for n in notes:
        print(f"\nnote: {n}")
    status = 0
    if a.baseline:
        base = json.loads(a.baseline.read_text())
        rows = compare(results, base)
        print(f"\nAgainst baseline {a.baseline} (regression = events/s or peak RSS worse by > {REGRESSION:.0%}):\n")
        print("| engine | P/V/T | baseline events/s | events/s | ratio | baseline RSS MiB | RSS MiB | status |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(rows) if rows else "| (no common engine/size) |||||||")
        if any("REGRESSION" in r for r in rows):
            print("\nREGRESSIONS found (see above)")
            if a.fail_on_regression:
                status = 1
    if a.save:
        a.save.write_text(json.dumps(results, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
