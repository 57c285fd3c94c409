//! Guest workloads: the operations a guest thread loops over, distributions, and the
//! parsing of a `[[vm.workload]]` table.
//!
//! A workload is a program of operations that each of its threads loops over forever.
//! Presets (`sysbench-cpu`, `stress-ng`, `lookbusy`, ...; see `presets`) expand into
//! programs; `program` spells the operations out. Each completed loop is one unit of
//! throughput (a sysbench event, a stress-ng bogo-op, ...), and a request served is one
//! unit for request-driven workloads.

mod presets;
mod rtapp;

use crate::reader::{type_name, Owned, Res, Table};
use crate::rng::Rng;
use crate::time::SimDuration;
use crate::vocab::LockKind;
pub use presets::{
    kind_keys, takes_common_keys, KeyInfo, COMMON_KEYS, KIND_KEYS, PRESETS, SYSBENCH_EVENT_CYCLES,
};

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
    /// rt-app's periodic timer: the thread's timer `slot` expires every `period` ns from
    /// the start of the run; block until its next expiry. Late (the expiry passed),
    /// go on at once, and with `relative` count the next period from now (rt-app's
    /// default) rather than catch up.
    Timer {
        period: f64,
        relative: bool,
        slot: u32,
    },
    /// Take the next request from the workload's queue, blocking until one arrives.
    WaitRequest,
    /// Complete the request taken by the last WaitRequest: records its latency.
    Respond,
    /// `respond` with `hold`: on the split-driver path, the thread sends the response to
    /// the backend and then keeps the backend's queue locked for `hold` of its own CPU
    /// time (a sender that wakes its receiver before it unlocks, as Rust's
    /// `std::sync::mpsc` does): the backend, woken at once, takes the response only once
    /// the sender has run that long, so a sender preempted meanwhile holds it up. A closed
    /// loop's think time then runs from the send (the KVM harness computes its next
    /// wake-up before it sends).
    RespondHeld { hold: Dist },
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
    /// The op's name in user terms (a program's `op = "..."`, or what a preset does).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Compute { .. } => "compute",
            Op::Lock { .. } => "lock",
            Op::Ipi { .. } => "ipi",
            Op::Io { .. } => "io",
            Op::Sleep { .. } => "sleep",
            Op::Timer { .. } => "timer",
            Op::WaitRequest => "wait_request",
            Op::Respond | Op::RespondHeld { .. } => "respond",
            Op::WaitPacket => "packet wait",
            Op::ForwardPacket { .. } => "packet forwarding",
            Op::LookbusySpin { .. } => "lookbusy busy-loop",
        }
    }

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
    /// `arrivals.latency = "taken"`: a request's latency runs from its reaching the guest
    /// to a guest thread taking it, not from its arrival to its response.
    pub latency_taken: bool,
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
            allowed = &["op", "hold"];
            match t.get("hold") {
                Some(h) => Op::RespondHeld { hold: parse_dist(&h)? },
                None => Op::Respond,
            }
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

/// The `arrivals` table: its process, and whether latency ends when the request is taken
/// (`latency = "taken"`) rather than at its response (`"response"`, the default).
fn parse_arrivals(o: &Owned) -> Res<(Arrivals, bool)> {
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
    let taken = match t.opt_str("latency")? {
        None | Some("response") => false,
        Some("taken") => true,
        Some(other) => {
            return t.err(
                "latency",
                format!("unknown latency end {other:?}; allowed: \"response\" (arrival to response), \"taken\" (reaching the guest to a guest thread taking it)"),
            )
        }
    };
    t.finish(&["process", "rate", "interval", "clients", "think", "latency"])?;
    Ok((a, taken))
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

/// Parses one `[[vm.workload]]` table into its workloads (one, or an rt-app file's
/// tasks), registering the lock names they use.
pub fn parse_workloads(
    o: &Owned,
    locks: &mut Vec<String>,
    default_lock: LockKind,
    vcpus: u32,
) -> Res<Vec<WorkloadSpec>> {
    let t = o.table()?;
    if t.req("kind")?.str()? == "rt-app" {
        return rtapp::parse(&t, locks, vcpus);
    }
    Ok(vec![parse_workload(o, locks, default_lock, vcpus)?])
}

/// Parses one workload table that is a single workload (a VM's, or a host thread's).
pub fn parse_workload(
    o: &Owned,
    locks: &mut Vec<String>,
    default_lock: LockKind,
    vcpus: u32,
) -> Res<WorkloadSpec> {
    let t = o.table()?;
    let kind = t.req("kind")?.str()?.to_string();
    if kind == "rt-app" {
        return t.err(
            "kind",
            "an rt-app file's tasks run in a guest: give it as a VM's workload (a host thread runs one thread of compute, sleep and io)",
        );
    }
    let threads = t.opt_u64("threads", 0, 1_000_000)?.unwrap_or(1) as u32;
    let (arrivals, latency_taken) = match t.get("arrivals") {
        Some(a) => {
            let (a, taken) = parse_arrivals(&a)?;
            (Some(a), taken)
        }
        None => (None, false),
    };
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
    let (ops, unit, allowed): (Vec<Op>, String, Vec<&str>) = match kind.as_str() {
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
                presets::allowed_keys("program"),
            )
        }
        _ => {
            let p = presets::expand(&t, &kind, locks, default_lock, vcpus)?;
            timer_arrivals = p.arrivals;
            if let Some(bytes) = p.request_bytes {
                request_bytes = bytes;
            }
            total_units = p.total_units;
            bytes_per_unit = p.bytes_per_unit;
            default_threads = p.default_threads;
            (p.ops, p.unit, p.keys)
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
    let counts_requests = ops
        .iter()
        .any(|o| matches!(o, Op::Respond | Op::RespondHeld { .. }));
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
        latency_taken,
    })
}
