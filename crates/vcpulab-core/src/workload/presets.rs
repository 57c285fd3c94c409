//! The workload presets: each named benchmark or tool (`sysbench-cpu`, `lookbusy`, `ping`,
//! `iozone`, the PLE papers' benchmarks, ...) expanded into the operations its threads loop
//! over, with its unit of throughput and the keys it takes. `program` (operations spelled
//! out) is parsed in the parent module.

use super::{
    fixed_ns, parse_cycles, parse_dist, periodic_arrivals, serve_ops, Arrivals, Dist, IpiTargets,
    Mode, Op, Work,
};
use crate::reader::{Res, Table};
use crate::time::SimDuration;
use crate::vocab::LockKind;

/// Every workload kind, with the one line `vcpulab presets` prints for it.
pub const PRESETS: &[(&str, &str)] = &[
    ("program", "explicit list of operations (compute, lock, ipi, io, sleep, wait_request, respond, serve)"),
    ("rt-app", "an rt-app JSON use case (file = \"x.json\"): a workload per task; run, sleep, timer and lock/unlock map (docs/scenarios.md)"),
    ("sysbench-cpu", "sysbench cpu: events of fixed CPU work (prime search), events/s"),
    ("stress-ng", "stress-ng --cpu: CPU hog threads, bogo-ops/s"),
    ("lookbusy", "lookbusy 1.4: 100 ms busy/sleep cycles at a target utilisation, busy phases adjusted to the guest's measured use"),
    ("ebizzy", "ebizzy: user-mode memory work, munmap TLB-shootdown IPI barriers; records/s"),
    ("pbzip2", "pbzip2: compression blocks, a shared queue lock, buffer munmap IPI barriers; blocks/s"),
    ("hackbench", "hackbench: kernel message passing over socket and run-queue spinlocks, frequent wake-ups; messages/s"),
    ("dbench", "dbench: file-system operations under kernel spinlocks, with disk I/O; ops/s"),
    ("swaptions", "PARSEC swaptions: CPU-bound Monte Carlo (the papers' noise VM); ops/s"),
    ("raytrace", "PARSEC raytrace: long compute, little synchronisation; ops/s"),
    ("vips", "PARSEC vips: image pipeline with heavy synchronisation (locks, wake-ups, munmap IPIs); ops/s"),
    ("dedup", "PARSEC dedup: a finite run of a 5-stage pipeline (fragment, refine, deduplicate, compress, reorder) over queue mutexes, futex wake-ups and a hot hash bucket; batches/s, completion_s"),
    ("timer-rt", "an RT-priority thread woken by a periodic timer; latency = timer expiry to the thread running"),
    ("dhrystone", "Dhrystone 2.1: CPU load, loops/s"),
    ("iozone", "IOzone write (page cache; each flush written back at once, or in request_kib requests, up to queue_depth in flight) or read (record by record from disk) test; flushes/s, KB/s with record_kib"),
    ("ping", "ping: ICMP echo requests from outside at a fixed interval, answered by the guest kernel; latency = round trip inside the host"),
    ("netperf", "netperf TCP_STREAM receiver: a window of outstanding segments from outside; bandwidth from completed bytes"),
    ("webbench", "webbench: concurrent HTTP clients from outside, each waiting for its response; pages/s and bandwidth"),
    ("netback", "an I/O backend: the driver domain's (or host's) packet forwarder for the split-driver path ([host] io_path)"),
];

/// A key a workload kind takes and its default in words, as `vcpulab workloads` lists it:
/// "required" when it must be given, "none" when leaving it out means what the kind's
/// model says (docs/scenarios.md). The allowed keys of each kind are read from here, so
/// the list a user sees is the list the reader checks.
#[derive(Clone, Copy, Debug)]
pub struct KeyInfo {
    pub name: &'static str,
    pub default: &'static str,
}

const fn key(name: &'static str, default: &'static str) -> KeyInfo {
    KeyInfo { name, default }
}

/// The PLE papers' benchmarks (one thread per vCPU; hackbench four).
const BENCHMARK_KEYS: &[KeyInfo] = &[
    key("threads", "one per vCPU"),
    key("work", "1 (multiplies the compute)"),
];

/// Each kind's own keys (besides `kind` and [`COMMON_KEYS`]), in the order of
/// [`PRESETS`]; `unit` renames the throughput unit, whose default is given.
pub const KIND_KEYS: &[(&str, &[KeyInfo])] = &[
    (
        "program",
        &[
            key("threads", "1"),
            key("ops", "required"),
            key("arrivals", "none (required by wait_request)"),
            key("request_bytes", "0"),
            key("unit", "loops/s (requests/s with wait_request)"),
        ],
    ),
    (
        "rt-app",
        &[key(
            "file",
            "required (the rt-app JSON file, relative to the scenario's folder)",
        )],
    ),
    (
        "sysbench-cpu",
        &[
            key("threads", "1"),
            key("event_cycles", "3066616 (cycles per event)"),
            key("event_cost", "none (a duration instead of event_cycles)"),
            key("events", "none (runs to the end)"),
            key("unit", "events/s"),
        ],
    ),
    (
        "stress-ng",
        &[
            key("threads", "1"),
            key("bogo_op", "1ms"),
            key("unit", "bogo-ops/s"),
        ],
    ),
    (
        "lookbusy",
        &[
            key("threads", "1"),
            key("utilization", "required (percent)"),
            key("period", "100ms"),
            key("adaptive", "true"),
            key("unit", "periods/s"),
        ],
    ),
    (
        "ebizzy",
        &[
            BENCHMARK_KEYS[0],
            BENCHMARK_KEYS[1],
            key("unit", "records/s"),
        ],
    ),
    (
        "pbzip2",
        &[
            BENCHMARK_KEYS[0],
            BENCHMARK_KEYS[1],
            key("unit", "blocks/s"),
        ],
    ),
    (
        "hackbench",
        &[
            key("threads", "four per vCPU"),
            BENCHMARK_KEYS[1],
            key("unit", "messages/s"),
        ],
    ),
    (
        "dbench",
        &[BENCHMARK_KEYS[0], BENCHMARK_KEYS[1], key("unit", "ops/s")],
    ),
    (
        "swaptions",
        &[BENCHMARK_KEYS[0], BENCHMARK_KEYS[1], key("unit", "ops/s")],
    ),
    (
        "raytrace",
        &[BENCHMARK_KEYS[0], BENCHMARK_KEYS[1], key("unit", "ops/s")],
    ),
    (
        "vips",
        &[BENCHMARK_KEYS[0], BENCHMARK_KEYS[1], key("unit", "ops/s")],
    ),
    (
        "dedup",
        &[
            key("threads", "one per vCPU (PARSEC's -t)"),
            BENCHMARK_KEYS[1],
            key(
                "input_mib",
                "64 (MiB of input; the run ends when it is done)",
            ),
            key("unit", "batches/s"),
        ],
    ),
    (
        "timer-rt",
        &[
            key("threads", "1"),
            key("interval", "10ms"),
            key("handle", "10us"),
            key("unit", "events/s"),
        ],
    ),
    ("dhrystone", &[key("threads", "1"), key("unit", "loops/s")]),
    (
        "iozone",
        &[
            key("threads", "1"),
            key("test", "\"write\" (or \"read\")"),
            key("flush_kib", "52429"),
            key("disk_mb_per_s", "100"),
            key("record_kib", "none (a loop is one flush; required by read)"),
            key("request_kib", "none (a flush is one request)"),
            key("queue_depth", "1"),
            key("unit", "flushes/s (records/s for read)"),
        ],
    ),
    (
        "ping",
        &[
            key("threads", "1"),
            key("interval", "1s"),
            key("handle", "10us"),
            key("unit", "echoes/s"),
        ],
    ),
    (
        "netperf",
        &[
            key("threads", "1"),
            key("window", "16"),
            key("segment_kib", "64"),
            key("cpu_per_kib", "1us"),
            key("rtt", "50us"),
            key("unit", "segments/s"),
        ],
    ),
    (
        "webbench",
        &[
            key("threads", "1"),
            key("clients", "100"),
            key("request_cpu", "200us"),
            key("page_kib", "8"),
            key("rtt", "50us"),
            key("unit", "pages/s"),
        ],
    ),
    (
        "netback",
        &[
            key("threads", "one per vCPU"),
            key("per_packet", "5us"),
            key("per_kib", "500ns"),
            key("unit", "packets/s"),
        ],
    ),
];

/// The keys every kind takes.
pub const COMMON_KEYS: &[KeyInfo] = &[
    key(
        "priority",
        "\"normal\" (or \"rt\"; timer-rt and ping are rt)",
    ),
    key("vcpus", "none (threads placed round-robin)"),
    key("dirty_mib_per_s", "0 (iozone: its copy rate, 2 bytes/ns)"),
    key(
        "rx",
        "none (request-serving kinds: a receive path on other vCPUs)",
    ),
];

/// The keys of `kind` (without `kind` and the common keys); empty for an unknown kind.
pub fn kind_keys(kind: &str) -> &'static [KeyInfo] {
    KIND_KEYS
        .iter()
        .find(|(name, _)| *name == kind)
        .map_or(&[], |(_, keys)| keys)
}

/// Whether `kind` takes [`COMMON_KEYS`]: all but `rt-app`, whose table only names its
/// file (the file gives threads, priorities and CPUs).
pub fn takes_common_keys(kind: &str) -> bool {
    kind != "rt-app"
}

/// The keys the reader allows in a `[[vm.workload]]` table of `kind`.
pub(super) fn allowed_keys(kind: &str) -> Vec<&'static str> {
    let common = if takes_common_keys(kind) {
        COMMON_KEYS
    } else {
        &[]
    };
    std::iter::once("kind")
        .chain(kind_keys(kind).iter().map(|k| k.name))
        .chain(common.iter().map(|k| k.name))
        .collect()
}

/// The benchmarks of the PLE papers (seeds 000, 004), modelled by their synchronisation
/// pattern. Durations are at the host's base clock; `work` scales the main compute.
/// Why each looks as it does:
/// - ebizzy: each record allocates a fresh chunk (512 KiB by default: page faults and
///   zeroing in the kernel, ~50 us on a 2.x GHz core at ~10 GB/s), copies and searches it
///   in user mode (~150 us), and frees the old chunk with munmap, which flushes the TLB of
///   every vCPU running the process: an IPI barrier whose targets are mostly in user mode
///   (the paper: ebizzy's PLEs come mostly from IPI barriers).
/// - pbzip2: a thread compresses one 900 kB block (bzip2 -9's block): bzip2 compresses
///   about 10-12 MB/s per core (measured on this project's build machine: libbz2 level 9
///   on 680 kB of source text, 55 ms, 12.4 MB/s), so ~75 ms of user compute per block.
///   Each block's compression allocates libbz2's working arrays (~7.6 MB at -9: two
///   4-byte arrays per input byte plus a 256 KiB table) and frees them afterwards, so the
///   pages are faulted in and zeroed again (~1.5 ms in the kernel, ~1,900 faults) and the
///   free returns them (munmap/madvise: a TLB-shootdown IPI barrier). Then the thread
///   hands the block to the writer under the shared queue lock (a futex: a kernel
///   spinlock on the hash bucket). (An earlier model used 2 ms per block, an unsourced
///   guess 40x too short, which made pbzip2 the most barrier-bound preset.)
/// - hackbench: groups of tasks pass 100-byte messages over socketpairs: a ~2 us kernel
///   send path under a receiver's socket-queue lock (held ~0.3 us; 8 shards for the
///   many sockets), a ~2 us receive/wake-up path under the woken task's run-queue lock
///   (0.3 us; one shard per vCPU), a little user code, then blocking until the peer
///   writes again (~10 us). 4 tasks per vCPU. PLEs come from spinlocks whose holder or
///   next waiter was preempted.
/// - dbench: clients run file-system calls that take the journal and dcache spinlocks
///   (kernel), with a disk I/O per operation.
/// - swaptions: pure user-mode compute (the noise VM).
/// - raytrace: long user-mode compute per ray batch, a rare task-queue lock.
/// - vips: a pipeline of short stages: user compute per tile (~100 us), the thread
///   pool's work-allocation lock, kernel work to hand the tile on (futex wake-ups), the
///   buffer-cache lock; every second tile its buffer is returned with munmap (IPI
///   barrier). Both locks are GMutexes in libvips 7.2x (`pool->allocate_lock` in
///   threadpool.c, the global lock around the buffer cache), i.e. pthread mutexes: a
///   thread that finds one held sleeps in futex_wait and its vCPU halts if it has nothing
///   else to run. (An earlier model used kernel spinlocks for them.) The ~100 us tile and
///   the munmap every second tile are estimates, not measured.
fn benchmark_ops(kind: &str, work: f64, lock: LockKind) -> Option<(Vec<Op>, &'static str, u32)> {
    let us = |x: f64| Work::Time(Dist::Fixed(x * 1e3));
    let exp_us = |x: f64| Work::Time(Dist::Exp { mean: x * 1e3 });
    let compute = |w: Work, mode: Mode| Op::Compute { work: w, mode };
    let lk = |id: u32, hold_us: f64, shards: u32| Op::Lock {
        lock: id,
        hold: Dist::Fixed(hold_us * 1e3),
        kind: lock,
        mode: Mode::Kernel,
        shards,
    };
    // A pthread mutex (GMutex): user-mode critical section, futex sleep on contention.
    let mutex = |id: u32, hold_us: f64| Op::Lock {
        lock: id,
        hold: Dist::Fixed(hold_us * 1e3),
        kind: LockKind::Mutex,
        mode: Mode::User,
        shards: 1,
    };
    let ipi = Op::Ipi {
        targets: IpiTargets::All,
    };
    Some(match kind {
        "ebizzy" => (
            vec![
                compute(exp_us(50.0 * work), Mode::Kernel),
                compute(exp_us(150.0 * work), Mode::User),
                ipi,
            ],
            "records/s",
            1,
        ),
        "pbzip2" => (
            vec![
                compute(us(1500.0 * work), Mode::Kernel),
                compute(exp_us(75_000.0 * work), Mode::User),
                ipi,
                lk(0, 2.0, 1),
            ],
            "blocks/s",
            1,
        ),
        "hackbench" => (
            vec![
                compute(us(2.0 * work), Mode::Kernel),
                lk(0, 0.3, 8),
                compute(us(2.0 * work), Mode::Kernel),
                lk(8, 0.3, 4),
                compute(us(1.0 * work), Mode::User),
                Op::Sleep {
                    duration: Dist::Exp { mean: 10e3 * work },
                },
            ],
            "messages/s",
            4,
        ),
        "dbench" => (
            vec![
                compute(us(10.0 * work), Mode::User),
                lk(0, 4.0, 1),
                compute(us(20.0 * work), Mode::Kernel),
                lk(1, 2.0, 1),
                Op::blocking_io(Dist::Exp { mean: 100e3 }, 0),
            ],
            "ops/s",
            1,
        ),
        "swaptions" => (vec![compute(us(10_000.0 * work), Mode::User)], "ops/s", 1),
        "raytrace" => (
            vec![compute(exp_us(5000.0 * work), Mode::User), lk(0, 1.0, 1)],
            "ops/s",
            1,
        ),
        "vips" => (
            vec![
                compute(exp_us(100.0 * work), Mode::User),
                mutex(0, 3.0),
                compute(us(5.0 * work), Mode::Kernel),
                mutex(1, 2.0),
                compute(exp_us(100.0 * work), Mode::User),
                mutex(0, 3.0),
                compute(us(5.0 * work), Mode::Kernel),
                mutex(1, 2.0),
                ipi,
            ],
            "ops/s",
            1,
        ),
        _ => return None,
    })
}

/// PARSEC dedup's encoder (`pkgs/kernels/dedup/src/encoder.c`, `dedupdef.h`, `config.h`,
/// `rabin.h` of PARSEC 3.0; read in public copies of the PARSEC tree), as a finite run.
///
/// The program: `Fragment` (1 thread) cuts the input into coarse chunks of about
/// `ANCHOR_JUMP` = 2 MiB; `FragmentRefine` (`-t N` threads) cuts each into fine chunks with
/// a Rabin rolling fingerprint (`NWINDOW` 32 bytes, an anchor where the low 12 bits are 0:
/// `RabinMask` 0xfff, so ~4 KiB on average); `Deduplicate` (N threads) takes each chunk's
/// SHA-1 and looks it up in a hash table of 65,536 buckets with a pthread mutex per bucket
/// (`hashtable_getlock`); `Compress` (N threads) gzips each new chunk (zlib `compress()`,
/// level 6); `Reorder` (1 thread) writes them out in order. Stages pass chunks through
/// queues (`queue.c`: a pthread mutex and condition variables) in batches of 20
/// (`ITEM_PER_FETCH`, `ITEM_PER_INSERT`, `CHUNK_ANCHOR_PER_INSERT`); the threads of a
/// stage share a queue four at a time (`MAX_THREADS_PER_QUEUE` 4, so ceil(N/4) queues
/// between two stages).
///
/// The guest model has no queues or condition variables (a thread loops over its own
/// operations), so the pipeline is modelled by its batches: each of the `threads` threads
/// (default one per vCPU, i.e. `-t` = vCPUs) carries one batch of 20 fine chunks through
/// all five stages per loop, and the run ends after `input_mib` of input (20 x 4 KiB per
/// batch). What is kept: the CPU work per byte of every stage, the serial stages (a mutex
/// held for the stage's work, so batches pass them one at a time as through one thread),
/// the queue mutexes per group of four threads, the kernel work of each hand-off (the
/// condition variable's futex wake: the futex hash-bucket spinlock and the woken task's
/// run-queue lock, kernel spinlocks that PLE), and the contended hash bucket. What is not:
/// a stage's threads blocking on an empty queue while another stage lags (here a thread
/// goes straight on), 3N+2 threads (here N), and the asynchronous reschedule IPI that wakes
/// a consumer on a halted vCPU (the engine's IPIs are barriers the sender waits on).
///
/// Costs per batch of 20 chunks, at the host's base clock (`work` scales the compute):
/// - refine: 20 x 12 us. Measured (2026-11-27, this project's build machine, a 2.3 GHz
///   Xeon shared with other jobs): a rolling-window table hash of rabinseg's shape (32-byte
///   window, 0xfff mask) runs at 2.9-3.6 ns per byte, 4,065-byte mean segments
///   (`gcc -O2`, 64 MiB of random bytes): ~12 us per 4 KiB.
/// - deduplicate: 20 x 10 us of SHA-1. Assumed: PARSEC's plain-C SHA-1 at ~400 MB/s;
///   OpenSSL's SHA-1 (Python's hashlib) measured 3.7 us per 4 KiB on the same machine,
///   a lower bound.
/// - compress: 20 x 116 us. Measured the same day: zlib level 6 (`compress()`'s default)
///   on 4 KiB pieces of this repository's Rust source, 116 us each (35 MB/s). Every chunk
///   is taken as new (no duplicates skip the stage): assumed, an upper bound.
/// - fragment: 1 us per batch under the fragment mutex. Assumed: the serial stage only
///   jumps 2 MiB and scans to the next anchor (~12 us per coarse chunk of ~25 batches at
///   the rate above) and enqueues one chunk.
/// - reorder: 30 us per batch under the reorder mutex. Assumed: 20 write()s of the
///   compressed chunks (~30 KiB) into the page cache at ~2 GB/s plus the syscalls.
/// - each of the four hand-offs (fragment -> refine -> deduplicate -> compress ->
///   reorder): the queue mutex held 1 us, 2 us of kernel work (futex wake/wait), the
///   futex hash-bucket spinlock (one per queue) and the woken task's run-queue lock (one
///   per vCPU) held 0.3 us each, as hackbench's (assumed).
/// - the hash bucket: 2 us per batch under one mutex. Runs of zero bytes defeat the Rabin
///   anchor (every 32 bytes is a cut), so all-zero chunks pile onto one bucket: "about
///   200,000" such blocks in the native input and lock contention on that bucket that
///   "severely limits the scalability" (A. Clements, parsec-users, 2011-07-28). Here all
///   20 lookups of a batch (0.1 us each, assumed) are taken under that one lock: the share
///   of lookups that hit it is not published, and all of them is an upper bound.
fn dedup_ops(
    t: &Table,
    locks: &mut Vec<String>,
    spin: LockKind,
    vcpus: u32,
) -> Res<(Vec<Op>, u64, u32)> {
    let work = t.opt_f64("work", 0.001, 1000.0)?.unwrap_or(1.0);
    let input_mib = t.opt_u64("input_mib", 1, 1 << 30)?.unwrap_or(64);
    let threads = t.opt_u64("threads", 0, 1_000_000)?.unwrap_or(vcpus as u64) as u32;
    const CHUNK_KIB: u64 = 4;
    const BATCH: u64 = 20;
    let batches = (input_mib * 1024).div_ceil(CHUNK_KIB * BATCH);
    let queues = threads.div_ceil(4).max(1);
    // The VM's lock table: this workload's locks, in the order of the ids below.
    let base = locks.len() as u32;
    let mut next = base;
    let mut add = |name: &str, shards: u32| {
        let id = next;
        for k in 0..shards {
            locks.push(format!("dedup#{base}#{name}#{k}"));
        }
        next += shards;
        id
    };
    let fragment = add("fragment", 1);
    let queue_locks: Vec<u32> = (0..4).map(|i| add(&format!("queue{i}"), queues)).collect();
    let futex_locks: Vec<u32> = (0..4).map(|i| add(&format!("futex{i}"), queues)).collect();
    let runqueue = add("rq", vcpus.max(1));
    let bucket = add("bucket", 1);
    let reorder = add("reorder", 1);
    let us = |x: f64| Dist::Fixed(x * 1e3);
    let user = |x: f64| Op::Compute {
        work: Work::Time(us(x * work)),
        mode: Mode::User,
    };
    let mutex = |lock: u32, hold: f64, shards: u32| Op::Lock {
        lock,
        hold: us(hold),
        kind: LockKind::Mutex,
        mode: Mode::User,
        shards,
    };
    let handoff = |i: usize| {
        vec![
            mutex(queue_locks[i], 1.0, queues),
            Op::Compute {
                work: Work::Time(us(2.0)),
                mode: Mode::Kernel,
            },
            Op::Lock {
                lock: futex_locks[i],
                hold: us(0.3),
                kind: spin,
                mode: Mode::Kernel,
                shards: queues,
            },
            Op::Lock {
                lock: runqueue,
                hold: us(0.3),
                kind: spin,
                mode: Mode::Kernel,
                shards: vcpus.max(1),
            },
        ]
    };
    let mut ops = vec![mutex(fragment, 1.0, 1)];
    ops.extend(handoff(0));
    ops.push(user(20.0 * 12.0)); // refine
    ops.extend(handoff(1));
    ops.push(user(20.0 * 10.0)); // SHA-1
    ops.push(mutex(bucket, 2.0, 1));
    ops.extend(handoff(2));
    ops.push(user(20.0 * 116.0)); // gzip
    ops.extend(handoff(3));
    ops.push(mutex(reorder, 30.0, 1));
    Ok((ops, batches, threads))
}

/// sysbench cpu, default event cost. Calibrated once, from the blog 001 single-thread
/// figure (1271.76 events/s on a Core i5-6600 at its 1-core turbo clock of 3.9 GHz):
/// 3.9e9 / 1271.76 = 3,066,616 cycles per event (--cpu-max-prime=10000, sysbench 1.0).
pub const SYSBENCH_EVENT_CYCLES: f64 = 3_066_616.0;

/// What a preset expands to: its operations, unit and keys, and what it sets besides
/// (its own request or timer stream, request size, a finite run, bytes per unit, threads).
pub(super) struct Preset {
    pub ops: Vec<Op>,
    pub unit: String,
    /// The keys the preset takes (from [`KIND_KEYS`], with `kind` and the common keys).
    pub keys: Vec<&'static str>,
    /// The preset's own arrivals (a periodic timer, a closed loop of clients).
    pub arrivals: Option<Arrivals>,
    /// Bytes per request, when the preset fixes them.
    pub request_bytes: Option<u64>,
    pub total_units: Option<u64>,
    pub bytes_per_unit: u64,
    /// Threads when the workload does not say.
    pub default_threads: u32,
}

/// Expands the preset `kind` (anything but `program`) from its table `t`, registering the
/// lock names its operations use.
pub(super) fn expand(
    t: &Table,
    kind: &str,
    locks: &mut Vec<String>,
    default_lock: LockKind,
    vcpus: u32,
) -> Res<Preset> {
    let mut arrivals: Option<Arrivals> = None;
    let mut request_bytes: Option<u64> = None;
    let mut total_units: Option<u64> = None;
    let mut bytes_per_unit = 0u64;
    // Benchmark presets default to their threads-per-vCPU; the others to 1.
    let mut default_threads = 1;
    let (ops, unit): (Vec<Op>, String) = match kind {
        "sysbench-cpu" => {
            let work = match (t.has("event_cost"), t.get("event_cycles")) {
                (true, Some(_)) => {
                    return t.err(
                        "event_cycles",
                        "give either event_cost or event_cycles, not both",
                    )
                }
                (true, None) => Work::Time(parse_dist(&t.req("event_cost")?)?),
                (false, Some(c)) => Work::Cycles(parse_cycles(&c)?),
                (false, None) => Work::Cycles(Dist::Fixed(SYSBENCH_EVENT_CYCLES)),
            };
            // `events`: a finite run (sysbench --max-requests, 10,000 in sysbench 0.4):
            // the workload stops after that many events and reports when it finished.
            total_units = t.opt_u64("events", 1, u64::MAX)?;
            (
                vec![Op::Compute {
                    work,
                    mode: Mode::User,
                }],
                "events/s".into(),
            )
        }
        "stress-ng" => {
            // One bogo-op of the cpu stressor is taken as 1 ms of work at the base clock;
            // only the CPU it takes matters for the host scheduler.
            let op = t
                .opt_duration("bogo_op")?
                .map(|d| d.ns() as f64)
                .unwrap_or(1e6);
            if op <= 0.0 {
                return t.err("bogo_op", "must be longer than 0s");
            }
            (
                vec![Op::Compute {
                    work: Work::Time(Dist::Fixed(op)),
                    mode: Mode::User,
                }],
                "bogo-ops/s".into(),
            )
        }
        "lookbusy" => {
            // lookbusy 1.4 (lb.c, `cpu_spin`): each spinner calibrates a spin count worth
            // `utilization` of a 100 ms cycle, then loops: spin, usleep for the rest of
            // the cycle (the sleep stays fixed), and adjust the spin count by (target -
            // measured) x count / ncpus, where "measured" is the whole guest's busy time
            // (/proc/stat user + nice + system, all CPUs, over the cycle's wall time) per
            // spinner. `adaptive = false` keeps the first spin count (a fixed duty cycle).
            let util = t.req("utilization")?.f64_in(0.0, 100.0)? / 100.0;
            let period = t
                .opt_duration("period")?
                .map(|d| d.ns() as f64)
                .unwrap_or(100e6);
            if period <= 0.0 {
                return t.err("period", "must be longer than 0s");
            }
            let adaptive = t.opt_bool("adaptive")?.unwrap_or(true);
            let mut ops = vec![];
            if util > 0.0 && adaptive && util < 1.0 {
                ops.push(Op::LookbusySpin {
                    util,
                    first_busy: Work::Time(Dist::Fixed(util * period)),
                    spinners: 0, // the thread count, set below
                });
            } else if util > 0.0 {
                ops.push(Op::Compute {
                    work: Work::Time(Dist::Fixed(util * period)),
                    mode: Mode::User,
                });
            }
            if util < 1.0 {
                ops.push(Op::Sleep {
                    duration: Dist::Fixed((1.0 - util) * period),
                });
            }
            (ops, "periods/s".into())
        }
        "timer-rt" => {
            // Seed 003's evaluation program: an RT-priority thread that sleeps until the
            // next periodic timer event and records when it ran. The response is measured
            // when the thread runs (respond comes first); handling the event (reading the
            // clock, storing the sample) takes `handle` of CPU. The paper does not give
            // the period; 10 ms (10,000 events in 100 s) is our assumption.
            arrivals = Some(periodic_arrivals(t, SimDuration::from_ms(10))?);
            let handle = t
                .opt_duration("handle")?
                .unwrap_or(SimDuration::from_us(10));
            (
                vec![
                    Op::WaitRequest,
                    Op::Respond,
                    Op::Compute {
                        work: Work::Time(fixed_ns(handle)),
                        mode: Mode::User,
                    },
                ],
                "events/s".into(),
            )
        }
        "ping" => {
            // ping (iputils): one ICMP echo request every `interval` (ping's default 1 s),
            // 84 bytes on the wire (56-byte payload + ICMP and IP headers). The guest
            // kernel answers in its receive softirq, ahead of user threads (so the
            // handler is RT here); `handle` covers the receive interrupt, icmp_echo and
            // the transmit (~10 us on a 2010s Xeon, our estimate). Latency runs from the
            // request's arrival at the host to the reply leaving it.
            arrivals = Some(periodic_arrivals(t, SimDuration::from_secs(1))?);
            let handle = t
                .opt_duration("handle")?
                .unwrap_or(SimDuration::from_us(10));
            request_bytes = Some(84);
            (serve_ops(fixed_ns(handle), Mode::Kernel), "echoes/s".into())
        }
        "netperf" => {
            // netperf TCP_STREAM into the guest: the sender keeps `window` segments of
            // `segment_kib` in flight (64 KiB: one TSO/GRO unit); each must be received
            // (driver, TCP, copy to netserver: `cpu_per_kib`, ~1 GB/s per core for the
            // whole receive path on 2010s hardware, our estimate) before its ACK lets the
            // sender put the next one on the wire, `rtt` later. Bandwidth is the completed
            // bytes; the window bounds how far a descheduled receiver lets the stream run
            // ahead.
            let window = t.opt_u64("window", 1, 1_000_000)?.unwrap_or(16) as u32;
            let seg_kib = t.opt_u64("segment_kib", 1, 1 << 20)?.unwrap_or(64);
            let per_kib = t
                .opt_duration("cpu_per_kib")?
                .unwrap_or(SimDuration::from_us(1));
            let rtt = t.opt_duration("rtt")?.unwrap_or(SimDuration::from_us(50));
            arrivals = Some(Arrivals::Closed {
                clients: window,
                think: fixed_ns(rtt),
            });
            request_bytes = Some(seg_kib * 1024);
            (
                // User mode: netserver's recv() returns to user space after each
                // segment, where the guest may switch to another thread.
                serve_ops(Dist::Fixed((per_kib.ns() * seg_kib) as f64), Mode::User),
                "segments/s".into(),
            )
        }
        "webbench" => {
            // webbench: `clients` concurrent HTTP clients on another host, each sending a
            // request, waiting for the whole response, and sending the next at once. The
            // server (a web server process per thread) spends `request_cpu` per page (a
            // small static page through Apache: ~200 us, our estimate) and returns
            // `page_kib`.
            let clients = t.opt_u64("clients", 1, 1_000_000)?.unwrap_or(100) as u32;
            let cpu = t
                .opt_duration("request_cpu")?
                .unwrap_or(SimDuration::from_us(200));
            let page_kib = t.opt_u64("page_kib", 0, 1 << 20)?.unwrap_or(8);
            let rtt = t.opt_duration("rtt")?.unwrap_or(SimDuration::from_us(50));
            arrivals = Some(Arrivals::Closed {
                clients,
                think: fixed_ns(rtt),
            });
            request_bytes = Some(page_kib * 1024);
            (serve_ops(fixed_ns(cpu), Mode::User), "pages/s".into())
        }
        "netback" => {
            // The split driver's backend (Xen netback in the driver domain; Linux 3.x
            // before 3.12 ran one netback kernel thread per driver-domain CPU, hence one
            // thread per vCPU by default). Each packet costs `per_packet` (grant
            // operations, event-channel notify, ~5 us, our estimate) plus `per_kib` of
            // its size (the grant copy, ~2 GB/s).
            let per_packet = t
                .opt_duration("per_packet")?
                .unwrap_or(SimDuration::from_us(5));
            let per_kib = t
                .opt_duration("per_kib")?
                .unwrap_or(SimDuration::from_ns(500));
            default_threads = vcpus;
            (
                vec![
                    Op::WaitPacket,
                    Op::ForwardPacket {
                        per_packet: per_packet.ns() as f64,
                        per_kib: per_kib.ns() as f64,
                    },
                ],
                "packets/s".into(),
            )
        }
        "dhrystone" => {
            // Dhrystone 2.1: a CPU-bound loop that lives in the cache (dirties next to no
            // memory). One unit = 1 ms of work at the base clock.
            (
                vec![Op::Compute {
                    work: Work::Time(Dist::Fixed(1e6)),
                    mode: Mode::User,
                }],
                "loops/s".into(),
            )
        }
        "iozone" => {
            // IOzone's write test through the guest page cache: write() copies each record
            // into the page cache (~2 GB/s with the kernel copy), and nothing reaches the
            // disk until the guest's writeback starts, which it does when dirty pages pass
            // dirty_background_ratio (10% of memory, the upstream default: 51.2 MiB of a
            // 512 MiB guest). So the disk sees one large write per `flush_kib` of records,
            // at the disk's streaming rate (a SAS disk under LVM: ~100 MB/s).
            // Without `record_kib` a loop is one flush (seed 003's model, flushes/s). With
            // `record_kib` (the FLMS paper's 1M-8M records) a loop is the records of one
            // flush, each its own write() (syscall and copy), and throughput_kbps counts
            // the bytes. The read test (`test = "read"`) reads a file larger than the
            // guest's page cache (the paper's 2 GB): each record is read from the disk at
            // its streaming rate (sequential readahead) and the read() then copies it to
            // user space; the thread blocks on the disk once per record.
            let flush_kib = t.opt_u64("flush_kib", 4, 1 << 30)?.unwrap_or(52_429);
            let disk_mb_s = t.opt_f64("disk_mb_per_s", 0.001, 1e6)?.unwrap_or(100.0);
            let record_kib = t.opt_u64("record_kib", 4, 1 << 30)?;
            // The writeback's block requests: by default the flush is one request; with
            // `request_kib` it goes out as requests of that size, one after another (a
            // guest with 2.6.32's 512 KiB max_sectors_kb splits it so). Under Kemari
            // each request is its own I/O event, so the split matters there.
            let request_kib = t.opt_u64("request_kib", 4, 1 << 30)?;
            // How many of those requests the guest keeps in flight: it submits the next
            // while fewer are outstanding and waits for a completion otherwise; the last
            // request of a flush waits for all. 1 (default) sends them one after another.
            // Writeback never waits for its own requests: the request queue's
            // `nr_requests` (128 in Linux 2.6.32; see the software-ft experiment) bounds
            // them, and a guest with `elevator = "cfq"` further (`CFQ_SLICE_SYNC_NS`).
            let queue_depth = t.opt_u64("queue_depth", 1, 1024)?;
            let read = match t.opt_str("test")? {
                None | Some("write") => false,
                Some("read") => true,
                Some(other) => {
                    return t.err(
                        "test",
                        format!("unknown iozone test {other:?}; allowed: \"write\", \"read\""),
                    )
                }
            };
            if read && record_kib.is_none() {
                return t.err("record_kib", "the read test needs a record size");
            }
            let disk_ns = |kib: u64| Dist::Fixed(kib as f64 * 1024.0 / (disk_mb_s * 1e6) * 1e9);
            // A kernel copy at ~2 GB/s: 0.5 ns per byte.
            let copy = |kib: u64| Op::Compute {
                work: Work::Time(Dist::Fixed(kib as f64 * 1024.0 / 2.0)),
                mode: Mode::Kernel,
            };
            if read && request_kib.is_some() {
                return t.err("request_kib", "applies to the write test only");
            }
            if read && queue_depth.is_some() {
                return t.err("queue_depth", "applies to the write test only");
            }
            let queue_depth = queue_depth.unwrap_or(1) as u32;
            // The disk writes of one flush of `kib`.
            let writeback = |kib: u64| -> Vec<Op> {
                let req = request_kib.unwrap_or(kib).min(kib);
                let mut ops = Vec::new();
                let mut left = kib;
                while left > 0 {
                    let n = req.min(left);
                    ops.push(Op::Io {
                        latency: disk_ns(n),
                        write_bytes: n * 1024,
                        // The flush's last request waits for all of them.
                        window: if left == n { 1 } else { queue_depth },
                        writeback: true,
                    });
                    left -= n;
                }
                ops
            };
            match record_kib {
                None => (
                    std::iter::once(copy(flush_kib))
                        .chain(writeback(flush_kib))
                        .collect(),
                    "flushes/s".into(),
                ),
                Some(rec) if read => {
                    bytes_per_unit = rec * 1024;
                    (
                        vec![Op::blocking_io(disk_ns(rec), 0), copy(rec)],
                        "records/s".into(),
                    )
                }
                Some(rec) => {
                    let records = (flush_kib / rec).max(1);
                    bytes_per_unit = records * rec * 1024;
                    let mut ops: Vec<Op> = (0..records).map(|_| copy(rec)).collect();
                    ops.extend(writeback(records * rec));
                    (ops, "flushes/s".into())
                }
            }
        }
        "dedup" => {
            let (ops, batches, threads) = dedup_ops(t, locks, default_lock, vcpus)?;
            total_units = Some(batches);
            default_threads = threads;
            (ops, "batches/s".into())
        }
        other => {
            let work = t.opt_f64("work", 0.001, 1000.0)?.unwrap_or(1.0);
            let Some((ops, unit, threads_per_vcpu)) = benchmark_ops(other, work, default_lock)
            else {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
                return t.err(
                    "kind",
                    format!(
                        "unknown workload kind {other:?}; allowed: {}",
                        names.join(", ")
                    ),
                );
            };
            // Lock ids 0..12 are this workload's own locks (hackbench: 8 socket-lock shards
            // and 4 run-queue-lock shards).
            let base = locks.len() as u32;
            for i in 0..12 {
                locks.push(format!("{other}#{base}#{i}"));
            }
            let ops = ops
                .into_iter()
                .map(|op| match op {
                    Op::Lock {
                        lock,
                        hold,
                        kind,
                        mode,
                        shards,
                    } => Op::Lock {
                        lock: base + lock,
                        hold,
                        kind,
                        mode,
                        shards,
                    },
                    o => o,
                })
                .collect();
            default_threads = threads_per_vcpu * vcpus;
            (ops, unit.to_string())
        }
    };
    Ok(Preset {
        ops,
        unit,
        keys: allowed_keys(kind),
        arrivals,
        request_bytes,
        total_units,
        bytes_per_unit,
        default_threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_lists_its_keys_once_in_the_order_of_presets() {
        let kinds: Vec<&str> = KIND_KEYS.iter().map(|(k, _)| *k).collect();
        let presets: Vec<&str> = PRESETS.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, presets);
        for (kind, keys) in KIND_KEYS {
            let mut names: Vec<&str> = allowed_keys(kind);
            if *kind == "rt-app" {
                assert_eq!(names, ["kind", "file"], "the reader of rt-app allows these");
            } else {
                assert!(
                    names.contains(&"threads") && names.contains(&"unit"),
                    "{kind}"
                );
            }
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "{kind} lists a key twice");
            assert!(keys.iter().all(|k| !k.default.is_empty()), "{kind}");
        }
    }
}
