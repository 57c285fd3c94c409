"""Host scheduling traces of real vCPU threads: read them, replay them, compare with the model.

``vcpulab import-trace`` is built from this module:

1. :func:`read_events` reads a host scheduling trace into :class:`SchedEvent` records:
   ``perf sched script`` text (:func:`read_perf_script`) or a Perfetto protobuf trace
   with ftrace ``sched_switch`` / ``sched_waking`` / ``sched_wakeup`` events
   (:func:`read_perfetto`, through the protos the ``perfetto`` package ships).
2. :func:`timelines` follows the threads whose name matches a regex through the trace
   (running, runnable, blocked) and gives each a :class:`Timeline`: its run slices, its
   run-queue waits, and its *demand*: the CPU time it used between a wake-up and the
   next block, and how long it then slept.
3. :func:`scenario_text` writes a scenario whose vCPUs replay that demand: one
   ``program`` workload per vCPU made of ``compute`` (the CPU time of one burst) and
   ``sleep`` (the time to the next wake-up) operations, so the simulated host scheduler
   decides, as the real one did, when each burst runs and where.
4. :func:`compare` runs the scenario with tracing on, measures the simulated vCPUs the
   same way (:func:`sim_timelines`) and sets real against simulated: run-queue waits and
   run-slice lengths as distributions (two-sample Kolmogorov-Smirnov distance), and
   migrations as counts; :func:`realism` folds them into one score.

Only the scheduling events are read; what a thread did while it ran is not in such a
trace, so the demand is CPU time, not guest operations.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Sequence

__all__ = [
    "DEFAULT_THREADS",
    "NICE_0_WEIGHT",
    "Row",
    "SchedEvent",
    "Timeline",
    "TraceFormatError",
    "compare",
    "count_distance",
    "format_table",
    "host_cpus",
    "ks_distance",
    "nice_weight",
    "other_load",
    "other_timelines",
    "perfetto_bytes",
    "read_events",
    "read_perf_script",
    "read_perfetto",
    "realism",
    "scenario_text",
    "sim_timelines",
    "timelines",
    "vcpu_slots",
]

# vcpulab's KVM harness names its vCPU threads `vcpuN`; QEMU names them `CPU N/KVM`.
DEFAULT_THREADS = r"^(vcpu\d+|CPU \d+/KVM)$"

# The kernel's sched_switch prev_state when the task left the CPU still runnable: "R" or
# "R+" in text; as a number 0, or with only a flag above the state bits when preempted
# (TASK_REPORT_MAX, 0x100, since Linux 4.14; TASK_STATE_MAX before), while a task that
# blocked has a state bit in the low byte (include/trace/events/sched.h,
# __trace_sched_switch_state).
_STATE_BITS = 0xFF


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file (and line)."""


@dataclass(frozen=True)
class SchedEvent:
    """One scheduling event. ``kind``: ``"switch"`` (``prev_*`` left ``cpu``, ``next_*``
    took it; ``prev_runnable``: the previous task stayed runnable, i.e. was preempted) or
    ``"waking"`` (``pid`` was woken)."""

    t_ns: int
    cpu: int
    kind: str
    pid: int = 0
    comm: str = ""
    prev_pid: int = 0
    prev_comm: str = ""
    prev_runnable: bool = False
    next_pid: int = 0
    next_comm: str = ""
    # The kernel's prio (100..139 = nice -20..19 for normal tasks; below 100 real-time):
    # of ``pid`` for a wake-up, of the two tasks for a switch.
    prio: int = 120
    prev_prio: int = 120
    next_prio: int = 120


# ---------------------------------------------------------------------------------------
# perf sched script text


_HEAD = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)(?:/\d+)?\s+\[(?P<cpu>\d+)\]\s+(?:[^\s:]+\s+)?"
    r"(?P<ts>\d+\.\d+):\s+(?:(?P<period>\d+)\s+)?(?P<event>[\w:]+):\s*(?P<rest>.*)$"
)
# `perf sched script` prints the tracepoints' own format (field=value); older perf
# versions print a short form (`comm:pid [prio] S ==> comm:pid [prio]`).
_SWITCH = re.compile(
    r"^prev_comm=(?P<pc>.*?) prev_pid=(?P<pp>-?\d+) prev_prio=(?P<pr>-?\d+) prev_state=(?P<ps>\S+) ==> "
    r"next_comm=(?P<nc>.*?) next_pid=(?P<np>-?\d+) next_prio=(?P<nr>-?\d+)\s*$"
)
_SWITCH_SHORT = re.compile(
    r"^(?P<pc>.*?):(?P<pp>-?\d+) \[(?P<pr>-?\d+)\] (?P<ps>\S+) ==> (?P<nc>.*?):(?P<np>-?\d+) \[(?P<nr>-?\d+)\]\s*$"
)
_WAKE = re.compile(r"^comm=(?P<c>.*?) pid=(?P<p>-?\d+) prio=(?P<r>-?\d+)")
_WAKE_SHORT = re.compile(r"^(?P<c>.*?):(?P<p>-?\d+) \[(?P<r>-?\d+)\]")
_WAKE_EVENTS = ("sched:sched_waking", "sched:sched_wakeup", "sched:sched_wakeup_new")


def _runnable_text(state: str) -> bool:
    # "R" preempted, "R+" preempted in the kernel (TASK_REPORT_MAX); anything else (S, D,
    # I, T, X, Z, combinations like "D|K") left the run queue.
    return state in ("R", "R+")


def read_perf_script(path: str, text: Optional[str] = None) -> list[SchedEvent]:
    """Reads ``perf sched script`` output (``perf script`` of ``perf sched record``). Lines
    of other events (``sched_stat_runtime``, ``sched_migrate_task``, ...) are skipped;
    a line that is not a perf script line at all, or a scheduling event whose fields do
    not parse, is an error naming the file and line."""
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    out: list[SchedEvent] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _HEAD.match(line)
        if m is None:
            raise TraceFormatError(
                f"{path}:{no}: not a `perf sched script` line (expected 'COMM PID [CPU] SECONDS: EVENT: FIELDS'): "
                f"{_clip(line)!r}"
            )
        event = m["event"]
        t_ns = _seconds_to_ns(m["ts"])
        cpu = int(m["cpu"])
        rest = m["rest"]
        if event == "sched:sched_switch":
            s = _SWITCH.match(rest) or _SWITCH_SHORT.match(rest)
            if s is None:
                raise TraceFormatError(
                    f"{path}:{no}: sched_switch fields not understood (expected prev_comm= prev_pid= prev_prio= "
                    f"prev_state= ==> next_comm= next_pid= next_prio=): {_clip(rest)!r}"
                )
            out.append(SchedEvent(t_ns, cpu, "switch", prev_pid=int(s["pp"]), prev_comm=s["pc"],
                                  prev_runnable=_runnable_text(s["ps"]), next_pid=int(s["np"]),
                                  next_comm=s["nc"], prev_prio=int(s["pr"]), next_prio=int(s["nr"])))
        elif event in _WAKE_EVENTS:
            s = _WAKE.match(rest) or _WAKE_SHORT.match(rest)
            if s is None:
                raise TraceFormatError(
                    f"{path}:{no}: {event.split(':')[1]} fields not understood (expected comm= pid= prio=): "
                    f"{_clip(rest)!r}"
                )
            out.append(SchedEvent(t_ns, cpu, "waking", pid=int(s["p"]), comm=s["c"], prio=int(s["r"])))
    if not out:
        raise TraceFormatError(
            f"{path}: no sched_switch or sched_waking events (record with `perf sched record`, "
            "then `perf sched script -i FILE.data > FILE.txt`)"
        )
    return out


def _seconds_to_ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9])


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


# ---------------------------------------------------------------------------------------
# Perfetto protobuf


def _perfetto_trace_class():
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    except ImportError as e:  # pragma: no cover - a dependency of vcpulab
        raise TraceFormatError(
            f"reading Perfetto traces needs the `perfetto` package (pip install perfetto): {e}"
        ) from None
    return pb


def read_perfetto(path: str, data: Optional[bytes] = None) -> list[SchedEvent]:
    """Reads a Perfetto protobuf trace: ftrace ``sched_switch``, ``sched_waking`` and
    ``sched_wakeup`` events, in the plain form and in the compact form (``compact_sched``,
    which traced writes when ``compact_sched.enabled`` is set)."""
    pb = _perfetto_trace_class()
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    trace = pb.Trace()
    try:
        trace.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError; its text says what was wrong
        raise TraceFormatError(f"{path}: not a Perfetto protobuf trace: {e}") from None
    out: list[SchedEvent] = []
    last_next: dict[int, tuple[int, str, int]] = {}  # compact_sched: per CPU, the task last switched to
    for n, packet in enumerate(trace.packet):
        if not packet.HasField("ftrace_events"):
            continue
        bundle = packet.ftrace_events
        cpu = bundle.cpu
        for ev in bundle.event:
            if ev.HasField("sched_switch"):
                s = ev.sched_switch
                out.append(SchedEvent(ev.timestamp, cpu, "switch", prev_pid=s.prev_pid, prev_comm=s.prev_comm,
                                      prev_runnable=(s.prev_state & _STATE_BITS) == 0, next_pid=s.next_pid,
                                      next_comm=s.next_comm, prev_prio=s.prev_prio, next_prio=s.next_prio))
            elif ev.HasField("sched_waking"):
                w = ev.sched_waking
                out.append(SchedEvent(ev.timestamp, cpu, "waking", pid=w.pid, comm=w.comm, prio=w.prio))
            elif ev.HasField("sched_wakeup"):
                w = ev.sched_wakeup
                out.append(SchedEvent(ev.timestamp, cpu, "waking", pid=w.pid, comm=w.comm, prio=w.prio))
        if bundle.HasField("compact_sched"):
            out.extend(_compact_events(path, n, cpu, bundle.compact_sched, last_next))
    if not out:
        raise TraceFormatError(
            f"{path}: no sched_switch or sched_waking events in this Perfetto trace (enable the ftrace "
            "events sched/sched_switch and sched/sched_waking)"
        )
    out.sort(key=lambda e: e.t_ns)
    return out


def _compact_events(path: str, packet: int, cpu: int, c, last_next: dict[int, tuple[int, str, int]]) -> Iterator[SchedEvent]:
    # compact_sched: timestamps are deltas; comms are indices into an intern table; the
    # previous task of a switch is the next task of the CPU's previous switch (in this
    # bundle or an earlier one), unknown (pid -1) for a CPU's first switch.
    table = list(c.intern_table)

    def comm(i: int) -> str:
        if not 0 <= i < len(table):
            raise TraceFormatError(f"{path}: packet {packet}: compact_sched comm index {i} outside its table")
        return table[i]

    t = 0
    for i, dt in enumerate(c.switch_timestamp):
        t += dt
        nxt, ncomm = c.switch_next_pid[i], comm(c.switch_next_comm_index[i])
        nprio = c.switch_next_prio[i] if i < len(c.switch_next_prio) else 120
        prev_pid, prev_comm, prev_prio = last_next.get(cpu, (-1, "", 120))
        yield SchedEvent(t, cpu, "switch", prev_pid=prev_pid, prev_comm=prev_comm,
                         prev_runnable=(c.switch_prev_state[i] & _STATE_BITS) == 0, next_pid=nxt, next_comm=ncomm,
                         prev_prio=prev_prio, next_prio=nprio)
        last_next[cpu] = (nxt, ncomm, nprio)
    t = 0
    for i, dt in enumerate(c.waking_timestamp):
        t += dt
        yield SchedEvent(t, cpu, "waking", pid=c.waking_pid[i], comm=comm(c.waking_comm_index[i]),
                         prio=c.waking_prio[i] if i < len(c.waking_prio) else 120)


def perfetto_bytes(events: Sequence[SchedEvent]) -> bytes:
    """A Perfetto protobuf trace holding ``events`` as plain ftrace sched_switch /
    sched_waking events (one bundle per CPU and run of events), written with the
    ``perfetto`` package's protos. Used to turn a ``perf sched script`` trace into a
    Perfetto one (``vcpulab import-trace X.txt --to-perfetto X.pftrace``); the result
    reads back through :func:`read_perfetto` (not checked here against Perfetto's own
    tools). ``prev_state`` is 0 (preempted) or 1 (TASK_INTERRUPTIBLE: blocked), the only
    distinction the events keep; ``success`` is 1 and ``target_cpu`` the CPU the
    wake-up was recorded on (perf's text has the target, but nothing here reads it)."""
    pb = _perfetto_trace_class()
    trace = pb.Trace()
    bundle = None
    for e in events:
        if bundle is None or bundle.cpu != e.cpu:
            packet = trace.packet.add()
            packet.trusted_packet_sequence_id = 1
            bundle = packet.ftrace_events
            bundle.cpu = e.cpu
        ev = bundle.event.add()
        ev.timestamp = e.t_ns
        if e.kind == "switch":
            ev.pid = e.prev_pid
            s = ev.sched_switch
            s.prev_comm, s.prev_pid, s.prev_prio = e.prev_comm, e.prev_pid, e.prev_prio
            s.prev_state = 0 if e.prev_runnable else 1  # TASK_INTERRUPTIBLE
            s.next_comm, s.next_pid, s.next_prio = e.next_comm, e.next_pid, e.next_prio
        else:
            w = ev.sched_waking
            w.comm, w.pid, w.prio, w.success, w.target_cpu = e.comm, e.pid, e.prio, 1, e.cpu
    return trace.SerializeToString()


def read_events(path: str) -> list[SchedEvent]:
    """Reads a trace file, Perfetto protobuf or ``perf sched script`` text (told apart by
    content: a text trace is UTF-8 lines, a Perfetto trace starts with a packet tag)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise TraceFormatError(f"{path}: empty file")
    if data[:1] == b"\x0a":  # field 1 (packet), length-delimited: a Perfetto Trace
        return read_perfetto(path, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceFormatError(
            f"{path}: neither `perf sched script` text nor a Perfetto protobuf trace "
            "(record with `perf sched record`, then `perf sched script -i FILE.data > FILE.txt`; "
            "`perf.data` itself is not read)"
        ) from None
    return read_perf_script(path, text)


# ---------------------------------------------------------------------------------------
# Following the threads


@dataclass
class Timeline:
    """One thread through a trace. Times are the trace's clock, in ns."""

    pid: int
    comm: str
    start: int = 0  # first event of the thread
    end: int = 0  # last event of the thread
    slices: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, cpu), complete ones
    waits: list[int] = field(default_factory=list)  # runnable -> running, ns
    demand: list[tuple[str, int]] = field(default_factory=list)  # ("compute" | "sleep", ns)
    cpus: set[int] = field(default_factory=set)
    prio: int = 120  # the prio of most of its events

    @property
    def migrations(self) -> int:
        return sum(1 for a, b in zip(self.slices, self.slices[1:]) if a[2] != b[2])

    @property
    def run_lengths(self) -> list[int]:
        return [e - s for s, e, _ in self.slices]

    @property
    def cpu_ns(self) -> int:
        return sum(n for k, n in self.demand if k == "compute")


def _push(demand: list[tuple[str, int]], kind: str, ns: int) -> None:
    if ns <= 0:
        return
    if demand and demand[-1][0] == kind:
        demand[-1] = (kind, demand[-1][1] + ns)
    else:
        demand.append((kind, ns))


def timelines(events: Sequence[SchedEvent], threads: str = DEFAULT_THREADS, path: str = "trace") -> list[Timeline]:
    """Follows every thread whose name (``comm``) fully matches the regex ``threads``.
    Each starts at its first event (a wake-up, or a switch onto a CPU) and ends at its
    last; a slice still running at the end of the trace is demand but not a slice (its
    length is cut off), as is one already running when the trace began. Ordered by the
    number in the thread's name (``vcpu3`` -> 3), then pid."""
    try:
        rx = re.compile(threads)
    except re.error as e:
        raise TraceFormatError(f"--threads {threads!r}: not a regular expression: {e}") from None
    names = _thread_names(events)
    # A thread renamed after it started (prctl) is known by its last name.
    wanted = {pid for pid, c in names.items() if pid > 0 and rx.fullmatch(c)}
    if not wanted:
        # The busiest names first: the threads meant are usually among them.
        count: dict[str, int] = {}
        for e in events:
            c = e.next_comm if e.kind == "switch" else e.comm
            count[c] = count.get(c, 0) + 1
        seen = sorted((c for c in count if not c.startswith("swapper")), key=lambda c: (-count[c], c))
        raise TraceFormatError(
            f"{path}: no thread's name matches --threads {threads!r}; the most active in the trace: "
            + ", ".join(seen[:12]) + (" ..." if len(seen) > 12 else "")
        )
    return _follow(events, wanted, names)


def _thread_names(events: Sequence[SchedEvent]) -> dict[int, str]:
    names: dict[int, str] = {}
    for e in events:
        if e.kind == "switch":
            names[e.prev_pid] = e.prev_comm
            names[e.next_pid] = e.next_comm
        else:
            names[e.pid] = e.comm
    return names


def other_timelines(events: Sequence[SchedEvent], tls: Sequence[Timeline]) -> list[Timeline]:
    """Every other task that ran in the trace (not one of ``tls``, not idle), followed as
    :func:`timelines` follows the vCPU threads, ordered by pid."""
    mine = {x.pid for x in tls}
    ran = {e.next_pid for e in events if e.kind == "switch"}
    wanted = {p for p in ran if p > 0 and p not in mine}
    return sorted(_follow(events, wanted, _thread_names(events)), key=lambda x: x.pid)


def _follow(events: Sequence[SchedEvent], wanted: set[int], names: dict[int, str]) -> list[Timeline]:
    # state: None unknown, "run", "ready", "blocked"
    st: dict[int, Optional[str]] = {p: None for p in wanted}
    since: dict[int, int] = {}
    run_cpu: dict[int, int] = {}
    acc: dict[int, int] = {p: 0 for p in wanted}
    tl: dict[int, Timeline] = {p: Timeline(p, names[p]) for p in wanted}
    begun: dict[int, bool] = {p: False for p in wanted}

    def begin(p: int, t: int) -> None:
        if not begun[p]:
            begun[p] = True
            tl[p].start = t
        tl[p].end = t

    prios: dict[int, dict[int, int]] = {p: {} for p in wanted}
    trace_end = 0
    for e in sorted(events, key=lambda e: e.t_ns):
        t = trace_end = e.t_ns
        if e.kind == "waking":
            p = e.pid
            if p not in wanted:
                continue
            prios[p][e.prio] = prios[p].get(e.prio, 0) + 1
            if st[p] == "blocked":
                _push(tl[p].demand, "sleep", t - since[p])
            if st[p] in (None, "blocked"):
                st[p], since[p] = "ready", t
                begin(p, t)
            continue
        p = e.prev_pid
        if p in wanted:
            prios[p][e.prev_prio] = prios[p].get(e.prev_prio, 0) + 1
            if st[p] == "run":
                acc[p] += t - since[p]
                tl[p].slices.append((since[p], t, run_cpu[p]))
            elif st[p] is None:
                # Running before the trace began: what it ran before is unknown.
                begin(p, t)
            tl[p].end = t
            if e.prev_runnable:
                st[p], since[p] = "ready", t
            else:
                _push(tl[p].demand, "compute", acc[p])
                acc[p] = 0
                st[p], since[p] = "blocked", t
        p = e.next_pid
        if p in wanted:
            if st[p] == "ready":
                tl[p].waits.append(t - since[p])
            begin(p, t)
            prios[p][e.next_prio] = prios[p].get(e.next_prio, 0) + 1
            st[p], since[p], run_cpu[p] = "run", t, e.cpu
            tl[p].cpus.add(e.cpu)
    result = []
    for p in wanted:
        if st[p] == "run":
            # Cut off by the end of the trace: the CPU time to it counts, the slice does not.
            acc[p] += trace_end - since[p]
            tl[p].end = trace_end
        _push(tl[p].demand, "compute", acc[p])
        if prios[p]:
            # The prio of most of its events: a harness that sets nice after the thread
            # starts, or resets it before it exits, shows another at the ends.
            tl[p].prio = max(prios[p], key=lambda pr: (prios[p][pr], -pr))
        result.append(tl[p])
    result.sort(key=lambda x: (_name_number(x.comm), x.pid))
    return result


def other_load(events: Sequence[SchedEvent], tls: Sequence[Timeline]) -> dict[int, list[tuple[int, int]]]:
    """Per CPU, the stretches ``(start, end)`` in which a task that is neither one of
    ``tls``'s threads nor the idle task (pid 0) ran: what the vCPU threads competed with.
    Before a CPU's first switch its occupant is unknown and taken as idle."""
    mine = {x.pid for x in tls}
    busy_since: dict[int, int] = {}
    out: dict[int, list[tuple[int, int]]] = {}
    for e in sorted(events, key=lambda e: e.t_ns):
        if e.kind != "switch":
            continue
        other = e.next_pid != 0 and e.next_pid not in mine
        if e.cpu in busy_since and not other:
            out.setdefault(e.cpu, []).append((busy_since.pop(e.cpu), e.t_ns))
        elif other and e.cpu not in busy_since:
            busy_since[e.cpu] = e.t_ns
    end = max(e.t_ns for e in events)
    for cpu, since in busy_since.items():
        out.setdefault(cpu, []).append((since, end))
    return out


# The kernel's load weight of each nice level, -20..19 (sched_prio_to_weight in
# kernel/sched/core.c; nice 0 = 1024, each level ~1.25x).
_NICE_WEIGHT = (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
    9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
    110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)


NICE_0_WEIGHT = 1024


def nice_weight(prio: int) -> Optional[int]:
    """A scenario ``weight`` for a kernel prio of a normal task (100..139 = nice -20..19):
    the kernel's load weight itself (nice 0 = 1024; weights are relative, and every VM
    and host thread of an imported scenario states its own), capped at the scenario's
    65535 (nice -20 and -19 only). None for a real-time prio."""
    if not 100 <= prio <= 139:
        return None
    return min(65_535, _NICE_WEIGHT[prio - 100])


def _name_number(comm: str) -> int:
    m = re.search(r"\d+", comm)
    return int(m.group()) if m else 1 << 30


def host_cpus(events: Sequence[SchedEvent]) -> int:
    """The host's CPU count as the trace shows it: one more than the highest CPU any event
    was recorded on (a trace does not carry the count itself; an idle CPU that recorded
    nothing is missed, hence ``--cpus``)."""
    return max(e.cpu for e in events) + 1


def _cpu_list(cpus: Iterable[int]) -> str:
    xs = sorted(set(cpus))
    parts, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(parts)


def _ns(n: int) -> str:
    return f"{n}ns"


def vcpu_slots(tls: Sequence[Timeline]) -> list[tuple[str, int]]:
    """Where each thread's vCPU goes: ``(vm name, vCPU index in it)``. One VM ``traced``
    when every thread has the same prio; otherwise a VM per prio (``traced-nice19``,
    ``traced-rt50``), in the order of the threads, since a weight is a VM's (the
    scenario has no per-vCPU weight)."""
    prios = []
    for x in tls:
        if x.prio not in prios:
            prios.append(x.prio)
    if len(prios) == 1:
        return [("traced", i) for i in range(len(tls))]
    count: dict[str, int] = {}
    out = []
    for x in tls:
        name = f"traced-nice{x.prio - 120}" if nice_weight(x.prio) is not None else f"traced-rt{x.prio}"
        out.append((name, count.get(name, 0)))
        count[name] = count.get(name, 0) + 1
    return out


def _weight(prio: int) -> int:
    return nice_weight(prio) or NICE_0_WEIGHT


def _program_lines(ops: Sequence[tuple[str, int]]) -> list[str]:
    return ["ops = ["] + [f'  {{ op = "{k}", duration = "{_ns(n)}" }},' for k, n in ops] + ["]"]


def scenario_text(
    tls: Sequence[Timeline],
    *,
    source: str,
    cpus: int,
    affinity: str = "seen",
    scheduler: str = "eevdf",
    threads: str = DEFAULT_THREADS,
    seed: int = 1,
    others: Optional[dict[int, list[tuple[int, int]]]] = None,
    other_threads: Sequence[Timeline] = (),
    end: Optional[int] = None,
) -> str:
    """A scenario (TOML) that replays the timelines' demand: a vCPU per thread, each
    running a program of the thread's bursts, in one VM, or one VM per nice level
    (:func:`vcpu_slots`) whose weight is that level's kernel load weight. Time 0 is the
    first event of any of the threads, and the run lasts to ``end`` (the trace's last
    event; default the threads' last); each program first sleeps until its thread's first
    event, and after its last burst sleeps past the end. ``affinity``: ``"seen"`` (the
    CPUs each thread ran on in the trace), ``"all"`` (every pCPU), or a cpu-list for
    every vCPU. ``others`` (:func:`other_load`): the other tasks' CPU time, replayed per
    CPU as a host thread pinned to it (busy stretches as compute, the gaps as sleeps), at
    nice 0; ``other_threads`` (:func:`other_timelines`): each other task replayed as a
    host thread of its own, with its own demand and nice level, like a vCPU."""
    t0 = min(x.start for x in tls)
    t1 = max([x.end for x in tls] + [end or 0])
    span = max(t1 - t0, 1_000)

    def aff_of(x: Timeline) -> str:
        if affinity == "all" or (affinity == "seen" and not x.cpus):
            return f"0-{cpus - 1}"
        return _cpu_list(x.cpus) if affinity == "seen" else affinity

    def replay(x: Timeline) -> list[tuple[str, int]]:
        ops = [("sleep", x.start - t0)] if x.start > t0 else []
        ops.extend(x.demand)
        ops.append(("sleep", span + 1_000_000_000))  # past the end: the program never loops
        return ops

    lines = [
        f"# Replays {len(tls)} thread(s) of {source} matching {threads}:",
        "# `vcpulab import-trace` wrote it. Each vCPU's program is its thread's demand: the CPU",
        "# time of each run burst (compute) and the time to its next wake-up (sleep).",
        "# Affinity: " + {"seen": "the CPUs each thread was seen running on.",
                          "all": "every pCPU."}.get(affinity, f"{affinity} (given)"),
        "# Weights: the kernel's load weight of each thread's nice level (nice 0 = 1024).",
        "# Other tasks: " + ("replayed per CPU by the host threads others-cpuN (their CPU time there)."
                             if others else "each replayed by a host thread task-PID (its own demand)."
                             if other_threads else "left out."),
        f"name = {_toml_str('trace ' + _basename(source))}",
        f"duration = \"{span}ns\"",
        f"seed = {seed}",
        "",
        "[host]",
        f"cores_per_socket = {cpus}",
        "",
        "# The recorded run lengths already hold the real host's interrupts, and its kernel",
        "# threads are in the trace (replayed as threads of their own with --others): the",
        "# model's default noise would count them twice.",
        "[host.noise]",
        "enabled = false",
        "",
        "[scheduler]",
        f"name = {_toml_str(scheduler)}",
    ]
    slots = vcpu_slots(tls)
    for vm in dict.fromkeys(name for name, _ in slots):
        members = [i for i, (name, _) in enumerate(slots) if name == vm]
        prio = tls[members[0]].prio
        lines += [
            "",
            "[[vm]]",
            f"name = {_toml_str(vm)}",
            f"vcpus = {len(members)}",
            f"weight = {_weight(prio)}" + ("" if nice_weight(prio) is not None
                                           else f"  # prio {prio} is real-time: no weight expresses it"),
            "affinity = [" + ", ".join(_toml_str(aff_of(tls[i])) for i in members) + "]",
        ]
        for i in members:
            x = tls[i]
            lines += [
                "",
                f"# vcpu {i}: thread {x.comm!r} (pid {x.pid}, prio {x.prio}), {x.cpu_ns / 1e6:.3f} ms of CPU in "
                f"{sum(1 for k, _ in x.demand if k == 'compute')} burst(s)",
                "[[vm.workload]]",
                'kind = "program"',
                "threads = 1",
                f"vcpus = [{slots[i][1]}]",
            ] + _program_lines(replay(x))
    for x in other_threads:
        if x.cpu_ns <= 0:
            continue
        lines += [
            "",
            f"# task {x.pid} {x.comm!r} (prio {x.prio}): {x.cpu_ns / 1e6:.3f} ms of CPU in "
            f"{sum(1 for k, _ in x.demand if k == 'compute')} burst(s)",
            "[[host_thread]]",
            f'name = "task-{x.pid}"',
            f"affinity = {_toml_str(aff_of(x))}",
            f"weight = {_weight(x.prio)}",
            "[host_thread.workload]",
            'kind = "program"',
        ] + _program_lines(replay(x))
    for cpu, stretches in sorted((others or {}).items()):
        ops = []
        at = t0
        for a, b in stretches:
            a, b = max(a, t0), min(b, t1)
            if b <= a:
                continue
            ops += [("sleep", a - at), ("compute", b - a)]
            at = b
        ops = [(k, n) for k, n in ops if n > 0]
        if not any(k == "compute" for k, _ in ops):
            continue
        ops.append(("sleep", span + 1_000_000_000))
        busy = sum(n for k, n in ops if k == "compute")
        lines += [
            "",
            f"# the other tasks on CPU {cpu}: {busy / 1e6:.3f} ms of CPU in "
            f"{sum(1 for k, _ in ops if k == 'compute')} stretch(es), as one task at nice 0",
            "[[host_thread]]",
            f'name = "others-cpu{cpu}"',
            f'affinity = "{cpu}"',
            f"weight = {NICE_0_WEIGHT}",
            "[host_thread.workload]",
            'kind = "program"',
        ] + _program_lines(ops)
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _basename(p: str) -> str:
    import os

    return os.path.basename(p)


# ---------------------------------------------------------------------------------------
# The simulated side, and the comparison


def sim_timelines(trace_events: Sequence[dict], slots: Optional[Sequence[tuple[str, int]]] = None) -> list[Timeline]:
    """The simulated vCPUs, measured as :func:`timelines` measures real threads, from a
    vcpulab trace's events (:meth:`vcpulab.tracing.Trace.events`): run slices (``X``
    events on the pCPU tracks), waits from a ``wake`` or ``preempted`` instant to the next
    slice (a ``halt`` ends a wait that led to no slice: zero-length runs leave none),
    migrations between consecutive slices. ``slots`` (:func:`vcpu_slots`) says which
    ``(vm, vcpu)`` is the i-th timeline; default: VM ``traced``'s vCPUs in order."""
    index = {slot: i for i, slot in enumerate(slots)} if slots is not None else None
    per: dict[int, list[tuple[int, int, str, int]]] = {}
    for e in trace_events:
        a = e.get("args") or {}
        if "vcpu" not in a or "vm" not in a:
            continue
        key = (a["vm"], int(a["vcpu"]))
        if index is None:
            if key[0] != "traced":
                continue
            v = key[1]
        elif key in index:
            v = index[key]
        else:
            continue
        if e.get("ph") == "X":
            s = round(e["ts"] * 1000)
            per.setdefault(v, []).append((s, 1, "run", round(e["dur"] * 1000) * 4096 + int(e["tid"])))
        elif e.get("ph") == "i" and e.get("name") in ("wake", "preempted", "halt"):
            per.setdefault(v, []).append((round(e["ts"] * 1000), 0, e["name"], 0))
    out = []
    for v in sorted(per):
        tl = Timeline(pid=v, comm=f"vcpu{v}")
        ready: Optional[int] = None
        for t, _, kind, x in sorted(per[v]):
            if kind == "wake":
                if ready is None:
                    ready = t
            elif kind == "preempted":
                ready = t
            elif kind == "halt":
                # A dispatch too short to leave a slice (a program's first op a sleep) ends
                # in a halt: the vCPU is no longer waiting.
                ready = None
            else:
                dur, cpu = divmod(x, 4096)
                if ready is not None:
                    tl.waits.append(t - ready)
                    ready = None
                tl.slices.append((t, t + dur, cpu))
                tl.cpus.add(cpu)
        out.append(tl)
    return out


def ks_distance(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the two
    empirical distribution functions, in [0, 1]; 0 for identical samples, 1 for samples
    that do not overlap. NaN if either is empty."""
    if not a or not b:
        return math.nan
    xs, ys = sorted(a), sorted(b)
    d = 0.0
    for v in sorted(set(xs) | set(ys)):
        fa = bisect.bisect_right(xs, v) / len(xs)
        fb = bisect.bisect_right(ys, v) / len(ys)
        d = max(d, abs(fa - fb))
    return d


def count_distance(a: int, b: int) -> float:
    """Distance of two counts in [0, 1]: |a - b| / max(a, b); 0 if both are 0."""
    return 0.0 if a == b else abs(a - b) / max(a, b)


@dataclass
class Row:
    vcpu: int
    thread: str
    wait_real: list[int]
    wait_sim: list[int]
    run_real: list[int]
    run_sim: list[int]
    mig_real: int
    mig_sim: int

    @property
    def d_wait(self) -> float:
        return ks_distance(self.wait_real, self.wait_sim)

    @property
    def d_run(self) -> float:
        return ks_distance(self.run_real, self.run_sim)

    @property
    def d_mig(self) -> float:
        return count_distance(self.mig_real, self.mig_sim)


def realism(rows: Sequence[Row]) -> float:
    """The overall realism score, in [0, 1] (1 = the simulated vCPUs are indistinguishable
    from the real threads by these measures): 1 minus the mean of every vCPU's three
    distances (KS of waits, KS of run slices, relative difference of migrations); a
    distance that cannot be computed (no sample on one side) counts as 1 unless both sides
    have none, when it is left out."""
    ds = []
    for r in rows:
        for d, a, b in ((r.d_wait, r.wait_real, r.wait_sim), (r.d_run, r.run_real, r.run_sim)):
            if math.isnan(d):
                if a or b:
                    ds.append(1.0)
            else:
                ds.append(d)
        ds.append(r.d_mig)
    return 1.0 - sum(ds) / len(ds) if ds else math.nan


def compare(real: Sequence[Timeline], sim: Sequence[Timeline]) -> list[Row]:
    """One row per real thread (vCPU i is the i-th thread)."""
    by = {s.pid: s for s in sim}
    rows = []
    for i, r in enumerate(real):
        s = by.get(i, Timeline(i, f"vcpu{i}"))
        rows.append(Row(i, r.comm, r.waits, s.waits, r.run_lengths, s.run_lengths, r.migrations, s.migrations))
    return rows


def _q(xs: Sequence[int], q: float) -> float:
    if not xs:
        return math.nan
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def _short_time(ns: float) -> str:
    """A duration in at most 5 characters: 23us, 2.7ms, 272ms, 1.4s."""
    if math.isnan(ns):
        return "-"
    us = ns / 1000
    if us < 1000:
        return f"{us:.0f}us"
    if us < 10_000:
        return f"{us / 1000:.1f}ms"
    if us < 1_000_000:
        return f"{us / 1000:.0f}ms"
    return f"{us / 1e6:.1f}s"


def format_table(rows: Sequence[Row], score: float) -> str:
    """The comparison as text, at most 100 columns: per vCPU the median and p95 of real and
    simulated run-queue waits and run slices with their KS distance, migrations with
    their relative difference; then the realism score."""
    def d(v: float) -> str:
        return "-" if math.isnan(v) else f"{v:.2f}"

    def pair(xs: Sequence[int]) -> str:
        return f"{_short_time(_q(xs, .5))}/{_short_time(_q(xs, .95))}"

    lines = [
        f"{'':<15} {'run-queue wait p50/p95':^29} {'run slice p50/p95':^29} {'migrations':^19}".rstrip(),
        f"{'vcpu':<4} {'thread':<10} {'real':>11} {'sim':>11} {'KS':>5} {'real':>11} {'sim':>11} {'KS':>5} "
        f"{'real':>6} {'sim':>6} {'d':>5}",
    ]
    for r in rows:
        lines.append(
            f"{r.vcpu:<4} {_clip(r.thread, 10):<10} {pair(r.wait_real):>11} {pair(r.wait_sim):>11} {d(r.d_wait):>5} "
            f"{pair(r.run_real):>11} {pair(r.run_sim):>11} {d(r.d_run):>5} "
            f"{r.mig_real:>6} {r.mig_sim:>6} {d(r.d_mig):>5}"
        )
    lines.append("KS: two-sample Kolmogorov-Smirnov distance; d: |real - sim| / max(real, sim)")
    lines.append(
        f"realism score {score:.2f} (1 - the mean of all distances above; 1 = indistinguishable)"
    )
    return "\n".join(lines)
