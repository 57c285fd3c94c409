"""Plain-text rendering for the CLI: aligned tables and number formats (ASCII only)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional


WIDTH = 100
"""Every line the CLI prints fits this many columns (issue 30): a terminal of 100
columns, or a log viewer, shows it without wrapping mid-cell."""

MIN_WRAPPED = 12
"""A wrapped column is never made narrower than this."""

NBSP = "\u00a0"
"""Joins words that :func:`wrap` and :func:`table` keep on one line (printed as a space)."""


def cols(text: str) -> int:
    """The columns ``text`` takes on a terminal: East Asian wide and full-width characters
    (the Japanese of some papers' quotes) take two."""
    import unicodedata

    if text.isascii():
        return len(text)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * max(0, width - cols(text))
    return fill + text if right else text + fill


def wrap(text: str, first: str = "", rest: Optional[str] = None, width: int = WIDTH) -> str:
    """``text`` wrapped to ``width`` terminal columns (see :func:`cols`) at spaces, the
    first line led by ``first`` and the others by ``rest`` (default: as many spaces as
    ``first``). A number stays on the line of the word after it ("8 pCPUs", "5 s"), as
    do words joined by :data:`NBSP`; a word longer than a line is broken."""
    import re

    rest = " " * len(first) if rest is None else rest
    glued = re.sub(r"(\d) (?=[A-Za-z%])", "\\1" + NBSP, text)
    words = [w for w in re.split(r"[ \t\n\r]+", glued) if w]
    lines: list[str] = []
    line, has_word = first, False
    for word in words:
        piece = (" " if has_word else "") + word
        if cols(line) + cols(piece) <= width:
            line, has_word = line + piece, True
            continue
        if has_word:
            lines.append(line)
            line, has_word = rest, False
        while cols(line) + cols(word) > width:
            room = max(1, width - cols(line))
            cut, used = 0, 0
            while cut < len(word) and used + cols(word[cut]) <= room:
                used += cols(word[cut])
                cut += 1
            cut = max(cut, 1)
            lines.append(line + word[:cut])
            line, word = rest, word[cut:]
        if word:
            line, has_word = line + word, True
    if has_word or not lines:
        lines.append(line)
    return "\n".join(ln.replace(NBSP, " ").rstrip() for ln in lines)


def _wrap_cell(text: str, width: int) -> list[str]:
    return wrap(text, width=width).split("\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] = (),
          width: int = WIDTH) -> str:
    """An aligned table; ``right[i]`` right-aligns column i (numbers). If it would be
    wider than ``width``, its widest columns are wrapped onto more lines (a row's
    continuation lines below it) until it fits: text cells at word boundaries, and the
    headers of number columns; numbers themselves are never broken."""
    ncol = len(headers)
    ralign = list(right) + [False] * (ncol - len(right))
    cell_widths = [0] * ncol
    for r in rows:
        for i, cell in enumerate(r):
            cell_widths[i] = max(cell_widths[i], cols(cell))
    widths = [max(cols(h), c) for h, c in zip(headers, cell_widths)]
    # How narrow each column may become: a number column as wide as its widest number.
    floors = [max(cell_widths[i], min(MIN_WRAPPED, widths[i])) if ralign[i] else min(MIN_WRAPPED, widths[i])
              for i in range(ncol)]
    gap = 2
    while sum(widths) + gap * (ncol - 1) > width:
        slack = [widths[i] - floors[i] for i in range(ncol)]
        widest = max(range(ncol), key=lambda i: slack[i])
        if slack[widest] <= 0:
            break  # as narrow as it can be: a longer line rather than broken numbers
        # Down to the next column's slack at most, so that the wrapping is shared.
        second = max((slack[i] for i in range(ncol) if i != widest), default=0)
        excess = sum(widths) + gap * (ncol - 1) - width
        widths[widest] -= max(1, min(excess, slack[widest] - second))

    def lines_of(cells: Sequence[str]) -> list[str]:
        # (A no-break space in a cell keeps two words together when it wraps.)
        parts = [_wrap_cell(c, w) if cols(c) > w else [c.replace(NBSP, " ")] for c, w in zip(cells, widths)]
        height = max(len(p) for p in parts)
        out = []
        for k in range(height):
            row = [(p[k] if k < len(p) else "") for p in parts]
            out.append((" " * gap).join(_pad(c, w, ra) for c, w, ra in zip(row, widths, ralign)).rstrip())
        return out

    sep = (" " * gap).join("-" * w for w in widths)
    body = [line for r in rows for line in lines_of(r)]
    return "\n".join([*lines_of(headers), sep, *body])


def _finite_or_none(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {k: _finite_or_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_or_none(v) for v in x]
    return x


def json_text(doc: Any) -> str:
    """``doc`` as indented JSON that every parser accepts: a value that is not a finite
    number (the CI of a single seed, a missing percentile) becomes ``null``, since
    ``json.dumps`` would write ``NaN``, which is not JSON."""
    import json

    return json.dumps(_finite_or_none(doc), indent=2, allow_nan=False)


def num(x: Optional[float], digits: int = 3) -> str:
    """A float with ``digits`` decimals; ``-`` for a missing value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}%"


def secs(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{x:g} s"


def phrases(*parts: str) -> str:
    """``parts`` joined by ", ", each kept on one line when the text is wrapped."""
    return ", ".join(p.replace(" ", NBSP) for p in parts)


def pairs(d: Mapping[str, Any], skip: Sequence[str] = ()) -> str:
    """``k v, k v`` for a dict of counters, each pair kept on one line by :func:`wrap`."""
    return phrases(*(f"{k} {v}" for k, v in d.items() if k not in skip))


def _ms(lat: Optional[Mapping[str, Any]], key: str) -> str:
    return num((lat or {}).get(key))


def _steal(vm: Mapping[str, Any], key: str) -> str:
    x = (vm.get("steal_pct") or {}).get(key)
    return "-" if x is None else f"{x:.1f}%"


def _vm_table(s: Mapping[str, Any]) -> str:
    """Per VM: times, and steal as its guests' /proc/stat shows it (mean, and the p95 of
    its 1 s windows)."""
    headers = ["VM", "vCPUs", "weight", "cpu s", "share", "wait s", "halted s", "spin s", "steal", "steal p95"]
    rows = [[vm["name"], str(vm["vcpu_count"]), str(vm["weight"]), num(vm["cpu_time_s"]),
             pct(vm["cpu_share"]), num(vm["wait_time_s"]), num(vm["halted_time_s"]), num(vm["spin_time_s"]),
             _steal(vm, "mean"), _steal(vm, "p95")]
            for vm in s["vms"]]
    return table(headers, rows, right=[False] + [True] * 9)


def _workload_table(s: Mapping[str, Any]) -> str:
    """Every workload of every VM (a VM's summary figures are its first workload's)."""
    headers = ["VM", "workload", "threads", "done", "throughput", "unit", "p50 ms", "p99 ms", "max ms"]
    rows = []
    for vm in s["vms"]:
        for i, w in enumerate(vm.get("workloads") or []):
            lat = w.get("latency_ms")
            extra = []
            if w.get("bandwidth_mbps") is not None:
                extra.append(f"{num(w['bandwidth_mbps'], 1)} Mb/s")
            if w.get("throughput_kbps") is not None:
                extra.append(f"{num(w['throughput_kbps'], 0)} KB/s")
            if w.get("completion_s") is not None:
                extra.append(f"finished at {num(w['completion_s'])} s")
            kind = f"{i}: {w['kind']}"
            unit = w["throughput_unit"] + (f" ({', '.join(extra)})" if extra else "")
            rows.append([vm["name"], kind, str(w["threads"]), str(w["completed"]), num(w["throughput"], 1), unit,
                         _ms(lat, "p50"), _ms(lat, "p99"), _ms(lat, "max")])
    if not rows:
        return ""
    return table(headers, rows, right=[False, False, True, True, True, False, True, True, True])


def _ple_table(s: Mapping[str, Any]) -> str:
    """KVM's pause-loop exits and directed yields ([kvm] scenarios); pv-spinlock waits and
    kicks when a guest uses them."""
    rows = []
    pv_used = False
    for vm in s["vms"]:
        ple = vm.get("ple")
        if not ple:
            continue
        st = ple.get("streaks") or {}
        boost = ple.get("boost_to_run_ms")
        waits = sum(v.get("pv_waits", 0) for v in vm.get("vcpus") or [])
        kicks = sum(v.get("pv_kicks", 0) for v in vm.get("vcpus") or [])
        pv_used = pv_used or waits > 0 or kicks > 0
        rows.append([vm["name"], str(ple["exits"]), str(ple["yield_attempts"]), str(ple["yield_successes"]),
                     str(st.get("count", 0)), str(st.get("median", 0)), str(st.get("max", 0)),
                     pct(st.get("ge53_frac")), _ms(boost, "mean"), _ms(boost, "max"), str(waits), str(kicks)])
    if not rows:
        return ""
    headers = ["VM", "PLE exits", "yields", "yields ok", "streaks", "median", "max", ">=53", "boost ms",
               "max ms", "pv waits", "pv kicks"]
    if not pv_used:
        headers, rows = headers[:-2], [r[:-2] for r in rows]
    head = ("KVM pause-loop exits (PLE) and directed yields. A streak: one vCPU's PLE exits in a row\n"
            "(median weighted by exits; >=53: share of exits in streaks of 53+); boost: mean and max\n"
            "time from a successful yield to the boosted vCPU running")
    return head + "\n" + table(headers, rows, right=[False] + [True] * (len(headers) - 1))


def _ft_table(s: Mapping[str, Any]) -> str:
    """Kemari's synchronisations and the time they stopped each VM."""
    rows = []
    for vm in s["vms"]:
        ft = vm.get("ft")
        if not ft:
            continue
        rows.append([vm["name"], str(ft["syncs"]), num(ft["paused_time_s"]), str(ft["timer_irqs"]),
                     str(ft["timer_irqs_queued"]), str(ft["timer_irqs_cross_cpu"]), str(ft["flushes"]),
                     num(ft["flush_wait_s"])])
    if not rows:
        return ""
    return "fault tolerance (Kemari): syncs, the time they stopped the VM, guest timer interrupts\n" + table(
        ["VM", "syncs", "stopped s", "timer irqs", "queued", "cross-CPU", "flushes", "flush wait s"],
        rows, right=[False] + [True] * 7)


def _is_housekeeping(t: Mapping[str, Any]) -> bool:
    """One of the host's per-pCPU kernel threads that [host.noise] adds (`kthread-<cpu>`)."""
    name = t["name"]
    return (name.startswith("kthread-") and name[len("kthread-"):].isdigit()
            and not t.get("vm") and not t.get("helper"))


def _host_thread_table(s: Mapping[str, Any], verbose: bool = False) -> str:
    """Host threads: replication helpers (Kemari, DRBD), I/O backends, host workloads. The
    housekeeping threads of the host noise are one row (their sums) unless verbose."""
    rows = []
    threads = list(s.get("host_threads") or [])
    kthreads = [t for t in threads if _is_housekeeping(t)]
    if kthreads and not verbose:
        threads = [t for t in threads if not _is_housekeeping(t)]
    for t in threads:
        lat = t.get("job_latency_ms")
        mig = (t.get("migrations") or {}).get("total", 0)
        rows.append([t["name"], t.get("vm") or "-", t.get("helper") or "workload", num(t["cpu_time_s"]),
                     num(t["wait_time_s"]), str(mig), "-" if t.get("jobs") is None else str(t["jobs"]),
                     _ms(lat, "p50"), _ms(lat, "p99")])
    if kthreads and not verbose:
        mig = sum((t.get("migrations") or {}).get("total", 0) for t in kthreads)
        rows.append([f"kthread-0..{len(kthreads) - 1}", "-", "housekeeping",
                     num(sum(t["cpu_time_s"] for t in kthreads)),
                     num(sum(t["wait_time_s"] for t in kthreads)), str(mig), "-", "-", "-"])
    if not rows:
        return ""
    return "host threads (jobs: Kemari syncs, DRBD replicated writes)\n" + table(
        ["thread", "VM", "role", "cpu s", "wait s", "migrations", "jobs", "job p50 ms", "job p99 ms"],
        rows, right=[False, False, False] + [True] * 6)


def summary_text(s: Mapping[str, Any], verbose: bool = False) -> str:
    """The human-readable report of one run (``vcpulab run`` without ``--json``): the
    VMs, every workload, and the figures of the features the scenario uses (KVM's PLE,
    Kemari/DRBD, host threads); the scheduler's raw counters and the event breakdown
    with ``verbose``. Every line fits :data:`WIDTH` columns."""
    out = [
        wrap(s["scenario"], "scenario   "),
        wrap(f"{s['scheduler']}, seed {s['seed']}, {secs(s['duration_s'])} simulated"
             f" (warmup {secs(s['warmup_s'])}), {s['events']} events", "scheduler  "),
        "",
        _vm_table(s),
    ]
    for section in (_workload_table(s), _ple_table(s), _ft_table(s), _host_thread_table(s, verbose)):
        if section:
            out += ["", section]
    h = s["host"]
    mig = h.get("migrations", {})
    jain = (s.get("fairness") or {}).get("jain_vm")
    out += [
        "",
        wrap(phrases(plural(h["pcpus"], "pCPU"), f"utilization {pct(h['utilization'])}",
                     f"busy {num(h['busy_time_s'])} s", f"idle {num(h['idle_time_s'])} s",
                     f"overhead {num(h['overhead_time_s'])} s", f"{h['context_switches']} context switches"),
             "host        "),
    ]
    core = h.get("core_sched")
    if core:
        per_core = ", ".join(f"{v:.1f}%" for v in core["forced_idle_pct_per_core"])
        out.append(wrap(f"forced idle {core['forced_idle_pct']:.1f}% of pCPU time (per core: {per_core})",
                        "core sched  "))
    noise = h.get("noise")
    if noise:
        out.append(wrap(f"{noise['interruptions']} interruptions of running tasks, {num(noise['lost_time_s'])} s "
                        f"({noise['lost_pct']:.1f}% of pCPU time)", "host noise  "))
    out += [
        wrap(f"{mig.get('total', 0)} ({pairs(mig, skip=('total', 'cross_socket_share')) or 'none'})"
             + (f", {pct(mig['cross_socket_share'])} across sockets" if mig.get("cross_socket_share") is not None
                else ""), "migrations  "),
        f"fairness    Jain index over VMs {'-' if jain is None else f'{jain:.4f}'}",
    ]
    counters = s.get("scheduler_counters") or {}
    if verbose:
        out.append(wrap(f"{s['events']} processed; {pairs(s.get('event_counts', {}))}", "events      "))
        if counters:
            out.append(wrap(f"{s['scheduler']}: {pairs(counters)}", "counters    "))
    elif counters:
        out.append(f"counters    {plural(len(counters), 'raw scheduler counter')} and the event breakdown: "
                   "run with --verbose")
    return "\n".join(out)
