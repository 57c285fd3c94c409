//! The scenario schema: parsing and validation of scenario files (TOML) and dicts (JSON).
//!
//! The key names here are a contract (see docs/scenarios.md): keys may be added, never
//! renamed. Every error names the file, the key path and what is allowed.

use crate::error::ScenarioError;
use crate::reader::{json_to_toml, parse_toml, type_name, Owned, Res, Table};
use crate::time::{SimDuration, NS_PER_S};
use crate::topology::{CpuSet, Topology};
use crate::workload::{self, WorkloadSpec};
// Re-exported: the schema's words, defined in a leaf module that `workload` and `sched`
// import without importing the schema.
pub use crate::vocab::{IoDriver, LockKind, VmClass};

/// Upper bounds that keep a scenario within what one machine can simulate. Larger inputs
/// are refused with an explanation rather than exhausting memory.
pub const MAX_PCPUS: u64 = 65_536;
pub const MAX_VCPUS_TOTAL: u64 = 1_000_000;
pub const MAX_THREADS_TOTAL: u64 = 4_000_000;

#[derive(Clone, Debug)]
pub struct Scenario {
    /// Where it came from (file path or `<dict>`), for error messages.
    pub origin: String,
    pub name: String,
    pub description: String,
    pub duration: SimDuration,
    /// Metrics are reset at this instant so the summary describes the steady state.
    pub warmup: SimDuration,
    pub seed: u64,
    pub host: HostSpec,
    pub scheduler: SchedulerSpec,
    /// KVM behaviour (pause-loop exiting, the papers' fixes); None: no PLE.
    pub kvm: Option<crate::kvm::KvmSpec>,
    pub vms: Vec<VmSpec>,
    /// Host threads that are not vCPUs (QEMU I/O threads, replication helpers, ...).
    pub host_threads: Vec<HostThreadSpec>,
    /// Where network packets of every VM pass on the split-driver path (`[host] io_path =
    /// "split"`); None: direct assignment, packets go straight to the guest.
    pub io_driver: Option<IoDriver>,
}

/// A host thread scheduled by the host scheduler beside the vCPUs (`[[host_thread]]`).
#[derive(Clone, Debug)]
pub struct HostThreadSpec {
    pub name: String,
    /// Index of the owning VM (its cgroup under group scheduling); None: a host-wide
    /// kernel thread.
    pub vm: Option<u32>,
    /// taskset mask; None: every pCPU not in `isolcpus`.
    pub affinity: Option<CpuSet>,
    pub weight: u32,
    pub body: HostThreadBody,
}

#[derive(Clone, Debug)]
pub enum HostThreadBody {
    /// Loops over a workload like a guest thread (compute, sleep, io only).
    Workload(WorkloadSpec),
    /// Serves the owner VM's I/O events (see `crate::ft`).
    Helper(crate::ft::HelperSpec),
}

#[derive(Clone, Debug)]
pub struct HostSpec {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub numa_nodes: u32,
    /// The clock at which compute durations are stated (GHz).
    pub base_ghz: f64,
    /// Clock by number of busy cores in a package: entry k-1 for k busy cores; the last
    /// entry holds for more. Empty: always base_ghz.
    pub turbo_ghz: Vec<f64>,
    /// Throughput of a core with all its SMT threads busy, relative to one thread alone.
    pub smt_throughput: f64,
    pub costs: Costs,
    /// `[host.noise]`: interruptions of running tasks (engine/noise.rs); present unless
    /// `enabled = false`.
    pub noise: Option<NoiseSpec>,
    /// Linux `isolcpus=`: pCPUs removed from the default affinity of every vCPU and host
    /// thread that does not name them in its own affinity.
    pub isolcpus: Option<CpuSet>,
    /// `io_path = "split"`: the name of the VM or host thread whose `netback` workload
    /// forwards every packet (`io_driver`); None: `"direct"` (SR-IOV style assignment).
    pub io_driver: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Costs {
    /// Paid by a pCPU when it switches to a different vCPU or thread than it ran last.
    pub context_switch: SimDuration,
    /// Cache refill paid by a vCPU that runs on a different pCPU than last time, by
    /// distance: SMT sibling, same socket, other socket, other NUMA node.
    pub migration: [SimDuration; 4],
    /// An inter-processor interrupt: paid when a host thread on one pCPU wakes or
    /// interrupts a vCPU (or thread) that last ran on another.
    pub ipi: SimDuration,
    /// A contended cache line moving from one core to another: paid by a guest thread
    /// that takes a lock last taken on another core, and twice by an IPI sender (its
    /// request out, the acknowledgement back). Zero unless set (or a host profile sets it).
    pub cacheline_transfer: SimDuration,
}

/// `[host.costs]` (also checked in a host profile, `profile.rs`): the defaults with the
/// table's keys over them.
pub(crate) fn parse_costs(ct: &Table) -> Res<Costs> {
    const MIGRATION: [&str; 4] = ["smt_sibling", "same_socket", "other_socket", "other_numa"];
    let mut costs = Costs::default();
    if let Some(d) = ct.opt_duration("context_switch")? {
        costs.context_switch = d;
    }
    if let Some(d) = ct.opt_duration("ipi")? {
        costs.ipi = d;
    }
    if let Some(d) = ct.opt_duration("cacheline_transfer")? {
        costs.cacheline_transfer = d;
    }
    if let Some(m) = ct.get("migration") {
        let mt = m.table()?;
        for (i, key) in MIGRATION.iter().enumerate() {
            if let Some(d) = mt.opt_duration(key)? {
                costs.migration[i] = d;
            }
        }
        mt.finish(&MIGRATION)?;
    }
    ct.finish(&["context_switch", "migration", "ipi", "cacheline_transfer"])?;
    Ok(costs)
}

/// `[host.noise]` (engine/noise.rs): each pCPU is interrupted at the times of a Poisson
/// process of `rate_hz`, each interruption lasting a draw of `duration` (ns).
#[derive(Clone, Debug, PartialEq)]
pub struct NoiseSpec {
    pub rate_hz: f64,
    pub duration: workload::Dist,
}

/// The interruptions every host has unless `[host.noise] enabled = false`: the host
/// kernel's own timer interrupts (the tick at HZ=250 and hrtimers), device interrupts and
/// the softirq work that runs on their exit, as the kernel's tracepoints see them on a CPU
/// kept busy by a user-space loop. Measured on this machine (2 x Intel Xeon, Linux
/// 6.18.44, HZ=250) on 2026-11-27 06:30 UTC, three 10 s runs with
/// `scripts/host_noise_trace.sh` (perf record of irq_vectors:local_timer_*, irq:irq_handler_*
/// and irq:softirq_* on both CPUs beside two busy loops; back-to-back handlers merged into
/// one interruption):
///
/// | run | interruptions / busy CPU-second | median | mean | p90 | lost |
/// |---|---|---|---|---|---|
/// | 1 | 279.7 | 8.24 us | 8.60 us | 10.97 us | 0.24 % |
/// | 2 | 285.7 | 9.89 us | 11.95 us | 18.70 us | 0.34 % |
/// | 3 | 285.3 | 9.21 us | 10.69 us | 16.89 us | 0.31 % |
///
/// The default is the median run: 285 a second, log-normal with median 9.21 us and
/// sigma = sqrt(2 ln(mean / median)) = 0.55 (its p90, 18.5 us, is within the runs' range).
/// Ticks make 92 % of them (262 a second: 250 ticks and the hrtimers' expiries).
/// This machine is itself a guest: its handlers' durations include the exits they cause
/// to the hypervisor below (timer reprogramming, EOI), so they are an upper bound for a
/// bare-metal host, whose tick handler takes a few microseconds; the rate is the
/// kernel's own. The hypervisor below's interruptions, which the guest kernel does not
/// see (`vcpulab kvm calibrate` measures them as `noise_rate`, ~3,200 a second), are not
/// in the default: they are this machine's, not a host's.
pub const DEFAULT_INTERRUPT_RATE_HZ: f64 = 285.0;
pub const DEFAULT_INTERRUPT_MEDIAN_NS: f64 = 9_210.0;
pub const DEFAULT_INTERRUPT_SIGMA: f64 = 0.55;

impl NoiseSpec {
    /// What a scenario without `[host.noise]` gets (see [`DEFAULT_INTERRUPT_RATE_HZ`]).
    pub fn host_default() -> NoiseSpec {
        NoiseSpec {
            rate_hz: DEFAULT_INTERRUPT_RATE_HZ,
            duration: workload::Dist::LogNormal {
                median: DEFAULT_INTERRUPT_MEDIAN_NS,
                sigma: DEFAULT_INTERRUPT_SIGMA,
            },
        }
    }
}

const NOISE_KEYS: &[&str] = &[
    "enabled",
    "interrupt_rate",
    "interrupt_duration",
    "housekeeping_rate",
    "housekeeping_run",
];

/// `[host.noise]`: `enabled` (default true); `interrupt_rate` (interruptions per second per
/// pCPU) and `interrupt_duration` (a distribution), each defaulting to
/// [`NoiseSpec::host_default`]'s; `housekeeping_rate` (kernel-thread runs per second per
/// pCPU) with `housekeeping_run` (a distribution), given together, or
/// `housekeeping_rate = 0` alone for none (default: [`expand_housekeeping`]'s). Returns
/// the interruptions (None when disabled); the housekeeping threads were made host threads
/// by [`expand_housekeeping`] before, so here their keys are only checked.
pub(crate) fn parse_noise(t: &Table) -> Res<Option<NoiseSpec>> {
    let enabled = t.opt_bool("enabled")?.unwrap_or(true);
    let default = NoiseSpec::host_default();
    let rate_hz = match t.get("interrupt_rate") {
        Some(r) => r.f64_in(0.001, 1e6)?,
        None => default.rate_hz,
    };
    let duration = match t.get("interrupt_duration") {
        Some(d) => workload::parse_dist(&d)?,
        None => default.duration,
    };
    match (t.get("housekeeping_rate"), t.get("housekeeping_run")) {
        (None, None) => {}
        (Some(r), Some(d)) => {
            r.f64_in(0.0, 1e6)?;
            workload::parse_dist(&d)?;
        }
        (Some(r), None) if r.f64_in(0.0, 1e6)? == 0.0 => {} // no housekeeping threads
        (Some(_), None) => {
            return t.err(
                "housekeeping_run",
                "required with housekeeping_rate (or housekeeping_rate = 0: none)",
            )
        }
        (None, Some(_)) => return t.err("housekeeping_rate", "required with housekeeping_run"),
    }
    t.finish(NOISE_KEYS)?;
    Ok(enabled.then_some(NoiseSpec { rate_hz, duration }))
}

/// The kernel threads every Linux host runs (kworker, ksoftirqd, RCU, migration, ...),
/// as one housekeeping thread per pCPU unless `[host.noise]` says otherwise, on hosts
/// whose scheduler is Linux's (`cfs`, `eevdf`: a KVM host); a Xen or Hyper-V host's own
/// work runs in its hypervisor's softirqs and its root partition, not as threads its
/// scheduler places, so they get none. Measured on this machine with
/// `vcpulab kvm calibrate` on 2026-11-27 03:52 UTC (the shipped profile
/// `crates/vcpulab-core/profiles/pvm-xeon-2cpu.toml`: the runs of the children of kthreadd,
/// from their schedstat, while the vCPUs of a guest were idle between requests):
/// 17.7 runs a second per CPU (three runs: 19.3, 14.5, 17.7), per-thread median run 14 us
/// and mean run 143 us, as a log-normal of median 14 us and sigma
/// sqrt(2 ln(143 / 14)) = 2.16.
pub const DEFAULT_HOUSEKEEPING_RATE_HZ: f64 = 17.7;
pub const DEFAULT_HOUSEKEEPING_MEDIAN: &str = "14us";
pub const DEFAULT_HOUSEKEEPING_SIGMA: f64 = 2.16;

/// A user-space PLE handler acts through the host scheduler: "yield" needs `sched_yield`
/// (the fair class: cfs, eevdf), "nice-boost" nice values changed while running (eevdf).
fn check_ple_handler_scheduler(kvm: &Table, k: &crate::kvm::KvmSpec, scheduler: &str) -> Res<()> {
    use crate::kvm::PleHandler;
    let (needs, allowed) = match k.handler {
        PleHandler::Yield => ("sched_yield", "cfs, eevdf"),
        PleHandler::Migrate { .. } => {
            ("sched_yield and affinity changed at run time", "cfs, eevdf")
        }
        PleHandler::NiceBoost { .. } => ("nice values changed at run time", "eevdf"),
        _ => return Ok(()),
    };
    if allowed.split(", ").any(|name| name == scheduler) {
        return Ok(());
    }
    kvm.err(
        "ple_handler",
        format!("this handler needs {needs} from the host scheduler; scheduler {scheduler:?} has none (allowed: {allowed})"),
    )
}

/// Whether a host scheduled by `scheduler` runs [`DEFAULT_HOUSEKEEPING_RATE_HZ`]'s kernel
/// threads by default.
pub fn linux_host_scheduler(scheduler: &str) -> bool {
    matches!(scheduler, "cfs" | "eevdf")
}

/// `[host.noise] housekeeping_rate` / `housekeeping_run`: the host's per-CPU kernel threads
/// (kworker, ksoftirqd, RCU, migration) as one host thread per pCPU, pinned to it
/// (`kthread-<cpu>`), that sleeps an exponential time of mean 1 / rate, then runs a draw
/// of `housekeeping_run` in kernel mode, scheduled by the host scheduler like any other
/// thread. Without the keys a Linux host ([`linux_host_scheduler`]) gets the defaults
/// (`DEFAULT_HOUSEKEEPING_*`); `housekeeping_rate = 0` or `enabled = false` means none.
/// Returns the scenario with those `[[host_thread]]`s appended and the two keys removed
/// (or `housekeeping_rate = 0` left, so the defaults do not apply twice), or None when
/// there is nothing to expand.
pub(crate) fn expand_housekeeping(v: &toml::Value) -> Option<toml::Value> {
    use toml::Value as V;
    let noise = v
        .get("host")
        .and_then(|h| h.get("noise"))
        .and_then(V::as_table);
    let enabled = noise
        .and_then(|n| n.get("enabled"))
        .and_then(V::as_bool)
        .unwrap_or(true);
    let given = noise.and_then(|n| Some((n.get("housekeeping_rate")?, n.get("housekeeping_run"))));
    let (rate, run) = match given {
        Some((rate, run)) => (rate.clone(), run.cloned().unwrap_or(V::Integer(0))),
        None => {
            let scheduler = v.get("scheduler")?.get("name")?.as_str()?;
            if !enabled || !linux_host_scheduler(scheduler) {
                return None;
            }
            let mut d = toml::Table::new();
            d.insert("dist".into(), V::String("lognormal".into()));
            d.insert(
                "median".into(),
                V::String(DEFAULT_HOUSEKEEPING_MEDIAN.into()),
            );
            d.insert("sigma".into(), V::Float(DEFAULT_HOUSEKEEPING_SIGMA));
            (V::Float(DEFAULT_HOUSEKEEPING_RATE_HZ), V::Table(d))
        }
    };
    let rate_hz = rate
        .as_float()
        .or_else(|| rate.as_integer().map(|i| i as f64));
    if rate_hz == Some(0.0) {
        return None; // none asked for, or expanded already
    }
    let mut out = v.clone();
    let host = out.get_mut("host")?.as_table_mut()?;
    let n = |k: &str| host.get(k).and_then(V::as_integer).unwrap_or(1).max(1) as u64;
    let ncpus = n("sockets")
        .saturating_mul(n("cores_per_socket"))
        .saturating_mul(n("threads_per_core"));
    if ncpus > MAX_PCPUS {
        return None; // the host table's own check refuses it, naming the key
    }
    let ncpus = ncpus as usize;
    let nt = host
        .entry("noise")
        .or_insert_with(|| V::Table(toml::Table::new()))
        .as_table_mut()?;
    nt.remove("housekeeping_run");
    // Left as 0: "no housekeeping threads", so the defaults do not apply on the next pass.
    nt.insert("housekeeping_rate".into(), V::Integer(0));
    if enabled && rate_hz? > 0.0 {
        // parse_noise checked the table before (`from_value`).
        let rate_hz = rate_hz?;
        let mean = format!("{}ns", (1e9 / rate_hz).round() as u64);
        let threads = out
            .as_table_mut()?
            .entry("host_thread")
            .or_insert_with(|| V::Array(vec![]));
        let arr = threads.as_array_mut()?;
        for cpu in 0..ncpus {
            let mut sleep = toml::Table::new();
            sleep.insert("op".into(), V::String("sleep".into()));
            let mut d = toml::Table::new();
            d.insert("dist".into(), V::String("exp".into()));
            d.insert("mean".into(), V::String(mean.clone()));
            sleep.insert("duration".into(), V::Table(d));
            let mut work = toml::Table::new();
            work.insert("op".into(), V::String("compute".into()));
            work.insert("duration".into(), run.clone());
            work.insert("mode".into(), V::String("kernel".into()));
            let mut wl = toml::Table::new();
            wl.insert("kind".into(), V::String("program".into()));
            wl.insert("threads".into(), V::Integer(1));
            wl.insert(
                "ops".into(),
                V::Array(vec![V::Table(sleep), V::Table(work)]),
            );
            let mut t = toml::Table::new();
            t.insert("name".into(), V::String(format!("kthread-{cpu}")));
            t.insert("affinity".into(), V::String(cpu.to_string()));
            t.insert("workload".into(), V::Table(wl));
            arr.push(V::Table(t));
        }
    }
    Some(out)
}

impl Default for Costs {
    fn default() -> Self {
        // Reasoning for the defaults (override per scenario under [host.costs]):
        // - context_switch 2us: a host switch between two vCPU threads (~1us on KVM) plus
        //   the VM exit/entry pair (~1us on Intel server parts of the X5650..4210 era).
        // - migration: refilling a ~1 MiB working set: from the shared L3 at ~200 GB/s is
        //   ~5us; from the other socket's cache at ~40 GB/s ~25us; from remote DRAM ~50us.
        //   SMT siblings share L1/L2, so nothing to refill.
        Costs {
            context_switch: SimDuration::from_us(2),
            migration: [
                SimDuration::ZERO,
                SimDuration::from_us(5),
                SimDuration::from_us(25),
                SimDuration::from_us(50),
            ],
            // Sending the IPI, the target leaving idle or guest mode, and the interrupt
            // entry: ~2 us on Westmere/Skylake-era servers (KVM posted-interrupt-less
            // delivery; measured figures for cross-core wake-ups are 2-5 us).
            ipi: SimDuration::from_us(2),
            // Off by default: what a handoff costs depends on the machine (measured by
            // `vcpulab kvm calibrate` as `cacheline_handoff`, and set by a host profile).
            cacheline_transfer: SimDuration::ZERO,
        }
    }
}

impl HostSpec {
    pub fn topology(&self) -> Topology {
        Topology::new(
            self.sockets,
            self.cores_per_socket,
            self.threads_per_core,
            self.numa_nodes,
        )
    }
    pub fn ncpus(&self) -> usize {
        (self.sockets * self.cores_per_socket * self.threads_per_core) as usize
    }
    /// The affinity of an entity that names none: every pCPU not isolated.
    pub fn default_affinity(&self) -> CpuSet {
        let full = CpuSet::full(self.ncpus());
        match &self.isolcpus {
            Some(iso) => full.subtract(iso),
            None => full,
        }
    }
}

#[derive(Clone, Debug)]
pub struct SchedulerSpec {
    pub name: String,
    /// The scheduler's own parameters, validated by the scheduler (see `sched::registry`).
    pub params: toml::Table,
}

impl VmSpec {
    /// Whether vCPU `index` is a latency (I/O) vCPU: every vCPU of an LSVM, the reserved
    /// ones of a MixVM.
    pub fn is_latency_vcpu(&self, index: u32) -> bool {
        match self.class {
            Some(VmClass::Lsvm) => true,
            Some(VmClass::Mixvm) => index < self.reserved_vcpus,
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
pub struct VmSpec {
    pub name: String,
    pub vcpus: u32,
    pub weight: u32,
    /// Percent of one pCPU the whole VM may use (Xen Credit `cap`); 0: no cap.
    pub cap: u32,
    /// RTDS reservation of each vCPU (keys left out: the scheduler's defaults).
    pub rt: crate::vocab::RtReservation,
    /// Per-vCPU affinity (one entry per vCPU); None = all pCPUs.
    pub affinity: Vec<Option<CpuSet>>,
    pub spinlock: LockKind,
    /// Paravirtual spinlocks (Linux `CONFIG_PARAVIRT_SPINLOCKS` with KVM's PV_UNHALT): a
    /// kernel spinlock waiter that has spun this many cycles halts until the lock's
    /// releaser kicks it (`KVM_HC_KICK_CPU`). None: plain spinning.
    pub pv_spin_threshold_cycles: Option<f64>,
    /// Time slice of the guest scheduler when several guest threads share a vCPU.
    pub guest_timeslice: SimDuration,
    /// FLMS's VM class (`class = "lsvm" | "nlsvm" | "mixvm"`); None when not given.
    pub class: Option<VmClass>,
    /// vCPUs 0..reserved_vcpus of a MixVM are its latency (I/O) vCPUs (FLMS: default 1).
    pub reserved_vcpus: u32,
    /// Each vCPU starts at a uniform random time in [0, start_jitter) (threads of a VM do
    /// not start in the same nanosecond; without it, symmetric hosts run in lockstep).
    pub start_jitter: SimDuration,
    /// The guest's block I/O scheduler (`elevator = "none" | "cfq"`): with CFQ, writeback
    /// requests in flight are limited after a delayed synchronous request (see
    /// `workload::CFQ_SLICE_SYNC_NS`).
    pub elevator_cfq: bool,
    /// The guest's haltpoll cpuidle governor (`[vm.haltpoll]`); None: the guest halts at
    /// once when idle.
    pub haltpoll: Option<crate::kvm::GuestHaltPoll>,
    /// The guest's idle loop spins instead of halting (`idle = "poll"`: Linux's
    /// `idle=poll`, or a DPDK poll-mode driver that never sleeps): the vCPU never blocks.
    pub idle_poll: bool,
    pub workloads: Vec<WorkloadSpec>,
    /// Lock names used by this VM's workloads, in first-use order (index = lock id).
    pub locks: Vec<String>,
}

impl Scenario {
    pub fn from_toml_str(text: &str, origin: &str) -> Res<Scenario> {
        let v = parse_toml(origin, text)?;
        Scenario::from_value(&v, origin).map_err(|mut e| {
            if looks_like_kvm_harness_file(&v) {
                e.message.push_str(&format!(
                    "; this looks like a real-KVM harness file: run it with `vcpulab kvm run {origin}`"
                ));
            }
            e
        })
    }

    pub fn from_json_str(text: &str, origin: &str) -> Res<Scenario> {
        let j: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| ScenarioError::new(origin, "", format!("invalid JSON: {e}")))?;
        let v = json_to_toml(origin, &j, "")?;
        Scenario::from_value(&v, origin)
    }

    pub fn from_file(path: &str) -> Result<Scenario, crate::Error> {
        let text = std::fs::read_to_string(path).map_err(|e| crate::Error::Io {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        Ok(Scenario::from_toml_str(&text, path)?)
    }

    pub fn from_value(v: &toml::Value, origin: &str) -> Res<Scenario> {
        if let Some(merged) = crate::profile::apply(v, origin)? {
            // `host.profile` is gone from the merged scenario, so this does not recurse again.
            return Scenario::from_value(&merged, origin);
        }
        if let Some(noise) = v.get("host").and_then(|h| h.get("noise")) {
            if noise.get("housekeeping_rate").is_some() || noise.get("housekeeping_run").is_some() {
                // Its errors name `host.noise.*`, before the keys become host threads.
                let root = Table::root(origin, v)?;
                parse_noise(&root.req("host")?.table()?.req("noise")?.table()?)?;
            }
        }
        if let Some(expanded) = expand_housekeeping(v) {
            // The housekeeping keys are gone from the expanded scenario: no second expansion.
            return Scenario::from_value(&expanded, origin);
        }
        let root = Table::root(origin, v)?;
        let name = root.opt_str("name")?.unwrap_or("unnamed").to_string();
        let description = root.opt_str("description")?.unwrap_or("").to_string();
        let duration = root.req("duration")?.duration()?;
        if duration.ns() == 0 {
            return root.err("duration", "must be longer than 0s");
        }
        if duration.ns() > 365 * 24 * 3600 * NS_PER_S {
            return root.err("duration", "is longer than a simulated year; split the run");
        }
        let warmup = root.opt_duration("warmup")?.unwrap_or(SimDuration::ZERO);
        if warmup >= duration {
            return root.err(
                "warmup",
                format!("({warmup}) must be shorter than duration ({duration})"),
            );
        }
        let seed = root.opt_u64("seed", 0, u64::MAX >> 1)?.unwrap_or(1);
        let host = parse_host(&root.req("host")?.table()?)?;
        let ncpus = host.ncpus();
        let sched_t = root.req("scheduler")?.table()?;
        let sname = sched_t.req("name")?.str()?.to_string();
        let mut params = toml::Table::new();
        for k in sched_t.keys() {
            if k != "name" {
                params.insert(k.clone(), sched_t.get(k).unwrap().v.clone());
            }
        }
        crate::sched::validate_params(&sname, &params, origin, &sched_t.path)?;
        crate::sched::validate_for_host(&sname, &params, ncpus, origin, &sched_t.path)?;

        let vm_items = root.req("vm")?.array()?;
        if vm_items.is_empty() {
            return root.err("vm", "at least one [[vm]] is required");
        }
        let mut vms = Vec::with_capacity(vm_items.len());
        let mut total_vcpus = 0u64;
        let mut total_threads = 0u64;
        for item in &vm_items {
            let vm = parse_vm(item, ncpus)?;
            if vms.iter().any(|o: &VmSpec| o.name == vm.name) {
                return item.table()?.err(
                    "name",
                    format!("duplicate VM name {:?}; VM names must be unique", vm.name),
                );
            }
            total_vcpus += vm.vcpus as u64;
            total_threads += vm.workloads.iter().map(|w| w.threads as u64).sum::<u64>();
            vms.push(vm);
        }
        if total_vcpus > MAX_VCPUS_TOTAL {
            return root.err(
                "vm",
                format!("{total_vcpus} vCPUs in total exceed the limit of {MAX_VCPUS_TOTAL}"),
            );
        }
        if total_threads > MAX_THREADS_TOTAL {
            return root.err("vm", format!("{total_threads} guest threads in total exceed the limit of {MAX_THREADS_TOTAL}"));
        }
        let kvm = root
            .get("kvm")
            .map(|k| k.table().and_then(|t| crate::kvm::parse_kvm(&t)))
            .transpose()?;
        if let Some(k) = &kvm {
            check_ple_handler_scheduler(&root.req("kvm")?.table()?, k, &sname)?;
        }
        if kvm.is_none() {
            if let Some(vm) = vms.iter().find(|v| v.haltpoll.is_some()) {
                return root.err(
                    "vm",
                    format!(
                        "VM {:?} has a [vm.haltpoll] table, but the guest haltpoll governor loads only in a KVM guest; add a [kvm] table or remove [vm.haltpoll]",
                        vm.name
                    ),
                );
            }
        }
        let mut host_threads: Vec<HostThreadSpec> = Vec::new();
        if let Some(items) = root.get("host_thread") {
            for item in items.array()? {
                let ht = parse_host_thread(&item, ncpus, &vms, &host_threads)?;
                host_threads.push(ht);
            }
        }
        let io_driver = resolve_io_driver(&root, &host, &vms, &host_threads)?;
        if let Some(iso) = &host.isolcpus {
            if host.default_affinity().is_empty() {
                return root.err(
                    "host.isolcpus",
                    format!("isolates every pCPU ({iso}); leave at least one for the rest"),
                );
            }
        }
        root.finish(&[
            "name",
            "description",
            "duration",
            "warmup",
            "seed",
            "host",
            "scheduler",
            "kvm",
            "vm",
            "host_thread",
        ])?;
        Ok(Scenario {
            origin: origin.to_string(),
            name,
            description,
            duration,
            warmup,
            seed,
            host,
            scheduler: SchedulerSpec {
                name: sname,
                params,
            },
            kvm,
            vms,
            host_threads,
            io_driver,
        })
    }
}

fn is_netback(w: &WorkloadSpec) -> bool {
    w.ops.iter().any(|o| matches!(o, workload::Op::WaitPacket))
}

/// Finds `[host] io_driver` among the VMs and host threads; it must run a netback
/// workload, and nothing else may.
fn resolve_io_driver(
    root: &Table,
    host: &HostSpec,
    vms: &[VmSpec],
    hts: &[HostThreadSpec],
) -> Res<Option<IoDriver>> {
    let driver = match &host.io_driver {
        None => None,
        Some(name) => {
            let netback = if let Some(i) = vms.iter().position(|v| &v.name == name) {
                vms[i]
                    .workloads
                    .iter()
                    .position(is_netback)
                    .map(|j| IoDriver::Vm {
                        vm: i as u32,
                        workload: j as u32,
                    })
            } else if let Some(i) = hts.iter().position(|h| &h.name == name) {
                matches!(&hts[i].body, HostThreadBody::Workload(w) if is_netback(w))
                    .then_some(IoDriver::HostThread(i as u32))
            } else {
                return root.err(
                    "host.io_driver",
                    format!("no VM or host thread named {name:?}"),
                );
            };
            if netback.is_none() {
                return root.err("host.io_driver", format!("{name:?} runs no netback workload, so nothing would forward the packets; add a workload with kind = \"netback\""));
            }
            netback
        }
    };
    for (i, vm) in vms.iter().enumerate() {
        if let Some(j) = vm.workloads.iter().position(is_netback) {
            if driver
                != Some(IoDriver::Vm {
                    vm: i as u32,
                    workload: j as u32,
                })
            {
                return root.err(&format!("vm[{i}].workload[{j}].kind"), "a netback workload runs only in the split-driver backend named by [host] io_driver (with io_path = \"split\")");
            }
            if let Some(k) = vm.workloads.iter().position(|w| w.arrivals.is_some()) {
                return root.err(
                    &format!("vm[{i}].workload[{k}]"),
                    "the driver domain forwards packets; it serves no requests of its own",
                );
            }
        }
    }
    for (i, h) in hts.iter().enumerate() {
        if matches!(&h.body, HostThreadBody::Workload(w) if is_netback(w))
            && driver != Some(IoDriver::HostThread(i as u32))
        {
            return root.err(&format!("host_thread[{i}].workload.kind"), "a netback workload runs only in the split-driver backend named by [host] io_driver (with io_path = \"split\")");
        }
    }
    // A held response is matched to its sender in the order sent, which one backend thread
    // keeps and several would not (engine/net.rs, `wait_for_holder`).
    if let Some(IoDriver::Vm { vm, workload }) = driver {
        let backend = &vms[vm as usize];
        let threads = backend.workloads[workload as usize].threads;
        if threads > 1 {
            for (i, v) in vms.iter().enumerate() {
                for (j, w) in v.workloads.iter().enumerate() {
                    if w.ops
                        .iter()
                        .any(|o| matches!(o, workload::Op::RespondHeld { .. }))
                    {
                        return root.err(
                            &format!("vm[{i}].workload[{j}].ops"),
                            format!("a respond with hold needs a backend with one thread; the netback of io_driver \"{}\" has {threads}: give it threads = 1", backend.name),
                        );
                    }
                }
            }
        }
    }
    Ok(driver)
}

fn parse_host(t: &Table) -> Res<HostSpec> {
    let sockets = t.opt_u64("sockets", 1, 64)?.unwrap_or(1) as u32;
    let cores = t.req("cores_per_socket")?.u64_in(1, MAX_PCPUS)? as u32;
    let threads = t.opt_u64("threads_per_core", 1, 8)?.unwrap_or(1) as u32;
    let nodes = t.opt_u64("numa_nodes", 1, 64)?.unwrap_or(1) as u32;
    let n = sockets as u64 * cores as u64 * threads as u64;
    if n > MAX_PCPUS {
        return t.err(
            "cores_per_socket",
            format!("the host would have {n} pCPUs; the limit is {MAX_PCPUS}"),
        );
    }
    if let Err((key, msg)) = Topology::check_shape(sockets, cores, threads, nodes) {
        return t.err(&key, msg);
    }
    let turbo = match t.get("turbo_ghz") {
        None => vec![],
        Some(o) => {
            let items = o.array()?;
            if items.is_empty() {
                return o.err("must list at least one clock (GHz), for 1 busy core");
            }
            items
                .iter()
                .map(|i| i.f64_in(0.01, 100.0))
                .collect::<Res<Vec<f64>>>()?
        }
    };
    let base_ghz = t
        .opt_f64("base_ghz", 0.01, 100.0)?
        .unwrap_or_else(|| turbo.first().copied().unwrap_or(1.0));
    let smt_throughput = t
        .opt_f64("smt_throughput", 0.1, threads as f64)?
        .unwrap_or(if threads > 1 { 1.25 } else { 1.0 });
    let costs = match t.get("costs") {
        Some(c) => parse_costs(&c.table()?)?,
        None => Costs::default(),
    };
    let noise = match t.get("noise") {
        Some(n) => parse_noise(&n.table()?)?,
        None => Some(NoiseSpec::host_default()),
    };
    let isolcpus = t
        .get("isolcpus")
        .map(|o| parse_affinity(&o, n as usize))
        .transpose()?;
    let io_driver = t.opt_str("io_driver")?.map(str::to_string);
    match (t.opt_str("io_path")?, &io_driver) {
        (None | Some("direct"), None) | (Some("split"), Some(_)) => {}
        (None | Some("direct"), Some(_)) => return t.err("io_driver", "names the split-driver backend; set io_path = \"split\" to use it"),
        (Some("split"), None) => return t.err("io_path", "the split-driver path needs io_driver = \"<VM or host thread running a netback workload>\""),
        (Some(other), _) => return t.err("io_path", format!("unknown I/O path {other:?}; allowed: \"direct\", \"split\"")),
    }
    t.finish(&[
        "sockets",
        "cores_per_socket",
        "threads_per_core",
        "numa_nodes",
        "base_ghz",
        "turbo_ghz",
        "smt_throughput",
        "costs",
        "noise",
        "isolcpus",
        "io_path",
        "io_driver",
    ])?;
    Ok(HostSpec {
        sockets,
        cores_per_socket: cores,
        threads_per_core: threads,
        numa_nodes: nodes,
        base_ghz,
        turbo_ghz: turbo,
        smt_throughput,
        costs,
        noise,
        isolcpus,
        io_driver,
    })
}

/// A VM's or host thread's `name`: it appears in key paths and column names, so no
/// whitespace, dots or brackets.
fn parse_name(t: &Table, what: &str) -> Res<String> {
    let name = t.req("name")?.str()?.to_string();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '.' || c == '[') {
        return t.err(
            "name",
            format!("{name:?} is not a valid {what} name: use letters, digits, '-' or '_'"),
        );
    }
    Ok(name)
}

fn parse_host_thread(
    item: &Owned,
    ncpus: usize,
    vms: &[VmSpec],
    earlier: &[HostThreadSpec],
) -> Res<HostThreadSpec> {
    let t = item.table()?;
    let name = parse_name(&t, "thread")?;
    if earlier.iter().any(|h| h.name == name) {
        return t.err(
            "name",
            format!("duplicate host thread name {name:?}; names must be unique"),
        );
    }
    let vm = match t.opt_str("vm")? {
        None => None,
        Some(v) => match vms.iter().position(|x| x.name == v) {
            Some(i) => Some(i as u32),
            None => {
                let names: Vec<&str> = vms.iter().map(|x| x.name.as_str()).collect();
                return t.err(
                    "vm",
                    format!("no VM named {v:?}; VMs: {}", names.join(", ")),
                );
            }
        },
    };
    let affinity = t
        .get("affinity")
        .map(|o| parse_affinity(&o, ncpus))
        .transpose()?;
    let weight = t.opt_u64("weight", 1, 65_535)?.unwrap_or(256) as u32;
    let body = match (t.get("workload"), t.get("helper")) {
        (Some(_), Some(_)) => return t.err("helper", "give either workload or helper, not both"),
        (None, None) => return t.err(
            "workload",
            "a host thread needs a workload = { kind = ... } or a helper = \"kemari\" | \"drbd\"",
        ),
        (Some(w), None) => {
            let mut locks = Vec::new();
            let spec = workload::parse_workload(&w, &mut locks, LockKind::Ticket, 1)?;
            if spec.threads != 1 {
                return w.err(format!(
                    "a host thread runs one thread; got threads = {}",
                    spec.threads
                ));
            }
            if spec
                .ops
                .iter()
                .any(|o| matches!(o, workload::Op::LookbusySpin { .. }))
            {
                return w.err("lookbusy's controller reads a guest's CPU time; on a host thread set adaptive = false (a fixed duty cycle)");
            }
            if let Some(bad) = spec.ops.iter().find(|o| {
                !matches!(
                    o,
                    workload::Op::Compute { .. }
                        | workload::Op::Sleep { .. }
                        | workload::Op::Io { .. }
                        | workload::Op::WaitPacket
                        | workload::Op::ForwardPacket { .. }
                )
            }) {
                const ONLY: &str =
                    "host threads run compute, sleep, io and netback operations only";
                // Name the op as the user wrote it, at its key path.
                if spec.kind == "program" {
                    for item in w.table()?.req("ops")?.array()? {
                        let op = item.table()?.req("op")?.str()?;
                        if !matches!(op, "compute" | "sleep" | "io") {
                            return item.err(format!("op = {op:?} needs a guest; {ONLY}"));
                        }
                    }
                }
                return w.table()?.err(
                    "kind",
                    format!(
                        "the {:?} workload runs {} operations, which need a guest; {ONLY}",
                        spec.kind,
                        bad.name()
                    ),
                );
            }
            if spec.arrivals.is_some() {
                return w.err("host threads take no arrivals");
            }
            HostThreadBody::Workload(spec)
        }
        (None, Some(h)) => {
            let Some(owner) = vm else {
                return t.err(
                    "vm",
                    "a helper thread serves a VM: name it with vm = \"...\"",
                );
            };
            let spec = crate::ft::parse_helper(&t, &h)?;
            if earlier.iter().any(|o| {
                o.vm == Some(owner)
                    && matches!(&o.body, HostThreadBody::Helper(x) if x.kind() == spec.kind())
            }) {
                return t.err(
                    "helper",
                    format!(
                        "VM {:?} already has a {} helper",
                        vms[owner as usize].name,
                        spec.kind()
                    ),
                );
            }
            HostThreadBody::Helper(spec)
        }
    };
    let mut allowed = vec!["name", "vm", "affinity", "weight", "workload", "helper"];
    allowed.extend_from_slice(crate::ft::HELPER_KEYS);
    t.finish(&allowed)?;
    Ok(HostThreadSpec {
        name,
        vm,
        affinity,
        weight,
        body,
    })
}

/// A `vcpulab kvm run` file (scenarios/kvm/, python/vcpulab/kvm.py): harness options in
/// `[kvm]` (repetitions, mode, timeout, waker, cgroups, a `ple` table), `[[vm.vcpu_policy]]`,
/// or VMs with neither `[host]` nor `[scheduler]` (the real host is both).
pub(crate) fn looks_like_kvm_harness_file(v: &toml::Value) -> bool {
    let Some(root) = v.as_table() else {
        return false;
    };
    if let Some(kvm) = root.get("kvm").and_then(|k| k.as_table()) {
        if ["repetitions", "mode", "timeout", "waker", "cgroup"]
            .iter()
            .any(|k| kvm.contains_key(*k))
            || kvm.get("ple").is_some_and(|p| p.is_table())
        {
            return true;
        }
    }
    let vms = root.get("vm").and_then(|v| v.as_array());
    if vms.is_some_and(|vms| {
        vms.iter()
            .any(|vm| vm.as_table().is_some_and(|t| t.contains_key("vcpu_policy")))
    }) {
        return true;
    }
    vms.is_some() && !root.contains_key("host") && !root.contains_key("scheduler")
}

fn parse_affinity(o: &Owned, ncpus: usize) -> Res<CpuSet> {
    let text = o.str()?;
    let set = CpuSet::parse(text).or_else(|m| o.err(m))?;
    if let Some(max) = set.max() {
        if max >= ncpus {
            return o.err(format!(
                "cpu-list {text:?} names pCPU {max}, but the host has pCPUs 0-{} only",
                ncpus - 1
            ));
        }
    }
    Ok(set)
}

/// A VM's RTDS reservation: Xen's `rt_validate_params` limits (period and budget at
/// least 10 us, budget at most the period).
fn parse_rt(t: &Table) -> Res<crate::vocab::RtReservation> {
    let min = SimDuration::from_us(10);
    let period = t.opt_duration("rt_period")?;
    let budget = t.opt_duration("rt_budget")?;
    for (key, d) in [("rt_period", period), ("rt_budget", budget)] {
        if d.is_some_and(|d| d < min) {
            return t.err(
                key,
                "must be at least 10us (Xen's RTDS_MIN_PERIOD and RTDS_MIN_BUDGET)",
            );
        }
    }
    let effective_period = period.unwrap_or(SimDuration::from_ms(10));
    if let Some(b) = budget {
        if b > effective_period {
            return t.err(
                "rt_budget",
                format!(
                    "{b} is longer than the period ({effective_period}); the budget must fit in it"
                ),
            );
        }
    } else if effective_period < SimDuration::from_ms(4) {
        return t.err(
            "rt_period",
            format!(
                "{effective_period} is shorter than the default budget (4ms); give rt_budget too"
            ),
        );
    }
    Ok(crate::vocab::RtReservation {
        period_ns: period.map(SimDuration::ns),
        budget_ns: budget.map(SimDuration::ns),
        extratime: t.opt_bool("rt_extratime")?,
    })
}

fn parse_vm(item: &Owned, ncpus: usize) -> Res<VmSpec> {
    let t = item.table()?;
    let name = parse_name(&t, "VM")?;
    let vcpus = t.req("vcpus")?.u64_in(1, MAX_VCPUS_TOTAL)? as u32;
    let weight = t.opt_u64("weight", 1, 65_535)?.unwrap_or(256) as u32;
    let cap = match t.get("cap") {
        None => 0,
        Some(o) => {
            let most = 100 * vcpus as u64;
            let c = o.u64_in(0, 65_535)?;
            if c > most {
                return o.err(format!(
                    "{c} is more than {vcpus} vCPUs can use (100 per vCPU); allowed 0 (no cap) to {most}"
                ));
            }
            c as u32
        }
    };
    let rt = parse_rt(&t)?;
    let affinity = match t.get("affinity") {
        None => vec![None; vcpus as usize],
        Some(o) => match o.v {
            toml::Value::String(_) => vec![Some(parse_affinity(&o, ncpus)?); vcpus as usize],
            toml::Value::Array(_) => {
                let items = o.array()?;
                if items.len() != vcpus as usize {
                    return o.err(format!(
                        "lists {} cpu-lists but the VM has {vcpus} vCPUs; give one per vCPU or a single string for all",
                        items.len()
                    ));
                }
                items
                    .iter()
                    .map(|i| parse_affinity(i, ncpus).map(Some))
                    .collect::<Res<_>>()?
            }
            other => {
                return o.err(format!(
                    "expected a cpu-list string like \"0-3\" or an array of them, got {}",
                    type_name(other)
                ))
            }
        },
    };
    let spinlock = match t.opt_str("spinlock")? {
        None | Some("ticket") => LockKind::Ticket,
        Some("tas") => LockKind::TestAndSet,
        Some(other) => {
            return t.err(
                "spinlock",
                format!("unknown spinlock kind {other:?}; allowed: \"ticket\", \"tas\""),
            )
        }
    };
    // Linux guest CFS with two runnable threads on one vCPU gives each about half of the
    // unscaled 6 ms sched_latency; we round to a 3 ms round-robin slice.
    let guest_timeslice = t
        .opt_duration("guest_timeslice")?
        .unwrap_or(SimDuration::from_ms(3));
    if guest_timeslice.ns() == 0 {
        return t.err("guest_timeslice", "must be longer than 0s");
    }
    let start_jitter = t.opt_duration("start_jitter")?.unwrap_or(SimDuration::ZERO);
    let elevator_cfq = match t.opt_str("elevator")? {
        None | Some("none") => false,
        Some("cfq") => true,
        Some(other) => {
            return t.err(
                "elevator",
                format!("unknown guest I/O scheduler {other:?}; allowed: \"none\" (requests go to the device as issued), \"cfq\" (CFQ's low-latency limit on writeback)"),
            )
        }
    };
    let idle_poll = match t.opt_str("idle")? {
        None | Some("halt") => false,
        Some("poll") => true,
        Some(other) => {
            return t.err(
                "idle",
                format!("unknown idle behaviour {other:?}; allowed: \"halt\" (an idle vCPU halts and leaves its pCPU), \"poll\" (it spins in the guest and stays runnable, as Linux's idle=poll or a DPDK poll-mode driver)"),
            )
        }
    };
    if idle_poll && t.has("haltpoll") {
        return t.err(
            "haltpoll",
            "has no effect with idle = \"poll\": the idle loop spins and never enters cpuidle; remove one of them",
        );
    }
    let class = match t.opt_str("class")? {
        None => None,
        Some("lsvm") => Some(VmClass::Lsvm),
        Some("nlsvm") => Some(VmClass::Nlsvm),
        Some("mixvm") => Some(VmClass::Mixvm),
        Some(other) => {
            return t.err(
                "class",
                format!("unknown VM class {other:?}; allowed: \"lsvm\" (latency-sensitive), \"nlsvm\" (CPU-bound), \"mixvm\" (both)"),
            )
        }
    };
    let reserved_vcpus = match t.get("reserved_vcpus") {
        None => 1,
        Some(o) => {
            if class != Some(VmClass::Mixvm) {
                return o.err("only a VM with class = \"mixvm\" has reserved vCPUs");
            }
            let r = o.u64_in(1, MAX_VCPUS_TOTAL)? as u32;
            if r >= vcpus {
                return o.err(format!(
                    "{r} reserved vCPUs leave none of the VM's {vcpus} for CPU-bound work; allowed 1 to {}",
                    vcpus - 1
                ));
            }
            r
        }
    };
    if class == Some(VmClass::Mixvm) && vcpus < 2 {
        return t.err(
            "class",
            "a MixVM needs at least 2 vCPUs: a reserved latency vCPU and one for CPU-bound work",
        );
    }
    let mut locks: Vec<String> = Vec::new();
    // Linux's pv spinlock slow path spins SPIN_THRESHOLD = 1 << 15 iterations before
    // pv_wait; one iteration is a PAUSE (~10 cycles on the papers' Westmere-era cores,
    // Intel's optimisation manual; ~140 on Skylake and later) plus a load and a branch,
    // so ~12 cycles: 32768 x 12 = 393,216 cycles (~150 us at 2.67 GHz).
    let pv_spin_threshold_cycles = match t.opt_bool("pv_spinlock")? {
        None | Some(false) => {
            if t.has("pv_spin_threshold") {
                return t.err("pv_spin_threshold", "needs pv_spinlock = true");
            }
            None
        }
        Some(true) => Some(
            t.opt_f64("pv_spin_threshold", 1.0, 1e12)?
                .unwrap_or(393_216.0),
        ),
    };
    let haltpoll = t
        .get("haltpoll")
        .map(|h| {
            h.table()
                .and_then(|ht| crate::kvm::parse_guest_haltpoll(&ht))
        })
        .transpose()?;
    let workloads = match t.get("workload") {
        None => vec![],
        Some(o) => o
            .array()?
            .iter()
            .map(|w| workload::parse_workloads(w, &mut locks, spinlock, vcpus))
            .collect::<Res<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect(),
    };
    if idle_poll && workloads.iter().any(|w| w.kind == "lookbusy") {
        // lookbusy steers by the guest's busy time, and a spinning idle loop would count
        // as busy to the model but as idle in /proc/stat under idle=poll.
        return t.err(
            "idle",
            "\"poll\" cannot be combined with a lookbusy workload (its controller reads the guest's busy time, which a spinning idle loop would distort); use \"halt\"",
        );
    }
    t.finish(&[
        "name",
        "vcpus",
        "weight",
        "cap",
        "rt_period",
        "rt_budget",
        "rt_extratime",
        "affinity",
        "spinlock",
        "pv_spinlock",
        "pv_spin_threshold",
        "guest_timeslice",
        "start_jitter",
        "elevator",
        "class",
        "reserved_vcpus",
        "haltpoll",
        "idle",
        "workload",
    ])?;
    Ok(VmSpec {
        name,
        vcpus,
        weight,
        cap,
        rt,
        affinity,
        spinlock,
        pv_spin_threshold_cycles,
        guest_timeslice,
        class,
        reserved_vcpus,
        start_jitter,
        elevator_cfq,
        haltpoll,
        idle_poll,
        workloads,
        locks,
    })
}
