#!/bin/bash
# Measures the host kernel's own noise on a busy CPU: the interruptions behind the default
# [host.noise] (crates/vcpulab-core/src/scenario.rs, DEFAULT_INTERRUPT_*).
#
# usage (as root, tracefs mounted: mount -t tracefs nodev /sys/kernel/tracing):
#     scripts/host_noise_trace.sh [SECONDS] [RUNS]
#
# Each run keeps every CPU busy with a shell loop, records the kernel's interrupt
# tracepoints (the local timer, device interrupt handlers, softirqs) and its context
# switches with `perf record -a`, and prints, over the time the busy loops ran:
#   - each source's rate per busy CPU-second and its duration (entry to exit);
#   - the interruptions: back-to-back handlers (less than 1 us apart, such as a tick and
#     the softirq it raises) merged into one, their rate, median, mean, p90, and the share
#     of busy time they took;
#   - the kernel threads that preempted a busy loop, their rate and run lengths.
# Rescheduling and function-call IPIs are recorded but not counted: the simulator models
# those itself.
set -euo pipefail
seconds=${1:-10}
runs=${2:-3}
ncpu=$(nproc)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(uname -r); $ncpu CPUs; HZ from /boot/config: $(grep -h '^CONFIG_HZ=' /boot/config-"$(uname -r)" 2>/dev/null || echo unknown)"
for run in $(seq 1 "$runs"); do
    for _ in $(seq 1 "$ncpu"); do timeout $((seconds + 3)) sh -c 'while :; do :; done' & done
    sleep 1
    perf record -q -a -o "$tmp/irq.data" \
        -e irq_vectors:local_timer_entry -e irq_vectors:local_timer_exit \
        -e irq:irq_handler_entry -e irq:irq_handler_exit \
        -e irq:softirq_entry -e irq:softirq_exit \
        -e irq_vectors:reschedule_entry -e irq_vectors:reschedule_exit \
        -e sched:sched_switch -- sleep "$seconds" 2>/dev/null
    wait
    perf script -i "$tmp/irq.data" --ns -F cpu,time,event,comm,pid,trace 2>/dev/null > "$tmp/irq.txt"
    echo "## run $run (load $(cut -d' ' -f1-3 /proc/loadavg))"
    python3 - "$tmp/irq.txt" <<'PY'
import collections, re, statistics, sys

BUSY = "sh"  # the busy loops' command name
events = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)", line)
    if m:
        comm, pid, cpu, t, name, rest = m.groups()
        events.append((int(cpu), float(t), name, rest))
end = max(e[1] for e in events)
current, busy_since, busy = {}, {}, collections.Counter()
open_at, depth, first = {}, collections.Counter(), {}
durations = collections.defaultdict(list)
spans = collections.defaultdict(list)
kthread_start, kthread_runs = {}, collections.defaultdict(list)
for cpu, t, name, rest in events:
    if name == "sched:sched_switch":
        m = re.search(r"prev_comm=(.*?) prev_pid=(\d+).*next_comm=(.*?) next_pid=(\d+)", rest)
        prev, prev_pid, nxt, next_pid = m.groups()
        if cpu in kthread_start and kthread_start[cpu][0] == prev_pid:
            kthread_runs[kthread_start[cpu][1]].append(t - kthread_start[cpu][2])
            del kthread_start[cpu]
        if prev == BUSY and cpu in busy_since:
            busy[cpu] += t - busy_since.pop(cpu)
        if nxt == BUSY:
            busy_since[cpu] = t
        elif prev == BUSY and not nxt.startswith(("swapper", "perf", "sleep")):
            kthread_start[cpu] = (next_pid, nxt, t)
        current[cpu] = nxt
        continue
    if "reschedule" in name:
        continue
    kind = name.rsplit("_", 1)[0]
    if name.endswith("entry"):
        open_at[(cpu, kind)] = t
        if depth[cpu] == 0:
            first[cpu] = t
        depth[cpu] += 1
    else:
        start = open_at.pop((cpu, kind), None)
        if start is None:
            continue
        depth[cpu] = max(0, depth[cpu] - 1)
        if current.get(cpu) == BUSY:
            durations[kind].append(t - start)
            if depth[cpu] == 0:
                spans[cpu].append((first[cpu], t))
for cpu, since in busy_since.items():
    busy[cpu] += end - since
busy_s = sum(busy.values())

def q(xs, p):
    xs = sorted(xs)
    return xs[int(p * (len(xs) - 1))]

def us(x):
    return f"{x * 1e6:.2f} us"

print(f"busy CPU-seconds: {busy_s:.2f}")
for kind, ds in sorted(durations.items()):
    print(f"  {kind:28s} {len(ds) / busy_s:8.1f}/s  median {us(q(ds, .5))}  mean {us(statistics.mean(ds))}")
merged = []
for cpu, ss in spans.items():
    out = []
    for s, e in sorted(ss):
        if out and s - out[-1][1] < 1e-6:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    merged += [e - s for s, e in out]
print(f"interruptions: {len(merged) / busy_s:.1f}/s  median {us(q(merged, .5))}  mean "
      f"{us(statistics.mean(merged))}  p90 {us(q(merged, .9))}  lost {100 * sum(merged) / busy_s:.2f} %")
runs = [x for v in kthread_runs.values() for x in v]
if runs:
    print(f"threads preempting a busy loop: {len(runs) / busy_s:.1f}/s  median {us(q(runs, .5))}  "
          f"mean {us(statistics.mean(runs))}")
    for comm, v in sorted(kthread_runs.items(), key=lambda kv: -len(kv[1]))[:6]:
        print(f"  {comm:28s} {len(v):5d} runs  mean {us(statistics.mean(v))}")
PY
done
