"""``vcpulab report DIR``: one self-contained HTML page with plots (no network, no CDN).

DIR may be a sweep's results (``runs.parquet``/``runs/``), a single run's ``--out`` folder
(``summary.json``) or a ``reproduce --out`` folder (``reproduce.json``); a folder holding
several gets a section for each. Plots are matplotlib SVGs embedded as data URIs.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ._native import ScenarioError
from . import stats
from .api import steal_window_ends

MAX_LINES = 10

PAGE_SCRIPT = """
(function () {
  var errors = 0;
  window.addEventListener('error', function () { errors++; document.body.dataset.errors = errors; }, true);
  window.addEventListener('load', function () {
    var imgs = document.querySelectorAll('figure.plot img');
    var ok = 0;
    for (var i = 0; i < imgs.length; i++) {
      var r = imgs[i].getBoundingClientRect();
      if (imgs[i].complete && imgs[i].naturalWidth > 0 && r.width > 0 && r.height > 0) ok++;
      else imgs[i].closest('figure').classList.add('broken');
    }
    document.body.dataset.plots = imgs.length;
    document.body.dataset.rendered = ok;
    document.body.dataset.errors = errors;
  });
})();
"""

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 0 auto;
       max-width: 1100px; padding: 1.5em; color: #1d1d1f; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
.meta { color: #555; } code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }
figure.plot { margin: 0; border: 1px solid #e3e3e3; border-radius: 6px; padding: .5em; background: #fff; }
figure.plot img { width: 100%; height: auto; display: block; }
figure.broken { outline: 3px solid #d00; }
figcaption { font-size: .85em; color: #555; margin-top: .3em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f6f6f6; } td.l, th.l { text-align: left; }
.bad { color: #b00; } .ok { color: #070; }
.verdict { font-weight: 600; padding: 0 .45em; border-radius: 3px; white-space: nowrap; }
.v-holds { color: #0a5d1f; background: #dff3e3; } .v-fails { color: #fff; background: #c0262d; }
.v-undecided { color: #5a3d00; background: #ffd866; }
tr.v-row-fails td { background: #fdf0f0; } tr.v-row-undecided td { background: #fffae6; }
.claims-summary { font-size: 1.05em; } table.claims td.n, table.claims code { white-space: nowrap; } details > summary { cursor: pointer; margin: .6em 0; }
"""


# ------------------------------------------------------------------------- helpers


def _mpl() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ScenarioError("vcpulab report needs matplotlib, a dependency of vcpulab missing from this "
                           "Python (uninstalled since?): pip install 'matplotlib>=3.5'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "svg.hashsalt": "vcpulab",
        "figure.dpi": 100,
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })
    return plt


def _figure(fig: Any, caption: str = "", legend_below: bool = False) -> str:
    """The figure as an <img> with an SVG data URI, inside <figure class="plot">.
    ``legend_below``: the axes' legend goes under the plot, outside it."""
    plt = _mpl()
    buf = io.StringIO()
    if legend_below:
        ax = fig.axes[0]
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.9 / fig.get_figheight() * 0.45, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    data = base64.b64encode(buf.getvalue().encode("utf-8")).decode("ascii")
    title = fig.axes[0].get_title().replace("\n", " ") if fig.axes else ""
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (
        f'<figure class="plot"><img alt="{html.escape(title)}" src="data:image/svg+xml;base64,{data}">{cap}</figure>'
    )


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if isinstance(v, float):
            return f"{v:.4g}"
        return html.escape(str(v))

    th = "".join(f'<th class="{"l" if i < left else ""}">{html.escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{cell(v)}</td>' for i, v in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def unit_of(metric: str, df: Any = None) -> str:
    """A readable unit for a metric column name."""
    leaf = metric.rsplit(".", 1)[-1]
    if ".latency_ms." in f".{metric}" or metric.endswith("_ms"):
        return "requests" if leaf == "count" else "ms"
    if leaf.endswith("_s"):
        return "s"
    if leaf in ("cpu_share", "utilization"):
        return "fraction of host CPU"
    if ".steal_pct." in f".{metric}" and leaf in ("mean", "p95"):
        return "% of the VM's vCPU time"
    if leaf == "bandwidth_mbps":
        return "Mb/s"
    if leaf == "throughput_kbps":
        return "KB/s"
    if leaf == "jain_vm":
        return "Jain index, 1 = fair"
    if leaf == "throughput":
        if df is not None and f"{metric}_unit" in df:
            units = [u for u in df[f"{metric}_unit"].dropna().unique()]
            if len(units) == 1:
                return str(units[0])
        return "per s"
    return "count"


def _label(metric: str, df: Any = None) -> str:
    name, unit = describe_column(metric, df)
    return f"{name} ({unit})" if unit else name


# Words for the leaves of the summary's column paths (runs.parquet), and for scenario keys.
_LATENCY_WORDS = {"mean": "mean", "p50": "median (p50)", "p90": "p90", "p99": "p99", "max": "max"}
_VM_LEAVES = {
    "cpu_share": "CPU share",
    "cpu_time_s": "CPU time",
    "wait_time_s": "wait (steal) time",
    "steal_pct.mean": "steal (mean over the run)",
    "steal_pct.p95": "steal (p95 of 1 s windows)",
    "halted_time_s": "halted time",
    "spin_time_s": "spin time",
    "throughput": "throughput",
    "vcpu_count": "vCPUs",
    "weight": "weight",
    "ple.exits": "PLE exits",
    "ple.yield_attempts": "directed-yield attempts",
    "ple.yield_successes": "directed-yield successes",
    "ple.streaks.count": "PLE streaks",
    "ple.streaks.median": "median PLE streak",
    "ple.streaks.max": "longest PLE streak",
    "ple.streaks.ge53_frac": "share of PLE exits in streaks of 53+",
    "ft.syncs": "fault-tolerance syncs",
    "ft.paused_time_s": "time stopped for fault-tolerance syncs",
    "ft.timer_irqs": "guest timer interrupts raised by Kemari",
    "ft.timer_irqs_queued": "guest timer interrupts queued behind a sync",
    "ft.timer_irqs_cross_cpu": "guest timer interrupts sent to another pCPU",
    "ft.flushes": "released writes Kemari waited for",
    "ft.flush_wait_s": "time Kemari waited for released writes",
    "completed": "units completed",
    "bandwidth_mbps": "bandwidth",
    "throughput_kbps": "throughput",
    "completion_s": "completion time",
}
_OTHER_COLUMNS = {
    "host.utilization": ("host CPU utilization", "fraction of host CPU"),
    "host.busy_time_s": ("host busy time", "s"),
    "host.idle_time_s": ("host idle time", "s"),
    "host.overhead_time_s": ("host switch and migration overhead", "s"),
    "host.context_switches": ("context switches", "count"),
    "host.core_sched.forced_idle_pct": ("core scheduling forced idle", "% of pCPU time"),
    "host.pcpus": ("pCPUs", "count"),
    "fairness.jain_vm": ("Jain fairness over VMs", "1 = fair"),
    "events": ("simulated events", "count"),
    "seed": ("seed", ""),
    "scheduler.name": ("scheduler", ""),
}
_KEY_WORDS = {"vcpus": "vCPUs", "vm": "VM", "pcpus": "pCPUs", "numa_nodes": "NUMA nodes", "smt_sibling": "SMT-sibling",
              "ple_window": "PLE window", "ple_gap": "PLE gap", "kvm": "KVM"}


def _words(key: str) -> str:
    return _KEY_WORDS.get(key, key.replace("_", " "))


def describe_column(col: str, df: Any = None) -> tuple[str, str]:
    """(human name, unit) of a sweep column: a summary metric (``vm.web.latency_ms.p99``
    -> ("p99 latency of VM web", "ms")) or an axis's scenario key path (``vm[1].vcpus``
    -> ("vCPUs of vm[1]", ""), ``scheduler.name`` -> ("scheduler", "")). The unit is ""
    where there is none to give (axes, seeds)."""
    if col in _OTHER_COLUMNS:
        return _OTHER_COLUMNS[col]
    # One workload of a VM (vm.NAME.workloads.I.LEAF): the VM figure's words, of that workload.
    m = re.fullmatch(r"vm\.(.+?)\.workloads\.(\d+)\.(.+)", col)
    if m:
        vm, index, leaf = m.groups()
        name, unit = describe_column(f"vm.{vm}.{leaf}", df)
        return name.replace(f"of VM {vm}", f"of VM {vm}'s workload {index}"), unit
    m = re.fullmatch(r"vm\.(.+?)\.(latency_ms|ple\.boost_to_run_ms)\.(count|mean|p50|p90|p99|max)", col)
    if m:
        vm, what, q = m.groups()
        thing = "latency" if what == "latency_ms" else "boost-to-run time"
        if q == "count":
            return (f"requests completed by VM {vm}" if what == "latency_ms" else f"boosts of VM {vm}"), "count"
        return f"{_LATENCY_WORDS[q]} {thing} of VM {vm}", "ms"
    m = re.fullmatch(r"vm\.(.+)\.(" + "|".join(re.escape(k) for k in _VM_LEAVES) + ")", col)
    if m:
        vm, leaf = m.groups()
        unit = unit_of(col, df)
        if leaf.startswith("ple.streaks.") and leaf != "ple.streaks.count":
            unit = "fraction of PLE exits" if leaf.endswith("ge53_frac") else "PLE exits"
        return f"{_VM_LEAVES[leaf]} of VM {vm}", unit
    m = re.fullmatch(r"host\.migrations\.(\w+)", col)
    if m:
        kind = m.group(1)
        if kind == "cross_socket_share":
            return "share of migrations leaving their socket", "fraction"
        return ("vCPU migrations" if kind == "total" else f"{_words(kind)} migrations"), "count"
    if col.startswith("scheduler.params."):
        return f"scheduler parameter {col[len('scheduler.params.'):]}", ""
    if col.startswith("scheduler_counters."):  # one decision branch's count
        return f"{_words(col[len('scheduler_counters.'):])} (scheduler counter)", "count"
    if col.startswith(("vm.", "fairness.")):  # another summary figure: its path in words
        head, _, rest = col.partition(".")
        if head == "vm" and "." in rest:
            vm, _, rest = rest.partition(".")
            return f"{' '.join(_words(p) for p in rest.split('.'))} of VM {vm}", unit_of(col, df)
        return f"{head} {' '.join(_words(p) for p in rest.split('.'))}", unit_of(col, df)
    # An axis: a scenario key path such as vm[1].workload[0].threads or host.cores_per_socket.
    parts = col.split(".")
    leaf = _words(parts[-1])
    owner = ".".join(parts[:-1])
    if not owner or owner in ("host", "scheduler"):
        return leaf, ""
    return f"{leaf} of {owner}", ""


# --------------------------------------------------------------------------- sweep


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _is_numeric(series: Any) -> bool:
    return series.dtype.kind in "iuf"


def _experiment_metric_name(exp: Mapping[str, Any], metric: str) -> str:
    """A reproduction metric in words: the summary figure it reads (``vm.bench.throughput``
    -> "throughput of VM bench") and what it is divided by; its own name if the experiment
    does not say what it reads."""
    spec = next((m for m in exp.get("metrics") or [] if m.get("name") == metric), None)
    if not spec or not spec.get("value"):
        return _words(metric)
    name = describe_column(spec["value"])[0]
    norm = spec.get("normalize")
    if norm:
        axis, value = norm
        name += f", relative to {_words(axis)} {value}"
    return name


def _sweep_section(out_dir: str) -> str:
    import pandas as pd

    from .sweep import MANIFEST, build_tables, read_record

    manifest: dict[str, Any] = {}
    mpath = os.path.join(out_dir, MANIFEST)
    if os.path.exists(mpath):
        with open(mpath, encoding="utf-8") as f:
            manifest = json.load(f)
    columns: list[str] = manifest.get("columns", [])
    ppath = os.path.join(out_dir, "runs.parquet")
    if os.path.exists(ppath):
        df = pd.read_parquet(ppath)
    else:
        rdir = os.path.join(out_dir, "runs")
        records = [r for r in (read_record(os.path.join(rdir, n)) for n in sorted(os.listdir(rdir))) if r]
        if not columns and records:
            columns = list(records[0]["axes"])
        df, _ = build_tables(records, columns)
    if not columns:
        columns = [c for c in df.columns if c not in ("run_id", "status", "error") and not c.startswith(("vm.", "host.", "fairness.")) and c != "events"]
    ok = df[df["status"] == "ok"]
    failed = df[df["status"] != "ok"]
    name = manifest.get("name") or os.path.basename(os.path.abspath(out_dir))
    parts = [f"<h2>Sweep: {html.escape(str(name))}</h2>"]
    axes_desc = ", ".join(f"<code>{html.escape(c)}</code> ({_count(df[c].nunique(), 'value')})" for c in columns)
    meta = (
        f'<p class="meta">{_count(len(df), "run")} ({len(ok)} ok, {len(failed)} failed'
        + (f", {manifest['runs'] - len(df)} not run yet" if manifest.get("runs", len(df)) > len(df) else "")
        + f"); axes: {axes_desc}.{{how}}</p>"
    )
    parts.append(meta)  # completed below, once the plots' kind is known
    if len(failed):
        rows = [[r["run_id"], ", ".join(f"{c}={r[c]}" for c in columns), r["error"]] for _, r in failed.head(20).iterrows()]
        parts.append("<h3>Failed runs</h3>" + _table(["run", "axes", "error"], rows, left=3))
    if ok.empty:
        parts[1] = meta.replace("{how}", "")
        parts.append("<p>No successful runs to plot.</p>")
        return "\n".join(parts)

    varying = [c for c in columns if c != "seed" and ok[c].nunique() > 1]
    numeric = [c for c in varying if _is_numeric(ok[c])]
    x = numeric[0] if numeric else (varying[0] if varying else None)
    hue: list[str] = []
    if x is not None:
        for c in varying:
            if c == x:
                continue
            if ok.groupby(x)[c].nunique().max() <= 1:  # moves with x (a zip partner): not a line of its own
                continue
            hue.append(c)
        hue.sort(key=lambda c: _is_numeric(ok[c]))  # non-numeric axes (scheduler.name) first
    metrics = _sweep_metrics(ok)
    by = ([x] if x else []) + hue
    agg = stats.aggregate(ok, by, metrics)
    nseeds = int(ok.groupby(by).size().max()) if by else len(ok)
    plots = []
    if x is None:
        how = " Means over seeds with their 95% confidence intervals (Student t)."
    elif _is_numeric(ok[x]):
        how = " Points are means over seeds; the shaded bands around the lines are 95% confidence intervals (Student t)."
    else:
        how = " Bars are means over seeds; their error bars are 95% confidence intervals (Student t)."
    parts[1] = meta.replace("{how}", how)
    if x is None:
        rows = []
        for m in metrics:
            e = stats.mean_ci(ok[m])
            rows.append([m, unit_of(m, ok), e.mean, e.lo, e.hi, e.n])
        parts.append(_table(["metric", "unit", "mean", "95% CI low", "95% CI high", "runs"], rows, left=2))
        return "\n".join(parts)
    for m in metrics:
        plots.append(_line_plot(agg, ok, x, hue, m, nseeds))
    parts.append('<div class="grid">' + "".join(plots) + "</div>")
    # The numbers behind the plots.
    rows = []
    for _, r in agg.iterrows():
        for m in metrics[:4]:
            rows.append([*(r[c] for c in by), m, r[f"{m}.mean"], r[f"{m}.ci_lo"], r[f"{m}.ci_hi"], r[f"{m}.n"]])
    parts.append(f"<details><summary>Table: means and 95% CIs of the first {min(4, len(metrics))} metrics</summary>"
                 + _table([*by, "metric", "mean", "CI low", "CI high", "seeds"], rows, left=len(by) + 1) + "</details>")
    return "\n".join(parts)


def _sweep_metrics(ok: Any) -> list[str]:
    vms = []
    for c in ok.columns:
        if c.startswith("vm.") and c.endswith(".cpu_share"):
            vms.append(c[3 : -len(".cpu_share")])
    out = []
    for vm in vms:
        for leaf in ("latency_ms.p99", "latency_ms.mean", "throughput", "cpu_share", "wait_time_s", "steal_pct.mean",
                     "steal_pct.p95", "ple.exits", "ple.streaks.median"):
            c = f"vm.{vm}.{leaf}"
            if c in ok and ok[c].notna().any():
                out.append(c)
    out += [c for c in ("host.utilization", "fairness.jain_vm", "host.migrations.total") if c in ok and ok[c].notna().any()]
    return out


def _line_plot(agg: Any, ok: Any, x: str, hue: list[str], metric: str, nseeds: int) -> str:
    """Mean vs a numeric axis with a 95% CI band per line; for a non-numeric axis, grouped
    bars with 95% CI error bars."""
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    groups = list(agg.groupby(hue, sort=True, dropna=False)) if hue else [((), agg)]
    groups = groups[:MAX_LINES]
    numeric_x = _is_numeric(ok[x])
    cats = list(dict.fromkeys(agg[x])) if not numeric_x else []
    width = 0.8 / max(1, len(groups))
    for gi, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(x)
        if len(hue) == 1:
            label = str(key[0])
        else:
            label = ", ".join(f"{describe_column(h)[0]}={k}" for h, k in zip(hue, key)) if hue else "all runs"
        mean = g[f"{metric}.mean"].astype(float)
        lo, hi = g[f"{metric}.ci_lo"].astype(float), g[f"{metric}.ci_hi"].astype(float)
        if numeric_x:
            xs = list(g[x])
            line = ax.plot(xs, mean, marker="o", ms=4, lw=1.6, label=label)[0]
            if lo.notna().any():
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.18, lw=0)
        else:
            xs = [cats.index(v) + (gi - (len(groups) - 1) / 2) * width for v in g[x]]
            err = [(mean - lo).fillna(0).clip(lower=0), (hi - mean).fillna(0).clip(lower=0)]
            ax.bar(xs, mean, width=width, yerr=err, capsize=3, label=label, alpha=0.85)
    if not numeric_x:
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([str(c) for c in cats])
    name, unit = describe_column(metric, ok)
    x_name = describe_column(x, ok)[0]
    # Long names wrap rather than run off the figure.
    ax.set_title(textwrap.fill(f"{name}{f' ({unit})' if unit else ''} {'vs' if numeric_x else 'by'} {x_name}", 70))
    ax.set_xlabel(_label(x, ok))
    ax.set_ylabel(textwrap.fill(_label(metric, ok), 40))
    ax.legend(title=", ".join(describe_column(h, ok)[0] for h in hue) if hue else None, fontsize=8, title_fontsize=8)
    how = "bands: 95% CI" if numeric_x else "error bars: 95% CI"
    what = "point" if numeric_x else "bar"
    return _figure(fig, f"mean of up to {_count(nseeds, 'seed')} per {what}; {how}; column {metric}")


# ----------------------------------------------------------------------------- run


def _run_section(out_dir: str) -> str:
    plt = _mpl()
    with open(os.path.join(out_dir, "summary.json"), encoding="utf-8") as f:
        s = json.load(f)
    vms = s["vms"]
    names = [v["name"] for v in vms]
    measured = s["duration_s"] - s.get("warmup_s", 0)
    parts = [
        f"<h2>Run: {html.escape(str(s.get('scenario')))}</h2>",
        f'<p class="meta">scheduler <code>{html.escape(str(s.get("scheduler")))}</code>, seed {s.get("seed")}, '
        f"{s['host']['pcpus']} pCPUs, {measured:g} s measured (after {s.get('warmup_s', 0):g} s warm-up), "
        f"{s.get('events')} events; host utilization {100 * s['host']['utilization']:.1f}%, "
        f"Jain fairness over VMs {s['fairness']['jain_vm']:.3f}.</p>",
    ]
    plots = []
    # CPU share per VM.
    fig, ax = plt.subplots(figsize=(6.4, 1.6 + 0.4 * len(vms)))
    shares = [100 * v["cpu_share"] for v in vms]
    bars = ax.barh(names, shares, color="#4C72B0", label="CPU share")
    ax.bar_label(bars, labels=[f"{x:.1f}%" for x in shares], padding=3, fontsize=8)
    ax.set_xlim(0, max(100.0, max(shares)) * 1.12)
    ax.invert_yaxis()
    ax.set_title("CPU share per VM")
    ax.set_xlabel("share of host CPU time (%)")
    plots.append(_figure(fig, legend_below=True, caption="pCPU time held by each VM's vCPUs over the measured interval (the summary has no time series)"))
    # Where each VM's vCPU time went.
    fig, ax = plt.subplots(figsize=(6.4, 1.6 + 0.4 * len(vms)))
    left = [0.0] * len(vms)
    for key, label, color in (("cpu_time_s", "running", "#4C72B0"), ("wait_time_s", "waiting (runnable)", "#DD8452"),
                              ("halted_time_s", "halted", "#BBBBBB")):
        vals = [v[key] for v in vms]
        ax.barh(names, vals, left=left, label=label, color=color)
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_title("vCPU time per VM: running, waiting, halted")
    ax.set_xlabel("vCPU-seconds (s)")
    plots.append(_figure(fig, legend_below=True, caption="summed over each VM's vCPUs; waiting = runnable but not running (steal time)"))
    # Steal time per window, as the guest's /proc/stat shows it.
    steal = [(v["name"], v["steal_pct"]) for v in vms if (v.get("steal_pct") or {}).get("windows")]
    if steal:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for name, st in steal:
            ends = steal_window_ends(s, st)
            # Each window's steal drawn over the window it covers (a step per window).
            xs = [s.get("warmup_s", 0)] + ends
            ys = st["windows"] + st["windows"][-1:]
            ax.step(xs, ys, where="post", label=f"{name} (mean {st['mean']:.1f}%, p95 {st['p95']:.1f}%)")
        ax.set_ylim(0, max(5.0, max(max(st["windows"]) for _, st in steal) * 1.15))
        ax.set_title("Steal time per VM (as the guest's /proc/stat shows it)")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylabel("steal (% of the VM's vCPU time)")
        ax.legend(fontsize=8)
        plots.append(_figure(fig, f"per {steal[0][1]['window_s']:g} s window: time the VM's vCPUs were runnable but "
                                  "not running on the host, over vCPUs x window (KVM's run_delay)"))
    # Latency.
    lat = [(v["name"], v["latency_ms"]) for v in vms if v.get("latency_ms")]
    if lat:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        qs = ["mean", "p50", "p90", "p99", "max"]
        width = 0.8 / len(lat)
        for i, (name, l) in enumerate(lat):
            xs = [j + (i - (len(lat) - 1) / 2) * width for j in range(len(qs))]
            ax.bar(xs, [l.get(q) or 0 for q in qs], width=width, label=f"{name} ({l.get('count', 0)} requests)")
        ax.set_xticks(range(len(qs)))
        ax.set_xticklabels(qs)
        ax.set_title("Request latency per VM")
        ax.set_xlabel("statistic")
        ax.set_ylabel("latency (ms)")
        ax.legend(fontsize=8)
        plots.append(_figure(fig, "arrival to response; percentiles within 0.8% (log-linear histogram)"))
    # PLE streaks (scenarios with [kvm]).
    ple = [(v["name"], v["ple"]) for v in vms if v.get("ple") and v["ple"]["streaks"]["cdf"]]
    if ple:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for name, p in ple:
            cdf = p["streaks"]["cdf"]
            ax.step([c[0] for c in cdf], [c[1] for c in cdf], where="post",
                    label=f"{name} ({p['exits']} exits, median streak {p['streaks']['median']})")
        ax.axvline(53, color="#999", ls="--", lw=1, label="53 exits")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_title("PLE exit streaks: CDF")
        ax.set_xlabel("streak length (consecutive PLE exits of a vCPU, log scale)")
        ax.set_ylabel("fraction of PLE exits in streaks up to this length")
        ax.legend(fontsize=8)
        plots.append(_figure(fig, "a streak continues while a vCPU PLE-exits again the next time it runs"))
    # Migrations by distance.
    mig = s["host"]["migrations"]
    kinds = ["smt_sibling", "same_socket", "other_socket", "other_numa"]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    per_vm = {v["name"]: [sum(c["migrations"].get(k, 0) for c in v["vcpus"]) for k in kinds] for v in vms}
    bottom = [0] * len(kinds)
    for name, counts in per_vm.items():
        ax.bar(kinds, counts, bottom=bottom, label=name)
        bottom = [a + b for a, b in zip(bottom, counts)]
    if not any(bottom):
        ax.set_ylim(0, 1)
        ax.text(1.5, 0.5, "no migrations in this run", ha="center", va="center", color="#555")
    ax.set_title(f"vCPU migrations by distance (total {mig.get('total', 0)})")
    ax.set_xlabel("distance between the old and the new pCPU")
    ax.set_ylabel("migrations (count)")
    ax.legend(fontsize=8, title="VM", title_fontsize=8)
    plots.append(_figure(fig, "stacked by VM"))
    parts.append('<div class="grid">' + "".join(plots) + "</div>")
    rows = []
    for v in vms:
        l = v.get("latency_ms") or {}
        st = v.get("steal_pct") or {}
        rows.append([v["name"], v["vcpu_count"], v["cpu_share"], v["cpu_time_s"], v["wait_time_s"], v["halted_time_s"],
                     v["spin_time_s"], st.get("mean"), st.get("p95"), v.get("throughput"), v.get("throughput_unit") or "",
                     l.get("p99")])
    parts.append(_table(["VM", "vCPUs", "CPU share", "CPU s", "wait s", "halted s", "spin s", "steal %", "steal p95 %",
                         "throughput", "unit", "p99 ms"], rows, left=1))
    return "\n".join(parts)


# ----------------------------------------------------------------------- reproduce


VERDICTS = ("fails", "undecided", "holds")  # the order claims are listed in


def _num(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.4g}" if isinstance(v, float) else html.escape(str(v))


def _verdict_badge(verdict: str) -> str:
    v = str(verdict)
    label = {"fails": "FAILS", "holds": "holds", "undecided": "undecided"}.get(v, v)
    return f'<span class="verdict v-{html.escape(v)}">{html.escape(label)}</span>'


def _claims_table(claims: Sequence[dict[str, Any]]) -> str:
    heads = ["experiment", "claim", "text", "verdict", "value [95% CI]", "threshold", "seeds", "source"]
    th = "".join(f'<th class="{"l" if h in ("experiment", "claim", "text", "verdict", "source") else ""}">'
                 f"{html.escape(h)}</th>" for h in heads)
    body = []
    for c in claims:
        lo, hi = c.get("ci_low"), c.get("ci_high")
        value = _num(c.get("value"))
        if lo is not None or hi is not None:
            value += f" [{_num(lo)}, {_num(hi)}]"
        op = re.search(r"\]\s*(<=|>=|<|>)\s*\S+\s*$", str(c.get("detail", "")))
        thr = (html.escape(op.group(1)) + " " if op else "vs ") + _num(c.get("threshold"))
        detail = html.escape(str(c.get("detail", "")))
        premise = c.get("premise")
        text = html.escape(str(c.get("text", "")))
        if premise:
            text += f'<br><span class="meta">premise: {html.escape(str(premise))}</span>'
        body.append(
            f'<tr class="v-row-{html.escape(str(c.get("verdict")))}">'
            f'<td class="l">{html.escape(str(c.get("experiment", "")))}</td>'
            f'<td class="l"><code>{html.escape(str(c.get("claim", "")))}</code></td>'
            f'<td class="l">{text}</td><td class="l">{_verdict_badge(c.get("verdict", ""))}</td>'
            f'<td class="n" title="{detail}">{value}</td><td class="n">{thr}</td><td>{_num(c.get("seeds"))}</td>'
            f'<td class="l">{html.escape(str(c.get("source", "")))}</td></tr>'
        )
    return f'<table class="claims"><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _claims_block(claims: Sequence[dict[str, Any]]) -> str:
    """The claims' verdicts: a summary line, the failed and undecided claims, then the
    holding ones (collapsed)."""
    n = {v: sum(1 for c in claims if c.get("verdict") == v) for v in VERDICTS}
    parts = [
        '<section id="claims"><h3>Claims</h3>',
        f'<p class="claims-summary"><b>{len(claims)} claims:</b> '
        f'{_verdict_badge("holds")} {n["holds"]} hold, {_verdict_badge("fails")} {n["fails"]} fail, '
        f'{_verdict_badge("undecided")} {n["undecided"]} undecided</p>',
        '<p class="meta">A claim holds when its whole 95% bootstrap interval over the seeds is on the '
        "claim's side of the threshold, fails when it is wholly on the other side, and is undecided when "
        "it straddles the threshold. A failed claim is a finding about the model, not an error.</p>",
    ]
    open_ = [c for c in claims if c.get("verdict") != "holds"]
    open_.sort(key=lambda c: VERDICTS.index(c["verdict"]) if c.get("verdict") in VERDICTS else len(VERDICTS))
    if open_:
        parts.append(f"<h4>Failed and undecided ({len(open_)})</h4>")
        parts.append(_claims_table(open_))
    holding = [c for c in claims if c.get("verdict") == "holds"]
    if holding:
        parts.append(f"<details><summary>Holding claims ({len(holding)})</summary>"
                     f"{_claims_table(holding)}</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _bar_data(er: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """What a reproduction bar chart draws: the paper's and vcpulab's bars, and for each
    simulated bar with a 95% interval the whisker (x index, ci_low, ci_high)."""
    whiskers = []
    for i, r in enumerate(er):
        lo, hi = r.get("ci_low"), r.get("ci_high")
        if lo is not None and hi is not None and r.get("sim") is not None:
            whiskers.append((i, float(lo), float(hi)))
    return {
        "cases": [r["case"] for r in er],
        "paper": [r["paper"] if r.get("paper") is not None else 0 for r in er],
        "sim": [r["sim"] if r.get("sim") is not None else 0 for r in er],
        "whiskers": whiskers,
    }


def _reproduce_section(out_dir: str) -> str:
    plt = _mpl()
    with open(os.path.join(out_dir, "reproduce.json"), encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):
        rows, exps, claims = doc, [], None
    else:
        rows, exps, claims = doc["rows"], doc.get("experiments", []), doc.get("claims")
    by_id = {e["id"]: e for e in exps}
    order = list(dict.fromkeys(r["experiment"] for r in rows))
    parts = ["<h2>Reproductions: the paper's numbers beside vcpulab's</h2>"]
    if claims is not None:
        parts.append(_claims_block(claims))
    for exp_id in order:
        e = by_id.get(exp_id, {"id": exp_id, "title": exp_id})
        tol = e.get("tolerance")
        parts.append(f"<h3>{html.escape(exp_id)}: {html.escape(e.get('title', ''))}</h3>")
        if e.get("source"):
            parts.append(f'<p class="meta">source: {html.escape(e["source"])}</p>')
        if claims:
            mine = [c for c in claims if c.get("experiment") == exp_id]
            if mine:
                parts.append('<p class="meta">claims: ' + ", ".join(
                    f'<code>{html.escape(str(c.get("claim", "")))}</code> {_verdict_badge(c.get("verdict", ""))}'
                    for c in mine) + "</p>")
        exp_rows = [r for r in rows if r["experiment"] == exp_id]
        for metric in dict.fromkeys(r.get("metric", "") for r in exp_rows):  # one chart per metric
            er = [r for r in exp_rows if r.get("metric", "") == metric]
            unit = er[0].get("unit", "")
            d = _bar_data(er)
            fig, ax = plt.subplots(figsize=(10, 4.2))
            xs = list(range(len(d["cases"])))
            ax.bar([x - 0.2 for x in xs], d["paper"], width=0.4, label="paper", color="#999999")
            ax.bar([x + 0.2 for x in xs], d["sim"], width=0.4, label="vcpulab", color="#4C72B0")
            if d["whiskers"]:
                wx = [i + 0.2 for i, _, _ in d["whiskers"]]
                mid = [(lo + hi) / 2 for _, lo, hi in d["whiskers"]]
                half = [(hi - lo) / 2 for _, lo, hi in d["whiskers"]]
                ax.errorbar(wx, mid, yerr=half, fmt="none", ecolor="#1a1a1a", elinewidth=1.2, capsize=4,
                            label="vcpulab 95% CI")
            ax.set_xticks(xs)
            ax.set_xticklabels(d["cases"], rotation=30, ha="right", fontsize=8)
            human = _experiment_metric_name(e, metric)
            ax.set_title(textwrap.fill(f"{exp_id}: {human}, paper vs vcpulab", 90))
            ax.set_ylabel(textwrap.fill(f"{human} ({unit})" if unit else human, 45))
            ax.set_xlabel("case")
            caption = f"{len(er)} cases; metric {metric}"
            if d["whiskers"]:
                n_ci = len(d["whiskers"])
                caption += ("; whiskers: 95% bootstrap CI of vcpulab's mean over seeds"
                            + ("" if n_ci == len(er) else f" ({n_ci} of {len(er)} bars have one)"))
            else:
                caption += "; no confidence intervals in this reproduce.json"
            if tol is not None:
                caption += f"; tolerance {100 * tol:g}%"
            parts.append(_figure(fig, caption, legend_below=True))
            has_ci = any("ci_low" in r for r in er)
            has_regimes = any(r.get("regimes") for r in er)
            trs = []
            for r in er:
                ratio = r.get("ratio")
                within = "" if tol is None or ratio is None else ("yes" if abs(ratio - 1) <= tol else "NO")
                row = [r["case"], r["paper"], r["sim"]]
                if has_ci:
                    row += [r.get("ci_low"), r.get("ci_high"), r.get("seeds")]
                row += [ratio, within]
                if has_regimes:
                    row.append((r.get("regimes") or {}).get("text", ""))
                trs.append(row)
            heads = ["case", f"paper ({unit})", f"vcpulab ({unit})"]
            if has_ci:
                heads += ["95% CI low", "95% CI high", "seeds"]
            heads += ["ratio", "within tolerance"]
            if has_regimes:
                heads.append("regimes (seeds split)")
            parts.append(_table(heads, trs))
    return "\n".join(parts)


# ---------------------------------------------------------------------------- page


def render(out_dir: str) -> str:
    """The report page (HTML text) for ``out_dir``."""
    if not os.path.isdir(out_dir):
        raise ScenarioError(f"{out_dir}: not a folder")
    sections = []
    if os.path.exists(os.path.join(out_dir, "runs.parquet")) or os.path.isdir(os.path.join(out_dir, "runs")):
        sections.append(_sweep_section(out_dir))
    if os.path.exists(os.path.join(out_dir, "summary.json")):
        sections.append(_run_section(out_dir))
    if os.path.exists(os.path.join(out_dir, "reproduce.json")):
        sections.append(_reproduce_section(out_dir))
    if not sections:
        raise ScenarioError(
            f"{out_dir}: nothing to report: expected a sweep's results (runs.parquet), a run's --out folder "
            "(summary.json) or a `reproduce --out` folder (reproduce.json)"
        )
    from . import __version__

    title = f"vcpulab report: {os.path.basename(os.path.abspath(out_dir))}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>"
        f'<p class="meta">vcpulab {html.escape(__version__)}; folder <code>{html.escape(os.path.abspath(out_dir))}</code></p>\n'
        + "\n".join(sections)
        + f"\n<script>{PAGE_SCRIPT}</script>\n</body></html>\n"
    )


def write_report(out_dir: str, output: Optional[str] = None) -> str:
    """Writes ``report.html`` (or ``output``) for ``out_dir``; returns its path."""
    from ._files import atomic_write_text

    page = render(out_dir)
    path = output or os.path.join(out_dir, "report.html")
    atomic_write_text(path, page)
    return path
