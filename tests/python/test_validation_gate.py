"""The validation gate (issue 27, part 6): the simulated side of every `vcpulab kvm compare`
case, run without /dev/kvm, against the real medians committed in vcpulab/kvm_reference.py
(measured on the reference machine, with date, kernel and load; the simulated side runs
on that machine's host profile). A row leaves its band when a model
change moves it: the barrier N=4 row moved 2,800x once and nothing noticed; this test is
what notices now."""

from __future__ import annotations

from typing import Any

from conftest import run_cli
from vcpulab import kvm_compare as kc
from vcpulab import kvm_reference as ref


def _out(rows: list[dict[str, Any]]) -> str:
    return "; ".join(f"{r['case']} {r['metric']}: sim/real {r['ratio']} outside {r['band']} ({r['why']})"
                     for r in rows if not r["in_band"])


def test_every_case_stays_in_its_documented_band():
    rows = kc.gate()
    assert [(r["case"], r["metric"]) for r in rows] == [(c, m) for c, m, *_ in ref.all_rows()]
    assert all(r["in_band"] for r in rows), _out(rows)
    # The 2x target (issue 27): how many rows meet it is part of the record, in both
    # directions; the held-out cases are counted apart. ple-migrate-steady left it in
    # session 30, with the simulated window of this Xeon's measured spin and the real side
    # re-measured (its band says why), and came back in session 32 with the world switch of
    # a vCPU switched out in the guest. irq-wake joined the rows within 2x in session 31, and
    # left the held-out ones: its wake-up cost is now calibrated on its own program.
    within = [(r["case"], r["metric"]) for r in rows if r["band"] == [0.5, 2.0] and not r["held_out"]]
    held = [(r["case"], r["metric"]) for r in rows if r["band"] == [0.5, 2.0] and r["held_out"]]
    assert (len(within), len(held)) == (31, 16), (within, held)
    assert sum(1 for r in rows if not r["held_out"]) == 31
    # The 30 rows: the first reference's, every one within 2x.
    first = {(c, m) for c, m, *_ in ref.ROWS} - {(r["case"], r["metric"]) for r in rows if r["held_out"]}
    assert len(first) == 30 and first <= set(within)


def test_the_user_space_ple_policies_order_as_on_real_kvm():
    """The family's shape (issue 27): the harness's none, yield, boost and migrate handlers,
    run by the simulator as the harness runs them (`[kvm] ple_handler`), rank as the real
    runs do, whole run and steady: boosting a vCPU to nice -20 costs more per op than a
    plain yield (the boosted vCPU, often not the lock holder, keeps its pCPU), pinning it
    to the spinner's pCPU more again, and no handler at all waits for the tick. Until
    session 32 the sim's boost was fix (b) of kvm_vcpu_on_spin and ranked below yield in
    the steady state, and its migrate (fix (c)) below boost. (boost-fifo keeps fix (b):
    real boost-fifo and boost are within 2 % of each other.)"""
    rows = {r["case"]: r for r in kc.gate(["ple-none", "ple-yield", "ple-boost", "ple-none-steady", "ple-yield-steady",
                                           "ple-boost-steady", "ple-migrate-steady"])}
    for fast, slow in (("ple-yield", "ple-boost"), ("ple-boost", "ple-none"),
                       ("ple-yield-steady", "ple-boost-steady"), ("ple-boost-steady", "ple-migrate-steady"),
                       ("ple-migrate-steady", "ple-none-steady")):
        assert rows[fast]["real"] < rows[slow]["real"], (fast, slow)
        assert rows[fast]["sim"] < rows[slow]["sim"], (fast, slow, rows[fast]["sim"], rows[slow]["sim"])


def test_a_simulated_barrier_round_waits_for_every_vcpu():
    """barrier N=4 on 2 pCPUs: a round needs every vCPU to have run, so it costs one to three
    4 ms ticks, never microseconds. The simulated side once sent its IPI to `"all"`, a TLB
    shootdown that skips vCPUs that have not run yet. The two vCPUs that ran first then
    looped freely for the first tick, giving 3 us per round on average (issue 27)."""
    sim, runs = kc.simulate(kc.select(["barrier-N4"])[0], "4ms")["ns_per_round"]
    assert sim is not None and 4e6 <= sim <= 12e6, runs
    assert len(runs) == len(kc.SIM_SEEDS) and all(r is not None and r >= 1e6 for r in runs), runs


def test_the_simulated_side_is_the_median_of_its_seeds():
    """Each row's `sim` is the median of the runs at `SIM_SEEDS`, which the row lists in
    their order; and the seeds do give different runs (else the median would be a seed's in
    disguise)."""
    rows = kc.gate(["ple-yield"])
    (r,) = rows
    assert len(r["sim_runs"]) == len(kc.SIM_SEEDS) == 5
    assert r["sim"] == sorted(r["sim_runs"])[2]
    assert len(set(r["sim_runs"])) == len(r["sim_runs"]), r["sim_runs"]
    one, runs = kc.simulate(kc.select(["ple-yield"])[0], ref.TICK, ref.PROFILE, seeds=(1,))["ns_per_op"]
    assert runs == [r["sim_runs"][0]] and one == runs[0]


def test_the_wake_cases_simulate_the_harness_closed_loop():
    """The harness asks for a vCPU's next wake-up when the vCPU halts, a draw of the case's
    io latency later (harness.rs, `schedule_wake`): one wake-up at a time, so none waits
    behind another. The simulated side must be the same loop, one client whose next request
    comes that draw after the last response, not an open stream of requests at the gap's
    mean rate, under which a starved vCPU's requests queue and the latency counts the queue
    (the wake-busy7-nice19 row was within 2x that way until session 24)."""
    sched = kc._eevdf_sched(ref.TICK, ref.PROFILE, ref.KERNEL)
    wake_cases = [c for c in kc.cases() if c["rows"][0][0] == "wake_p50"]
    assert len(wake_cases) == 10
    for case in wake_cases:
        (real_io,) = [op["latency"] for wl in case["real"]["vm"][0]["workload"] for op in wl["ops"] if op["op"] == "io"]
        sim_wl = case["sim"](sched)["vm"][0]["workload"][0]
        arrivals = {"process": "closed", "clients": 1, "think": real_io}
        if case["real"]["kvm"].get("halt") != "kernel":
            arrivals["latency"] = "taken"  # the harness's measure: its stamp to guest code
        assert sim_wl["arrivals"] == arrivals, case["id"]
    # A starved nice-19 vCPU (seven busy nice-0 vCPUs on 2 pCPUs) completes fewer wake-ups
    # than the loop would offer at its gaps alone (~1,000 in 2 s), and the closed loop has no
    # queue: its requests follow one another, so their latencies add up to less than the run
    # (under the open loop they added up to 14 s in a 2 s run).
    case = kc.select(["wake-busy7-nice19"])[0]
    s = kc._run_sim(case, sched, 1)
    lat = s["vms"][0]["latency_ms"]
    assert lat["count"] < 500, lat
    assert lat["count"] * lat["mean"] / 1e3 <= s["duration_s"], (lat, s["duration_s"])


def test_the_simulated_host_delays_dequeues_as_the_reference_kernel_does():
    """The reference machines run Linux 6.18, whose EEVDF has DELAY_DEQUEUE and DELAY_ZERO
    on (6.12+), so the gate's host model turns them on; a 6.11 or 4.15 host does not. With
    them the nice-19 vCPU behind three busy vCPUs halts ineligible and stays queued, and is
    woken there. (Its row no longer depends on it since session 26: the harness's waker
    thread decides it; docs/validation.md.)"""
    assert kc.kernel_delays_dequeue(ref.KERNEL)
    assert not kc.kernel_delays_dequeue("6.11.0-1-generic")
    assert not kc.kernel_delays_dequeue("4.15.0-213-generic")
    sched = kc._eevdf_sched(ref.TICK, ref.PROFILE, ref.KERNEL)
    assert sched["delay_dequeue"] is True
    case = kc.select(["wake-busy3-nice19"])[0]
    counters = kc._run_sim(case, sched, 1)["scheduler_counters"]
    assert counters["delay_dequeue_delayed"] > 0 and counters["delay_dequeue_woken_in_place"] > 0, counters
    off = kc._run_sim(case, {**sched, "delay_dequeue": False}, 1)["scheduler_counters"]
    assert "delay_dequeue_delayed" not in off, off


def test_the_simulated_host_yields_as_the_reference_kernels_do():
    """Both reference kernels are 6.18.44: their yield forfeits an eligible yielder's
    vruntime (79104becf42b, in the 6.18 stable kernels from 6.18.2), so the gate's host
    model does; 6.18.1 and 6.12 do not, 6.19 does. Only the user-space PLE cases yield, and
    with the forfeit their spinners' yields show up as forfeits."""
    assert kc.kernel_forfeits_on_yield(ref.KERNEL) and kc.kernel_forfeits_on_yield(ref.STEADY_KERNEL)
    assert kc.kernel_forfeits_on_yield("6.19.0-rc1") and kc.kernel_forfeits_on_yield("7.0.3")
    assert not kc.kernel_forfeits_on_yield("6.18.1-arch1")
    assert not kc.kernel_forfeits_on_yield("6.12.40") and not kc.kernel_forfeits_on_yield("4.15.0-213-generic")
    sched = kc._eevdf_sched(ref.TICK, ref.PROFILE, ref.KERNEL)
    assert sched["yield_rule"] == "forfeit"
    assert "yield_rule" not in kc._eevdf_sched(ref.TICK, ref.PROFILE, "6.18.1")
    case = kc.select(["ple-yield-steady"])[0]
    counters = kc._run_sim(case, sched, 1)["scheduler_counters"]
    assert counters["yield_forfeit"] > 0, counters
    old = kc._run_sim(case, {k: v for k, v in sched.items() if k != "yield_rule"}, 1)["scheduler_counters"]
    assert "yield_forfeit" not in old, old


def test_the_wake_cases_simulate_the_harness_waker():
    """The harness's waker is a thread of the host: a vCPU's halt wakes it (its request for
    the next wake-up) and so does its own timer, when it writes the vCPU's eventfd; the
    halt costs the vCPU's thread an exit round trip (the profile's). The simulated side of
    the user-space halt cases has both: the waker as the split-driver backend, at its
    measured pass, and the exit after each response."""
    sched = kc._eevdf_sched(ref.TICK, ref.PROFILE, ref.KERNEL)
    assert sched["wakee_load"] == "pelt"
    for case in kc.cases():
        if not case["id"].startswith("wake-busy"):
            continue
        sc = case["sim"](sched)
        assert sc["host"]["io_path"] == "split" and sc["host"]["io_driver"] == "harness-waker", case["id"]
        (waker,) = [t for t in sc["host_thread"] if t["name"] == "harness-waker"]
        assert waker["workload"] == {"kind": "netback", "per_packet": kc.HARNESS_WAKER_PASS, "per_kib": "0ns"}
        ops = sc["vm"][0]["workload"][0]["ops"]
        # pvm-xeon-2cpu's ple_exit_cost, then the send that keeps the channel locked
        assert ops[-2:] == [{"op": "compute", "duration": "69.9us", "mode": "kernel"},
                            {"op": "respond", "hold": kc.HARNESS_SEND_HOLD}], ops


def test_a_profile_s_measured_send_hold_replaces_the_default():
    """The send's hold is a measurement of the harness on its machine: a profile that has one
    (`[harness] send_hold`, pvm-xeon-2cpu-v1252's) gives it to the wake cases' simulated
    side; one without (the reference's) keeps HARNESS_SEND_HOLD, the EPYC machine's."""
    assert kc._profile_send_hold(ref.PROFILE) == kc.HARNESS_SEND_HOLD
    measured = kc._profile_send_hold("pvm-xeon-2cpu-v1252")
    assert measured == {"dist": "lognormal", "median": "2us", "sigma": 2.12}
    sched = kc._eevdf_sched(ref.TICK, "pvm-xeon-2cpu-v1252", ref.KERNEL)
    sc = kc.select(["wake-busy3-nice19"])[0]["sim"](sched)
    assert sc["vm"][0]["workload"][0]["ops"][-1] == {"op": "respond", "hold": measured}


def test_each_halt_pays_the_wake_up_of_its_own_path(tmp_path):
    """Two halts, two wake-ups: the harness's user-space halt (the wake cases) pays the
    profile's `[harness] halt_wakeup_cost`, 36.9 us on pvm-xeon-2cpu-v1252; a halt in the
    kernel woken by an interrupt (irq-wake, halt-poll) pays `[kvm] halt_wakeup_cost`, 12.2 us
    there. Until session 31 both paid the first, and irq-wake was 2.9x real. A profile
    written before then has the user-space one under `[kvm]`, which the wake cases take."""
    sched = kc._eevdf_sched(ref.TICK, "pvm-xeon-2cpu-v1252", ref.KERNEL)
    wake = kc.select(["wake-busy0"])[0]["sim"](sched)
    assert wake["kvm"]["halt_wakeup_cost"] == {"dist": "lognormal", "median": "36.9us", "sigma": 0.286}
    irq = kc.select(["irq-wake"])[0]["sim"](sched)
    assert "halt_wakeup_cost" not in irq["kvm"]  # the profile's [kvm] value applies
    assert kc._profile_value("pvm-xeon-2cpu-v1252", "kvm", "halt_wakeup_cost", None)["median"] == "12.2us"
    (row,) = kc.gate(["irq-wake"])
    assert 0.5 <= row["ratio"] <= 2 and not row["held_out"], row
    old = tmp_path / "old.toml"
    old.write_text('[kvm]\nhalt_wakeup_cost = "46.8us"\n')
    sched_old = kc._eevdf_sched(ref.TICK, str(old), ref.KERNEL)
    assert kc.select(["wake-busy0"])[0]["sim"](sched_old)["kvm"]["halt_wakeup_cost"] == "46.8us"


def test_the_nice19_wake_family_has_the_real_shape():
    """On the reference machine a nice-19 vCPU wakes later behind seven busy nice-0 vCPUs
    (10.4 ms) than behind three (0.61 ms), and either far later than at nice 0 (42-58 us).
    The simulated medians must order the same, and they do since session 26 (before:
    1.3 ms and 0.74 ms, the wrong way round). Behind three, the waker thread preempts the
    vCPU's thread at its send and then waits for the channel's lock, which the preempted
    thread holds (a priority inversion: the wake-up is stamped late, so the measured wait
    is short); it preempts it there only because a thread that mostly sleeps weighs its
    load average in wake_affine_weight (`wakee_load = "pelt"`) and so runs on the vCPU's
    pCPU. Without either the row is out by more than 5x."""
    names = ["wake-busy3", "wake-busy3-nice19", "wake-busy7-nice19"]
    rows = {r["case"]: r for r in kc.gate(names)}
    real = {row[0]: row[3] for row in ref.ROWS if row[0] in names}
    assert real["wake-busy7-nice19"] > real["wake-busy3-nice19"] > 10 * real["wake-busy3"]
    sim = {c: rows[c]["sim"] for c in names}
    assert sim["wake-busy7-nice19"] > sim["wake-busy3-nice19"] > 10 * sim["wake-busy3"], sim
    sched = kc._eevdf_sched(ref.TICK, ref.PROFILE, ref.KERNEL)
    case = kc.select(["wake-busy3-nice19"])[0]
    by_weight, _ = kc.simulate(case, ref.TICK, ref.PROFILE, {**sched, "wakee_load": "weight"})["wake_p50"]
    assert by_weight > 5 * real["wake-busy3-nice19"], by_weight


def test_the_waker_s_wait_for_the_channel_lock_decides_the_nice19_row(monkeypatch):
    """With the send's hold at 0 (the waker never waits for the sender) the nice-19 vCPU's
    measured wake-up behind three busy vCPUs is 5x the real one: the inversion is what
    hides its wait from the harness's stamp."""
    monkeypatch.setattr(kc, "HARNESS_SEND_HOLD", "0us")
    (row,) = kc.gate(["wake-busy3-nice19"])
    assert row["ratio"] > 4, row


def test_the_user_space_ple_family_has_the_real_shape():
    """Over the whole 1 s run, the policy hardly matters on real KVM (22-43 us per op
    against 30 us; docs/validation.md): no policy is 1.5x slower or faster than none. The
    figure is mostly the start-up burst (docs/validation.md, "The start-up burst"), which
    makes no pause-loop exits, so every policy shares it. The simulated side's medians
    must say the same. (At seed 1 alone the model's exits made it 3-4x worse: a slow
    regime that seeds 1 and 3 of 1-10 land in.)"""
    rows = {r["case"]: r for r in kc.gate(["ple-"]) if not r["case"].endswith("-steady")}
    assert len(rows) == 5
    real = {c: r["real"] / rows["ple-none"]["real"] for c, r in rows.items()}
    sim = {c: r["sim"] / rows["ple-none"]["sim"] for c, r in rows.items()}
    assert all(0.5 <= v <= 1.5 for v in real.values()), real
    assert all(0.5 <= v <= 1.5 for v in sim.values()), sim


def test_after_the_start_up_burst_every_ple_policy_cuts_the_collapse_on_both_sides():
    """Counted after the warm-up, the ticket collapse without a handler hands the lock over
    about once per 2 ms on both sides (a host scheduling decision: two pCPUs, a 4 ms tick),
    and every user-space PLE policy makes it several times faster (real 8.7-23x, sim
    19-25.6x with the simulated window of this Xeon's measured spin; checked at 5x): the
    pause-loop exit gives the CPU to a vCPU that can take its turn. The order among the
    policies is not checked: the real boost is ~1.6x slower than the real yield, the
    simulated one as fast (docs/validation.md, "The spin of this Xeon")."""
    rows = {r["case"]: r for r in kc.gate(["ticket-N4-steady", "ple-"]) if r["case"].endswith("-steady")}
    assert set(rows) == {"ticket-N4-steady"} | {f"ple-{p}-steady" for p in ("none", "yield", "boost", "boost-fifo", "migrate")}
    for side in ("real", "sim"):
        none = rows["ple-none-steady"][side]
        assert 1.5e6 < none < 2.5e6 and 1.5e6 < rows["ticket-N4-steady"][side] < 2.5e6, side
        for p in ("yield", "boost", "boost-fifo", "migrate"):
            assert none / rows[f"ple-{p}-steady"][side] >= 5, (side, p)


def _with_host_costs(monkeypatch, costs):
    """Every simulated scenario of the gate gets these `[host.costs]` (a scenario key wins
    over its host profile's)."""
    plain = kc._sim_sc

    def broken(name, vms, duration, sched):
        sc = plain(name, vms, duration, sched)
        sc["host"]["costs"] = costs
        return sc

    monkeypatch.setattr(kc, "_sim_sc", broken)


def test_the_gate_fails_on_a_deliberately_broken_cost(monkeypatch):
    """A context switch of 500 us instead of the model's 2 us: the wake-up of a vCPU that
    must preempt a busy one leaves its band (and the gate says which); compute throughput,
    12% lower, stays within 2x and does not. (The ticket collapse, now dominated by the
    cache-line handoffs and the tick, stays in its pinned band.)"""
    _with_host_costs(monkeypatch, {"context_switch": "500us"})
    rows = kc.gate(["wake-busy3", "compute-N8"])
    left = {r["case"] for r in rows if not r["in_band"]}
    assert left == {"wake-busy3"}, _out(rows)


def test_the_gate_fails_when_the_profiles_cacheline_cost_is_lost(monkeypatch):
    """The host profile's cache-line handoff (87 ns, measured by `vcpulab kvm calibrate`)
    is what brings the two-vCPU lock and barrier rows within 2x: set back to 0 in every
    simulated scenario (a scenario key wins over its profile), they leave their bands;
    compute, which takes no lock, does not."""
    _with_host_costs(monkeypatch, {"cacheline_transfer": "0ns"})
    rows = kc.gate(["tas-N2", "ticket-N2", "barrier-N2", "compute-N2"])
    left = {r["case"] for r in rows if not r["in_band"]}
    assert left == {"tas-N2", "ticket-N2", "barrier-N2"}, _out(rows)


def test_the_cli_reports_the_gate_and_fails_when_a_row_leaves_its_band():
    p = run_cli("kvm", "compare", "compute-N1", "ple-yield", "--reference")
    assert p.returncode == 0, p.stderr
    assert "3 of 3 rows within 2x of real" in p.stdout
    assert "0 outside their band" in p.stdout
    assert all(len(line) <= 100 for line in p.stdout.splitlines()), p.stdout
    assert "(-steady cases)" not in p.stdout


def test_the_cli_names_the_machine_and_profile_of_each_reference_set():
    """The steady-state and interrupt rows were measured on another machine than the rest:
    the table's header names each set shown, and their simulated side runs on that
    machine's profile. Every case has rows, so no notice says a case has none."""
    p = run_cli("kvm", "compare", "ple-yield", "ple-yield-steady", "irq-wake", "--reference")
    assert p.returncode == 0, p.stderr
    assert "real: measured 2026-11-27 (6.18.44-fc-v595" in p.stdout
    assert "real (-steady cases): measured 2026-12-05 (6.18.44-fc-v1252" in p.stdout
    assert "sim (-steady cases): eevdf, tick 4ms, host profile pvm-xeon-2cpu-v1252" in p.stdout
    assert "real (irq-wake, halt-poll): measured 2026-12-05 (6.18.44-fc-v1252" in p.stdout
    assert all(len(line) <= 100 for line in p.stdout.splitlines()), p.stdout
    assert "no reference rows" not in p.stderr
    assert kc.referenced_cases() == {c["id"] for c in kc.cases()}
