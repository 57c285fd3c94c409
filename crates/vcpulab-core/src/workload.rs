//! Guest workloads: the operations a guest thread loops over, distributions, and presets.
//!
//! A workload is a program of operations that each of its threads loops over forever.
//! Presets (`sysbench-cpu`, `stress-ng`, `lookbusy`) expand into programs; `program` spells
//! the operations out. Each completed loop is one unit of throughput (a sysbench event, a
//! stress-ng bogo-op, ...), and a request served is one unit for request-driven workloads.

use crate::reader::{type_name, Owned, Res, Table};
use crate::rng::Rng;
use crate::vocab::LockKind;
use crate::time::SimDuration;

/// A non-negative random quantity, in nanoseconds of work or time.
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Fixed(f64),
    Exp {
        mean: f64,
    },
    Uniform {
        lo: f64,
        hi: f64,
    },
    /// Normal, truncated at zero.
    Normal {
        mean: f64,
        sd: f64,
    },
    /// Log-normal given by its median and the sigma of the underlying normal.
    LogNormal {
        median: f64,
        sigma: f64,
    },
}

impl Dist {
    /// A draw. The constant and the exponential (the common cases) are inlined at the
    /// call; the others are out of line.
    #[inline(always)]
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match *self {
            Dist::Fixed(x) => x,
            Dist::Exp { mean } => rng.exp(mean),
            _ => self.sample_other(rng),
        }
    }

    /// Every distribution (so it stands alone); `sample` calls it for the rarer ones.
    #[inline(never)]
    fn sample_other(&self, rng: &mut Rng) -> f64 {
        match *self {
            Dist::Fixed(x) => x,
            Dist::Exp { mean } => rng.exp(mean),
            Dist::Uniform { lo, hi } => lo + (hi - lo) * (1.0 - rng.uniform_open0()),
            Dist::Normal { mean, sd } => (mean + sd * rng.std_normal()).max(0.0),
            Dist::LogNormal { median, sigma } => median * (sigma * rng.std_normal()).exp(),
        }
    }
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Fixed(x) => x,
            Dist::Exp { mean } => mean,
            Dist::Uniform { lo, hi } => (lo + hi) / 2.0,
            Dist::Normal { mean, .. } => mean,
            Dist::LogNormal { median, sigma } => median * (sigma * sigma / 2.0).exp(),
        }
    }
    pub fn scaled(&self, k: f64) -> Dist {
        match *self {
            Dist::Fixed(x) => Dist::Fixed(x * k),
            Dist::Exp { mean } => Dist::Exp { mean: mean * k },
            Dist::Uniform { lo, hi } => Dist::Uniform {
                lo: lo * k,
                hi: hi * k,
            },
            Dist::Normal { mean, sd } => Dist::Normal {
                mean: mean * k,
                sd: sd * k,
            },
            Dist::LogNormal { median, sigma } => Dist::LogNormal {
                median: median * k,
                sigma,
            },
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    User,
    Kernel,
}

#[derive(Clone, Debug, PartialEq)]
pub enum IpiTargets {
    /// Every other vCPU of the VM.
    All,
    /// These vCPU indices (the sender's own vCPU is skipped).
    List(Vec<u32>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Burn CPU: `work` is time at the host's base clock, or cycles.
    Compute { work: Work, mode: Mode },
    /// Spin until the named lock (index into the VM's lock table) is acquired, hold it for
    /// `hold`, release it. Kernel spinlocks by default; `mode = "user"` for user-space
    /// spinlocks (Intel PLE ignores those).
    /// `shards` > 1: the threads are split into that many consecutive groups, each with
    /// its own instance of the lock (e.g. one socket lock per hackbench group).
    Lock {
        lock: u32,
        hold: Dist,
        kind: LockKind,
        mode: Mode,
        shards: u32,
    },
    /// Send an IPI to other vCPUs and spin until each has acknowledged (a target
    /// acknowledges when it runs).
    Ipi { targets: IpiTargets },
    /// Block on a device; the completion interrupt wakes the vCPU after `latency`.
    /// `write_bytes` > 0 makes it a disk write of that size (replicated by a DRBD helper;
    /// its buffer counts as dirty memory for Kemari). `window` is how many of the thread's
    /// requests may be outstanding: after submitting this one the thread goes on to its
    /// next operation while fewer than `window` are, and otherwise blocks until a
    /// completion brings them below it. 1 (every `io` op of a scenario) waits for this
    /// request; a larger window keeps requests in flight (the disk serves them one after
    /// another), and a run of such requests ends with one of window 1, which waits for
    /// all of them. Only presets build windows (IOzone's `queue_depth`). `writeback`
    /// marks the page-cache writeback's asynchronous requests (IOzone's); every other
    /// request is synchronous (a read, or a write the thread waits for, such as a
    /// journal commit), which matters under a guest `elevator = "cfq"`.
    Io {
        latency: Dist,
        write_bytes: u64,
        window: u32,
        writeback: bool,
    },
    /// Block on a timer.
    Sleep { duration: Dist },
    /// Take the next request from the workload's queue, blocking until one arrives.
    WaitRequest,
    /// Complete the request taken by the last WaitRequest: records its latency.
    Respond,
    /// I/O backend (the `netback` preset, a driver domain's or host's packet forwarder):
    /// take the next packet from the backend queue, blocking until one is there.
    WaitPacket,
    /// Forward the packet taken by the last WaitPacket after `per_packet` plus
    /// `per_kib` x its size of CPU work: into the guest (an arriving request) or out to the
    /// network (a response, which completes the request).
    ForwardPacket { per_packet: f64, per_kib: f64 },
    /// lookbusy's busy phase under its controller (the `lookbusy` preset with `adaptive`):
    /// `first_busy` of work in the first cycle, then moved each cycle by (target `util` -
    /// the guest's measured utilisation) x the phase / `spinners` (lookbusy's ncpus).
    LookbusySpin {
        util: f64,
        first_busy: Work,
        spinners: u32,
    },
}

impl Op {
    /// A synchronous request the thread waits for (window 1, not writeback): every `io`
    /// op of a scenario and the presets' reads.
    pub fn blocking_io(latency: Dist, write_bytes: u64) -> Op {
        Op::Io {
            latency,
            write_bytes,
            window: 1,
            writeback: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Arrivals {
    /// Open loop: Poisson arrivals at `rate` per second.
    Poisson { rate: f64 },
    /// Open loop: one arrival every `interval` ns.
    Periodic { interval: f64 },
    /// Closed loop: `clients` each send a request, wait for the response, think, repeat.
    Closed { clients: u32, think: Dist },
}

#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    /// The preset name as written (`program`, `sysbench-cpu`, ...).
    pub kind: String,
    pub threads: u32,
    pub ops: Vec<Op>,
    /// What one unit of throughput is called, e.g. `events/s`.
    pub unit: String,
    /// Throughput counts served requests (true) or completed loops (false).
    pub counts_requests: bool,
    pub arrivals: Option<Arrivals>,
    /// Real-time priority inside the guest: a woken thread preempts the vCPU's other
    /// (normal) threads at once.
    pub rt: bool,
    /// Guest memory dirtied per ns of the workload's CPU time (bytes; for Kemari).
    pub dirty_bytes_per_ns: f64,
    /// Bytes one request carries over the network (for bandwidth and backend copy cost).
    pub request_bytes: u64,
    /// A finite job: the workload stops after this many units (loops) in total, and its
    /// completion time is reported (`sysbench-cpu` with `events`).
    pub total_units: Option<u64>,
    /// Guest vCPUs this workload's threads live on (thread j on `vcpus[j mod len]`); None:
    /// the VM's default placement (thread k of the VM on vCPU k mod vcpus).
    pub vcpus: Option<Vec<u32>>,
    /// Bytes one unit (loop) moves, for `throughput_kbps` (iozone with `record_kib`); 0:
    /// not a byte stream.
    pub bytes_per_unit: u64,
    /// The guest's receive path for a request-serving workload, when it runs elsewhere
    /// than the workload's own threads (the `rx` key); None: the serving thread does it.
    pub rx: Option<RxPath>,
}

/// A guest receive path on dedicated vCPUs (`rx = { vcpus = [..], ... }`): each arriving
/// request first interrupts one of `vcpus` (the one waiting longest), whose kernel handles it at interrupt
/// priority (driver, softirq, TCP/IP: `per_packet` + `per_kib` x its size, in base-clock
/// ns) and then hands it to the workload's threads. vTurbo's I/O vCPU is the motivating
/// case: interrupts and kernel receive processing there, the application elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub struct RxPath {
    pub vcpus: Vec<u32>,
    pub per_packet: f64,
    pub per_kib: f64,
}

/// Default kernel cost of the receive path per request: interrupt entry and exit, the
/// NAPI poll and the socket wake-up (~2 us on a 2010s Xeon, our estimate).
pub const RX_PER_PACKET_NS: u64 = 2_000;
/// Default kernel cost per KiB received: driver, GRO, IP and TCP per-frame work. The whole
/// receive path of a TCP stream is ~1 us/KiB on 2010s hardware (the netperf preset's
/// `cpu_per_kib`); about half of it is the copy to user space, which stays with the
/// application, so the kernel part is ~0.5 us/KiB (our estimate).
pub const RX_PER_KIB_NS: u64 = 500;

/// A guest with `elevator = "cfq"` (the CFQ I/O scheduler of Linux 2.6.33 and later, with
/// its default `low_latency = 1`; assumed for the RHEL 6 kernels, see docs/models.md)
/// limits the asynchronous writeback requests it dispatches to the device
/// (`cfq_may_dispatch`): none while a synchronous request is in flight; otherwise one per
/// `cfq_slice_sync` (100 ms, `HZ / 10`) since the last delayed synchronous request, and
/// one when none is in flight. A synchronous request is delayed when it completes at least
/// `cfq_fifo_expire[1]` (125 ms, `HZ / 8`) after it was queued (`cfq_completed_request`).
/// At boot the last delayed one counts as a second ago (`last_delayed_sync = jiffies -
/// HZ`). Not modelled: the quantum when several queues are busy, idling, CFQ's time
/// slices and its sorting; the limit applies per writing thread, not per disk.
pub const CFQ_SLICE_SYNC_NS: u64 = 100_000_000;
/// See `CFQ_SLICE_SYNC_NS`.
pub const CFQ_FIFO_EXPIRE_SYNC_NS: u64 = 125_000_000;

pub const PRESETS: &[(&str, &str)] = &[
    ("program", "explicit list of operations (compute, lock, ipi, io, sleep, wait_request, respond, serve)"),
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
    ("timer-rt", "an RT-priority thread woken by a periodic timer; latency = timer expiry to the thread running"),
    ("dhrystone", "Dhrystone 2.1: CPU load, loops/s"),
    ("iozone", "IOzone write (page cache; each flush written back at once, or in request_kib requests, up to queue_depth in flight) or read (record by record from disk) test; flushes/s, KB/s with record_kib"),
    ("ping", "ping: ICMP echo requests from outside at a fixed interval, answered by the guest kernel; latency = round trip inside the host"),
    ("netperf", "netperf TCP_STREAM receiver: a window of outstanding segments from outside; bandwidth from completed bytes"),
    ("webbench", "webbench: concurrent HTTP clients from outside, each waiting for its response; pages/s and bandwidth"),
    ("netback", "an I/O backend: the driver domain's (or host's) packet forwarder for the split-driver path ([host] io_path)"),
];

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

/// sysbench cpu, default event cost. Calibrated once, from the blog 001 single-thread
/// figure (1271.76 events/s on a Core i5-6600 at its 1-core turbo clock of 3.9 GHz):
/// 3.9e9 / 1271.76 = 3,066,616 cycles per event (--cpu-max-prime=10000, sysbench 1.0).
pub const SYSBENCH_EVENT_CYCLES: f64 = 3_066_616.0;

fn parse_dist_with(o: &Owned, scalar: &dyn Fn(&Owned) -> Res<f64>) -> Res<Dist> {
    match o.v {
        toml::Value::Table(_) => {
            let t = o.table()?;
            let kind = t.req("dist")?.str()?;
            // Each distribution takes its own keys: a key another one takes (`sd` with
            // `exp`, `value` with anything but `fixed`) is unknown here, and the error
            // lists what this one takes. Checked before the values are read, so that
            // `{ dist = "exp", value = ... }` names `value`, not a missing `mean`.
            let allowed: &[&str] = match kind {
                "fixed" => &["dist", "value"],
                "exp" | "exponential" => &["dist", "mean"],
                "uniform" => &["dist", "min", "max"],
                "normal" => &["dist", "mean", "sd"],
                "lognormal" => &["dist", "median", "sigma"],
                other => {
                    return t.err(
                        "dist",
                        format!("unknown distribution {other:?}; allowed: fixed, exp, uniform, normal, lognormal"),
                    )
                }
            };
            t.only(allowed)?;
            let d = match kind {
                "fixed" => Dist::Fixed(scalar(&t.req("value")?)?),
                "exp" | "exponential" => Dist::Exp {
                    mean: scalar(&t.req("mean")?)?,
                },
                "uniform" => {
                    let (lo, hi) = (scalar(&t.req("min")?)?, scalar(&t.req("max")?)?);
                    if lo > hi {
                        return t.err("min", "must not exceed max");
                    }
                    Dist::Uniform { lo, hi }
                }
                "normal" => Dist::Normal {
                    mean: scalar(&t.req("mean")?)?,
                    sd: scalar(&t.req("sd")?)?,
                },
                _ => Dist::LogNormal {
                    median: scalar(&t.req("median")?)?,
                    sigma: t.req("sigma")?.f64_in(0.0, 10.0)?,
                },
            };
            Ok(d)
        }
        _ => Ok(Dist::Fixed(scalar(o)?)),
    }
}

/// A duration or a distribution of durations, in ns.
pub fn parse_dist(o: &Owned) -> Res<Dist> {
    parse_dist_with(o, &|x: &Owned| Ok(x.duration()?.ns() as f64))
}

fn parse_cycles(o: &Owned) -> Res<Dist> {
    parse_dist_with(o, &|x: &Owned| x.f64_in(0.0, 1e18))
}

fn parse_mode(t: &Table) -> Res<Mode> {
    match t.opt_str("mode")? {
        None | Some("user") => Ok(Mode::User),
        Some("kernel") => Ok(Mode::Kernel),
        Some(other) => t.err(
            "mode",
            format!("unknown mode {other:?}; allowed: \"user\", \"kernel\""),
        ),
    }
}

/// Compute work from `duration` (time at the base clock) or `cycles`.
fn parse_work(t: &Table, what: &str) -> Res<Work> {
    match (t.has("duration"), t.has("cycles")) {
        (true, true) => t.err("cycles", "give either duration or cycles, not both"),
        (true, false) => Ok(Work::Time(parse_dist(&t.req("duration")?)?)),
        (false, true) => Ok(Work::Cycles(parse_cycles(&t.req("cycles")?)?)),
        (false, false) => t.err(
            "duration",
            format!("{what} needs a duration (e.g. \"50us\") or cycles"),
        ),
    }
}

/// Work is stated as time at the base clock or as cycles; cycles become base-clock
/// nanoseconds once the host clock is known (`Work::base_ns`).
#[derive(Clone, Debug, PartialEq)]
pub enum Work {
    Time(Dist),
    Cycles(Dist),
}

impl Work {
    pub fn base_ns(&self, base_ghz: f64) -> Dist {
        match self {
            Work::Time(d) => d.clone(),
            Work::Cycles(c) => c.scaled(1.0 / base_ghz),
        }
    }
}

fn parse_op(
    o: &Owned,
    locks: &mut Vec<String>,
    default_lock: LockKind,
    vcpus: u32,
) -> Res<Vec<Op>> {
    let t = o.table()?;
    let op = t.req("op")?.str()?;
    let allowed: &[&str];
    let parsed = match op {
        "compute" => {
            allowed = &["op", "duration", "cycles", "mode"];
            Op::Compute { work: parse_work(&t, "compute")?, mode: parse_mode(&t)? }
        }
        "lock" => {
            allowed = &["op", "lock", "hold", "kind", "mode", "shards"];
            let name = t.req("lock")?.str()?.to_string();
            let hold = parse_dist(&t.req("hold")?)?;
            let kind = match t.opt_str("kind")? {
                None => default_lock,
                Some("ticket") => LockKind::Ticket,
                Some("tas") => LockKind::TestAndSet,
                Some("mutex") => LockKind::Mutex,
                Some(other) => return t.err("kind", format!("unknown lock kind {other:?}; allowed: \"ticket\", \"tas\", \"mutex\"")),
            };
            let shards = t.opt_u64("shards", 1, 65_536)?.unwrap_or(1) as u32;
            let id = match locks.iter().position(|l| *l == name) {
                Some(i) => i,
                None => {
                    locks.push(name.clone());
                    for k in 1..shards {
                        locks.push(format!("{name}#{k}"));
                    }
                    locks.len() - shards as usize
                }
            };
            let mode = match t.opt_str("mode")? {
                // A mutex guards user-space data; a spinlock is the guest kernel's.
                None if kind == LockKind::Mutex => Mode::User,
                None | Some("kernel") => Mode::Kernel,
                Some("user") => Mode::User,
                Some(other) => return t.err("mode", format!("unknown mode {other:?}; allowed: \"kernel\", \"user\"")),
            };
            Op::Lock { lock: id as u32, hold, kind, mode, shards }
        }
        "ipi" => {
            allowed = &["op", "targets"];
            let targets = match t.get("targets") {
                None => IpiTargets::All,
                Some(x) => match x.v {
                    toml::Value::String(s) if s == "all" => IpiTargets::All,
                    toml::Value::Array(_) => {
                        let mut list = Vec::new();
                        for i in x.array()? {
                            let v = i.u64_in(0, u64::MAX)?;
                            if v >= vcpus as u64 {
                                return i.err(format!("vCPU index {v} does not exist: the VM has vCPUs 0-{}", vcpus - 1));
                            }
                            list.push(v as u32);
                        }
                        IpiTargets::List(list)
                    }
                    other => {
                        return x.err(format!(
                            "expected \"all\" or an array of vCPU indices, got {}",
                            if let toml::Value::String(s) = other { format!("{s:?}") } else { type_name(other).into() }
                        ))
                    }
                },
            };
            Op::Ipi { targets }
        }
        "io" => {
            allowed = &["op", "latency", "write_kib"];
            let write_bytes = t.opt_u64("write_kib", 0, 1 << 30)?.unwrap_or(0) * 1024;
            Op::blocking_io(parse_dist(&t.req("latency")?)?, write_bytes)
        }
        "sleep" => {
            allowed = &["op", "duration"];
            Op::Sleep { duration: parse_dist(&t.req("duration")?)? }
        }
        "wait_request" => {
            allowed = &["op"];
            Op::WaitRequest
        }
        "respond" => {
            allowed = &["op"];
            Op::Respond
        }
        "serve" => {
            // Sugar for wait_request + compute(service) + respond.
            let service = parse_dist(&t.req("service")?)?;
            let mode = parse_mode(&t)?;
            t.finish(&["op", "service", "mode"])?;
            return Ok(serve_ops(service, mode));
        }
        other => {
            return t.err(
                "op",
                format!("unknown op {other:?}; allowed: compute, lock, ipi, io, sleep, wait_request, respond, serve"),
            )
        }
    };
    t.finish(allowed)?;
    Ok(vec![parsed])
}

/// Wait for a request, spend `service` on it, respond: the `serve` op and the request
/// presets (ping, netperf, webbench).
fn serve_ops(service: Dist, mode: Mode) -> Vec<Op> {
    vec![
        Op::WaitRequest,
        Op::Compute {
            work: Work::Time(service),
            mode,
        },
        Op::Respond,
    ]
}

fn fixed_ns(d: SimDuration) -> Dist {
    Dist::Fixed(d.ns() as f64)
}

/// A preset's periodic timer or request stream: `interval` (non-zero), default `default`.
fn periodic_arrivals(t: &Table, default: SimDuration) -> Res<Arrivals> {
    let interval = t.opt_duration("interval")?.unwrap_or(default);
    if interval.ns() == 0 {
        return t.err("interval", "must be longer than 0s");
    }
    Ok(Arrivals::Periodic {
        interval: interval.ns() as f64,
    })
}

fn parse_arrivals(o: &Owned) -> Res<Arrivals> {
    let t = o.table()?;
    let process = t.req("process")?.str()?;
    let a = match process {
        "poisson" => Arrivals::Poisson {
            rate: t.req("rate")?.f64_in(1e-9, 1e9)?,
        },
        "periodic" => {
            let d = t.req("interval")?.duration()?;
            if d.ns() == 0 {
                return t.err("interval", "must be longer than 0s");
            }
            Arrivals::Periodic {
                interval: d.ns() as f64,
            }
        }
        "closed" => Arrivals::Closed {
            clients: t.req("clients")?.u64_in(1, 1_000_000)? as u32,
            think: match t.get("think") {
                Some(x) => parse_dist(&x)?,
                None => Dist::Fixed(0.0),
            },
        },
        other => {
            return t.err(
                "process",
                format!("unknown arrival process {other:?}; allowed: poisson, periodic, closed"),
            )
        }
    };
    t.finish(&["process", "rate", "interval", "clients", "think"])?;
    Ok(a)
}

/// A list of distinct guest vCPU indices below `vcpus` (a workload's `vcpus`, `rx.vcpus`).
fn parse_vcpu_list(o: &Owned, vcpus: u32) -> Res<Vec<u32>> {
    let items = o.array()?;
    if items.is_empty() {
        return o.err("must list at least one vCPU index");
    }
    let mut list = Vec::new();
    for i in &items {
        let v = i.u64_in(0, vcpus as u64 - 1)? as u32;
        if list.contains(&v) {
            return i.err(format!("vCPU {v} is listed twice"));
        }
        list.push(v);
    }
    Ok(list)
}

/// The `rx` table of a request-serving workload.
fn parse_rx(o: &Owned, vcpus: u32) -> Res<RxPath> {
    let t = o.table()?;
    let list = parse_vcpu_list(&t.req("vcpus")?, vcpus)?;
    let per_packet = t
        .opt_duration("per_packet")?
        .unwrap_or(SimDuration::from_ns(RX_PER_PACKET_NS));
    let per_kib = t
        .opt_duration("per_kib")?
        .unwrap_or(SimDuration::from_ns(RX_PER_KIB_NS));
    t.finish(&["vcpus", "per_packet", "per_kib"])?;
    Ok(RxPath {
        vcpus: list,
        per_packet: per_packet.ns() as f64,
        per_kib: per_kib.ns() as f64,
    })
}

/// Parses one `[[vm.workload]]` table, registering the lock names it uses.
pub fn parse_workload(
    o: &Owned,
    locks: &mut Vec<String>,
    default_lock: LockKind,
    vcpus: u32,
) -> Res<WorkloadSpec> {
    let t = o.table()?;
    let kind = t.req("kind")?.str()?.to_string();
    let threads = t.opt_u64("threads", 0, 1_000_000)?.unwrap_or(1) as u32;
    let arrivals = t.get("arrivals").map(|a| parse_arrivals(&a)).transpose()?;
    let unit_override = t.opt_str("unit")?.map(str::to_string);
    let rt = match t.opt_str("priority")? {
        None | Some("normal") => false,
        Some("rt") => true,
        Some(other) => {
            return t.err(
                "priority",
                format!("unknown priority {other:?}; allowed: \"normal\", \"rt\""),
            )
        }
    };
    let placement = t
        .get("vcpus")
        .map(|o| parse_vcpu_list(&o, vcpus))
        .transpose()?;
    let dirty_stated = t.opt_f64("dirty_mib_per_s", 0.0, 1e6)?;
    let dirty_bytes_per_ns = match (dirty_stated, kind.as_str()) {
        (Some(x), _) => x * crate::ft::MIB / 1e9,
        // IOzone's CPU time is its copies between user space and the page cache, each
        // byte copied a byte dirtied: the copy rate below, 2 bytes per ns.
        (None, "iozone") => 2.0,
        (None, _) => 0.0,
    };
    let mut timer_arrivals: Option<Arrivals> = None;
    let mut request_bytes = t.opt_u64("request_bytes", 0, 1 << 40)?.unwrap_or(0);
    let mut total_units: Option<u64> = None;
    let mut bytes_per_unit = 0u64;
    // Benchmark presets default to their threads-per-vCPU; the others to 1.
    let mut default_threads = 1;
    let (ops, unit, allowed): (Vec<Op>, String, &[&str]) = match kind.as_str() {
        "program" => {
            let items = t.req("ops")?.array()?;
            if items.is_empty() {
                return t.err("ops", "must list at least one operation");
            }
            let mut ops = Vec::new();
            for item in &items {
                ops.extend(parse_op(item, locks, default_lock, vcpus)?);
            }
            let uses_requests = ops.iter().any(|o| matches!(o, Op::WaitRequest));
            if uses_requests && arrivals.is_none() {
                return t.err("arrivals", "the program waits for requests, so it needs arrivals = { process = \"poisson\", rate = ... }");
            }
            (
                ops,
                if uses_requests {
                    "requests/s".into()
                } else {
                    "loops/s".into()
                },
                &[
                    "kind",
                    "threads",
                    "ops",
                    "unit",
                    "arrivals",
                    "request_bytes",
                ],
            )
        }
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
                &[
                    "kind",
                    "threads",
                    "event_cost",
                    "event_cycles",
                    "events",
                    "unit",
                ],
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
                &["kind", "threads", "bogo_op", "unit"],
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
            (
                ops,
                "periods/s".into(),
                &[
                    "kind",
                    "threads",
                    "utilization",
                    "period",
                    "adaptive",
                    "unit",
                ],
            )
        }
        "timer-rt" => {
            // Seed 003's evaluation program: an RT-priority thread that sleeps until the
            // next periodic timer event and records when it ran. The response is measured
            // when the thread runs (respond comes first); handling the event (reading the
            // clock, storing the sample) takes `handle` of CPU. The paper does not give
            // the period; 10 ms (10,000 events in 100 s) is our assumption.
            timer_arrivals = Some(periodic_arrivals(&t, SimDuration::from_ms(10))?);
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
                &["kind", "threads", "interval", "handle", "unit"],
            )
        }
        "ping" => {
            // ping (iputils): one ICMP echo request every `interval` (ping's default 1 s),
            // 84 bytes on the wire (56-byte payload + ICMP and IP headers). The guest
            // kernel answers in its receive softirq, ahead of user threads (so the
            // handler is RT here); `handle` covers the receive interrupt, icmp_echo and
            // the transmit (~10 us on a 2010s Xeon, our estimate). Latency runs from the
            // request's arrival at the host to the reply leaving it.
            timer_arrivals = Some(periodic_arrivals(&t, SimDuration::from_secs(1))?);
            let handle = t
                .opt_duration("handle")?
                .unwrap_or(SimDuration::from_us(10));
            request_bytes = 84;
            (
                serve_ops(fixed_ns(handle), Mode::Kernel),
                "echoes/s".into(),
                &["kind", "threads", "interval", "handle", "unit"],
            )
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
            timer_arrivals = Some(Arrivals::Closed {
                clients: window,
                think: fixed_ns(rtt),
            });
            request_bytes = seg_kib * 1024;
            (
                // User mode: netserver's recv() returns to user space after each
                // segment, where the guest may switch to another thread.
                serve_ops(Dist::Fixed((per_kib.ns() * seg_kib) as f64), Mode::User),
                "segments/s".into(),
                &[
                    "kind",
                    "threads",
                    "window",
                    "segment_kib",
                    "cpu_per_kib",
                    "rtt",
                    "unit",
                ],
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
            timer_arrivals = Some(Arrivals::Closed {
                clients,
                think: fixed_ns(rtt),
            });
            request_bytes = page_kib * 1024;
            (
                serve_ops(fixed_ns(cpu), Mode::User),
                "pages/s".into(),
                &[
                    "kind",
                    "threads",
                    "clients",
                    "request_cpu",
                    "page_kib",
                    "rtt",
                    "unit",
                ],
            )
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
                &["kind", "threads", "per_packet", "per_kib", "unit"],
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
                &["kind", "threads", "unit"],
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
            let keys: &[&str] = &[
                "kind",
                "threads",
                "flush_kib",
                "disk_mb_per_s",
                "record_kib",
                "request_kib",
                "queue_depth",
                "test",
                "unit",
            ];
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
                    keys,
                ),
                Some(rec) if read => {
                    bytes_per_unit = rec * 1024;
                    (
                        vec![Op::blocking_io(disk_ns(rec), 0), copy(rec)],
                        "records/s".into(),
                        keys,
                    )
                }
                Some(rec) => {
                    let records = (flush_kib / rec).max(1);
                    bytes_per_unit = records * rec * 1024;
                    let mut ops: Vec<Op> = (0..records).map(|_| copy(rec)).collect();
                    ops.extend(writeback(records * rec));
                    (ops, "flushes/s".into(), keys)
                }
            }
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
            (ops, unit.to_string(), &["kind", "threads", "work", "unit"])
        }
    };
    if request_bytes > 0 && timer_arrivals.is_none() && arrivals.is_none() {
        return t.err("request_bytes", "only workloads that serve requests (wait_request/respond with arrivals) carry request bytes");
    }
    if kind != "program" && arrivals.is_some() {
        return t.err(
            "arrivals",
            format!(
                "the {kind} preset takes no arrivals; use kind = \"program\" with wait_request"
            ),
        );
    }
    let rx = match t.get("rx") {
        None => None,
        Some(o) => {
            let serves = ops.iter().any(|op| matches!(op, Op::WaitRequest));
            if !serves || kind == "timer-rt" {
                return o.err(format!(
                    "the {kind} workload does not receive requests from the network; rx applies to ping, netperf, webbench and programs with wait_request"
                ));
            }
            Some(parse_rx(&o, vcpus)?)
        }
    };
    // Keys every kind takes, besides its own.
    let allowed: Vec<&str> = allowed
        .iter()
        .copied()
        .chain(["priority", "dirty_mib_per_s", "vcpus", "rx"])
        .collect();
    t.finish(&allowed)?;
    let threads = if t.has("threads") {
        threads
    } else {
        default_threads
    };
    let ops = ops
        .into_iter()
        .map(|op| match op {
            Op::LookbusySpin {
                util, first_busy, ..
            } => Op::LookbusySpin {
                util,
                first_busy,
                spinners: threads,
            },
            o => o,
        })
        .collect::<Vec<_>>();
    let counts_requests = ops.iter().any(|o| matches!(o, Op::Respond));
    let rt = rt || kind == "timer-rt" || kind == "ping";
    Ok(WorkloadSpec {
        kind,
        threads,
        ops,
        unit: unit_override.unwrap_or(unit),
        counts_requests,
        arrivals: arrivals.or(timer_arrivals),
        rt,
        dirty_bytes_per_ns,
        request_bytes,
        total_units,
        vcpus: placement,
        bytes_per_unit,
        rx,
    })
}
