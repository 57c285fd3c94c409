"""Perfetto's protobuf trace format (``.pftrace``) from a run's trace, written with the
``perfetto`` package's protos and its streaming builder (no binary needed to write).

The core records a trace once, as Chrome JSON (see :mod:`vcpulab.tracing`); this module
translates those records, so both formats carry the same slices and instants:

- a track group "pCPUs" with a track per pCPU; each stretch a vCPU or host thread ran
  there is a slice named ``<vm>/vcpu<i>`` (or the host thread's name);
- a track group "vCPUs" with a track per vCPU and per host thread; each instant the core
  records for it (wake, halt, preempted, migrate, ipi, ple_exit, yield_to, and a
  user-space PLE handler's sched_yield, nice_boost, migrate_boost and boost_end) is an
  instant event there, with debug annotations ``cpu`` (the pCPU it happened on),
  ``from_cpu`` (migrate) and ``target`` (ipi, yield_to, nice_boost, migrate_boost);
- a flow (an arrow in the UI) from each ``ipi``, ``yield_to``, ``nice_boost`` and ``migrate_boost`` instant to an instant on
  the target's track at the same time, named ``ipi_received`` or ``boosted``: those two
  names exist only in this format, the Chrome JSON carries the target as ``args.other``.

Timestamps are nanoseconds of simulated time. Event and annotation names are interned
(sent once), which is most of the size saving over Chrome JSON.
"""

from __future__ import annotations

from typing import IO, Any, Optional

#: Extensions that select the Perfetto format when no format is given.
PERFETTO_EXTENSIONS = (".pftrace", ".perfetto-trace", ".perfetto")
FORMATS = ("json", "perfetto")

_SEQ = 1  # one writer, one packet sequence
# Track uuids: the two group tracks, then one per pCPU, then one per task.
_PCPU_GROUP, _TASK_GROUP, _FIRST_TRACK = 1, 2, 16
# Order of records at one timestamp: a slice ends before the next one on the same pCPU
# begins; a flow's start before its end.
_END, _BEGIN, _INSTANT, _RECEIVED = 0, 1, 2, 3
_FLOW_TARGET_NAMES = {"ipi": "ipi_received", "yield_to": "boosted", "nice_boost": "boosted", "migrate_boost": "boosted"}


def format_for(path: str, fmt: Optional[str] = None) -> str:
    """The trace format to write ``path`` in: ``fmt`` if given (``json`` or ``perfetto``),
    else ``perfetto`` for a ``.pftrace`` (or ``.perfetto-trace``) file and ``json``
    otherwise."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown trace format {fmt!r}; allowed: {', '.join(FORMATS)}")
        return fmt
    return "perfetto" if path.lower().endswith(PERFETTO_EXTENSIONS) else "json"


def _ns(us: float) -> int:
    return round(us * 1000)


def write(events: list[dict[str, Any]], out: IO[bytes]) -> dict[str, int]:
    """Writes Chrome JSON trace events as a Perfetto trace to the binary stream ``out``;
    returns counts (slices, instants, flows) for the caller's report."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackDescriptor, TrackEvent
    from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

    cpu_names: dict[int, str] = {}
    task_names: dict[int, str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            (cpu_names if e["pid"] == 0 else task_names)[e["tid"]] = e["args"]["name"]
    ncpus = max(cpu_names, default=-1) + 1
    cpu_track = {c: _FIRST_TRACK + c for c in cpu_names}
    task_track = {t: _FIRST_TRACK + ncpus + t for t in task_names}

    names: dict[str, int] = {}

    def iid(name: str) -> int:
        i = names.get(name)
        if i is None:
            i = names[name] = len(names) + 1
        return i

    ann_names = {"cpu": 1, "from_cpu": 2, "target": 3}
    # (ts, order, index, fields): sorted by time, then by order (a slice ends before the
    # next begins; a flow starts before it ends), then by the core's order.
    recs: list[tuple[int, int, int, tuple[Any, ...]]] = []
    counts = {"slices": 0, "instants": 0, "flows": 0}
    flow_id = 0
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            start = _ns(e["ts"])
            end = start + _ns(e["dur"])
            track = cpu_track[e["tid"]]
            recs.append((start, _BEGIN, len(recs), (track, iid(e["name"]))))
            recs.append((end, _END, len(recs), (track,)))
            counts["slices"] += 1
        elif ph == "i":
            t = _ns(e["ts"])
            args = e.get("args", {})
            name = e["name"]
            ann: list[tuple[int, Any]] = []
            if "cpu" in args:
                ann.append((ann_names["cpu"], args["cpu"]))
            other = args.get("other")
            flow = None
            if other is not None:
                if name == "migrate":
                    ann.append((ann_names["from_cpu"], other))
                elif name in _FLOW_TARGET_NAMES and other in task_track:
                    ann.append((ann_names["target"], task_names[other]))
                    flow_id += 1
                    flow = flow_id
                    recs.append((t, _RECEIVED, len(recs),
                                 (task_track[other], iid(_FLOW_TARGET_NAMES[name]), (), None, flow)))
                    counts["flows"] += 1
            recs.append((t, _INSTANT, len(recs), (task_track[e["tid"]], iid(name), ann, flow, None)))
            counts["instants"] += 1
    recs.sort(key=lambda r: (r[0], r[1], r[2]))

    builder = StreamingTraceProtoBuilder(out)
    first = TracePacket()
    first.trusted_packet_sequence_id = _SEQ
    first.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    for name, i in names.items():
        first.interned_data.event_names.add(iid=i, name=name)
    for name, i in ann_names.items():
        first.interned_data.debug_annotation_names.add(iid=i, name=name)
    builder.write_packet(first)

    def track(uuid: int, name: str, parent: Optional[int], rank: int, ordered_children: bool) -> None:
        p = TracePacket()
        p.trusted_packet_sequence_id = _SEQ
        d = p.track_descriptor
        d.uuid = uuid
        d.name = name
        if parent is not None:
            d.parent_uuid = parent
            d.sibling_order_rank = rank
        if ordered_children:
            d.child_ordering = TrackDescriptor.EXPLICIT
        builder.write_packet(p)

    track(_PCPU_GROUP, "pCPUs", None, 0, True)
    track(_TASK_GROUP, "vCPUs", None, 0, True)
    for c in sorted(cpu_names):
        track(cpu_track[c], cpu_names[c], _PCPU_GROUP, c, False)
    for t in sorted(task_names):
        track(task_track[t], task_names[t], _TASK_GROUP, t, False)

    needs_state = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    for ts, order, _, f in recs:
        p = TracePacket()
        p.timestamp = ts
        p.trusted_packet_sequence_id = _SEQ
        p.sequence_flags = needs_state
        ev = p.track_event
        ev.track_uuid = f[0]
        if order == _END:
            ev.type = TrackEvent.TYPE_SLICE_END
        elif order == _BEGIN:
            ev.type = TrackEvent.TYPE_SLICE_BEGIN
            ev.name_iid = f[1]
        else:
            ev.type = TrackEvent.TYPE_INSTANT
            ev.name_iid = f[1]
            for name_iid, value in f[2]:
                a = ev.debug_annotations.add(name_iid=name_iid)
                if isinstance(value, str):
                    a.string_value = value
                else:
                    a.uint_value = value
            if f[3] is not None:
                ev.flow_ids.append(f[3])
            if f[4] is not None:
                ev.terminating_flow_ids.append(f[4])
        builder.write_packet(p)
    return counts


def read(data: bytes) -> Any:
    """Parses a Perfetto trace with the package's own protos (no trace processor binary):
    the ``Trace`` message, whose ``packet`` list holds the track descriptors and events."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    t = Trace()
    t.ParseFromString(data)
    return t
