"""`vcpulab import-trace`: host scheduling traces of vCPU threads in (perf sched script text,
Perfetto protobuf), a scenario replaying their demand out, and the real/simulated
comparison (`--compare`). tests/data/README.md says how the committed traces were made."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from vcpulab import api, cli
from vcpulab import realtrace as rt

DATA = Path(__file__).resolve().parents[1] / "data"
PERF = DATA / "kvm-wake-busy3.perf.txt"
PFTRACE = DATA / "kvm-wake-busy3.pftrace"


def run_cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def perf_line(comm: str, pid: int, cpu: int, t_ns: int, event: str, rest: str) -> str:
    s, ns = divmod(t_ns, 1_000_000_000)
    return f"{comm:>16} {pid:>6} [{cpu:03d}] {s}.{ns:09d}: {event:>30}: {rest}"


def switch(cpu: int, t_ns: int, prev: tuple[str, int], state: str, nxt: tuple[str, int]) -> str:
    return perf_line(prev[0], prev[1], cpu, t_ns, "sched:sched_switch",
                     f"prev_comm={prev[0]} prev_pid={prev[1]} prev_prio=120 prev_state={state} ==> "
                     f"next_comm={nxt[0]} next_pid={nxt[1]} next_prio=120")


def waking(cpu: int, t_ns: int, by: tuple[str, int], who: tuple[str, int]) -> str:
    return perf_line(by[0], by[1], cpu, t_ns, "sched:sched_waking",
                     f"comm={who[0]} pid={who[1]} prio=120 target_cpu={cpu:03d}")


IDLE = ("swapper/0", 0)
V0 = ("vcpu0", 101)
BUSY = ("rustc", 200)
T0 = 1_000_000_000_000  # the trace's clock does not start at 0


def lone_vcpu_trace() -> str:
    """vcpu0 alone on CPU 0 of two: runs 2 ms, sleeps 3 ms, runs 1 ms, sleeps 4 ms, runs
    0.5 ms, sleeps; no other task. The replay must give the same slices, no waits."""
    ms = 1_000_000
    lines, t = [], T0
    for run, sleep in ((2, 3), (1, 4), (0.5, 2)):
        lines.append(waking(1, t, IDLE, V0))
        lines.append(switch(0, t, IDLE, "R", V0))
        t += int(run * ms)
        lines.append(switch(0, t, V0, "S", IDLE))
        t += int(sleep * ms)
    lines.append(perf_line("swapper/1", 0, 1, t, "sched:sched_stat_runtime", "comm=x pid=1 runtime=1 [ns]"))
    lines.append(waking(1, t, IDLE, ("kworker/1:1", 33)))  # the trace goes on after vcpu0's last event
    return "\n".join(lines) + "\n"


def test_ks_distance_is_0_on_identical_samples_and_1_on_disjoint_ones():
    xs = [5, 1, 3, 3, 9]
    assert rt.ks_distance(xs, list(reversed(xs))) == 0.0
    assert rt.ks_distance([1, 2, 3], [10, 20]) == 1.0
    assert rt.ks_distance([1, 2, 3, 4], [3, 4, 5, 6]) == 0.5
    assert math.isnan(rt.ks_distance([], [1]))
    assert rt.count_distance(0, 0) == 0.0 and rt.count_distance(4, 1) == 0.75
    same = rt.Row(0, "vcpu0", xs, xs, xs, xs, 3, 3)
    apart = rt.Row(0, "vcpu0", [1, 2], [100, 200], [1], [9], 0, 5)
    assert rt.realism([same]) == 1.0
    assert rt.realism([apart]) == 0.0
    assert rt.realism([same, apart]) == 0.5


def test_a_lone_thread_is_replayed_slice_for_slice(tmp_path):
    """No contention: the simulated vCPU runs exactly the recorded bursts, at the recorded
    times, so every distance is 0 and the score 1."""
    path = tmp_path / "lone.txt"
    path.write_text(lone_vcpu_trace())
    events = rt.read_events(str(path))
    (tl,) = rt.timelines(events, path=str(path))
    assert tl.comm == "vcpu0" and tl.cpus == {0}
    assert tl.demand == [("compute", 2_000_000), ("sleep", 3_000_000), ("compute", 1_000_000),
                         ("sleep", 4_000_000), ("compute", 500_000)]
    assert tl.run_lengths == [2_000_000, 1_000_000, 500_000] and tl.waits == [0, 0, 0]
    out = tmp_path / "lone.toml"
    out.write_text(rt.scenario_text([tl], source=str(path), cpus=rt.host_cpus(events),
                                    end=max(e.t_ns for e in events)))
    assert api.validate(str(out))["pcpus"] == 2
    from vcpulab.tracing import trace

    (sim,) = rt.sim_timelines(trace(str(out)).events())
    # The model's only addition: the 2 us context switch (docs/scenarios.md) the pCPU pays
    # when it first switches to the vCPU, which delays what follows by as much.
    switch = 2_000
    assert sim.run_lengths == [2_000_000 + switch, 1_000_000, 500_000]
    assert [s for s, _, _ in sim.slices] == [0, 5_000_000 + switch, 10_000_000 + switch]
    assert sim.waits == [0, 0, 0] and sim.migrations == 0
    rows = rt.compare([tl], [sim])
    assert [(r.d_wait, r.d_mig) for r in rows] == [(0.0, 0.0)]
    assert rows[0].d_run == pytest.approx(1 / 3)  # the first slice, 2 us longer


def test_the_recorded_perf_trace_is_parsed():
    events = rt.read_events(str(PERF))
    tls = rt.timelines(events)
    assert [t.comm for t in tls] == ["vcpu0", "vcpu1", "vcpu2", "vcpu3"]
    assert rt.host_cpus(events) == 2
    # wake-busy3-nice19: vcpu0 (nice 19) halts and is woken 1-3 ms later, but it waited
    # longer than that for a CPU each time, so it found its wake-up already there and
    # blocked only once (tests/data/README.md); vcpus 1-3 compute without a break after
    # the harness's start-up.
    assert [(t.comm, len(t.slices), len(t.waits), t.migrations, sorted(t.cpus), t.prio) for t in tls] == [
        ("vcpu0", 43, 43, 1, [0, 1], 139), ("vcpu1", 252, 252, 0, [0], 120), ("vcpu2", 243, 243, 0, [0], 120),
        ("vcpu3", 194, 194, 1, [0, 1], 120)]
    assert rt.vcpu_slots(tls) == [("traced-nice19", 0), ("traced-nice0", 0), ("traced-nice0", 1),
                                  ("traced-nice0", 2)]
    assert (rt.nice_weight(120), rt.nice_weight(139), rt.nice_weight(100), rt.nice_weight(50)) == (
        1024, 15, 65535, None)
    assert tls[0].demand == [("compute", 464_514), ("sleep", 35_838_226), ("compute", 1_398_471)]
    assert tls[1].demand == [("compute", 140_020), ("sleep", 202_343), ("compute", 1_682), ("sleep", 240_395),
                             ("compute", 87_684_112)]
    # The run slices and the CPU time agree: the last burst's slices plus the one cut off
    # at the end of the trace.
    for t in tls:
        assert sum(t.run_lengths) <= t.cpu_ns


def test_the_perfetto_trace_holds_the_same_events_as_the_perf_text():
    """The committed .pftrace was converted from the committed perf text through the
    perfetto package's protos (tests/data/README.md): reading it back gives the same
    scheduling events."""
    assert rt.read_events(str(PFTRACE)) == rt.read_events(str(PERF))


def test_to_perfetto_writes_what_reads_back(tmp_path, capsys):
    path = tmp_path / "lone.txt"
    path.write_text(lone_vcpu_trace())
    out = tmp_path / "lone.pftrace"
    code, _, err = run_cli(capsys, "import-trace", path, "--to-perfetto", out)
    assert code == 0, err
    assert f"wrote {out}: 10 scheduling events" in err  # 3 x (waking, 2 switches) + the last waking
    assert rt.read_events(str(out)) == rt.read_events(str(path))


def test_compact_sched_bundles_are_read():
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    trace = pb.Trace()
    b = trace.packet.add().ftrace_events
    b.cpu = 1
    c = b.compact_sched
    c.intern_table.extend(["swapper/1", "vcpu0"])
    # switch to vcpu0 at 1000, back to idle (vcpu0 sleeps) at 3000; vcpu0 woken at 500
    c.switch_timestamp.extend([1000, 2000])
    c.switch_next_pid.extend([101, 0])
    c.switch_next_comm_index.extend([1, 0])
    c.switch_next_prio.extend([120, 120])
    c.switch_prev_state.extend([0, 1])
    c.waking_timestamp.extend([500])
    c.waking_pid.extend([101])
    c.waking_comm_index.extend([1])
    c.waking_target_cpu.extend([1])
    c.waking_prio.extend([120])
    events = rt.read_perfetto("x.pftrace", trace.SerializeToString())
    assert [(e.t_ns, e.kind, e.prev_pid, e.next_pid) for e in events] == [
        (500, "waking", 0, 0), (1000, "switch", -1, 101), (3000, "switch", 101, 0)]
    (tl,) = rt.timelines(events)
    assert (tl.comm, tl.waits, tl.slices, tl.demand) == ("vcpu0", [500], [(1000, 3000, 1)], [("compute", 2000)])


def test_import_trace_writes_a_scenario_that_runs_and_compare_prints_the_table(tmp_path, capsys):
    out = tmp_path / "replay.toml"
    code, stdout, err = run_cli(capsys, "import-trace", PERF, "--out", out, "--compare")
    assert code == 0, err
    assert f"wrote {out}: 4 vCPU(s) (vcpu0, vcpu1, vcpu2, vcpu3), 2 pCPU(s)" in err
    lines = stdout.splitlines()
    assert lines[0].split()[:3] == ["run-queue", "wait", "p50/p95"]
    assert lines[1].split() == ["vcpu", "thread", "real", "sim", "KS", "real", "sim", "KS", "real", "sim", "d"]
    assert [ln.split()[1] for ln in lines[2:6]] == ["vcpu0", "vcpu1", "vcpu2", "vcpu3"]
    # The real side is fixed by the committed trace: vcpu1's waits and slices, migrations.
    assert lines[3].split()[2] == "214us/4.0ms" and lines[3].split()[5] == "167us/572us"
    assert [ln.split()[8] for ln in lines[2:6]] == ["1", "0", "0", "1"]
    assert lines[-1].startswith("realism score ")
    assert 0.0 <= float(lines[-1].split()[2]) <= 1.0
    assert max(len(ln) for ln in lines) <= 100
    s = api.run(str(out)).summary
    # vcpu0 ran at nice 19 (prio 139), the others at nice 0: a VM each, weighted by the
    # kernel's load weights.
    assert [(vm["name"], vm["vcpu_count"], vm["weight"]) for vm in s["vms"]] == [
        ("traced-nice19", 1, 15), ("traced-nice0", 3, 1024)]
    # The other tasks' CPU time is replayed on each CPU by a pinned host thread.
    assert [t["name"] for t in s["host_threads"]] == ["others-cpu0", "others-cpu1"]
    assert all(t["cpu_time_s"] > 0.01 for t in s["host_threads"])
    # vcpu1 and vcpu2 ran only on CPU 0 in the trace: --affinity seen keeps them there.
    assert [v["migrations"]["total"] for v in s["vms"][1]["vcpus"]][:2] == [0, 0]


def test_others_none_leaves_the_other_tasks_out_and_affinity_all_frees_the_vcpus(tmp_path, capsys):
    out = tmp_path / "replay.toml"
    code, _, err = run_cli(capsys, "import-trace", PERF, "--out", out, "--others", "none", "--affinity", "all")
    assert code == 0, err
    text = out.read_text()
    assert "[[host_thread]]" not in text
    assert [ln for ln in text.splitlines() if ln.startswith("affinity")] == [
        'affinity = ["0-1"]', 'affinity = ["0-1", "0-1", "0-1"]']


def test_a_bad_scheduler_is_refused_naming_its_key_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "replay.toml"
    code, _, err = run_cli(capsys, "import-trace", PERF, "--out", out, "--scheduler", "cfs-typo")
    assert code == 2
    assert "scheduler.name" in err and "cfs-typo" in err and "nothing written" in err, err
    assert "Traceback" not in err
    assert not out.exists()


def test_others_per_task_replays_each_other_task_with_its_nice_level(tmp_path, capsys):
    out = tmp_path / "replay.toml"
    code, _, err = run_cli(capsys, "import-trace", PERF, "--out", out, "--others", "per-task")
    assert code == 0, err
    s = api.validate(str(out))
    assert s["pcpus"] == 2
    text = out.read_text()
    # rustc ran at nice 10 (prio 130) in the trace: weight 110; the harness's python at 0.
    i = text.index("'rustc' (prio 130)")
    assert "weight = 110" in text[i:i + 400]
    assert "others-cpu" not in text


def test_a_malformed_trace_is_refused_naming_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    good = lone_vcpu_trace().splitlines()
    good[2] = good[2].replace("prev_state=", "prev_stat=")
    bad.write_text("\n".join(good) + "\n")
    code, _, err = run_cli(capsys, "import-trace", bad, "--out", tmp_path / "x.toml")
    assert code == 2
    assert f"{bad}:3: sched_switch fields not understood" in err
    assert "Traceback" not in err
    bad.write_text(good[0] + "\nthis is not perf output\n")
    code, _, err = run_cli(capsys, "import-trace", bad, "--out", tmp_path / "x.toml")
    assert code == 2 and f"{bad}:2: not a `perf sched script` line" in err
    bad.write_bytes(b"\x0a\xff\xff\xff\xff")
    code, _, err = run_cli(capsys, "import-trace", bad, "--out", tmp_path / "x.toml")
    assert code == 2 and f"{bad}: not a Perfetto protobuf trace" in err
    code, _, err = run_cli(capsys, "import-trace", PERF, "--threads", "qemu.*", "--out", tmp_path / "x.toml")
    assert code == 2 and "no thread's name matches --threads 'qemu.*'" in err and "vcpu1" in err


def test_perf_short_form_and_preempted_states_are_read(tmp_path):
    """Older perf prints sched_switch as `comm:pid [prio] STATE ==> comm:pid [prio]`; "R+"
    (preempted in the kernel) is runnable like "R", "D" blocked like "S"."""
    path = tmp_path / "short.txt"
    path.write_text("\n".join([
        perf_line("swapper/0", 0, 0, 1_000, "sched:sched_switch", "swapper/0:0 [120] R ==> vcpu0:7 [139]"),
        perf_line("vcpu0", 7, 0, 3_000, "sched:sched_switch", "vcpu0:7 [139] R+ ==> cc1 plus:9 [120]"),
        perf_line("cc1 plus", 9, 0, 4_000, "sched:sched_switch", "cc1 plus:9 [120] D ==> vcpu0:7 [139]"),
        perf_line("vcpu0", 7, 0, 9_000, "sched:sched_switch", "vcpu0:7 [139] S ==> swapper/0:0 [120]"),
        perf_line("cc1 plus", 9, 1, 10_000, "sched:sched_wakeup", "cc1 plus:9 [120] success=1 CPU:001"),
    ]) + "\n")
    events = rt.read_events(str(path))
    assert [(e.kind, e.prev_runnable, e.next_comm) for e in events[:3]] == [
        ("switch", True, "vcpu0"), ("switch", True, "cc1 plus"), ("switch", False, "vcpu0")]
    assert events[4].comm == "cc1 plus" and events[4].pid == 9
    (tl,) = rt.timelines(events)
    assert (tl.prio, tl.slices, tl.waits, tl.demand) == (139, [(1_000, 3_000, 0), (4_000, 9_000, 0)], [1_000],
                                                         [("compute", 7_000)])
    assert rt.other_load(events, [tl]) == {0: [(3_000, 4_000)]}
