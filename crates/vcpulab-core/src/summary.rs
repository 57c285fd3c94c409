//! The run summary. Its JSON form is a contract (docs/scenarios.md, "Summary"): fields
//! may be added, never renamed. All figures derive from counters kept by the engine and
//! the scheduler; times are seconds over the measured interval (after warm-up).

use serde::{Serialize, Serializer};

fn pairs_as_map<S: Serializer>(pairs: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub scheduler: String,
    pub seed: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Events processed (superseded timers not counted).
    pub events: u64,
    pub vms: Vec<VmSummary>,
    pub host: HostSummary,
    pub fairness: FairnessSummary,
    /// One counter per decision branch of the scheduler, in its declared order.
    #[serde(serialize_with = "pairs_as_map")]
    pub scheduler_counters: Vec<(String, u64)>,
    pub event_counts: EventCounts,
    /// Host threads that are not vCPUs (absent when the scenario declares none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_threads: Vec<HostThreadSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostThreadSummary {
    pub name: String,
    /// The owning VM, if any.
    pub vm: Option<String>,
    /// `kemari`, `drbd`, or null for a workload thread.
    pub helper: Option<String>,
    pub cpu_time_s: f64,
    pub wait_time_s: f64,
    pub migrations: MigrationSummary,
    /// Helper jobs completed (syncs, replicated writes).
    pub jobs: Option<u64>,
    /// Submission to completion of a job.
    pub job_latency_ms: Option<LatencySummary>,
}

/// Software fault tolerance of a VM (present when it has a Kemari helper).
#[derive(Clone, Debug, Serialize)]
pub struct FtSummary {
    /// Kemari synchronisations (one per guest disk write).
    pub syncs: u64,
    /// Time the VM was stopped for them.
    pub paused_time_s: f64,
    /// Guest timer interrupts raised by the Kemari thread (`guest_timers`); of them,
    /// those queued behind a sync or a flush, and those sent to a vCPU on another pCPU.
    pub timer_irqs: u64,
    pub timer_irqs_queued: u64,
    pub timer_irqs_cross_cpu: u64,
    /// `global_mutex`: releases of QEMU's global mutex by the Kemari thread with a raised
    /// interrupt waiting for the vCPU thread to take it: taken because the thread then
    /// blocked (idle), taken by a vCPU thread on the same pCPU, or lost by a vCPU thread
    /// on another pCPU to the Kemari thread going straight on to its next sync.
    pub mutex_handoffs_idle: u64,
    pub mutex_handoffs_same_cpu: u64,
    pub mutex_handoffs_lost: u64,
    /// Released writes the Kemari thread waited for (`sync_release`), and the time.
    pub flushes: u64,
    pub flush_wait_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct VmSummary {
    pub name: String,
    pub vcpu_count: u32,
    pub weight: u32,
    /// pCPU time the VM's vCPUs held (including switch and migration overhead).
    pub cpu_time_s: f64,
    /// cpu_time_s over (pCPUs x measured time).
    pub cpu_share: f64,
    /// Runnable but not running (steal time).
    pub wait_time_s: f64,
    pub halted_time_s: f64,
    /// Part of cpu_time_s spent spinning on locks or IPI acknowledgements.
    pub spin_time_s: f64,
    /// Of the first workload (null if the VM has none).
    pub throughput: Option<f64>,
    pub throughput_unit: Option<String>,
    pub latency_ms: Option<LatencySummary>,
    pub workloads: Vec<WorkloadSummary>,
    /// Pause-loop exits and directed yields (null when the scenario has no [kvm]).
    pub ple: Option<PleSummary>,
    /// Time figures per vCPU.
    pub vcpus: Vec<VcpuSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ft: Option<FtSummary>,
    /// Halt polling, host and guest side (absent without [kvm]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub halt_poll: Option<HaltPollSummary>,
    /// Steal time as the guest's /proc/stat shows it, per one-second window.
    pub steal_pct: StealSummary,
}

/// A VM's steal time in percent of its vCPUs' time (docs/models.md, "Steal time"): the
/// time its vCPUs were runnable on the host but not running (KVM's `run_delay`, which the
/// guest reads as `steal`), over (vCPUs x the window).
#[derive(Clone, Debug, Serialize)]
pub struct StealSummary {
    /// Over the whole measured interval (the windows weighted by their length).
    pub mean: f64,
    /// The nearest-rank 95th percentile of `windows` (their largest when fewer than 20).
    pub p95: f64,
    /// The windows' length; the last is shorter when the measured interval is not a
    /// whole number of windows.
    pub window_s: f64,
    /// Steal% of each window, in order from the end of the warm-up.
    pub windows: Vec<f64>,
}

/// Halt polling of a VM or one vCPU (see `crate::kvm`): KVM's host-side polls
/// (`halt_attempted_poll`, `halt_successful_poll`, and the pCPU time they took, as
/// `halt_poll_success_ns` + `halt_poll_fail_ns`) and the guest haltpoll governor's polls.
#[derive(Clone, Debug, Serialize)]
pub struct HaltPollSummary {
    pub polls: u64,
    pub successful_polls: u64,
    /// pCPU time spent polling (host CPU burned; not in `cpu_time_s`: the pCPU was idle
    /// to the host scheduler).
    pub poll_time_s: f64,
    pub guest_polls: u64,
    pub guest_successful_polls: u64,
    /// vCPU time spent in the guest's poll loop (part of `cpu_time_s`).
    pub guest_poll_time_s: f64,
    /// From a wake-up of a halted vCPU (or a thread made ready while the guest polls)
    /// to guest code running again; VM level only (null on vCPUs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeup_latency_ms: Option<LatencySummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSummary {
    pub kind: String,
    pub threads: u32,
    /// Units completed (loops, events, requests) in the measured interval.
    pub completed: u64,
    pub throughput: f64,
    pub throughput_unit: String,
    pub latency_ms: Option<LatencySummary>,
    /// Network bandwidth of completed requests (workloads that carry request bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_mbps: Option<f64>,
    /// When a finite workload (e.g. sysbench-cpu with `events`) finished its last unit,
    /// in simulated seconds from the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_s: Option<f64>,
    /// Bytes moved per second in KiB/s (IOzone's "KB/s"), for byte streams (iozone with
    /// `record_kib`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_kbps: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct VcpuSummary {
    pub index: u32,
    pub cpu_time_s: f64,
    pub wait_time_s: f64,
    pub halted_time_s: f64,
    pub spin_time_s: f64,
    pub overhead_time_s: f64,
    pub dispatches: u64,
    pub preemptions: u64,
    pub halts: u64,
    pub migrations: MigrationSummary,
    pub ple_exits: u64,
    pub yield_attempts: u64,
    pub yield_successes: u64,
    /// Paravirtual spinlocks (`pv_spinlock`): times a waiter on this vCPU gave up
    /// spinning and halted (pv_wait), and times a releaser kicked it awake.
    pub pv_waits: u64,
    pub pv_kicks: u64,
    /// This vCPU's PLE streaks (see `PleSummary::streaks`): how many, the PLE-weighted
    /// median length and the longest.
    pub ple_streaks: u64,
    pub ple_streak_median: u64,
    pub ple_streak_max: u64,
    /// From a successful directed yield to this vCPU running (null if never boosted).
    pub boost_to_run_mean_ms: Option<f64>,
    pub boost_to_run_max_ms: Option<f64>,
    /// Halt polling on this vCPU (absent without [kvm]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub halt_poll: Option<HaltPollSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PleSummary {
    pub exits: u64,
    pub yield_attempts: u64,
    pub yield_successes: u64,
    /// A streak: consecutive PLE exits of one vCPU, continuing while it PLE-exits again
    /// the next time it runs. Lengths are in PLE exits.
    pub streaks: StreakSummary,
    /// From a successful directed yield to the boosted vCPU running (null if none ran).
    pub boost_to_run_ms: Option<LatencySummary>,
    /// The IPI-aware directed yield's decisions (only with `[kvm] ipi_aware_yield`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipi_aware_yield: Option<IpiAwareSummary>,
}

/// One VM's IPI-aware directed-yield decisions, one counter per branch (crate::kvm).
#[derive(Clone, Debug, Serialize)]
pub struct IpiAwareSummary {
    /// Unicast IPIs from its vCPUs recorded as sender -> receiver.
    pub ipis_tracked: u64,
    /// EOIs that cleared a sender's pending IPI.
    pub eoi_cleared: u64,
    /// Successful directed yields, by the tier that admitted the target.
    pub boost_ipi_receiver: u64,
    pub boost_pending_interrupt: u64,
    pub boost_preempted: u64,
    pub boost_relaxed: u64,
    /// vCPUs the first walk passed over: neither receiver, pending nor preempted; or
    /// preempted in user mode.
    pub skip_not_preempted: u64,
    pub skip_user_mode: u64,
    /// Second (relaxed) walks after a first walk that yielded to nobody.
    pub relaxed_walks: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct StreakSummary {
    pub count: u64,
    /// PLE-weighted median: half of all PLE exits are in streaks at least this long.
    pub median: u64,
    pub max: u64,
    /// Fraction of PLE exits in streaks of 53 or more (the long paper's figure).
    pub ge53_frac: f64,
    /// The papers' figure 4: [streak length, fraction of PLE exits in streaks up to it].
    pub cdf: Vec<(u64, f64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct MigrationSummary {
    pub total: u64,
    pub smt_sibling: u64,
    pub same_socket: u64,
    pub other_socket: u64,
    pub other_numa: u64,
    /// Migrations that left their socket (other socket or other NUMA node) as a fraction of
    /// all; absent when nothing migrated (the FLMS paper's cross-package share).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_socket_share: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostSummary {
    pub pcpus: u32,
    pub busy_time_s: f64,
    pub idle_time_s: f64,
    pub overhead_time_s: f64,
    pub utilization: f64,
    pub context_switches: u64,
    pub migrations: MigrationSummary,
    /// Linux core scheduling (`[scheduler] core_sched` "vm" or "vcpu"); absent when off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_sched: Option<CoreSchedSummary>,
    /// `[host.noise]`: interruptions that cost a running task time, and that time (in
    /// seconds, and in percent of all pCPUs' measured time); absent without noise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseSummary>,
}

/// `[host.noise]`: the interruptions that cost a running task time over the measured run.
#[derive(Clone, Debug, Serialize)]
pub struct NoiseSummary {
    pub interruptions: u64,
    pub lost_time_s: f64,
    pub lost_pct: f64,
}

/// Forced idle under core scheduling: pCPU time spent idle with tasks runnable because a
/// sibling ran another cookie, in percent of pCPU time over the measured run.
#[derive(Clone, Debug, Serialize)]
pub struct CoreSchedSummary {
    pub forced_idle_pct: f64,
    /// Per core (in core order): its siblings' forced idle over their time.
    pub forced_idle_pct_per_core: Vec<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FairnessSummary {
    /// Jain's index over (CPU time / weight) of the VMs that used any CPU.
    pub jain_vm: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EventCounts {
    pub cpu_deadlines: u64,
    pub thread_wakeups: u64,
    pub arrivals: u64,
    pub global_timers: u64,
    pub op_completions: u64,
    pub scheduler_timers: u64,
    pub ipis_sent: u64,
    pub lock_acquisitions: u64,
    /// Lock handoffs and IPI round trips charged `[host.costs] cacheline_transfer`
    /// (absent when it is zero).
    #[serde(skip_serializing_if = "is_zero")]
    pub cacheline_transfers: u64,
    /// Packets through the split driver's backend (absent on the direct path).
    #[serde(skip_serializing_if = "is_zero")]
    pub backend_packets: u64,
    /// Software-FT helper events: released writes completing, timer interrupts
    /// reaching a vCPU across pCPUs (absent without them).
    #[serde(skip_serializing_if = "is_zero")]
    pub helper_events: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}
