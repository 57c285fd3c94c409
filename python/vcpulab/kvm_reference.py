"""The real side of ``vcpulab kvm compare`` on the reference machine, committed as the
reference the simulated side is checked against (the validation gate, issue 27 part 6).

Measured with ``vcpulab kvm compare --json`` run twice (3 x 1 s real runs per case each, so
6 runs per case; harness ``kvm``) on 2026-11-27, 03:17-03:20 and 03:25-03:27 UTC, at commit
e697f32 plus this change's harness programs, on:

- kernel ``Linux 6.18.44-fc-v595 #1 SMP PREEMPT_DYNAMIC x86_64`` (``kvm_pvm``: nested,
  pagetable-based KVM; guest code at CPL3), ``CONFIG_HZ=250`` (tick 4 ms);
- 2 x "Intel(R) Xeon(R) Processor" (vCPUs of an outer VM);
- load: the other sessions' builds were stopped (SIGSTOP) for both runs; ``/proc/loadavg``
  2.61 before and 2.77 after the first (the harness's own vCPU threads and the load
  average's memory of the builds), 0.98 and 2.78 around the second. The outer machine
  remains an unknown source of noise: spreads reach 2-6x on the bimodal rows.

The simulated side runs on the host profile ``PROFILE`` (``vcpulab kvm calibrate`` on the
same machine at 03:52 UTC: exit round trip, halt wake-up, cache-line handoff, interruptions
and kernel threads), the machine's tick, the kernel's EEVDF features (``KERNEL`` is 6.12 or
later, so ``delay_dequeue`` is on; ``kvm_compare.kernel_delays_dequeue``; since 2026-11-27,
session 25), the harness's own monitor thread
(``kvm_compare.HARNESS_MONITOR``), which runs in every real case, and in the wake-up cases
its waker thread (``kvm_compare._harness_waker``; since 2026-11-28, session 26). Its figure is the median
of its runs at seeds 1-5 (``kvm_compare.SIM_SEEDS``), as the real figure is the median of six
runs (seed 1 alone until the evening of 2026-11-27, which put the user-space PLE rows in a
slow regime two of ten seeds land in). docs/validation.md has the tables, the runs and what
each gap means.
(The reference of 2026-11-21 was measured on another machine of the same kind, 2 x AMD
EPYC with kernel 6.18.44-fc-v657; docs/validation.md keeps its table.)

Each row: (case, metric, unit, real median, spread (max - min) / median, the runs, the band
of sim / real the simulated side must stay in, why that band). A row within 2x of real has
the band 0.5-2 (the issue's target); a row outside it has a band pinned at its ratio on
the day it left or was added (x/÷ 1.25) with the known reason (today one, held out, of
2026-12-05: ``halt-poll``; ``ple-migrate-steady`` was one until session 32), so that any change to
it, for better or worse, is seen the day it happens and the band is then moved on purpose. Rows of held-out
cases (``kvm_compare.cases()``, ``held_out``: other N, a longer critical section, another
shares ratio, another number of busy vCPUs) are reported apart; no model parameter was
taken from them.
"""

from __future__ import annotations

MEASURED = "2026-11-27 03:17-03:27 UTC"
COMMAND = "vcpulab kvm compare --json (twice)"
COMMIT = "e697f32 + the calibration programs"
KERNEL = "6.18.44-fc-v595 (kvm_pvm), CONFIG_HZ=250"
TICK = "4ms"
PROFILE = "pvm-xeon-2cpu"

#   (case, metric, unit, real, spread, runs, (band low, band high) of sim/real, why)
Row = tuple[str, str, str, float, float, list[float], tuple[float, float], str]
ROWS: list[Row] = [
    ('compute-N1', 'throughput', 'ops/s', 91310.0, 0.772, [93850.0, 159000.0, 88600.0, 88530.0, 134800.0, 88770.0], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N1', 'fairness_jain', '-', 1.0, 0.0, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N2', 'throughput', 'ops/s', 176100.0, 0.903, [154900.0, 182000.0, 170100.0, 204200.0, 242400.0, 83420.0], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N2', 'fairness_jain', '-', 0.9918, 0.0142, [0.9987, 0.9846, 0.9876, 0.9893, 0.9954, 0.9944], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N4', 'throughput', 'ops/s', 180500.0, 0.377, [179200.0, 208800.0, 140700.0, 165400.0, 181800.0, 200600.0], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N4', 'fairness_jain', '-', 0.9874, 0.0209, [0.999, 0.9851, 0.9783, 0.9849, 0.9897, 0.9906], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N8', 'throughput', 'ops/s', 154400.0, 1.0, [140300.0, 237600.0, 153000.0, 155900.0, 170400.0, 83170.0], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N8', 'fairness_jain', '-', 0.9975, 0.015, [0.9973, 0.984, 0.9979, 0.9932, 0.999, 0.9976], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N3', 'throughput', 'ops/s', 116900.0, 1.51, [166000.0, 151600.0, 255700.0, 81640.0, 79230.0, 82140.0], (0.5, 2.0),
     'within 2x of real'),
    ('compute-N3', 'fairness_jain', '-', 0.9871, 0.0437, [0.9864, 0.9817, 0.9521, 0.993, 0.9877, 0.9952], (0.5, 2.0),
     'within 2x of real'),
    ('tas-N1', 'ns_per_op', 'ns', 46.82, 0.316, [49.46, 36.97, 44.17, 49.53, 51.76, 38.49], (0.5, 2.0),
     'within 2x of real'),
    ('tas-N2', 'ns_per_op', 'ns', 64.94, 0.297, [72.7, 53.44, 67.33, 57.78, 62.56, 71.22], (0.5, 2.0),
     'within 2x of real'),
    ('tas-N4', 'ns_per_op', 'ns', 106.4, 0.773, [130.9, 170.0, 123.9, 88.97, 87.74, 88.87], (0.5, 2.0),
     'within 2x of real'),
    ('tas-N8', 'ns_per_op', 'ns', 234.4, 0.626, [240.4, 261.2, 292.4, 145.5, 228.3, 223.3], (0.5, 2.0),
     'within 2x of real'),
    ('ticket-N1', 'ns_per_op', 'ns', 49.92, 0.392, [43.73, 51.6, 38.1, 57.66, 49.38, 50.46], (0.5, 2.0),
     'within 2x of real'),
    ('ticket-N2', 'ns_per_op', 'ns', 82.86, 0.907, [116.4, 110.0, 127.4, 55.72, 52.2, 54.95], (0.5, 2.0),
     'within 2x of real'),
    ('ticket-N4', 'ns_per_op', 'ns', 31160.0, 0.614, [31330.0, 31000.0, 38760.0, 41340.0, 30340.0, 22220.0], (0.5, 2.0),
     'within 2x of real'),
    ('tas-N3', 'ns_per_op', 'ns', 101.1, 0.332, [110.4, 90.47, 94.06, 124.1, 105.9, 96.41], (0.5, 2.0),
     'within 2x of real'),
    ('ticket-N3', 'ns_per_op', 'ns', 33080.0, 2.29, [44960.0, 34290.0, 14140.0, 89930.0, 31870.0, 16020.0], (0.5, 2.0),
     'within 2x of real'),
    ('tas-N2-hold300ns', 'ns_per_op', 'ns', 385.8, 0.525, [501.7, 299.2, 449.9, 455.6, 316.5, 321.7], (0.5, 2.0),
     'within 2x of real'),
    ('ticket-N2-hold300ns', 'ns_per_op', 'ns', 509.8, 0.506, [498.0, 521.7, 542.2, 477.6, 719.0, 460.9], (0.5, 2.0),
     'within 2x of real'),
    ('barrier-N1', 'ns_per_round', 'ns', 31.3, 1.12, [26.62, 27.05, 26.81, 61.77, 35.54, 41.02], (0.5, 2.0),
     'within 2x of real'),
    ('barrier-N2', 'ns_per_round', 'ns', 258.9, 0.371, [301.6, 223.6, 236.5, 281.4, 315.0, 219.0], (0.5, 2.0),
     'within 2x of real'),
    ('barrier-N4', 'ns_per_round', 'ns', 4067000.0, 0.0886, [4018000.0, 4017000.0, 4238000.0, 3878000.0, 4238000.0, 4116000.0], (0.5, 2.0),
     'within 2x of real'),
    ('barrier-N3', 'ns_per_round', 'ns', 2220000.0, 0.458, [1609000.0, 2107000.0, 2334000.0, 2343000.0, 1969000.0, 2625000.0], (0.5, 2.0),
     'within 2x of real'),
    ('wake-busy0', 'wake_p50', 'us', 58.28, 0.196, [51.1, 58.37, 49.52, 59.28, 60.92, 58.19], (0.5, 2.0),
     'within 2x of real'),
    ('wake-busy0-nice19', 'wake_p50', 'us', 52.35, 0.19, [48.65, 51.14, 50.56, 57.73, 58.62, 53.56], (0.5, 2.0),
     'within 2x of real'),
    ('wake-busy3', 'wake_p50', 'us', 50.8, 0.229, [42.89, 49.86, 53.22, 54.54, 49.54, 51.75], (0.5, 2.0),
     'within 2x of real'),
    ('wake-busy3-nice19', 'wake_p50', 'us', 613.7, 6.46, [516.9, 611.2, 57.24, 655.6, 616.2, 4023.0], (0.5, 2.0),
     "within 2x of real since session 26, on the line (1.92x; seeds 1-5: 1.18-1.20 ms): the simulated side has the harness's waker "
     "thread, which preempts the vCPU's thread at its send and then waits for the channel's lock that thread holds "
     "(docs/validation.md, 'The harness's waker in the model'). 2.2x in session 25, 5.5x before DELAY_DEQUEUE"),
    ('wake-busy7', 'wake_p50', 'us', 41.8, 0.476, [37.25, 34.38, 33.19, 53.08, 46.34, 50.1], (0.5, 2.0),
     'within 2x of real'),
    ('wake-busy7-nice19', 'wake_p50', 'us', 10390.0, 2.17, [739.7, 11280.0, 9502.0, 4107.0, 14650.0, 23250.0], (0.5, 2.0),
     "within 2x of real since session 26 (1.03x; seeds 1-5: 2.3-14.6 ms, as spread as the real runs): the waker "
     "thread on the vCPU's pCPU. 0.072x in session 25 (docs/validation.md, 'The harness's waker in the model')"),
    ('wake-busy1', 'wake_p50', 'us', 55.92, 0.288, [47.24, 45.72, 51.94, 60.93, 59.9, 61.8], (0.5, 2.0),
     'within 2x of real'),
    ('wake-busy1-nice19', 'wake_p50', 'us', 53.9, 0.306, [46.54, 49.44, 50.88, 60.44, 63.02, 56.92], (0.5, 2.0),
     'within 2x of real'),
    ('shares-8192-vs-128', 'wait_ratio_lo_hi', '-', 12.32, 0.803, [20.68, 10.9, 11.02, 13.62, 18.92, 10.79], (0.5, 2.0),
     "within 2x of real, on the line: 1.93x, the median of seeds 1-5 (1.89-2.03x; seed 1 alone gave 2.00x and had the "
     "band 1.6-2.5 until the gate took the median). The real ratio is lower because the monitor's and the session's "
     "threads preempt the high-share vCPUs (docs/models.md, 'Cgroup shares against the root cgroup')"),
    ('shares-1024-vs-256', 'wait_ratio_lo_hi', '-', 3.61, 0.209, [3.752, 3.71, 3.036, 3.65, 2.997, 3.571], (0.5, 2.0),
     'within 2x of real'),
    ('ple-none', 'ns_per_op', 'ns', 29590.0, 0.415, [30040.0, 21320.0, 29140.0, 31580.0, 19310.0, 31250.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-yield', 'ns_per_op', 'ns', 22500.0, 4.08, [74580.0, 100300.0, 14550.0, 22250.0, 22750.0, 8521.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-boost', 'ns_per_op', 'ns', 26490.0, 1.65, [24990.0, 54620.0, 65760.0, 28000.0, 23200.0, 21990.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-boost-fifo', 'ns_per_op', 'ns', 43370.0, 1.78, [58360.0, 10960.0, 32380.0, 54370.0, 88060.0, 22620.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-migrate', 'ns_per_op', 'ns', 27880.0, 2.82, [19340.0, 81000.0, 30220.0, 97830.0, 25540.0, 25060.0], (0.5, 2.0),
     'within 2x of real'),
]

# The steady-state cases (``<case>-steady``; ``kvm_compare.STEADY_CASES``; since 2026-12-05,
# session 29): the ticket collapse and the user-space PLE cases counted after a 200 ms
# warm-up, which leaves out the start-up burst their whole-run rows above mostly measure
# (docs/validation.md, "The start-up burst, measured apart"). Not measured on the reference machine above
# but on another of its kind, the one its simulated side takes its host profile from:
#
# - ``vcpulab kvm compare ticket-N4-steady ple-none-steady ple-yield-steady
#   ple-boost-steady ple-boost-fifo-steady ple-migrate-steady --json`` run twice
#   (3 x 1.2 s real runs per case each, so 6; 1 s counted after the 200 ms warm-up),
#   2026-12-05 15:11:15-15:12:00 UTC, with the harness whose PLE handler makes its system
#   calls outside its lock (session 30); the two outputs are
#   docs/validation-runs/kvm-compare-xeon-v1252-2026-12-05-1511-steady-reference-[12].json.
#   Two earlier measurements, 11:25-11:26 UTC with the handler that held its lock across
#   the calls and 14:24 UTC with a first version of the new one (their outputs
#   ...-112[56]- and ...-1424-steady-reference-*.json), gave medians within 10 % of these
#   (docs/validation.md);
# - kernel ``6.18.44-fc-v1252`` (``kvm_pvm``), ``CONFIG_HZ=250``; 2 x "Intel(R) Xeon(R)
#   Processor"; nothing else running (``/proc/loadavg`` 1.90 before, 3.00 after: the
#   harness's own threads, and a CI run that had ended at 15:09).
#
# Held out: no model parameter was taken from them.
STEADY_MEASURED = "2026-12-05 15:11 UTC"
STEADY_KERNEL = "6.18.44-fc-v1252 (kvm_pvm), CONFIG_HZ=250"
STEADY_PROFILE = "pvm-xeon-2cpu-v1252"
STEADY_ROWS: list[Row] = [
    ('ticket-N4-steady', 'ns_per_op', 'ns', 2030000.0, 0.1, [2193000.0, 2033000.0, 2004000.0, 1989000.0, 2028000.0, 2096000.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-none-steady', 'ns_per_op', 'ns', 1936000.0, 0.236, [2008000.0, 1942000.0, 1931000.0, 1670000.0, 1552000.0, 1980000.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-yield-steady', 'ns_per_op', 'ns', 83330.0, 0.208, [82340.0, 87000.0, 81540.0, 96200.0, 78910.0, 84320.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-boost-steady', 'ns_per_op', 'ns', 136700.0, 0.441, [140900.0, 112500.0, 172800.0, 132500.0, 127200.0, 148000.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-boost-fifo-steady', 'ns_per_op', 'ns', 138600.0, 0.304, [127200.0, 169400.0, 167400.0, 131600.0, 145700.0, 128200.0], (0.5, 2.0),
     'within 2x of real'),
    ('ple-migrate-steady', 'ns_per_op', 'ns', 221400.0, 0.197, [246900.0, 214400.0, 220700.0, 203300.0, 245300.0, 222000.0], (0.5, 2.0),
     "within 2x since session 32 (2026-12-05): 1.055x, with the harness's own migrate handler in the sim "
     "([kvm] ple_handler = \"migrate\": the next vCPU in round robin pinned to the spinner's pCPU for 1 ms or until "
     "the next exit's boost) and the world switch a vCPU switched out in the guest pays ([kvm] world_switch_cost); "
     "before them 0.449-0.472x with fix (c) as the stand-in, band pinned x/÷ 1.25"),
]


# The interrupt cases (``irq-wake``, ``halt-poll``; since 2026-11-27, session 23): a vCPU
# halted in the kernel and woken by an MSI through an irqfd, 1-3 ms after each halt (past
# KVM's 200 us halt polling) or 20-100 us after it (caught by the polling). Added to the
# gate in session 30; until then the comparison measured them live only. Measured on the
# same machine as the steady set:
#
# - ``vcpulab kvm compare irq-wake halt-poll --json`` run twice (3 x 1 s real runs per
#   case each, so 6), 2026-12-05 15:40:41-15:40:53 UTC, at d90b63a; the two outputs are
#   docs/validation-runs/kvm-compare-xeon-v1252-2026-12-05-1540-irq-reference-[12].json;
# - kernel, CPUs and profile as the steady set; nothing else running (``/proc/loadavg``
#   0.76 before, 0.59 after).
#
# Both were outside 2x in every live comparison on this machine until session 31, so
# their bands were pinned at their ratio (x/÷ 1.25) with the reason, and both were held out.
# Since session 31 the simulated in-kernel halt pays the interrupt wake-up calibrate
# measures with irq-wake's program, so irq-wake is within 2x and no longer held out;
# halt-poll keeps its pinned band and stays held out (no model parameter comes from it).
IRQ_MEASURED = "2026-12-05 15:40 UTC"
IRQ_ROWS: list[Row] = [
    ('irq-wake', 'wake_p50', 'us', 13.22, 0.042, [13.21, 12.88, 13.05, 13.35, 13.44, 13.23], (0.5, 2.0),
     "within 2x of real since session 31 (1.009x; was 2.876x, band pinned). Not held out since then, a calibration "
     "point: the sim's [kvm] halt_wakeup_cost is the profile's interrupt_wakeup, calibrate's measurement of this "
     "program (1 ms gaps there, 1-3 ms here); until then it was the harness's user-space halt wake-up (36.9 us), "
     "now [harness] halt_wakeup_cost, which only the wake cases pay. Live runs are bimodal: ~13 us with the waker "
     "and the vCPU on one CPU, 46-60 us across CPUs, which the sim does not model (0.40x and 0.51x in two live "
     "comparisons of 2026-12-05; docs/validation.md)"),
    ('halt-poll', 'wake_p50', 'us', 4.297, 1.658, [4.319, 4.236, 4.275, 11.18, 4.055, 11.16], (0.187, 0.292),
     "outside 2x on this machine since session 28: 0.233x, band pinned x/÷ 1.25. KVM's halt polling catches the interrupt on "
     "both sides; the real 4.3 us (2 of 6 runs at 11.2 us) is the interrupt's delivery and the guest's handler at "
     "CPL0, which PVM emulates instruction by instruction (~0.5-1 us each, the KVM notes), and the simulated "
     "polled wake-up charges nothing for either (docs/validation.md)"),
]


# Every committed reference: (its rows, the host profile of its simulated side, its
# machine's tick, kernel, when it was measured, what `vcpulab kvm compare --reference`
# calls it in its header).
SETS: list[tuple[list[Row], str, str, str, str, str]] = [
    (ROWS, PROFILE, TICK, KERNEL, MEASURED, ""),
    (STEADY_ROWS, STEADY_PROFILE, TICK, STEADY_KERNEL, STEADY_MEASURED, " (-steady cases)"),
    (IRQ_ROWS, STEADY_PROFILE, TICK, STEADY_KERNEL, IRQ_MEASURED, " (irq-wake, halt-poll)"),
]


def all_rows() -> list[Row]:
    """The rows of every reference, in order."""
    return [row for rows, *_ in SETS for row in rows]
