"""Perfetto protobuf traces (`trace --format perfetto`, `run --trace X.pftrace`), read back
with the `perfetto` package's own protos and compared with the Chrome JSON of the same run."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

from conftest import run_cli

# PLE exits and directed yields (an overcommitted VM spinning on a ticket lock, [kvm]
# PLE on) and IPIs (a TLB-shootdown-like `ipi` op), so every instant kind and both kinds
# of flow occur in a 30 ms run.
SCENARIO = """\
name = "perfetto-check"
duration = "30ms"
seed = 5
[host]
cores_per_socket = 2
[scheduler]
name = "cfs"
[kvm]
ple = true
[[vm]]
name = "locks"
vcpus = 4
[[vm.workload]]
kind = "program"
threads = 4
ops = [
  { op = "compute", duration = { dist = "exp", mean = "20us" } },
  { op = "lock", lock = "l", kind = "ticket", hold = "5us" },
  { op = "ipi", targets = [0, 1] },
  { op = "sleep", duration = "30us" },
]
[[vm]]
name = "hog"
vcpus = 2
[[vm.workload]]
kind = "stress-ng"
threads = 2
"""


def read_pftrace(path):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

    from vcpulab.pftrace import read

    trace = read(path.read_bytes())
    names: dict[int, str] = {}
    ann_names: dict[int, str] = {}
    tracks: dict[int, tuple[str, int]] = {}
    events = []
    for p in trace.packet:
        if p.HasField("interned_data"):
            names.update({n.iid: n.name for n in p.interned_data.event_names})
            ann_names.update({n.iid: n.name for n in p.interned_data.debug_annotation_names})
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = (d.name, d.parent_uuid)
        if p.HasField("track_event"):
            e = p.track_event
            kind = {TrackEvent.TYPE_SLICE_BEGIN: "B", TrackEvent.TYPE_SLICE_END: "E",
                    TrackEvent.TYPE_INSTANT: "i"}[e.type]
            ann = {}
            for a in e.debug_annotations:
                ann[ann_names[a.name_iid]] = a.string_value if a.HasField("string_value") else a.uint_value
            events.append({
                "ts": p.timestamp, "kind": kind, "track": e.track_uuid,
                "name": names.get(e.name_iid) if e.name_iid else None, "ann": ann,
                "flows": list(e.flow_ids), "ends": list(e.terminating_flow_ids),
            })
    return tracks, events


def test_perfetto_trace_reads_back_as_the_json_trace(tmp_path):
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    pf, js = tmp_path / "t.pftrace", tmp_path / "t.json"
    res = run_cli("trace", str(sc), "--out", str(pf))  # format from the extension
    assert res.returncode == 0, res.stderr
    assert "(Perfetto)" in res.stderr
    assert run_cli("trace", str(sc), "--format", "json", "--out", str(js)).returncode == 0
    chrome = json.loads(js.read_text())["traceEvents"]
    tracks, events = read_pftrace(pf)

    # Tracks: two groups, a pCPU track per pCPU and a track per vCPU, named as in the JSON.
    groups = {name: uuid for uuid, (name, parent) in tracks.items() if parent == 0}
    assert set(groups) == {"pCPUs", "vCPUs"}
    meta = {(e["pid"], e["tid"]): e["args"]["name"] for e in chrome if e.get("ph") == "M" and e["name"] == "thread_name"}
    cpu_tracks = {uuid: name for uuid, (name, parent) in tracks.items() if parent == groups["pCPUs"]}
    task_tracks = {uuid: name for uuid, (name, parent) in tracks.items() if parent == groups["vCPUs"]}
    assert sorted(cpu_tracks.values()) == sorted(n for (pid, _), n in meta.items() if pid == 0) == [
        "pCPU 0", "pCPU 1"]
    assert sorted(task_tracks.values()) == sorted(n for (pid, _), n in meta.items() if pid == 1)
    # 6 vCPUs and the two pCPUs' housekeeping threads (the default host noise)
    assert len(task_tracks) == 6 + 2
    assert sorted(n for n in task_tracks.values() if n.startswith("kthread-")) == ["kthread-0", "kthread-1"]

    # Slices: per pCPU the same count, names and total time as the JSON's; begins and ends pair up.
    by_uuid_name = {name: uuid for uuid, name in cpu_tracks.items()}
    want = defaultdict(Counter)
    want_ns = defaultdict(int)
    for e in chrome:
        if e.get("ph") == "X":
            want[by_uuid_name[f"pCPU {e['tid']}"]][e["name"]] += 1
            want_ns[by_uuid_name[f"pCPU {e['tid']}"]] += round(e["dur"] * 1000)
    got = defaultdict(Counter)
    got_ns = defaultdict(int)
    open_at: dict[int, int] = {}
    for e in events:
        if e["kind"] == "B":
            assert e["track"] not in open_at, "a pCPU runs one thing at a time"
            open_at[e["track"]] = e["ts"]
            got[e["track"]][e["name"]] += 1
        elif e["kind"] == "E":
            got_ns[e["track"]] += e["ts"] - open_at.pop(e["track"])
    assert not open_at
    assert sum(sum(c.values()) for c in got.values()) == sum(1 for e in chrome if e.get("ph") == "X") > 100
    assert got == want and got_ns == want_ns

    # Instants: the JSON's, on the same tracks; plus one flow end per ipi and yield_to.
    instants = Counter(e["name"] for e in events if e["kind"] == "i")
    chrome_instants = Counter(e["name"] for e in chrome if e.get("ph") == "i")
    for kind in ("wake", "halt", "preempted", "ipi", "ple_exit", "yield_to"):
        assert chrome_instants[kind] > 0, kind
    assert instants["ipi_received"] == chrome_instants["ipi"]
    assert instants["boosted"] == chrome_instants["yield_to"]
    del instants["ipi_received"], instants["boosted"]
    assert instants == chrome_instants
    assert all(task_tracks.get(e["track"]) for e in events if e["kind"] == "i")

    # Flows: from the sender's ipi/yield_to instant to an instant on the target's track.
    starts = {f: e for e in events for f in e["flows"]}
    ends = {f: e for e in events for f in e["ends"]}
    assert starts.keys() == ends.keys() and len(starts) == chrome_instants["ipi"] + chrome_instants["yield_to"]
    for f, s in starts.items():
        t = ends[f]
        assert s["name"] in ("ipi", "yield_to") and s["ts"] == t["ts"]
        assert task_tracks[t["track"]] == s["ann"]["target"]
        assert t["name"] == {"ipi": "ipi_received", "yield_to": "boosted"}[s["name"]]
    # timestamps never go back (the trace is sorted), and instants say where they ran
    assert all(a["ts"] <= b["ts"] for a, b in zip(events, events[1:]))
    assert any("cpu" in e["ann"] for e in events if e["name"] == "halt")


def test_run_trace_picks_the_format_and_bad_formats_are_refused(tmp_path):
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    pf = tmp_path / "out" / "run.pftrace"
    a = run_cli("run", str(sc), "--json", "--trace", str(pf))
    assert a.returncode == 0, a.stderr
    assert a.stdout == run_cli("run", str(sc), "--json").stdout  # tracing changes nothing
    tracks, events = read_pftrace(pf)
    assert len(tracks) == 2 + 2 + 6 + 2 and any(e["kind"] == "B" for e in events)
    # --trace-format overrides the extension; the JSON stays the default for .json
    forced = tmp_path / "forced.json"
    assert run_cli("run", str(sc), "--trace", str(forced), "--trace-format", "perfetto").returncode == 0
    assert read_pftrace(forced)[0] == tracks
    plain = tmp_path / "plain.json"
    assert run_cli("run", str(sc), "--trace", str(plain)).returncode == 0
    assert json.loads(plain.read_text())["traceEvents"]
    for args in (["trace", str(sc), "--out", str(tmp_path / "x"), "--format", "protobuf"],
                 ["run", str(sc), "--trace", str(tmp_path / "x"), "--trace-format", "pb"]):
        res = run_cli(*args)
        assert res.returncode == 2, res.stderr
        assert "invalid choice" in res.stderr and "'json', 'perfetto'" in res.stderr
        assert "Traceback" not in res.stderr


def test_trace_save_names_the_allowed_formats(tmp_path):
    import vcpulab

    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO.replace('"30ms"', '"10ms"'))
    tr = vcpulab.trace(str(sc))
    with pytest.raises(ValueError, match="unknown trace format 'xml'; allowed: json, perfetto"):
        tr.save(str(tmp_path / "t.xml"), format="xml")
    assert tr.save(str(tmp_path / "t.perfetto-trace")) == "perfetto"
    assert tr.save(str(tmp_path / "t.trace")) == "json"
