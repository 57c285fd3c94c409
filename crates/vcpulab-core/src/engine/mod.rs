//! The simulation engine: one ordered event queue, the host (pCPUs, clock model), the
//! vCPUs the host scheduler places on pCPUs, and the guest model running inside them.
//!
//! ## Guest model
//! Each VM has vCPUs and guest threads. Thread k of a VM (threads numbered across its
//! workloads in order) lives on vCPU k mod vcpus, unless its workload lists the `vcpus`
//! its threads live on; a vCPU time-slices its runnable threads
//! round robin with the VM's `guest_timeslice`, preempting only user-mode compute (kernel
//! code, lock holds and spins are not preemptible in the guest). A vCPU with no runnable
//! thread halts and uses no host CPU; an interrupt (I/O completion, timer, request arrival,
//! IPI) wakes it, and the host scheduler decides when it runs.
//!
//! A thread that spins (on a held lock, or waiting for IPI acknowledgements) keeps its
//! vCPU busy and burns host CPU. A ticket lock hands over to the next waiter in FIFO order
//! even if that waiter's vCPU is preempted; a test-and-set lock goes to whichever waiter is
//! running when it is released, or to the first to run afterwards. An IPI target
//! acknowledges when its vCPU runs.
//!
//! ## Host model
//! A pCPU that switches to a vCPU other than the one it ran last pays `context_switch`; a
//! vCPU that runs on a different pCPU than last time pays the migration cost of that
//! distance. Compute progresses at `clock(busy cores in the package) / base_ghz`, times
//! `smt_throughput / n` when n > 1 SMT siblings of the core are busy.

pub mod queue;
pub mod trace;

use crate::error::SimError;
use crate::kvm::{grow_window, KvmSpec, Vendor};
use crate::metrics::{jain, Histogram};
use crate::model::{HostThreadProgram, Model, RtOp};
use crate::rng::Rng;
use crate::sched::{
    CpuId, RunState, SchedCtx, SchedOut, SchedView, Scheduler, TaskId, TaskInfo, YieldRequest,
    YieldResult,
};
use crate::summary::*;
use crate::time::{u64_as_f64, SimDuration, SimTime};
use crate::topology::{CpuSet, Distance};
use crate::vocab::{IoDriver, LockKind};
use crate::workload::{Arrivals, IpiTargets, Mode};
use queue::{EventKind, EventQueue, HELPER_FLUSH_DONE, HELPER_IRQ_ARRIVES};
use std::collections::BTreeMap;
use std::collections::VecDeque;

/// Called now and then during a run with the fraction of simulated time done (0..1).
pub type ProgressFn = std::sync::Arc<dyn Fn(f64) + Send + Sync>;

/// Asked now and then during a run whether to abandon it (the caller saw Ctrl-C): `true`
/// ends the run with `Error::Interrupted`.
pub type StopFn = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// Options that change how a run is checked or observed, never its results.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Verify the engine's invariants after every event (slow; on in tests).
    pub check_invariants: bool,
    /// Progress callback, called every `PROGRESS_EVERY` events.
    pub progress: Option<ProgressFn>,
    /// Record an execution trace of this window of simulated time (ns).
    pub trace_window: Option<(u64, u64)>,
    /// Run even when the up-front estimate of the event count exceeds
    /// `api::MAX_ESTIMATED_EVENTS` (see `api::estimate_events`).
    pub force: bool,
    /// Asked every `STOP_CHECK_EVERY` events whether to abandon the run.
    pub stop: Option<StopFn>,
}

/// What a run produces: the summary, and the trace if one was asked for.
pub struct RunOutput {
    pub summary: Summary,
    /// Chrome JSON trace text (see `trace`).
    pub trace_json: Option<String>,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("check_invariants", &self.check_invariants)
            .field("progress", &self.progress.is_some())
            .field("trace_window", &self.trace_window)
            .field("force", &self.force)
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

/// Events between two progress callbacks (a power of two: a mask test per event).
const PROGRESS_EVERY: u64 = 1 << 20;
/// Events between two questions to `RunOptions::stop`: a few ms of a run even with
/// invariant checks on, so Ctrl-C ends a run at once. A divisor of `PROGRESS_EVERY`, so
/// that one mask test per event covers both.
const STOP_CHECK_EVERY: u64 = 1 << 16;
/// The `SimError` message of a run its caller stopped (`api` reports such a run as
/// `Error::Interrupted`).
const STOPPED_BY_CALLER: &str = "stopped by the caller";
const _: () = assert!(PROGRESS_EVERY.is_multiple_of(STOP_CHECK_EVERY));

type ThreadId = u32;
const NONE: u32 = u32::MAX;
/// Work below this many base-clock ns counts as done (float rounding).
const WORK_EPSILON: f64 = 1e-6;
/// A thread completing this many loops without simulated time passing is a model that
/// cannot make progress (e.g. only zero-length operations).
const MAX_ZERO_TIME_LOOPS: u32 = 100_000;

/// An interrupt the Kemari thread has for a vCPU that must take QEMU's global mutex to
/// inject it (`global_mutex`): a guest timer, or the completion of a write it held.
#[derive(Clone, Copy)]
enum MutexIrq {
    Timer(Packet),
    WriteDone(ThreadId),
}

/// A request from outside (see `Sim::arrival`): queued at its server workload, and on the
/// split-driver path also a packet in the backend's queue, in and out.
#[derive(Clone, Copy, Debug)]
struct Packet {
    /// The guest workload the request belongs to.
    workload: u32,
    /// When the request reached the host (latency is measured from here).
    arrived: SimTime,
    /// A response leaving the guest (true) or a request entering it (false).
    outbound: bool,
    /// Its guest receive path (`rx`) has handled it.
    received: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ThState {
    /// At an operation boundary, about to execute `ops[pc]`.
    Ready,
    Compute {
        remaining: f64,
        mode: Mode,
        release: u32,
    },
    SpinLock {
        lock: u32,
        hold: f64,
        mode: Mode,
        /// Spinning left (base-clock ns of guest execution) before a paravirtual
        /// spinlock waiter halts; infinite without pv spinlocks.
        pv_left: f64,
    },
    /// A paravirtual spinlock waiter halted in pv_wait: its vCPU sleeps until the lock's
    /// releaser kicks it, or any interrupt wakes it; then it takes the lock if it was
    /// handed over or is free, else spins again.
    PvWait {
        lock: u32,
        hold: f64,
        mode: Mode,
    },
    SpinIpi {
        pending: u32,
    },
    Blocked,
}

/// Laid out by hand (`repr(C)`, one 64-byte line of what every step and wake-up touches,
/// then the request, lookbusy and loop-guard state), like `Task`.
#[repr(C, align(64))]
struct Thread {
    // Line 0.
    state: ThState,
    rng: Rng,
    /// When the last of the thread's disk requests leaves the disk, which serves them one
    /// after another.
    io_tail: SimTime,
    task: TaskId,
    workload: u32,
    pc: u32,
    /// Disk requests submitted and not yet completed.
    io_pending: u32,
    /// A thread blocked on its requests wakes when fewer than this many are outstanding
    /// (the `window` of the `Io` op it blocked at).
    io_wake_below: u32,
    /// Its pending writes went through its VM's Kemari event-tap.
    kemari_io: bool,
    // Line 1.
    /// The request being served (guest threads) or the packet being forwarded (backends).
    packet: Option<Packet>,
    /// lookbusy's controller state (`RtOp::LookbusySpin`), from its first cycle on.
    lookbusy: Option<LookbusyState>,
    last_loop_at: SimTime,
    zero_time_loops: u32,
    index_in_workload: u32,
}

// Two cache lines: at 8,192 vCPUs a third line per thread cost ~6% of the run time
// (session 10); rarely used per-thread state goes in side tables of `State`.
const _: () = assert!(std::mem::size_of::<Thread>() <= 128);

impl Thread {
    /// A thread of `workload` on vCPU or host-thread task `task`, at its first operation.
    fn new(
        task: TaskId,
        workload: u32,
        index_in_workload: u32,
        state: ThState,
        rng: Rng,
    ) -> Thread {
        Thread {
            task,
            workload,
            index_in_workload,
            pc: 0,
            state,
            rng,
            packet: None,
            last_loop_at: SimTime(u64::MAX),
            zero_time_loops: 0,
            io_pending: 0,
            io_wake_below: 1,
            io_tail: SimTime::ZERO,
            kemari_io: false,
            lookbusy: None,
        }
    }
}

/// One lookbusy spinner's controller (lookbusy 1.4 `cpu_spin`): the CPU work of its next
/// busy phase, and the wall clock and guest-wide busy time when the last cycle began.
#[derive(Clone, Copy, Debug)]
struct LookbusyState {
    busy_ns: f64,
    cycle_start: SimTime,
    guest_busy_at_start: u64,
}

/// lookbusy's floor for a busy phase (its `minimum_cycles`, 10,000 loop iterations: ~10 us).
const LOOKBUSY_MIN_BUSY_NS: f64 = 10_000.0;

struct Lock {
    holder: u32,
    kind: LockKind,
    waiters: VecDeque<ThreadId>,
}

struct WorkloadRt {
    vm: u32,
    ops: Vec<RtOp>,
    counts_requests: bool,
    arrivals: Option<Arrivals>,
    rng: Rng,
    /// Requests (servers) or packets (backends) that arrived while no thread waited.
    queue: VecDeque<Packet>,
    waiting: VecDeque<ThreadId>,
    completed: u64,
    latency: Histogram,
    rt: bool,
    dirty_bytes_per_ns: f64,
    /// The helper this workload drives (NONE for ordinary workloads).
    helper: u32,
    /// Bytes per request, and bytes of completed requests in the measured interval.
    request_bytes: u64,
    bytes_done: u64,
    /// Finite workloads: units not yet started, units running, when the last finished.
    units_left: Option<u64>,
    units_running: u64,
    finished_at: Option<SimTime>,
    /// The guest receive path (`rx`) its requests go through first, NONE if none.
    rx_stage: u32,
    /// For a receive path: the workload it serves; NONE for every other workload.
    rx_for: u32,
    /// A guest timer workload (`timer-rt`): the vCPU task its timer interrupts go to;
    /// NONE for every other workload.
    timer_task: u32,
}

impl WorkloadRt {
    /// A workload of VM `vm` (or a host thread's) running `ops`, with nothing served yet;
    /// the callers set what differs from these defaults (arrivals, priority, helper, ...).
    fn new(vm: u32, ops: Vec<RtOp>, rng: Rng) -> WorkloadRt {
        WorkloadRt {
            vm,
            ops,
            counts_requests: false,
            arrivals: None,
            rng,
            queue: VecDeque::new(),
            waiting: VecDeque::new(),
            completed: 0,
            latency: Histogram::default(),
            rt: false,
            dirty_bytes_per_ns: 0.0,
            helper: NONE,
            request_bytes: 0,
            bytes_done: 0,
            units_left: None,
            units_running: 0,
            finished_at: None,
            rx_stage: NONE,
            rx_for: NONE,
            timer_task: NONE,
        }
    }
}

/// One unit of helper work: a Kemari sync or a DRBD replication.
#[derive(Clone, Copy, Debug)]
struct Job {
    /// The guest thread whose I/O caused it.
    guest_thread: ThreadId,
    enqueued: SimTime,
    /// Kemari: memory dirtied since the last sync; DRBD: the write's size.
    bytes: f64,
    /// Local disk latency of the held I/O (ns), started when Kemari releases it.
    io_ns: u64,
    write_bytes: u64,
    /// DRBD: when the local disk write completes.
    local_done: SimTime,
    /// DRBD: the Kemari helper waiting for this write (`sync_release`), NONE if none.
    release_by: u32,
}

struct HelperRt {
    spec: crate::ft::HelperSpec,
    vm: u32,
    thread: ThreadId,
    task: TaskId,
    jobs: VecDeque<Job>,
    cur: Option<Job>,
    /// Blocked in HelperWait (a submitted job must wake it).
    waiting: bool,
    /// Submission to completion, per job.
    job_latency: Histogram,
    jobs_done: u64,
    /// Kemari with `guest_timers`: timer expiries not yet raised, the one being raised,
    /// and raised interrupts in flight to a vCPU on another pCPU (an IPI away).
    timers: VecDeque<Packet>,
    cur_timer: Option<Packet>,
    irqs_in_flight: VecDeque<Packet>,
    /// Kemari with `global_mutex`: raised interrupts whose vCPU thread has not yet got
    /// QEMU's global mutex from this thread.
    irqs_awaiting_mutex: VecDeque<MutexIrq>,
    /// Kemari with `sync_release`: a released write has not completed yet; the thread
    /// is blocked in HelperFlush waiting for it.
    flushing: bool,
    flush_blocked: bool,
    flush_since: SimTime,
    c: HelperCounters,
}

/// What a helper did, one counter per branch (reset at warm-up).
#[derive(Clone, Copy, Default)]
struct HelperCounters {
    /// Timer interrupts raised; of them, those that found the thread busy with a sync
    /// or a flush (queued behind it) and those sent to a vCPU on another pCPU.
    timer_irqs: u64,
    timer_irqs_queued: u64,
    timer_irqs_cross_cpu: u64,
    /// `global_mutex`: releases of the mutex with a raised interrupt waiting for it, by
    /// outcome: the thread blocked (nothing left to do) and the vCPU thread took it; the
    /// vCPU thread shares the pCPU and took it; the vCPU thread is on another pCPU and
    /// lost it to this thread going straight on to more work.
    mutex_handoffs_idle: u64,
    mutex_handoffs_same_cpu: u64,
    mutex_handoffs_lost: u64,
    /// Released writes waited for, and the time spent waiting.
    flushes: u64,
    flush_ns: u64,
}

/// Laid out in declaration order: the first eight (one cache line) change on every
/// dispatch, deschedule or halt; the rest only with migrations, PLE and pv spinlocks.
#[derive(Clone, Default)]
#[repr(C)]
struct TaskCounters {
    run_ns: u64,
    wait_ns: u64,
    halted_ns: u64,
    dispatches: u64,
    preemptions: u64,
    halts: u64,
    spin_ns: u64,
    overhead_ns: u64,
    migrations: [u64; 4],
    ple_exits: u64,
    yield_attempts: u64,
    yield_successes: u64,
    pv_waits: u64,
    pv_kicks: u64,
}

/// Laid out by hand, in declaration order, for the cache: a dispatch, deschedule, settle
/// or wake touches the first two lines and the first line of `c`; the rest is cold unless
/// IPIs are pending (`pending_acks`) or KVM's PLE handling is on (`kv`). With the
/// compiler's order these fields spread over five or six lines of the 344 bytes, and at
/// 8,192 vCPUs each was a miss.
#[repr(C, align(64))]
struct Task {
    // Line 0.
    state_since: SimTime,
    /// Guest progress of the current compute has been accounted up to here.
    progress_from: SimTime,
    /// When it last became runnable (for the starvation check).
    runnable_since: SimTime,
    /// When the current stretch on a pCPU began (for traces; `state_since` is reset by
    /// warm-up accounting).
    run_since: SimTime,
    slice_start: SimTime,
    overhead_end: SimTime,
    vm: u32,
    last_cpu: u32,
    cur: u32,
    /// Past the switch overhead and executing guest code.
    executing: bool,
    /// In its VM's process's `mm_cpumask` (the guest's lazy TLB mode): set when the vCPU
    /// runs a guest thread, cleared when it acknowledges a TLB-shootdown IPI with nothing
    /// to run (an idle CPU that gets a flush IPI leaves the mm, Linux `leave_mm`), so an
    /// idle vCPU is interrupted by at most one shootdown until it runs a thread again.
    in_mm: bool,
    /// Its affinity holds every pCPU, so a pick needs no membership test: a 1024-pCPU set
    /// lives on the heap, and testing it (or a separate flag array) missed the cache on
    /// every dispatch, while this line is read by the dispatch anyway.
    runs_anywhere: bool,
    /// `pending_acks` is not empty: tested on every dispatch, so it lives on this line
    /// and the vector's (a fourth line) is read only when it holds something.
    has_pending_acks: bool,
    // Line 1.
    /// Spin time has been charged to `c.spin_ns` up to here; None when not spinning.
    spin_since: Option<SimTime>,
    /// In KVM handling a PLE exit on its pCPU until then (no guest progress meanwhile).
    exit_until: Option<SimTime>,
    local: VecDeque<ThreadId>,
    // Lines 2-4.
    c: TaskCounters,
    pending_acks: Vec<ThreadId>,
    kv: KvmTask,
    /// Run time accounted before the warm-up reset `c` (so guest-visible busy time, which
    /// lookbusy's controller reads, is monotonic).
    run_ns_before_warmup: u64,
}

// What a dispatch reads stays on the first line (see the layout note above).
const _: () = assert!(std::mem::offset_of!(Task, runs_anywhere) < 64);
const _: () = assert!(std::mem::offset_of!(Task, has_pending_acks) < 64);

impl Task {
    fn new(vm: u32, ple_window: u64) -> Task {
        Task {
            vm,
            state_since: SimTime::ZERO,
            run_since: SimTime::ZERO,
            last_cpu: NONE,
            executing: false,
            exit_until: None,
            overhead_end: SimTime::ZERO,
            progress_from: SimTime::ZERO,
            spin_since: None,
            runnable_since: SimTime::ZERO,
            cur: NONE,
            slice_start: SimTime::ZERO,
            local: VecDeque::new(),
            pending_acks: Vec::new(),
            in_mm: false,
            runs_anywhere: false,
            has_pending_acks: false,
            c: TaskCounters::default(),
            run_ns_before_warmup: 0,
            kv: KvmTask {
                window: ple_window,
                ..Default::default()
            },
        }
    }

    /// Charges the spin time up to `now` and goes on spinning from there: summaries and
    /// the warm-up reset read `c.spin_ns` while the spin is still under way.
    #[inline]
    fn account_spin(&mut self, now: SimTime) {
        if let Some(s) = self.spin_since {
            self.c.spin_ns += now.since(s).ns();
            self.spin_since = Some(now);
        }
    }

    /// Charges the spin time up to `now` and stops spinning (no longer executing the
    /// spin loop: descheduled, in a PLE exit, or the thread moved on).
    #[inline]
    fn end_spin(&mut self, now: SimTime) {
        if let Some(s) = self.spin_since.take() {
            self.c.spin_ns += now.since(s).ns();
        }
    }
}

/// Per-vCPU state of the KVM layer (see `crate::kvm`). In declaration order: the flags
/// and `boosted_at`, which every dispatch touches, first.
#[derive(Clone, Default)]
#[repr(C)]
struct KvmTask {
    /// Descheduled while runnable (4.15 `preempted`).
    preempted: bool,
    /// 5.3+ `ready`: preempted, or woken from a halt and not yet running.
    ready: bool,
    /// Guest mode when it was last descheduled (`preempted_in_kernel`).
    in_kernel: bool,
    in_spin_loop: bool,
    dy_eligible: bool,
    /// This run (dispatch) saw a PLE exit.
    ple_in_run: bool,
    boosted_at: Option<SimTime>,
    /// Current PLE window, cycles.
    window: u64,
    /// Start of the current PLE window (a spin, or the time after the last exit).
    ple_from: SimTime,
    streak: u64,
}

struct Cpu {
    curr: u32,
    last_task: u32,
    timer_at: Option<SimTime>,
    guest_at: Option<SimTime>,
    pending_at: Option<SimTime>,
    gen: u32,
    speed: f64,
    /// Counted as busy by the clock model (kept across a direct task-to-task switch).
    busy: bool,
    /// In `State::dirty`: its deadline is re-armed at the end of the event (here rather
    /// than in a flag array: the re-arm reads this record anyway).
    dirty: bool,
}

#[derive(Clone, Default)]
struct HostCounters {
    context_switches: u64,
    migrations: [u64; 4],
    events: u64,
    ev_cpu: u64,
    ev_thread_wake: u64,
    ev_arrival: u64,
    ev_helper: u64,
    ev_global: u64,
    op_completions: u64,
    timer_fires: u64,
    ipis_sent: u64,
    lock_acquisitions: u64,
    backend_packets: u64,
}

pub struct Sim<'m, S: Scheduler> {
    model: &'m Model,
    sched: S,
    view: SchedView,
    out: SchedOut,
    st: State,
}

struct State {
    now: SimTime,
    end: SimTime,
    seed: u64,
    opts: RunOptions,
    q: EventQueue,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    threads: Vec<Thread>,
    workloads: Vec<WorkloadRt>,
    locks: Vec<Lock>,
    /// First lock id of each VM in `locks`.
    vm_lock_base: Vec<u32>,
    /// First task id of each VM.
    vm_task_base: Vec<u32>,
    vm_vcpus: Vec<u32>,
    vm_timeslice: Vec<SimDuration>,
    /// Per VM: base-clock ns a kernel spinlock waiter spins before pv_wait (paravirtual
    /// spinlocks), or infinity.
    vm_pv_spin_ns: Vec<f64>,
    workload_threads: Vec<u32>,
    /// First workload id of each VM.
    vm_workload_base: Vec<u32>,
    kicks: Vec<TaskId>,
    /// pCPUs whose deadline may have changed; re-armed once at the end of the event.
    dirty: Vec<CpuId>,
    h: HostCounters,
    global_gen: u32,
    error: Option<String>,
    // clock model
    rate_model: bool,
    base_ghz: f64,
    turbo: Vec<f64>,
    smt_throughput: f64,
    busy_cores_in_pkg: Vec<u32>,
    busy_threads_in_core: Vec<u32>,
    costs_switch: SimDuration,
    costs_migration: [SimDuration; 4],
    sched_counters_at_warmup: Vec<(&'static str, u64)>,
    trace: Option<trace::Tracer>,
    kvm: Option<KvmSpec>,
    /// Per VM: index of the last boosted vCPU (`kvm->last_boosted_vcpu`).
    last_boosted: Vec<u32>,
    /// Per task (vCPU): PLE streak lengths -> number of streaks of that length.
    streaks: Vec<BTreeMap<u64, u64>>,
    /// Per task (vCPU): time from a successful directed yield to it running.
    boost_to_run: Vec<Histogram>,
    /// Spinners that left the PLE handler; their spin-loop flags clear if still running.
    spin_loop_exits: Vec<TaskId>,
    /// Tasks 0..n_vcpu_tasks are vCPUs; the rest are host threads.
    n_vcpu_tasks: u32,
    /// Workloads 0..n_vm_workloads belong to VMs; the rest to host threads.
    n_vm_workloads: u32,
    helpers: Vec<HelperRt>,
    /// The netback workload every packet passes through (split-driver path); NONE: direct.
    io_backend: u32,
    /// Per VM: its Kemari and DRBD helper ids (NONE if none).
    vm_kemari: Vec<u32>,
    vm_drbd: Vec<u32>,
    /// Per VM: stopped by a Kemari sync, since when, and totals.
    vm_paused: Vec<bool>,
    /// How many VMs are stopped now: `vcpu_paused`, asked several times per event, looks
    /// no further while none is (always, without Kemari).
    vms_paused: u32,
    vm_paused_since: Vec<SimTime>,
    vm_paused_ns: Vec<u64>,
    vm_syncs: Vec<u64>,
    /// Per VM: guest memory dirtied since the last sync (bytes).
    vm_dirty: Vec<f64>,
    /// Per VM: its guest runs CFQ (`elevator = "cfq"`), and when its last delayed
    /// synchronous request completed (ns; may be negative: at boot, a second ago).
    vm_cfq: Vec<bool>,
    vm_last_delayed_sync_ns: Vec<i64>,
    /// Per VM with CFQ: synchronous requests in flight, and writeback threads held back
    /// by them with nothing in flight of their own.
    vm_sync_in_flight: Vec<u32>,
    vm_async_waiters: Vec<Vec<ThreadId>>,
    /// Per thread, when a guest with CFQ is configured (empty otherwise, so the thread
    /// record stays two cache lines): when its outstanding synchronous request was
    /// queued (`SimTime::MAX`: none), as its completion may count as a delayed sync.
    io_sync_since: Vec<SimTime>,
    /// Per task: its affinity was defaulted (so it must avoid isolated pCPUs).
    default_affinity: Vec<bool>,
    isolcpus: Option<CpuSet>,
    costs_ipi: SimDuration,
    /// The scheduler's promise for `--check-invariants` (asked after init).
    starvation_bound: Option<SimDuration>,
    /// Metrics count from here (0, or the end of the warm-up).
    metrics_since: SimTime,
}

macro_rules! ctx {
    ($s:expr) => {
        &mut SchedCtx {
            now: $s.st.now,
            view: &$s.view,
            out: &mut $s.out,
        }
    };
}

impl<'m, S: Scheduler> Sim<'m, S> {
    pub fn new(model: &'m Model, sched: S, seed: u64, opts: RunOptions) -> Sim<'m, S> {
        let host = &model.host;
        let topo = &host.topo;
        let ncpus = topo.ncpus();
        let mut tasks_info = Vec::new();
        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        let mut workloads = Vec::new();
        let mut locks = Vec::new();
        let (mut vm_lock_base, mut vm_task_base, mut vm_vcpus, mut vm_timeslice) =
            (vec![], vec![], vec![], vec![]);
        let mut vm_workload_base = vec![];
        let mut default_affinity: Vec<bool> = Vec::new();
        for (vi, vm) in model.vms.iter().enumerate() {
            vm_workload_base.push(workloads.len() as u32);
            vm_task_base.push(tasks.len() as u32);
            vm_lock_base.push(locks.len() as u32);
            vm_vcpus.push(vm.vcpus);
            vm_timeslice.push(vm.guest_timeslice);
            locks.extend(vm.lock_kinds.iter().map(|&kind| Lock {
                holder: NONE,
                kind,
                waiters: VecDeque::new(),
            }));
            for i in 0..vm.vcpus {
                default_affinity.push(vm.affinity[i as usize].is_none());
                let affinity = vm.affinity[i as usize]
                    .clone()
                    .unwrap_or_else(|| host.default_affinity.clone());
                tasks_info.push(TaskInfo {
                    vm: vi as u32,
                    index: i,
                    affinity,
                    weight: vm.weight,
                    cap: vm.cap,
                    class: vm.class,
                    latency_vcpu: i < vm.latency_vcpus,
                });
                tasks.push(Task::new(
                    vi as u32,
                    model.kvm.as_ref().map_or(0, |k| k.ple_window),
                ));
            }
            for (wi, w) in vm.workloads.iter().enumerate() {
                let wid = workloads.len() as u32;
                let wis = wi.to_string();
                workloads.push(WorkloadRt {
                    counts_requests: w.counts_requests,
                    arrivals: w.arrivals.clone(),
                    rt: w.rt,
                    dirty_bytes_per_ns: w.dirty_bytes_per_ns,
                    request_bytes: w.request_bytes,
                    units_left: w.total_units,
                    timer_task: if w.timer {
                        vm_task_base[vi] + w.thread_vcpu(0)
                    } else {
                        NONE
                    },
                    ..WorkloadRt::new(
                        vi as u32,
                        w.ops.clone(),
                        Rng::derive(seed, &["vm", &vm.name, "workload", &wis, "arrivals"]),
                    )
                });
                for ti in 0..w.threads {
                    let task = vm_task_base[vi] + w.thread_vcpu(ti);
                    let tid = threads.len() as u32;
                    threads.push(Thread::new(
                        task,
                        wid,
                        ti,
                        ThState::Ready,
                        Rng::derive(
                            seed,
                            &["vm", &vm.name, "workload", &wis, "thread", &ti.to_string()],
                        ),
                    ));
                    tasks[task as usize].local.push_back(tid);
                }
            }
        }
        let n_vcpu_tasks = tasks.len() as u32;
        let n_vm_workloads = workloads.len() as u32;
        let nvms = model.vms.len();
        let mut helpers: Vec<HelperRt> = Vec::new();
        let (mut vm_kemari, mut vm_drbd) = (vec![NONE; nvms], vec![NONE; nvms]);
        // Host threads: one task and one thread each. Unowned ones form their own group
        // (VM id nvms) for schedulers that group by VM.
        for (hi, h) in model.host_threads.iter().enumerate() {
            let owner = h.vm.unwrap_or(nvms as u32);
            let task = tasks.len() as u32;
            default_affinity.push(h.affinity.is_none());
            tasks_info.push(TaskInfo {
                vm: owner,
                index: hi as u32,
                affinity: h
                    .affinity
                    .clone()
                    .unwrap_or_else(|| host.default_affinity.clone()),
                weight: h.weight,
                cap: 0,
                class: None,
                latency_vcpu: false,
            });
            tasks.push(Task::new(owner, 0));
            let wid = workloads.len() as u32;
            let tid = threads.len() as u32;
            let (ops, helper) = match &h.program {
                HostThreadProgram::Ops(ops) => (ops.clone(), NONE),
                HostThreadProgram::Helper(spec) => {
                    let id = helpers.len() as u32;
                    match spec {
                        crate::ft::HelperSpec::Kemari { .. } => vm_kemari[owner as usize] = id,
                        crate::ft::HelperSpec::Drbd { .. } => vm_drbd[owner as usize] = id,
                    }
                    helpers.push(HelperRt {
                        spec: spec.clone(),
                        vm: owner,
                        thread: tid,
                        task,
                        jobs: VecDeque::new(),
                        cur: None,
                        waiting: true,
                        job_latency: Histogram::default(),
                        jobs_done: 0,
                        timers: VecDeque::new(),
                        cur_timer: None,
                        irqs_in_flight: VecDeque::new(),
                        irqs_awaiting_mutex: VecDeque::new(),
                        flushing: false,
                        flush_blocked: false,
                        flush_since: SimTime::ZERO,
                        c: HelperCounters::default(),
                    });
                    (
                        vec![
                            RtOp::HelperWait,
                            RtOp::HelperWork,
                            RtOp::HelperNet,
                            RtOp::HelperDone,
                            RtOp::HelperFlush,
                        ],
                        id,
                    )
                }
            };
            workloads.push(WorkloadRt {
                helper,
                ..WorkloadRt::new(
                    owner,
                    ops,
                    Rng::derive(seed, &["host_thread", &h.name, "arrivals"]),
                )
            });
            let state = if helper == NONE {
                ThState::Ready
            } else {
                ThState::Blocked
            };
            threads.push(Thread::new(
                task,
                wid,
                0,
                state,
                Rng::derive(seed, &["host_thread", &h.name, "thread"]),
            ));
            if helper == NONE {
                tasks[task as usize].local.push_back(tid);
            }
        }
        // Guest receive paths (`rx`): one more workload per request-serving workload that
        // has one, after every VM workload and host thread (so their indices stay as the
        // scenario lists them), with one interrupt-priority thread per listed vCPU.
        for (vi, vm) in model.vms.iter().enumerate() {
            for (wi, w) in vm.workloads.iter().enumerate() {
                let Some(rx) = &w.rx else { continue };
                let app = vm_workload_base[vi] + wi as u32;
                let wid = workloads.len() as u32;
                workloads[app as usize].rx_stage = wid;
                let wis = wi.to_string();
                let ops = vec![
                    RtOp::WaitRequest,
                    RtOp::PacketWork {
                        per_packet: rx.per_packet,
                        per_kib: rx.per_kib,
                    },
                    RtOp::RxDeliver,
                ];
                workloads.push(WorkloadRt {
                    rt: true,
                    rx_for: app,
                    ..WorkloadRt::new(
                        vi as u32,
                        ops,
                        Rng::derive(seed, &["vm", &vm.name, "workload", &wis, "rx"]),
                    )
                });
                for (ti, &vcpu) in rx.vcpus.iter().enumerate() {
                    let task = vm_task_base[vi] + vcpu;
                    let tid = threads.len() as u32;
                    threads.push(Thread::new(
                        task,
                        wid,
                        ti as u32,
                        ThState::Ready,
                        Rng::derive(
                            seed,
                            &["vm", &vm.name, "workload", &wis, "rx", &ti.to_string()],
                        ),
                    ));
                    tasks[task as usize].local.push_back(tid);
                }
            }
        }
        let any_unowned = model.host_threads.iter().any(|h| h.vm.is_none());
        let io_backend = match model.io_driver {
            None => NONE,
            Some(IoDriver::HostThread(i)) => n_vm_workloads + i,
            Some(IoDriver::Vm { vm, workload }) => vm_workload_base[vm as usize] + workload,
        };
        let ntasks = tasks.len();
        let turbo = host.turbo_ghz.clone();

        let distinct_clock = turbo.iter().any(|g| *g != host.base_ghz);
        let smt_active =
            topo.threads_per_core > 1 && host.smt_throughput != topo.threads_per_core as f64;
        let view = SchedView {
            cpu_curr: vec![None; ncpus],
            state: vec![RunState::Halted; ntasks],
            tasks: tasks_info,
            nvms: model.vms.len() as u32 + any_unowned as u32,
            topo: topo.clone(),
        };
        let out = SchedOut {
            resched_pending: vec![false; ncpus],
            ..Default::default()
        };
        let opts_trace = opts.trace_window;
        let idle_speed = if turbo.is_empty() {
            1.0
        } else {
            turbo[0] / host.base_ghz
        };
        let n_all_tasks = tasks.len();
        for (task, info) in tasks.iter_mut().zip(&view.tasks) {
            task.runs_anywhere = info.affinity.len() == ncpus;
        }
        let io_sync_since = if model.vms.iter().any(|v| v.cfq) {
            vec![SimTime::MAX; threads.len()]
        } else {
            Vec::new()
        };
        let st = State {
            now: SimTime::ZERO,
            end: SimTime::ZERO + model.duration,
            seed,
            opts,
            q: EventQueue::with_capacity(ntasks + ncpus + 16),
            cpus: (0..ncpus)
                .map(|_| Cpu {
                    curr: NONE,
                    last_task: NONE,
                    timer_at: None,
                    guest_at: None,
                    pending_at: None,
                    gen: 0,
                    speed: idle_speed,
                    busy: false,
                    dirty: false,
                })
                .collect(),
            tasks,
            threads,
            workloads,
            locks,
            vm_lock_base,
            vm_task_base,
            vm_vcpus,
            vm_timeslice,
            vm_pv_spin_ns: model.vms.iter().map(|v| v.pv_spin_ns).collect(),
            workload_threads: model
                .vms
                .iter()
                .flat_map(|v| v.workloads.iter().map(|w| w.threads))
                .collect(),
            vm_workload_base,
            kicks: Vec::new(),
            dirty: Vec::new(),
            h: HostCounters::default(),
            global_gen: 0,
            error: None,
            rate_model: distinct_clock || smt_active,
            base_ghz: host.base_ghz,
            turbo,
            smt_throughput: host.smt_throughput,
            busy_cores_in_pkg: vec![0; topo.sockets as usize],
            busy_threads_in_core: vec![0; topo.ncores()],
            costs_switch: host.costs.context_switch,
            costs_migration: host.costs.migration,
            sched_counters_at_warmup: Vec::new(),
            trace: opts_trace.map(|(a, b)| trace::Tracer::new(SimTime(a), SimTime(b))),
            kvm: model.kvm.clone().filter(|k| k.ple),
            last_boosted: vec![0; model.vms.len()],
            streaks: vec![BTreeMap::new(); n_all_tasks],
            boost_to_run: vec![Histogram::default(); n_all_tasks],
            spin_loop_exits: Vec::new(),
            starvation_bound: None,
            metrics_since: SimTime::ZERO,
            n_vcpu_tasks,
            n_vm_workloads,
            helpers,
            io_backend,
            vm_kemari,
            vm_drbd,
            vm_paused: vec![false; nvms],
            vms_paused: 0,
            vm_paused_since: vec![SimTime::ZERO; nvms],
            vm_paused_ns: vec![0; nvms],
            vm_syncs: vec![0; nvms],
            vm_dirty: vec![0.0; nvms],
            vm_cfq: model.vms.iter().map(|v| v.cfq).collect(),
            vm_last_delayed_sync_ns: vec![-(crate::time::NS_PER_S as i64); nvms],
            vm_sync_in_flight: vec![0; nvms],
            vm_async_waiters: vec![Vec::new(); nvms],
            io_sync_since,
            default_affinity,
            isolcpus: host.isolcpus.clone(),
            costs_ipi: host.costs.ipi,
        };
        Sim {
            model,
            sched,
            view,
            out,
            st,
        }
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// Asks the CPU to fetch the records the next event will use while this one is
    /// handled. With thousands of vCPUs their task and thread records do not fit the
    /// cache, and each first touch was a miss that the event's handling waited for.
    /// Usually the next event in the queue is the next one handled (a new event may come
    /// first; then the hint is wasted, nothing else).
    #[inline(always)]
    fn prefetch_next_event(&self) {
        match self.st.q.peek_kind() {
            Some(EventKind::Cpu { cpu, .. }) => {
                let t = self.st.cpus[cpu as usize].curr;
                if t != NONE {
                    prefetch_lines(&self.st.tasks[t as usize], 3);
                }
                // The event often ends the current run, and the scheduler's next pick
                // is dispatched at once.
                if let Some(n) = self.sched.likely_next(cpu) {
                    prefetch_lines(&self.st.tasks[n as usize], 3);
                }
            }
            Some(EventKind::ThreadWake { thread }) => {
                prefetch_lines(&self.st.threads[thread as usize], 1);
            }
            _ => {}
        }
    }

    fn fail(&mut self, msg: String) {
        if self.st.error.is_none() {
            self.st.error = Some(msg);
        }
    }

    /// The caller's hooks, every `STOP_CHECK_EVERY` events: progress, and whether to stop
    /// (which ends the run as an error at once, through `st.error`).
    #[cold]
    fn poll_caller(&mut self) {
        if self.st.h.events & (PROGRESS_EVERY - 1) == 0 {
            if let Some(p) = &self.st.opts.progress {
                p(self.st.now.0 as f64 / self.st.end.0 as f64);
            }
        }
        if let Some(stop) = &self.st.opts.stop {
            if stop() && self.st.error.is_none() {
                self.st.error = Some(STOPPED_BY_CALLER.to_string());
            }
        }
    }

    /// Runs to the end of the scenario and returns the summary.
    pub fn run(self) -> Result<Summary, SimError> {
        self.run_full().map(|o| o.summary)
    }

    /// Runs to the end of the scenario; returns the summary and the trace if asked for.
    pub fn run_full(mut self) -> Result<RunOutput, SimError> {
        let model = self.model;
        self.sched.init(ctx!(self));
        self.apply_out();
        self.st.starvation_bound = self.sched.starvation_bound(&self.view);
        // Every vCPU with guest threads starts runnable (at once, or after its VM's start
        // jitter); the others start halted.
        for (vi, vm) in model.vms.iter().enumerate() {
            let mut rng = Rng::derive(self.st.seed, &["vm", &vm.name, "start"]);
            for i in 0..vm.vcpus {
                let t = self.st.vm_task_base[vi] + i;
                if self.st.tasks[t as usize].local.is_empty() {
                    continue;
                }
                if vm.start_jitter.ns() == 0 {
                    self.make_runnable(t);
                } else {
                    let at = SimTime(rng.below(vm.start_jitter.ns()));
                    self.st.q.push(at, EventKind::TaskStart { task: t });
                }
            }
        }
        for t in self.st.n_vcpu_tasks..self.st.tasks.len() as u32 {
            if !self.st.tasks[t as usize].local.is_empty() {
                self.make_runnable(t);
            }
        }
        for w in 0..self.st.workloads.len() {
            self.start_arrivals(w as u32);
        }
        if model.warmup.ns() > 0 {
            self.st
                .q
                .push(SimTime::ZERO + model.warmup, EventKind::Warmup);
        }
        self.flush();
        while let Some(ev) = self.st.q.pop() {
            if ev.time >= self.st.end {
                break;
            }
            if self.st.opts.check_invariants && ev.time < self.st.now {
                self.fail(format!(
                    "event queue went backwards: {} after {}",
                    ev.time.0, self.st.now.0
                ));
            }
            self.st.now = ev.time;
            self.prefetch_next_event();
            match ev.kind {
                EventKind::Cpu { cpu, gen } => {
                    let c = &self.st.cpus[cpu as usize];
                    if gen != c.gen {
                        continue; // superseded
                    }
                    self.st.h.ev_cpu += 1;
                    self.cpu_event(cpu);
                }
                EventKind::ThreadWake { thread } => {
                    self.st.h.ev_thread_wake += 1;
                    if !self.ft_write_done_awaits_mutex(thread) {
                        self.wake_thread(thread);
                    }
                }
                EventKind::Helper { helper, what } => {
                    self.st.h.ev_helper += 1;
                    if what == HELPER_FLUSH_DONE {
                        self.ft_flush_done(helper as usize);
                    } else {
                        let p = self.st.helpers[helper as usize]
                            .irqs_in_flight
                            .pop_front()
                            .expect("an interrupt in flight");
                        self.enqueue_inbound(p);
                    }
                }
                EventKind::Arrival { workload } => {
                    self.st.h.ev_arrival += 1;
                    self.arrival(workload);
                }
                EventKind::Global { gen } => {
                    if gen != self.st.global_gen {
                        continue;
                    }
                    self.st.h.ev_global += 1;
                    self.sched.global_timer(ctx!(self));
                    self.apply_out();
                }
                EventKind::Warmup => {
                    self.reset_metrics();
                    continue;
                }
                EventKind::TaskStart { task } => {
                    // An IPI may already have woken it.
                    if self.view.state[task as usize] == RunState::Halted && !self.vcpu_paused(task)
                    {
                        self.make_runnable(task);
                    }
                }
            }
            self.st.h.events += 1;
            self.flush();
            if self.st.h.events & (STOP_CHECK_EVERY - 1) == 0 {
                self.poll_caller();
            }
            if self.st.opts.check_invariants {
                self.check_invariants();
            }
            // Tested before taken: `take` would store None back on every event.
            if self.st.error.is_some() {
                return Err(SimError {
                    scenario: model.name.clone(),
                    seed: self.st.seed,
                    at_ns: self.st.now.0,
                    message: self.st.error.take().expect("tested"),
                });
            }
        }
        if let Some(msg) = self.st.error.take() {
            return Err(SimError {
                scenario: model.name.clone(),
                seed: self.st.seed,
                at_ns: self.st.now.0,
                message: msg,
            });
        }
        self.st.now = self.st.end;
        self.account_all();
        for (task, lengths) in self.st.tasks.iter_mut().zip(&mut self.st.streaks) {
            close_streak(&mut task.kv.streak, lengths);
        }
        if self.st.trace.is_some() {
            for c in 0..self.st.cpus.len() {
                let t = self.st.cpus[c].curr;
                if t != NONE {
                    let start = self.st.tasks[t as usize].run_since;
                    self.trace_run(c as u32, t, start);
                }
            }
        }
        let summary = self.summary();
        let trace_json = self.st.trace.take().map(|tr| {
            let vm_name = |vm: u32| model.vms.get(vm as usize).map(|v| v.name.clone());
            let labels: Vec<trace::TaskLabel> = self
                .view
                .tasks
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if (i as u32) < self.st.n_vcpu_tasks {
                        trace::TaskLabel::Vcpu {
                            vm: model.vms[t.vm as usize].name.clone(),
                            index: t.index,
                        }
                    } else {
                        trace::TaskLabel::HostThread {
                            name: model.host_threads[t.index as usize].name.clone(),
                            vm: vm_name(t.vm),
                        }
                    }
                })
                .collect();
            tr.to_chrome_json(self.st.cpus.len(), &labels)
        });
        Ok(RunOutput {
            summary,
            trace_json,
        })
    }

    #[inline]
    fn trace_instant(
        &mut self,
        task: TaskId,
        kind: &'static str,
        cpu: Option<u32>,
        other: Option<u32>,
    ) {
        if let Some(tr) = &mut self.st.trace {
            tr.instant(self.st.now, task, kind, cpu, other);
        }
    }

    #[inline]
    fn trace_run(&mut self, cpu: CpuId, task: TaskId, start: SimTime) {
        if let Some(tr) = &mut self.st.trace {
            tr.run(cpu, task, start, self.st.now);
        }
    }

    // ----------------------------------------------------------------- scheduler glue

    /// Applies timer requests made by the last hook. Most hooks make none, so the check
    /// is inlined at every call and the work is not.
    #[inline(always)]
    fn apply_out(&mut self) {
        if !self.out.timers.is_empty() || self.out.global_timer.is_some() {
            self.apply_timer_requests();
        }
    }

    #[inline(never)]
    fn apply_timer_requests(&mut self) {
        // In request order, so the last request for a pCPU wins.
        for i in 0..self.out.timers.len() {
            let (cpu, at) = self.out.timers[i];
            self.st.cpus[cpu as usize].timer_at = at;
            self.rearm(cpu);
        }
        self.out.timers.clear();
        if let Some(g) = self.out.global_timer.take() {
            self.st.global_gen += 1;
            if let Some(at) = g {
                let gen = self.st.global_gen;
                self.st
                    .q
                    .push(at.max(self.st.now), EventKind::Global { gen });
            }
        }
    }

    /// Runs kicked vCPUs and pending reschedules until nothing is left to do.
    fn flush(&mut self) {
        self.run_kicked();
        // Reschedule in request order; requests made meanwhile are appended and come
        // after, so one pass with a cursor handles them all (no batch buffer to swap).
        let mut i = 0;
        while let Some(&cpu) = self.out.resched.get(i) {
            i += 1;
            self.out.resched_pending[cpu as usize] = false;
            self.resched(cpu);
            self.run_kicked();
        }
        self.out.resched.clear();
        while let Some(t) = self.st.spin_loop_exits.pop() {
            let task = &mut self.st.tasks[t as usize];
            if task.executing {
                task.kv.in_spin_loop = false;
                task.kv.dy_eligible = false;
            }
        }
        self.commit_rearms();
    }

    /// Runs the guests of kicked vCPUs that are still executing.
    #[inline(always)]
    fn run_kicked(&mut self) {
        while let Some(t) = self.st.kicks.pop() {
            if self.st.tasks[t as usize].executing {
                self.settle(t);
                self.run_guest(t);
            }
        }
    }

    fn resched(&mut self, cpu: CpuId) {
        let prev = self.st.cpus[cpu as usize].curr;
        let prev_opt = (prev != NONE).then_some(prev);
        if let Some(p) = prev_opt {
            self.settle(p);
        }
        let next = self.sched.pick_next(ctx!(self), cpu, prev_opt);
        self.apply_out();
        if next == prev_opt {
            if next.is_none() {
                // The task that ran here already left (a halt descheduled it): the pCPU
                // stays idle, and the clock and SMT model must count it so.
                self.set_busy(cpu, false);
            }
            return;
        }
        if let Some(n) = next {
            let ok = match self.view.state[n as usize] {
                RunState::Runnable => true,
                RunState::Running(c) => c == cpu,
                RunState::Halted => false,
            };
            let allowed = self.st.tasks[n as usize].runs_anywhere
                || self.view.tasks[n as usize].affinity.contains(cpu as usize);
            if !ok || !allowed {
                self.fail(format!(
                    "scheduler bug: pick_next on pCPU {cpu} returned vCPU task {n} in state {:?} with affinity {}",
                    self.view.state[n as usize], self.view.tasks[n as usize].affinity
                ));
                return;
            }
        }
        if let Some(p) = prev_opt {
            self.deschedule(p, cpu, RunState::Runnable);
        }
        match next {
            Some(n) => self.dispatch(n, cpu),
            None => self.set_busy(cpu, false),
        }
    }

    fn make_runnable(&mut self, t: TaskId) {
        let now = self.st.now;
        self.trace_instant(t, "wake", None, None);
        let task = &mut self.st.tasks[t as usize];
        task.c.halted_ns += now.since(task.state_since).ns();
        task.state_since = now;
        if self.st.kvm.is_some() {
            // Read only by KVM's directed yield; without it this line stays cold.
            task.kv.ready = true; // kvm_vcpu_wake_up
        }
        task.runnable_since = now;
        self.view.state[t as usize] = RunState::Runnable;
        self.sched.wake(ctx!(self), t);
        self.apply_out();
    }

    /// Takes a task off its pCPU, accounting its run time, and counts a preemption (to
    /// Runnable) or a halt (to Halted).
    fn deschedule(&mut self, t: TaskId, cpu: CpuId, to: RunState) {
        let now = self.st.now;
        if self.st.trace.is_some() {
            let start = self.st.tasks[t as usize].run_since;
            self.trace_run(cpu, t, start);
            let kind = if to == RunState::Halted {
                "halt"
            } else {
                "preempted"
            };
            self.trace_instant(t, kind, Some(cpu), None);
        }
        let task = &mut self.st.tasks[t as usize];
        task.c.run_ns += now.since(task.state_since).ns();
        match to {
            RunState::Runnable => task.c.preemptions += 1,
            RunState::Halted => task.c.halts += 1,
            RunState::Running(_) => {}
        }
        if let Some(until) = task.exit_until.take() {
            // Descheduled from inside a PLE exit (a directed yield): the rest is not paid.
            task.c.overhead_ns -= until.since(now).ns();
        } else if !task.executing {
            // Preempted during the switch overhead: only part of it was paid.
            let started = task.state_since;
            let full = task.overhead_end.since(started).ns();
            task.c.overhead_ns += now.since(started).ns().min(full);
        }
        task.end_spin(now);
        task.state_since = now;
        task.executing = false;
        task.runnable_since = now;
        if self.st.kvm.is_some() {
            let involuntary = to == RunState::Runnable;
            task.kv.preempted = involuntary;
            task.kv.ready = involuntary;
            task.kv.in_kernel = match task.cur {
                NONE => false,
                cur => match self.st.threads[cur as usize].state {
                    ThState::Compute { mode, .. } | ThState::SpinLock { mode, .. } => {
                        mode == Mode::Kernel
                    }
                    ThState::SpinIpi { .. } => true,
                    _ => false,
                },
            };
            if !task.kv.ple_in_run {
                close_streak(&mut task.kv.streak, &mut self.st.streaks[t as usize]);
            }
            task.kv.ple_in_run = false;
        }
        self.view.state[t as usize] = to;
        self.view.cpu_curr[cpu as usize] = None;
        let c = &mut self.st.cpus[cpu as usize];
        c.curr = NONE;
        c.guest_at = None;
        if to != RunState::Runnable {
            self.rearm(cpu);
        }
    }

    fn dispatch(&mut self, t: TaskId, cpu: CpuId) {
        let now = self.st.now;
        let mut cost = SimDuration::ZERO;
        {
            let c = &mut self.st.cpus[cpu as usize];
            if c.last_task != t {
                self.st.h.context_switches += 1;
                cost += self.st.costs_switch;
            }
            c.last_task = t;
            c.curr = t;
        }
        let task = &mut self.st.tasks[t as usize];
        task.c.wait_ns += now.since(task.state_since).ns();
        task.state_since = now;
        task.run_since = now;
        task.c.dispatches += 1;
        let from = task.last_cpu;
        let migrated = from != NONE && from != cpu;
        if migrated {
            let d = self.view.topo.distance(from as usize, cpu as usize);
            let i = d as usize - 1;
            task.c.migrations[i] += 1;
            self.st.h.migrations[i] += 1;
            cost += self.st.costs_migration[i];
        }
        task.last_cpu = cpu;
        if self.st.kvm.is_some() {
            // Set and read only with KVM's PLE handling; without it this line stays cold.
            task.kv.preempted = false;
            task.kv.ready = false;
            if let Some(b) = task.kv.boosted_at.take() {
                self.st.boost_to_run[t as usize].record(now.since(b).ns());
            }
        }
        // Traced once the task's record is done with (no other trace entry comes between).
        if migrated && self.st.trace.is_some() {
            self.trace_instant(t, "migrate", Some(cpu), Some(from));
        }
        self.view.state[t as usize] = RunState::Running(cpu);
        self.view.cpu_curr[cpu as usize] = Some(t);
        self.set_busy(cpu, true);
        if cost.ns() == 0 {
            self.begin_exec(t);
        } else {
            let task = &mut self.st.tasks[t as usize];
            task.executing = false;
            task.overhead_end = now + cost;
            self.st.cpus[cpu as usize].guest_at = Some(now + cost);
            self.rearm(cpu);
        }
    }

    /// Back in the guest after KVM handled a PLE exit (not a sched-in: the PLE window
    /// and the spin-loop flags stay): acknowledge IPIs that arrived meanwhile, go on.
    fn end_ple_exit(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        task.exit_until = None;
        task.executing = true;
        task.progress_from = now;
        self.ack_pending_ipis(t);
        self.run_guest(t);
    }

    /// The vCPU starts executing guest code: acknowledge pending IPIs, run its threads.
    /// Inlined (forced) into dispatch, which calls it on nearly every switch without cost.
    #[inline(always)]
    fn begin_exec(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        if task.overhead_end > task.state_since {
            task.c.overhead_ns += task.overhead_end.since(task.state_since).ns();
        }
        task.executing = true;
        task.progress_from = now;
        if let Some(k) = &self.st.kvm {
            task.kv.in_spin_loop = false;
            task.kv.dy_eligible = false;
            task.kv.window = k.ple_window; // shrink 0: reset to the base window at sched-in
        }
        if task.cur == NONE && task.local.is_empty() {
            task.in_mm = false; // woken only to acknowledge: leave_mm
        }
        self.ack_pending_ipis(t);
        self.run_guest(t);
    }

    /// Acknowledges the IPIs that reached the vCPU while it was not executing guest code
    /// (descheduled, halted or in a PLE exit): it handles them as soon as it is back.
    #[inline(always)]
    fn ack_pending_ipis(&mut self, t: TaskId) {
        if self.st.tasks[t as usize].has_pending_acks {
            self.ack_pending_ipis_now(t);
        }
    }

    #[inline(never)]
    fn ack_pending_ipis_now(&mut self, t: TaskId) {
        let task = &mut self.st.tasks[t as usize];
        let acks = std::mem::take(&mut task.pending_acks);
        task.has_pending_acks = false;
        for sender in acks {
            self.ack_ipi(sender);
        }
    }

    fn cpu_event(&mut self, cpu: CpuId) {
        let now = self.st.now;
        let c = &mut self.st.cpus[cpu as usize];
        c.pending_at = None;
        let guest_due = c.guest_at.is_some_and(|g| g <= now);
        let timer_due = c.timer_at.is_some_and(|g| g <= now);
        if guest_due {
            c.guest_at = None;
            let t = c.curr;
            if t != NONE {
                if self.st.tasks[t as usize].executing {
                    self.settle(t);
                    self.guest_progress(t);
                } else if self.st.tasks[t as usize].exit_until.is_some() {
                    self.end_ple_exit(t);
                } else {
                    self.begin_exec(t);
                }
            }
        }
        if timer_due {
            self.st.cpus[cpu as usize].timer_at = None;
            self.st.h.timer_fires += 1;
            self.sched.timer(ctx!(self), cpu);
            self.apply_out();
        }
        self.rearm(cpu);
    }

    /// Marks the pCPU's deadline for re-arming at the end of the current event.
    #[inline]
    fn rearm(&mut self, cpu: CpuId) {
        let c = &mut self.st.cpus[cpu as usize];
        if !c.dirty {
            c.dirty = true;
            self.st.dirty.push(cpu);
        }
    }

    /// Pushes each dirty pCPU's next deadline if it changed.
    fn commit_rearms(&mut self) {
        // In marking order, so simultaneous deadlines keep the order they were set in.
        for i in 0..self.st.dirty.len() {
            let cpu = self.st.dirty[i];
            let c = &mut self.st.cpus[cpu as usize];
            c.dirty = false;
            let want = match (c.timer_at, c.guest_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if want != c.pending_at {
                c.gen = c.gen.wrapping_add(1);
                c.pending_at = want;
                if let Some(at) = want {
                    let gen = c.gen;
                    self.st
                        .q
                        .push(at.max(self.st.now), EventKind::Cpu { cpu, gen });
                }
            }
        }
        self.st.dirty.clear();
    }

    // ----------------------------------------------------------------- clock model

    /// Marks `cpu` busy or idle for the clock model. Without one (no SMT sharing, one
    /// clock) nothing depends on it, so that common case returns here, inlined (forced:
    /// left to itself the compiler kept it out of line, a call per dispatch for a test).
    #[inline(always)]
    fn set_busy(&mut self, cpu: CpuId, busy: bool) {
        if self.st.rate_model && self.st.cpus[cpu as usize].busy != busy {
            self.change_busy(cpu, busy);
        }
    }

    /// `set_busy` when the state changes: updates the busy counts per core and package
    /// and re-rates the pCPUs whose clock or SMT share moved.
    fn change_busy(&mut self, cpu: CpuId, busy: bool) {
        self.st.cpus[cpu as usize].busy = busy;
        let info = &self.view.topo.cpus[cpu as usize];
        let (pkg, core) = (info.socket as usize, info.core as usize);
        let delta: i32 = if busy { 1 } else { -1 };
        let before_core = self.st.busy_threads_in_core[core];
        self.st.busy_threads_in_core[core] = (before_core as i32 + delta) as u32;
        let core_flip = (before_core == 0) != (self.st.busy_threads_in_core[core] == 0);
        if core_flip {
            self.st.busy_cores_in_pkg[pkg] = (self.st.busy_cores_in_pkg[pkg] as i32 + delta) as u32;
        }
        // Recompute the speed of every pCPU whose clock or SMT share may have changed.
        let range = if core_flip && !self.st.turbo.is_empty() {
            self.view.topo.socket_cpus(pkg as u32)
        } else {
            self.view.topo.core_cpus(core as u32)
        };
        for c in range {
            let new = self.speed_of(c);
            if new != self.st.cpus[c].speed {
                let t = self.st.cpus[c].curr;
                if t != NONE && self.st.tasks[t as usize].executing {
                    self.settle(t);
                    self.st.cpus[c].speed = new;
                    self.update_guest_deadline(t);
                } else {
                    self.st.cpus[c].speed = new;
                }
            }
        }
    }

    fn speed_of(&self, cpu: usize) -> f64 {
        let info = &self.view.topo.cpus[cpu];
        let busy_cores = self.st.busy_cores_in_pkg[info.socket as usize].max(1) as usize;
        let clock = if self.st.turbo.is_empty() {
            self.st.base_ghz
        } else {
            self.st.turbo[(busy_cores - 1).min(self.st.turbo.len() - 1)]
        };
        let n = self.st.busy_threads_in_core[info.core as usize].max(1);
        let smt = if n > 1 {
            self.st.smt_throughput / n as f64
        } else {
            1.0
        };
        clock / self.st.base_ghz * smt
    }

    // ----------------------------------------------------------------- guest model

    /// Brings the executing task's compute progress and spin time up to now. Inlined
    /// (forced: the compiler kept it out of line, and the call cost a third of its work).
    #[inline(always)]
    fn settle(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        if !task.executing {
            return;
        }
        task.account_spin(now);
        let elapsed = now.since(task.progress_from).ns();
        task.progress_from = now;
        if elapsed == 0 || task.cur == NONE {
            return;
        }
        let th = &mut self.st.threads[task.cur as usize];
        // An executing task runs where it was last dispatched (`executing` is set only
        // after a dispatch and cleared by the deschedule): the task's own line says where,
        // without a read of `view.state` (another line, a miss at thousands of vCPUs).
        let cpu = task.last_cpu as usize;
        debug_assert_eq!(self.view.state[t as usize], RunState::Running(cpu as u32));
        match &mut th.state {
            ThState::Compute { remaining, .. } => {
                *remaining -= u64_as_f64(elapsed) * self.st.cpus[cpu].speed;
            }
            ThState::SpinLock { pv_left, .. } if pv_left.is_finite() => {
                *pv_left -= u64_as_f64(elapsed) * self.st.cpus[cpu].speed;
            }
            _ => {}
        }
    }

    /// The running task's deadline fired: finish a compute or rotate guest threads.
    fn guest_progress(&mut self, t: TaskId) {
        let cur = self.st.tasks[t as usize].cur;
        if cur == NONE {
            self.run_guest(t);
            return;
        }
        let spin_mode = match self.st.threads[cur as usize].state {
            ThState::SpinLock { mode, .. } => Some(mode),
            ThState::SpinIpi { .. } => Some(Mode::Kernel),
            _ => None,
        };
        if let Some(mode) = spin_mode {
            if self.ple_deadline(t, mode).is_some_and(|d| d <= self.st.now) {
                self.pause_loop_exit(t, mode);
            }
            if let ThState::SpinLock {
                lock,
                hold,
                mode,
                pv_left,
            } = self.st.threads[cur as usize].state
            {
                if pv_left <= WORK_EPSILON && self.st.tasks[t as usize].executing {
                    // pv_wait: halt in the guest kernel (preemption off, so no other
                    // guest thread runs here) until kicked or interrupted.
                    self.st.threads[cur as usize].state = ThState::PvWait { lock, hold, mode };
                    self.st.tasks[t as usize].c.pv_waits += 1;
                    self.update_guest_deadline(t); // ends the spin accounting
                    self.halt(t);
                    return;
                }
            }
            if self.st.tasks[t as usize].executing {
                self.update_guest_deadline(t);
            }
            return;
        }
        if let ThState::Compute {
            remaining, release, ..
        } = self.st.threads[cur as usize].state
        {
            if remaining <= WORK_EPSILON {
                self.st.h.op_completions += 1;
                if release != NONE {
                    self.release_lock(release);
                }
                let th = &mut self.st.threads[cur as usize];
                th.state = ThState::Ready;
                th.pc += 1;
            } else {
                // Guest time slice over: rotate to the next runnable thread.
                let task = &mut self.st.tasks[t as usize];
                let slice = self.st.vm_timeslice[task.vm as usize];
                if !task.local.is_empty() && self.st.now >= task.slice_start + slice {
                    task.local.push_back(cur);
                    task.cur = NONE;
                }
            }
        }
        self.run_guest(t);
    }

    /// Runs the executing task's guest threads until one needs time, spins, or all block.
    fn run_guest(&mut self, t: TaskId) {
        loop {
            if self.vcpu_paused(t) {
                // Stopped by a Kemari sync: the vCPU thread sleeps until the VM resumes.
                self.halt(t);
                return;
            }
            let task = &mut self.st.tasks[t as usize];
            if task.cur == NONE {
                match task.local.pop_front() {
                    Some(th) => {
                        task.cur = th;
                        task.slice_start = self.st.now;
                        task.in_mm = true;
                    }
                    None => {
                        self.halt(t);
                        return;
                    }
                }
            }
            let cur = task.cur;
            if self.step_thread(cur) {
                break;
            }
            self.st.tasks[t as usize].cur = NONE;
            if self.st.error.is_some() {
                return;
            }
        }
        self.update_guest_deadline(t);
    }

    /// Sets the pCPU's guest deadline for the task's current thread.
    fn update_guest_deadline(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        // Executing: running where last dispatched (see `settle`), found on the task's
        // line; otherwise only a running task (in its switch overhead) has a deadline.
        let cpu = if task.executing {
            debug_assert_eq!(
                self.view.state[t as usize],
                RunState::Running(task.last_cpu)
            );
            task.last_cpu
        } else {
            match self.view.state[t as usize] {
                RunState::Running(c) => c,
                _ => return,
            }
        };
        let th = &self.st.threads[task.cur as usize];
        let spinning = matches!(th.state, ThState::SpinLock { .. } | ThState::SpinIpi { .. });
        match (spinning, task.spin_since) {
            (true, None) => {
                task.spin_since = Some(now);
                task.kv.ple_from = task.kv.ple_from.max(now);
            }
            (false, Some(_)) => task.end_spin(now),
            _ => {}
        }
        let deadline = match th.state {
            ThState::Compute {
                remaining, mode, ..
            } => {
                let speed = self.st.cpus[cpu as usize].speed;
                let mut d = now + SimDuration::ceil_ns(remaining / speed);
                if mode == Mode::User && !task.local.is_empty() {
                    let slice_end = task.slice_start + self.st.vm_timeslice[task.vm as usize];
                    d = d.min(slice_end.max(now));
                }
                Some(d)
            }
            ThState::SpinLock { mode, pv_left, .. } => {
                let ple = self.ple_deadline(t, mode);
                if pv_left.is_finite() {
                    let speed = self.st.cpus[cpu as usize].speed;
                    let pv = now + SimDuration::ceil_ns(pv_left / speed);
                    Some(ple.map_or(pv, |p| p.min(pv)))
                } else {
                    ple
                }
            }
            ThState::SpinIpi { .. } => self.ple_deadline(t, Mode::Kernel),
            _ => None,
        };
        self.st.cpus[cpu as usize].guest_at = deadline;
        self.rearm(cpu);
    }

    /// Advances a thread through operations that take no time. Returns true if the
    /// thread keeps its vCPU (computing or spinning), false if it blocked.
    fn step_thread(&mut self, id: ThreadId) -> bool {
        let now = self.st.now;
        loop {
            let th = &mut self.st.threads[id as usize];
            match th.state {
                ThState::Compute { .. } => return true,
                ThState::Blocked => return false,
                ThState::SpinIpi { pending } => {
                    if pending > 0 {
                        return true;
                    }
                    th.state = ThState::Ready;
                    th.pc += 1;
                    continue;
                }
                ThState::SpinLock {
                    lock, hold, mode, ..
                }
                | ThState::PvWait { lock, hold, mode } => {
                    let was_waiting = matches!(th.state, ThState::PvWait { .. });
                    if self.try_lock(id, lock, false) {
                        self.st.threads[id as usize].state = ThState::Compute {
                            remaining: hold,
                            mode,
                            release: lock,
                        };
                        continue;
                    }
                    if was_waiting {
                        // Woken without the lock (an interrupt): the slow path spins again.
                        let vm = self.st.tasks[self.st.threads[id as usize].task as usize].vm;
                        let pv_left = self.pv_spin_budget(vm, mode);
                        self.st.threads[id as usize].state = ThState::SpinLock {
                            lock,
                            hold,
                            mode,
                            pv_left,
                        };
                    }
                    return true;
                }
                ThState::Ready => {}
            }
            let w = th.workload as usize;
            let ops_len = self.st.workloads[w].ops.len() as u32;
            if th.pc >= ops_len {
                th.pc = 0;
                if th.last_loop_at == now {
                    th.zero_time_loops += 1;
                    if th.zero_time_loops > MAX_ZERO_TIME_LOOPS {
                        th.state = ThState::Blocked;
                        let vm = self.st.workloads[w].vm as usize;
                        let rx_for = self.st.workloads[w].rx_for;
                        let msg = if rx_for != NONE {
                            let local = rx_for as usize - self.st.vm_workload_base[vm] as usize;
                            let name = self.model.vms[vm].name.clone();
                            format!("the rx path of vm[{vm}] ({name:?}), workload[{local}], completed {MAX_ZERO_TIME_LOOPS} loops without time passing: give it a per_packet or per_kib cost")
                        } else if w >= self.st.n_vm_workloads as usize {
                            let hi = w - self.st.n_vm_workloads as usize;
                            format!("host_thread[{hi}] completed {MAX_ZERO_TIME_LOOPS} loops without time passing: its operations take no time")
                        } else {
                            let local = w - self.st.vm_workload_base[vm] as usize;
                            let name = self.model.vms[vm].name.clone();
                            format!("a thread of vm[{vm}] ({name:?}), workload[{local}], completed {MAX_ZERO_TIME_LOOPS} loops without time passing: its operations take no time")
                        };
                        self.fail(msg);
                        return false;
                    }
                } else {
                    th.zero_time_loops = 0;
                    th.last_loop_at = now;
                }
                let wl = &mut self.st.workloads[w];
                if !wl.counts_requests {
                    wl.completed += 1;
                }
                if wl.units_left.is_some() {
                    wl.units_running -= 1;
                    if wl.units_left == Some(0) && wl.units_running == 0 {
                        wl.finished_at = Some(now);
                    }
                }
            }
            let th = &mut self.st.threads[id as usize];
            if th.pc == 0 {
                // A finite workload hands out its units one loop at a time (sysbench's
                // event counter); with none left the thread exits.
                let wl = &mut self.st.workloads[w];
                match wl.units_left {
                    Some(0) => {
                        th.state = ThState::Blocked;
                        return false;
                    }
                    Some(left) => {
                        wl.units_left = Some(left - 1);
                        wl.units_running += 1;
                    }
                    None => {}
                }
            }
            let op = &self.st.workloads[w].ops[th.pc as usize];
            match op {
                RtOp::Compute { work, mode } => {
                    let x = work.sample(&mut th.rng);
                    let wl = &self.st.workloads[w];
                    if wl.dirty_bytes_per_ns > 0.0 {
                        // Dirtied as the compute starts (Kemari snapshots at sync time).
                        self.st.vm_dirty[wl.vm as usize] += x * wl.dirty_bytes_per_ns;
                    }
                    if x > WORK_EPSILON {
                        th.state = ThState::Compute {
                            remaining: x,
                            mode: *mode,
                            release: NONE,
                        };
                        return true;
                    }
                    th.pc += 1;
                }
                RtOp::Sleep { duration: d } => {
                    let x = d.sample(&mut th.rng);
                    th.state = ThState::Blocked;
                    th.pc += 1;
                    self.st.q.push(
                        now + SimDuration::round_ns(x),
                        EventKind::ThreadWake { thread: id },
                    );
                    return false;
                }
                _ => match self.step_other_op(id, w, now) {
                    None => continue,
                    Some(keeps_vcpu) => return keeps_vcpu,
                },
            }
        }
    }

    /// `step_thread` for every operation but Compute and Sleep (all that the hot loops of
    /// most models use), out of line: inlined, their state and address arithmetic was
    /// hoisted into the frame set-up of every guest run. None: go on to the thread's next
    /// operation; Some(keeps_vcpu): what `step_thread` returns.
    #[inline(never)]
    fn step_other_op(&mut self, id: ThreadId, w: usize, now: SimTime) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        let op = &self.st.workloads[w].ops[th.pc as usize];
        match op {
            RtOp::Compute { .. } | RtOp::Sleep { .. } => unreachable!("step_thread's own"),
            RtOp::Lock {
                lock,
                hold,
                mode,
                shards,
            } => {
                let (hold, mode) = (hold.sample(&mut th.rng), *mode);
                let vm = self.st.workloads[w].vm;
                // Threads split into `shards` consecutive groups, one lock each.
                let per = self.st.workload_threads[w].div_ceil(*shards).max(1);
                let gl = self.st.vm_lock_base[vm as usize] + *lock + th.index_in_workload / per;
                let pv_left = self.pv_spin_budget(vm, mode);
                self.st.threads[id as usize].state = ThState::SpinLock {
                    lock: gl,
                    hold,
                    mode,
                    pv_left,
                };
                if !self.try_lock(id, gl, true) {
                    if self.st.locks[gl as usize].kind == LockKind::Mutex {
                        // futex_wait: sleep until the holder's release wakes us, then
                        // run this operation again.
                        self.st.threads[id as usize].state = ThState::Blocked;
                        return Some(false);
                    }
                    return Some(true);
                }
                self.st.threads[id as usize].state = ThState::Compute {
                    remaining: hold,
                    mode,
                    release: gl,
                };
            }
            RtOp::Ipi { targets } => {
                let targets = targets.clone();
                let pending = self.send_ipis(id, &targets);
                let th = &mut self.st.threads[id as usize];
                if pending == 0 {
                    th.pc += 1;
                } else {
                    th.state = ThState::SpinIpi { pending };
                    return Some(true);
                }
            }
            RtOp::Io {
                latency,
                write_bytes,
                window,
                writeback,
            } => {
                let vm = self.st.workloads[w].vm as usize;
                let mut window = *window;
                if th.task < self.st.n_vcpu_tasks && self.st.vm_cfq[vm] {
                    if *writeback {
                        // cfq_may_dispatch with low_latency (see
                        // workload::CFQ_SLICE_SYNC_NS): one more writeback request in
                        // flight per 100 ms since the last delayed synchronous one, one
                        // when none is, and none while a synchronous one is in flight.
                        let since = now.0 as i64 - self.st.vm_last_delayed_sync_ns[vm];
                        let depth = (since / crate::workload::CFQ_SLICE_SYNC_NS as i64)
                            .clamp(1, u32::MAX as i64) as u32;
                        let sync_busy = self.st.vm_sync_in_flight[vm] > 0;
                        if sync_busy || th.io_pending >= depth {
                            // Held back: try again at the thread's next completion,
                            // or, with none in flight, when the synchronous ones are
                            // done.
                            th.state = ThState::Blocked;
                            if th.io_pending > 0 {
                                th.io_wake_below = depth.min(th.io_pending);
                            } else {
                                self.st.vm_async_waiters[vm].push(id);
                            }
                            return Some(false);
                        }
                        window = window.min(depth);
                    } else {
                        self.st.io_sync_since[id as usize] = now;
                        self.st.vm_sync_in_flight[vm] += 1;
                    }
                }
                let x = SimDuration::round_ns(latency.sample(&mut th.rng)).0;
                let write_bytes = *write_bytes;
                th.pc += 1;
                th.io_pending += 1;
                // The disk takes the thread's requests in turn.
                let done = now.max(th.io_tail) + SimDuration(x);
                th.io_tail = done;
                let wait = th.io_pending >= window;
                if wait {
                    th.state = ThState::Blocked;
                    th.io_wake_below = window;
                }
                debug_assert!(
                    wait || matches!(
                        self.st.workloads[w].ops.get(th.pc as usize),
                        Some(RtOp::Io { .. })
                    ),
                    "an Io op that leaves requests in flight is followed by another Io"
                );
                let guest = th.task < self.st.n_vcpu_tasks;
                // kemari-next's event-tap holds writes (and flushes), not reads.
                if guest && write_bytes > 0 && self.st.vm_kemari[vm] != NONE {
                    th.kemari_io = true;
                    self.ft_start_sync(vm, id, x, write_bytes);
                } else if guest && write_bytes > 0 && self.st.vm_drbd[vm] != NONE {
                    let from_cpu =
                        self.st.tasks[self.st.threads[id as usize].task as usize].last_cpu;
                    self.ft_replicate(vm, id, done, x, write_bytes, from_cpu, NONE);
                } else {
                    self.st.q.push(done, EventKind::ThreadWake { thread: id });
                }
                if !wait {
                    return None; // the window has room: the next request goes out now
                }
                return Some(false);
            }
            RtOp::HelperWait => {
                let h = self.st.workloads[w].helper as usize;
                self.ft_release_mutex(h);
                let th = &mut self.st.threads[id as usize];
                let helper = &mut self.st.helpers[h];
                // QEMU's main loop runs expired timers before bottom halves (the
                // event-tap's sync), so a pending timer goes first.
                if let Some(p) = helper.timers.pop_front() {
                    helper.cur_timer = Some(p);
                    th.pc += 1;
                    return None;
                }
                match helper.jobs.pop_front() {
                    Some(job) => {
                        helper.cur = Some(job);
                        th.pc += 1;
                        self.ft_begin_job(h);
                    }
                    None => {
                        helper.waiting = true;
                        th.state = ThState::Blocked;
                        return Some(false);
                    }
                }
            }
            RtOp::HelperWork => {
                let h = self.st.workloads[w].helper as usize;
                let work = self.ft_job_cpu(h);
                // As for Compute: the pc advances when the work completes.
                if work <= WORK_EPSILON {
                    self.st.threads[id as usize].pc += 1;
                } else {
                    self.st.threads[id as usize].state = ThState::Compute {
                        remaining: work,
                        mode: Mode::Kernel,
                        release: NONE,
                    };
                    return Some(true);
                }
            }
            RtOp::HelperNet => {
                th.pc += 1;
                let h = &self.st.helpers[self.st.workloads[w].helper as usize];
                if h.cur_timer.is_some() {
                    return None;
                }
                th.state = ThState::Blocked;
                let job = h.cur.expect("helper job");
                let d = h.spec.until_ack(job.bytes, job.io_ns);
                self.st
                    .q
                    .push(now + d, EventKind::ThreadWake { thread: id });
                return Some(false);
            }
            RtOp::HelperDone => {
                th.pc += 1;
                let h = self.st.workloads[w].helper as usize;
                if let Some(p) = self.st.helpers[h].cur_timer.take() {
                    self.ft_interrupt_raised(h, p);
                } else {
                    // kemari-next waits for the secondary's ack in QEMU's main loop,
                    // which runs the timers that expired meanwhile: their interrupts
                    // are pending as the VM resumes.
                    while let Some(p) = self.st.helpers[h].timers.pop_front() {
                        self.ft_interrupt_raised(h, p);
                    }
                    self.ft_job_done(h);
                }
            }
            RtOp::HelperFlush => {
                th.pc += 1;
                let h = self.st.workloads[w].helper as usize;
                let helper = &mut self.st.helpers[h];
                if helper.flushing {
                    helper.flush_blocked = true;
                    th.state = ThState::Blocked;
                    return Some(false);
                }
            }
            RtOp::WaitRequest => {
                let wl = &mut self.st.workloads[w];
                match wl.queue.pop_front() {
                    Some(p) => {
                        th.packet = Some(p);
                        th.pc += 1;
                    }
                    None => {
                        wl.waiting.push_back(id);
                        th.state = ThState::Blocked;
                        return Some(false);
                    }
                }
            }
            RtOp::Respond => {
                th.pc += 1;
                if let Some(p) = th.packet.take() {
                    if self.st.io_backend == NONE {
                        self.complete_request(w as u32, p.arrived);
                    } else {
                        self.send_to_backend(Packet {
                            outbound: true,
                            ..p
                        });
                    }
                }
            }
            RtOp::PacketWork {
                per_packet,
                per_kib,
            } => {
                let bytes = th
                    .packet
                    .map_or(0, |p| self.st.workloads[p.workload as usize].request_bytes);
                let x = per_packet + per_kib * bytes as f64 / 1024.0;
                if x > WORK_EPSILON {
                    th.state = ThState::Compute {
                        remaining: x,
                        mode: Mode::Kernel,
                        release: NONE,
                    };
                    return Some(true);
                }
                th.pc += 1;
            }
            RtOp::Forward => {
                th.pc += 1;
                if let Some(p) = th.packet.take() {
                    if p.outbound {
                        self.complete_request(p.workload, p.arrived);
                    } else {
                        self.enqueue_inbound(p);
                    }
                }
            }
            RtOp::LookbusySpin {
                util,
                first_busy_ns,
                spinners,
            } => {
                let (util, first, spinners) = (*util, *first_busy_ns, *spinners);
                let busy = self.lookbusy_busy_ns(id, util, first, spinners);
                let wl = &self.st.workloads[w];
                if wl.dirty_bytes_per_ns > 0.0 {
                    // As for Compute: dirtied as the busy phase starts.
                    self.st.vm_dirty[wl.vm as usize] += busy * wl.dirty_bytes_per_ns;
                }
                let th = &mut self.st.threads[id as usize];
                // As for Compute: the pc advances when the work completes.
                th.state = ThState::Compute {
                    remaining: busy,
                    mode: Mode::User,
                    release: NONE,
                };
                return Some(true);
            }
            RtOp::RxDeliver => {
                th.pc += 1;
                if let Some(p) = th.packet.take() {
                    self.enqueue(
                        p.workload,
                        Packet {
                            received: true,
                            ..p
                        },
                    );
                }
            }
        }
        None
    }

    /// When the spinning vCPU `t` will take a PLE exit, if PLE applies to this spin.
    fn ple_deadline(&self, t: TaskId, mode: Mode) -> Option<SimTime> {
        let k = self.st.kvm.as_ref()?;
        if mode == Mode::User && k.vendor == Vendor::Intel {
            return None; // Intel ignores PAUSE loops at CPL > 0
        }
        let kv = &self.st.tasks[t as usize].kv;
        let ns = (kv.window as f64 / self.st.base_ghz).ceil() as u64;
        Some(kv.ple_from + SimDuration(ns))
    }

    /// A PLE exit of the spinning vCPU `t`: account it, grow the window, run the handler.
    fn pause_loop_exit(&mut self, t: TaskId, mode: Mode) {
        let now = self.st.now;
        let k = self.st.kvm.clone().expect("PLE without KVM");
        let task = &mut self.st.tasks[t as usize];
        task.c.ple_exits += 1;
        task.kv.ple_in_run = true;
        task.kv.streak += 1;
        task.kv.window = grow_window(&k, task.kv.window);
        task.kv.ple_from = now + k.ple_exit_cost;
        let cpu = match self.view.state[t as usize] {
            RunState::Running(c) => c,
            _ => return,
        };
        self.trace_instant(t, "ple_exit", Some(cpu), None);
        // AMD reports the spinner's CPL; Intel only exits at CPL 0.
        let yield_to_kernel_mode = k.vendor == Vendor::Intel || mode == Mode::Kernel;
        self.kvm_vcpu_on_spin(t, cpu, yield_to_kernel_mode, &k);
        // The exit itself (VM exit, handler, VM entry) takes `ple_exit_cost` of the pCPU
        // without guest progress, unless the handler's yield deschedules the vCPU first.
        let task = &mut self.st.tasks[t as usize];
        if k.ple_exit_cost.ns() > 0
            && task.executing
            && self.view.state[t as usize] == RunState::Running(cpu)
        {
            task.end_spin(now);
            let until = now + k.ple_exit_cost;
            task.executing = false;
            task.exit_until = Some(until);
            task.c.overhead_ns += k.ple_exit_cost.ns();
            self.st.cpus[cpu as usize].guest_at = Some(until);
            self.rearm(cpu);
        }
    }

    /// KVM's PLE handler: directed yield to a candidate vCPU of the spinner's VM.
    fn kvm_vcpu_on_spin(
        &mut self,
        me: TaskId,
        cpu: CpuId,
        yield_to_kernel_mode: bool,
        k: &KvmSpec,
    ) {
        let vm = self.st.tasks[me as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        let last = self.st.last_boosted[vm];
        self.st.tasks[me as usize].kv.in_spin_loop = true;
        let spinner_thread = self.st.tasks[me as usize].cur;
        let mut tries = 3;
        for i in crate::kvm::ring_order(n, last) {
            let v = base + i;
            let task = &self.st.tasks[v as usize];
            let mut cand = crate::kvm::Candidate {
                is_spinner: v == me,
                preempted: task.kv.preempted,
                ready: task.kv.ready,
                halted: self.view.state[v as usize] == RunState::Halted,
                in_kernel: task.kv.in_kernel,
                pending_interrupt: !task.pending_acks.is_empty(),
                ipi_from_spinner: task.pending_acks.contains(&spinner_thread),
                in_spin_loop: task.kv.in_spin_loop,
                dy_eligible: task.kv.dy_eligible,
            };
            let verdict = crate::kvm::check_candidate(k, &mut cand, yield_to_kernel_mode);
            self.st.tasks[v as usize].kv.dy_eligible = cand.dy_eligible;
            if verdict.is_err() {
                continue;
            }
            self.st.tasks[me as usize].c.yield_attempts += 1;
            let req = YieldRequest {
                from: me,
                from_cpu: cpu,
                target: v,
                ignore_vcpu_fairness: k.features.boost_ignores_vcpu_fairness,
                migrate_to_yielder: k.features.migrate_boosted_to_spinner,
            };
            let r = self.sched.yield_to(ctx!(self), req);
            self.apply_out();
            match r {
                YieldResult::Yielded => {
                    self.st.tasks[me as usize].c.yield_successes += 1;
                    self.st.tasks[v as usize].kv.boosted_at = Some(self.st.now);
                    self.st.last_boosted[vm] = i;
                    self.trace_instant(me, "yield_to", Some(cpu), Some(v));
                    break;
                }
                YieldResult::NoSuchTarget => {
                    tries -= 1;
                    if tries == 0 {
                        break;
                    }
                }
                YieldResult::Failed => {}
            }
        }
        self.st.spin_loop_exits.push(me);
    }

    /// How long (base-clock ns of guest execution) a spinlock waiter of `vm` spins before
    /// pv_wait: only guest-kernel spinlocks take the paravirtual slow path, so infinite in
    /// user mode or without pv spinlocks. A waiter woken from pv_wait (always kernel mode)
    /// gets the full budget again.
    fn pv_spin_budget(&self, vm: u32, mode: Mode) -> f64 {
        if mode == Mode::Kernel {
            self.st.vm_pv_spin_ns[vm as usize]
        } else {
            f64::INFINITY
        }
    }

    /// Tries to take a lock for thread `id`. `first` registers it as a waiter on failure.
    fn try_lock(&mut self, id: ThreadId, lock: u32, first: bool) -> bool {
        let l = &mut self.st.locks[lock as usize];
        let acquired = if l.holder == id {
            true // a ticket lock was handed to us while we waited
        } else if l.holder == NONE {
            match l.kind {
                // A free ticket lock with waiters has already been handed over; a free one
                // without waiters is ours.
                LockKind::Ticket => l.waiters.is_empty(),
                LockKind::TestAndSet | LockKind::Mutex => true,
            }
        } else {
            false
        };
        if acquired {
            l.holder = id;
            if !first {
                if let Some(pos) = l.waiters.iter().position(|w| *w == id) {
                    l.waiters.remove(pos);
                }
            }
            self.st.h.lock_acquisitions += 1;
        } else if first {
            l.waiters.push_back(id);
        }
        acquired
    }

    fn release_lock(&mut self, lock: u32) {
        let l = &mut self.st.locks[lock as usize];
        l.holder = NONE;
        if l.waiters.is_empty() {
            return;
        }
        match l.kind {
            LockKind::Ticket => {
                // FIFO hand-over to the next waiter, running or not.
                let next = l.waiters.pop_front().unwrap();
                l.holder = next;
                self.kick_if_current(next);
                self.pv_kick(next);
            }
            LockKind::Mutex => {
                // futex_wake: the first sleeper becomes ready and tries again when it runs
                // (the lock stays free meanwhile, as glibc's mutex does not hand over).
                let w = l.waiters.pop_front().unwrap();
                let now = self.st.now;
                self.st.q.push(now, EventKind::ThreadWake { thread: w });
            }
            LockKind::TestAndSet => {
                // The first waiter spinning right now wins; if none runs, the lock stays
                // free for whichever waiter runs first.
                let threads = &self.st.threads;
                let tasks = &self.st.tasks;
                let winner = l.waiters.iter().position(|&w| {
                    let task = &tasks[threads[w as usize].task as usize];
                    task.executing && task.cur == w
                });
                if let Some(pos) = winner {
                    let w = l.waiters.remove(pos).unwrap();
                    l.holder = w;
                    self.kick_if_current(w);
                } else {
                    // No waiter is spinning: kick the first halted one to retry.
                    let threads = &self.st.threads;
                    let halted = l
                        .waiters
                        .iter()
                        .copied()
                        .find(|&w| matches!(threads[w as usize].state, ThState::PvWait { .. }));
                    if let Some(w) = halted {
                        self.pv_kick(w);
                    }
                }
            }
        }
    }

    /// `KVM_HC_KICK_CPU`: wake the vCPU of thread `id` if it is halted in pv_wait.
    fn pv_kick(&mut self, id: ThreadId) {
        if !matches!(self.st.threads[id as usize].state, ThState::PvWait { .. }) {
            return;
        }
        let t = self.st.threads[id as usize].task;
        self.st.tasks[t as usize].c.pv_kicks += 1;
        if self.view.state[t as usize] == RunState::Halted && !self.vcpu_paused(t) {
            self.make_runnable(t);
        }
    }

    /// If thread `id` is the current thread of an executing vCPU, re-run that vCPU.
    fn kick_if_current(&mut self, id: ThreadId) {
        let t = self.st.threads[id as usize].task;
        let task = &self.st.tasks[t as usize];
        if task.executing && task.cur == id {
            self.st.kicks.push(t);
        }
    }

    /// Sends IPIs from thread `id`; returns how many acknowledgements are outstanding.
    fn send_ipis(&mut self, id: ThreadId, targets: &IpiTargets) -> u32 {
        let src = self.st.threads[id as usize].task;
        let vm = self.st.tasks[src as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        // `all` is a TLB shootdown: it goes to the vCPUs in the process's mm_cpumask;
        // an explicit list is sent as written.
        let shootdown = matches!(targets, IpiTargets::All);
        let list: Vec<u32> = match targets {
            IpiTargets::All => (0..n).collect(),
            IpiTargets::List(l) => l.clone(), // validated: every index < vcpus
        };
        let mut pending = 0;
        for i in list {
            let tt = base + i;
            if tt == src {
                continue;
            }
            if shootdown && !self.st.tasks[tt as usize].in_mm {
                continue;
            }
            self.st.h.ipis_sent += 1;
            if self.st.trace.is_some() {
                let cpu = match self.view.state[src as usize] {
                    RunState::Running(c) => Some(c),
                    _ => None,
                };
                self.trace_instant(src, "ipi", cpu, Some(tt));
            }
            if self.st.tasks[tt as usize].executing {
                continue; // acknowledged at once
            }
            let target = &mut self.st.tasks[tt as usize];
            target.pending_acks.push(id);
            target.has_pending_acks = true;
            pending += 1;
            if self.view.state[tt as usize] == RunState::Halted {
                self.make_runnable(tt);
            }
        }
        pending
    }

    fn ack_ipi(&mut self, sender: ThreadId) {
        if let ThState::SpinIpi { pending } = &mut self.st.threads[sender as usize].state {
            *pending -= 1;
            if *pending == 0 {
                self.kick_if_current(sender);
            }
        }
    }

    /// The vCPU has nothing to run: it halts and leaves its pCPU.
    fn halt(&mut self, t: TaskId) {
        let RunState::Running(cpu) = self.view.state[t as usize] else {
            return;
        };
        self.deschedule(t, cpu, RunState::Halted);
        self.sched.block(ctx!(self), cpu, t);
        self.apply_out();
        ctx!(self).resched(cpu);
    }

    /// A blocked thread (guest or host) goes on: it is Ready and queued on its task. A
    /// disk request's completion counts down the thread's outstanding requests, and wakes
    /// it only once they are fewer than the window it blocked at.
    fn wake_thread(&mut self, id: ThreadId) {
        // A VM whose last synchronous request this completes (CFQ): its held-back
        // writeback may go out once this thread is handled.
        let mut sync_done_in = None;
        let mut wake = true;
        let th = &mut self.st.threads[id as usize];
        if th.io_pending > 0 {
            th.io_pending -= 1;
            if th.io_pending == 0 {
                th.kemari_io = false;
                if !self.st.io_sync_since.is_empty()
                    && self.st.io_sync_since[id as usize] != SimTime::MAX
                {
                    // cfq_completed_request: a synchronous request that took
                    // cfq_fifo_expire[1] or more marks a delayed sync.
                    let since =
                        std::mem::replace(&mut self.st.io_sync_since[id as usize], SimTime::MAX);
                    let waited = self.st.now.since(since).ns();
                    let vm = self.st.workloads[th.workload as usize].vm as usize;
                    if waited >= crate::workload::CFQ_FIFO_EXPIRE_SYNC_NS {
                        self.st.vm_last_delayed_sync_ns[vm] = self.st.now.0 as i64;
                    }
                    self.st.vm_sync_in_flight[vm] -= 1;
                    if self.st.vm_sync_in_flight[vm] == 0 {
                        sync_done_in = Some(vm);
                    }
                }
            }
            // A completion below the window wakes the writer once; later ones (the
            // global mutex can hand several over together) find it already woken.
            wake = th.io_pending < th.io_wake_below && th.state == ThState::Blocked;
        }
        if wake {
            th.state = ThState::Ready;
            self.make_thread_ready(id);
        }
        if let Some(vm) = sync_done_in {
            self.wake_async_writers(vm);
        }
    }

    /// The VM's last synchronous request completed: writeback held back with nothing in
    /// flight (CFQ) may go out again.
    #[inline(never)]
    fn wake_async_writers(&mut self, vm: usize) {
        for id in std::mem::take(&mut self.st.vm_async_waiters[vm]) {
            let th = &self.st.threads[id as usize];
            if th.state == ThState::Blocked && th.io_pending == 0 {
                self.wake_thread(id);
            }
        }
    }

    /// A guest thread became runnable (I/O done, timer, request): queue it on its vCPU and
    /// interrupt the vCPU if it is halted.
    fn make_thread_ready(&mut self, id: ThreadId) {
        let t = self.st.threads[id as usize].task;
        if self.st.workloads[self.st.threads[id as usize].workload as usize].rt {
            self.make_rt_thread_ready(id, t);
            return;
        }
        self.st.tasks[t as usize].local.push_back(id);
        match self.view.state[t as usize] {
            RunState::Halted if self.vcpu_paused(t) => {}
            RunState::Halted => self.make_runnable(t),
            RunState::Running(_) if self.st.tasks[t as usize].executing => {
                // A second runnable thread may start the guest time slice.
                self.settle(t);
                self.update_guest_deadline(t);
            }
            _ => {}
        }
    }

    /// An RT-priority guest thread preempts the vCPU's normal threads at once.
    fn make_rt_thread_ready(&mut self, id: ThreadId, t: TaskId) {
        let cur = self.st.tasks[t as usize].cur;
        let preempt =
            cur != NONE && !self.st.workloads[self.st.threads[cur as usize].workload as usize].rt;
        let executing = matches!(self.view.state[t as usize], RunState::Running(_))
            && self.st.tasks[t as usize].executing;
        if preempt {
            if executing {
                self.settle(t);
            }
            let task = &mut self.st.tasks[t as usize];
            task.local.push_front(cur);
            task.cur = NONE;
        }
        self.st.tasks[t as usize].local.push_front(id);
        match self.view.state[t as usize] {
            RunState::Halted if self.vcpu_paused(t) => {}
            RunState::Halted => self.make_runnable(t),
            RunState::Running(_) if executing => {
                if preempt {
                    self.run_guest(t);
                } else {
                    self.settle(t);
                    self.update_guest_deadline(t);
                }
            }
            _ => {}
        }
    }

    fn start_arrivals(&mut self, w: u32) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        match wl.arrivals.clone() {
            None => {}
            Some(Arrivals::Poisson { rate }) => {
                let d = wl.rng.exp(1e9 / rate);
                self.st.q.push(
                    now + SimDuration::round_ns(d),
                    EventKind::Arrival { workload: w },
                );
            }
            Some(Arrivals::Periodic { interval }) => {
                self.st.q.push(
                    now + SimDuration::round_ns(interval),
                    EventKind::Arrival { workload: w },
                );
            }
            Some(Arrivals::Closed { clients, think }) => {
                for _ in 0..clients {
                    let d = think.sample(&mut wl.rng);
                    self.st.q.push(
                        now + SimDuration::round_ns(d),
                        EventKind::Arrival { workload: w },
                    );
                }
            }
        }
    }

    fn arrival(&mut self, w: u32) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        match &wl.arrivals {
            Some(Arrivals::Poisson { rate }) => {
                let d = wl.rng.exp(1e9 / rate);
                self.st.q.push(
                    now + SimDuration::round_ns(d),
                    EventKind::Arrival { workload: w },
                );
            }
            Some(Arrivals::Periodic { interval }) => {
                self.st.q.push(
                    now + SimDuration::round_ns(*interval),
                    EventKind::Arrival { workload: w },
                );
            }
            _ => {}
        }
        let p = Packet {
            workload: w,
            arrived: now,
            outbound: false,
            received: false,
        };
        let wl = &self.st.workloads[w as usize];
        if wl.timer_task != NONE {
            let k = self.st.vm_kemari[wl.vm as usize];
            if k != NONE && self.st.helpers[k as usize].spec.raises_guest_timers() {
                self.ft_timer_expired(k as usize, p);
                return;
            }
        }
        if self.st.io_backend == NONE {
            self.enqueue_inbound(p);
        } else {
            self.send_to_backend(p);
        }
    }

    /// The guest-visible busy time of VM `vm` so far (ns): its vCPUs' time on pCPUs,
    /// including the current stretch of those running. Stolen time (a vCPU runnable but
    /// not running, or stopped) is not busy, as in a guest kernel that accounts steal time
    /// (Xen and KVM guests since Linux 3.x). Deviation: lookbusy reads user + nice +
    /// system only, so a guest's interrupt and softirq time (an `rx` path) and the host's
    /// switch costs, which count here, would not count there; both are small.
    fn guest_busy_ns(&self, vm: u32) -> u64 {
        let now = self.st.now;
        let base = self.st.vm_task_base[vm as usize];
        (base..base + self.st.vm_vcpus[vm as usize])
            .map(|t| {
                let task = &self.st.tasks[t as usize];
                let running = matches!(self.view.state[t as usize], RunState::Running(_));
                task.run_ns_before_warmup
                    + task.c.run_ns
                    + if running {
                        now.since(task.state_since).ns()
                    } else {
                        0
                    }
            })
            .sum()
    }

    /// lookbusy 1.4's `cpu_spin` controller: each cycle is a busy phase then a fixed
    /// sleep. At the start of a cycle it reads the guest's busy time over the last cycle
    /// (all CPUs, /proc/stat's user + nice + system, divided by its spinner count) and
    /// moves the busy phase by (target - measured) x busy phase / spinners. A guest that
    /// cannot get its target share therefore grows its busy phases cycle after cycle.
    fn lookbusy_busy_ns(&mut self, id: ThreadId, util: f64, first: f64, spinners: u32) -> f64 {
        let now = self.st.now;
        let vm = self.st.workloads[self.st.threads[id as usize].workload as usize].vm;
        let busy_now = self.guest_busy_ns(vm);
        let th = &mut self.st.threads[id as usize];
        let st = th.lookbusy.get_or_insert(LookbusyState {
            busy_ns: first,
            cycle_start: now,
            guest_busy_at_start: busy_now,
        });
        let wall = now.since(st.cycle_start).ns();
        if wall > 0 {
            let spinners = spinners.max(1) as f64;
            let busy = busy_now.saturating_sub(st.guest_busy_at_start);
            let measured = busy as f64 / wall as f64 / spinners;
            let adjust = (util - measured) * st.busy_ns / spinners;
            st.busy_ns = (st.busy_ns + adjust).max(LOOKBUSY_MIN_BUSY_NS);
        }
        st.cycle_start = now;
        st.guest_busy_at_start = busy_now;
        st.busy_ns
    }

    /// A request reaches its guest: through the workload's receive path (`rx`) first if
    /// it has one, else straight to the workload.
    fn enqueue_inbound(&mut self, p: Packet) {
        let rx = self.st.workloads[p.workload as usize].rx_stage;
        if rx != NONE && !p.received {
            self.enqueue(rx, p);
        } else {
            self.enqueue(p.workload, p);
        }
    }

    /// A request reaches its workload `w` (a server, or the backend): hand it to a waiting
    /// thread, which wakes, or queue it.
    fn enqueue(&mut self, w: u32, p: Packet) {
        let wl = &mut self.st.workloads[w as usize];
        match wl.waiting.pop_front() {
            Some(th) => {
                let t = &mut self.st.threads[th as usize];
                t.packet = Some(p);
                t.pc += 1;
                self.wake_thread(th);
            }
            None => wl.queue.push_back(p),
        }
    }

    /// A packet enters the split driver's backend.
    fn send_to_backend(&mut self, p: Packet) {
        self.st.h.backend_packets += 1;
        self.enqueue(self.st.io_backend, p);
    }

    /// The response to a request arriving at `arrived` has left the host.
    fn complete_request(&mut self, w: u32, arrived: SimTime) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        wl.latency.record(now.since(arrived).ns());
        wl.completed += 1;
        wl.bytes_done += wl.request_bytes;
        if let Some(Arrivals::Closed { think, .. }) = &wl.arrivals {
            let d = think.sample(&mut wl.rng);
            self.st.q.push(
                now + SimDuration::round_ns(d),
                EventKind::Arrival { workload: w },
            );
        }
    }

    // ----------------------------------------------------------------- software FT (crate::ft)

    fn vcpu_paused(&self, t: TaskId) -> bool {
        self.st.vms_paused != 0
            && t < self.st.n_vcpu_tasks
            && self.st.vm_paused[self.st.tasks[t as usize].vm as usize]
    }

    /// A guest I/O event in a VM protected by Kemari: stop the VM, queue a sync.
    fn ft_start_sync(&mut self, vm: usize, thread: ThreadId, io_ns: u64, write_bytes: u64) {
        let now = self.st.now;
        // A write buffer counts as dirtied when it is written, unless its workload states
        // a dirtying rate for its computation, which then covers filling the buffer.
        let wl = self.st.threads[thread as usize].workload as usize;
        if self.st.workloads[wl].dirty_bytes_per_ns == 0.0 {
            self.st.vm_dirty[vm] += write_bytes as f64;
        }
        self.st.vm_syncs[vm] += 1;
        // The issuing vCPU left the guest for the write (it halts in run_guest). If the
        // Kemari thread waits for work, the VM stops now: the write's transaction is next
        // (once the thread is woken, after an IPI if it is elsewhere, and scheduled). If
        // it is busy (a transaction or the flush of an earlier write), the write waits in
        // the event-tap queue and the VM runs on until its transaction starts
        // (`ft_begin_job`).
        let from = self.st.threads[thread as usize].task;
        let h = self.st.vm_kemari[vm] as usize;
        if self.st.helpers[h].waiting {
            self.ft_stop_vm(vm, from);
        }
        let job = Job {
            guest_thread: thread,
            enqueued: now,
            bytes: 0.0, // the memory dirtied up to the transaction's start (ft_begin_job)
            io_ns,
            write_bytes,
            local_done: now,
            release_by: NONE,
        };
        let from_cpu = self.st.tasks[from as usize].last_cpu;
        self.ft_submit(h, job, from_cpu);
    }

    /// Stops VM `vm` for a Kemari transaction: its executing vCPUs other than `except`
    /// halt now; one in its switch overhead halts when it would enter the guest.
    fn ft_stop_vm(&mut self, vm: usize, except: TaskId) {
        if self.st.vm_paused[vm] {
            return;
        }
        self.st.vm_paused[vm] = true;
        self.st.vms_paused += 1;
        self.st.vm_paused_since[vm] = self.st.now;
        let base = self.st.vm_task_base[vm];
        for v in base..base + self.st.vm_vcpus[vm] {
            if v != except
                && matches!(self.view.state[v as usize], RunState::Running(_))
                && self.st.tasks[v as usize].executing
            {
                self.settle(v);
                self.halt(v);
            }
        }
    }

    /// A helper takes its next job. For Kemari that starts a transaction: each one stops
    /// the VM (kemari-next's `vm_stop` per transaction; a queued write's transaction
    /// starts after the previous one resumed the VM and flushed), and carries the memory
    /// dirtied up to now.
    fn ft_begin_job(&mut self, h: usize) {
        if !matches!(
            self.st.helpers[h].spec,
            crate::ft::HelperSpec::Kemari { .. }
        ) {
            return;
        }
        let vm = self.st.helpers[h].vm as usize;
        self.ft_stop_vm(vm, NONE);
        let bytes = std::mem::take(&mut self.st.vm_dirty[vm]);
        if let Some(job) = self.st.helpers[h].cur.as_mut() {
            job.bytes = bytes;
        }
    }

    /// A guest disk write goes to the VM's DRBD helper; it completes at the later of the
    /// local write (`local_done`) and the replication. `io_ns` is the write's disk latency
    /// (the secondary's disk takes it too); `release_by` is the Kemari helper that waits
    /// for the write (NONE if none).
    #[allow(clippy::too_many_arguments)]
    fn ft_replicate(
        &mut self,
        vm: usize,
        thread: ThreadId,
        local_done: SimTime,
        io_ns: u64,
        bytes: u64,
        from_cpu: u32,
        release_by: u32,
    ) {
        let job = Job {
            guest_thread: thread,
            enqueued: self.st.now,
            bytes: bytes as f64,
            io_ns,
            write_bytes: bytes,
            local_done,
            release_by,
        };
        let h = self.st.vm_drbd[vm] as usize;
        self.ft_submit(h, job, from_cpu);
    }

    /// Queues a job; wakes the helper if it waits (after an IPI if it last ran elsewhere).
    fn ft_submit(&mut self, h: usize, job: Job, from_cpu: u32) {
        self.st.helpers[h].jobs.push_back(job);
        self.ft_wake_if_waiting(h, from_cpu);
    }

    /// Wakes helper `h` if it is blocked waiting for work, after an IPI if `from_cpu` is
    /// another pCPU than the one it last ran on (NONE: a local wake). False if it is busy:
    /// it takes the new work when it next looks.
    fn ft_wake_if_waiting(&mut self, h: usize, from_cpu: u32) -> bool {
        let helper = &mut self.st.helpers[h];
        if !helper.waiting {
            return false;
        }
        helper.waiting = false;
        let (tid, task) = (helper.thread, helper.task);
        let last = self.st.tasks[task as usize].last_cpu;
        if last != NONE && from_cpu != NONE && last != from_cpu && self.st.costs_ipi.ns() > 0 {
            self.st.q.push(
                self.st.now + self.st.costs_ipi,
                EventKind::ThreadWake { thread: tid },
            );
        } else {
            self.wake_thread(tid);
        }
        true
    }

    /// CPU work (base-clock ns) of the helper's current job, on the pCPU it runs on.
    fn ft_job_cpu(&self, h: usize) -> f64 {
        let helper = &self.st.helpers[h];
        if helper.cur_timer.is_some() {
            if let crate::ft::HelperSpec::Kemari { timer_cpu, .. } = helper.spec {
                return timer_cpu.ns() as f64;
            }
        }
        let job = helper.cur.expect("a helper works only on a taken job");
        let mib = job.bytes / crate::ft::MIB;
        match helper.spec {
            crate::ft::HelperSpec::Kemari {
                sync_cpu,
                copy_cpu_per_mib,
                ..
            } => {
                // The dirty pages were last written by the vCPU: refill them from its cache.
                let here = match self.view.state[helper.task as usize] {
                    RunState::Running(c) => c,
                    _ => NONE,
                };
                let vcpu = self.st.threads[job.guest_thread as usize].task;
                let there = self.st.tasks[vcpu as usize].last_cpu;
                let refill = if here == NONE || there == NONE {
                    0
                } else {
                    match self.view.topo.distance(here as usize, there as usize) {
                        Distance::SameCpu => 0,
                        d => self.st.costs_migration[d as usize - 1].ns(),
                    }
                };
                sync_cpu.ns() as f64 + mib * (copy_cpu_per_mib.ns() + refill) as f64
            }
            crate::ft::HelperSpec::Drbd {
                cpu_per_write,
                cpu_per_mib,
                ..
            } => cpu_per_write.ns() as f64 + mib * cpu_per_mib.ns() as f64,
        }
    }

    /// The helper finished its current job.
    fn ft_job_done(&mut self, h: usize) {
        let now = self.st.now;
        let helper = &mut self.st.helpers[h];
        let job = helper
            .cur
            .take()
            .expect("a helper completes only a taken job");
        helper.jobs_done += 1;
        helper.job_latency.record(now.since(job.enqueued).ns());
        let here = self.st.tasks[helper.task as usize].last_cpu;
        let vm = helper.vm as usize;
        let is_kemari = matches!(helper.spec, crate::ft::HelperSpec::Kemari { .. });
        let sync_release = helper.spec.waits_for_release();
        let ipi = self.st.costs_ipi;
        let vcpu_of =
            |st: &State, th: ThreadId| st.tasks[st.threads[th as usize].task as usize].last_cpu;
        if is_kemari {
            if self.st.vm_paused[vm] {
                self.st.vm_paused[vm] = false;
                self.st.vms_paused -= 1;
                self.st.vm_paused_ns[vm] += now
                    .since(self.st.vm_paused_since[vm].max(self.st.metrics_since))
                    .ns();
            }
            let base = self.st.vm_task_base[vm];
            for v in base..base + self.st.vm_vcpus[vm] {
                let task = &self.st.tasks[v as usize];
                let has_work = task.cur != NONE || !task.local.is_empty();
                if self.view.state[v as usize] != RunState::Halted || !has_work {
                    continue;
                }
                if task.last_cpu != here && ipi.ns() > 0 {
                    self.st.q.push(now + ipi, EventKind::TaskStart { task: v });
                } else {
                    self.make_runnable(v);
                }
            }
            // Release the held I/O. With sync_release the thread then waits for it
            // (kemari-next's event-tap flushes each released write: qemu_aio_flush and
            // bdrv_flush, in the I/O thread).
            let local_done = now + SimDuration(job.io_ns);
            if sync_release {
                let helper = &mut self.st.helpers[h];
                helper.flushing = true;
                helper.flush_since = now;
                helper.c.flushes += 1;
            }
            if job.write_bytes > 0 && self.st.vm_drbd[vm] != NONE {
                let waiter = if sync_release { h as u32 } else { NONE };
                self.ft_replicate(
                    vm,
                    job.guest_thread,
                    local_done,
                    job.io_ns,
                    job.write_bytes,
                    here,
                    waiter,
                );
            } else {
                self.st.q.push(
                    local_done,
                    EventKind::ThreadWake {
                        thread: job.guest_thread,
                    },
                );
                if sync_release {
                    self.st.q.push(
                        local_done,
                        EventKind::Helper {
                            helper: h as u32,
                            what: HELPER_FLUSH_DONE,
                        },
                    );
                }
            }
        } else {
            let cross = vcpu_of(&self.st, job.guest_thread) != here;
            let at = job.local_done.max(now) + if cross { ipi } else { SimDuration::ZERO };
            self.st.q.push(
                at,
                EventKind::ThreadWake {
                    thread: job.guest_thread,
                },
            );
            if job.release_by != NONE {
                // The write completes for Kemari's flush when the replication is acked.
                let kemari_cpu =
                    self.st.tasks[self.st.helpers[job.release_by as usize].task as usize].last_cpu;
                let cross = kemari_cpu != here;
                self.st.q.push(
                    job.local_done.max(now) + if cross { ipi } else { SimDuration::ZERO },
                    EventKind::Helper {
                        helper: job.release_by,
                        what: HELPER_FLUSH_DONE,
                    },
                );
            }
        }
    }

    /// A released write has completed: a Kemari thread blocked in HelperFlush goes on.
    fn ft_flush_done(&mut self, h: usize) {
        let now = self.st.now;
        let helper = &mut self.st.helpers[h];
        if !helper.flushing {
            return;
        }
        helper.flushing = false;
        helper.c.flush_ns += now
            .since(helper.flush_since.max(self.st.metrics_since))
            .ns();
        if std::mem::take(&mut helper.flush_blocked) {
            let tid = helper.thread;
            self.wake_thread(tid);
        }
    }

    /// A guest timer expired in a VM whose Kemari thread raises its timer interrupts
    /// (QEMU 1.0's userspace APIC: the I/O thread's main loop runs the timer). The
    /// thread handles it when it is free: at once if it waits, else after its current
    /// sync or flush.
    fn ft_timer_expired(&mut self, h: usize, p: Packet) {
        self.st.helpers[h].timers.push_back(p);
        if !self.ft_wake_if_waiting(h, NONE) {
            self.st.helpers[h].c.timer_irqs_queued += 1;
        }
    }

    /// The Kemari thread has raised a timer interrupt. With `global_mutex` the vCPU
    /// thread must take QEMU's global mutex to inject it, which it can only when this
    /// thread releases the mutex (`ft_release_mutex`); without, it goes to the vCPU now.
    fn ft_interrupt_raised(&mut self, h: usize, p: Packet) {
        if self.st.helpers[h].spec.holds_global_mutex() {
            self.st.helpers[h]
                .irqs_awaiting_mutex
                .push_back(MutexIrq::Timer(p));
        } else {
            self.ft_raise_timer(h, p);
        }
    }

    /// A wake-up of guest thread `th`: if it completes a write held by a Kemari
    /// event-tap and, with `global_mutex`, the Kemari thread holds the mutex (a
    /// transaction or timer in hand, or a flush under way), the completion interrupt
    /// waits for a release like a timer interrupt. True if it waits.
    #[inline]
    fn ft_write_done_awaits_mutex(&mut self, th: ThreadId) -> bool {
        let thread = &self.st.threads[th as usize];
        if !thread.kemari_io || thread.task >= self.st.n_vcpu_tasks {
            return false;
        }
        let vm = self.st.tasks[thread.task as usize].vm as usize;
        let h = self.st.vm_kemari[vm] as usize;
        let helper = &mut self.st.helpers[h];
        // It holds the mutex while it has a transaction or a timer in hand, or waits for a
        // released write; woken but not yet back in its main loop, it does not.
        let busy = helper.cur.is_some() || helper.cur_timer.is_some() || helper.flushing;
        if !helper.spec.holds_global_mutex() || !busy {
            return false;
        }
        helper
            .irqs_awaiting_mutex
            .push_back(MutexIrq::WriteDone(th));
        true
    }

    /// The Kemari thread is back in QEMU's main loop, which releases the global mutex
    /// only around select() and takes it again when select() returns. A vCPU thread
    /// waiting for the mutex on the thread's own pCPU gets it: the futex wake-up makes it
    /// runnable there and it preempts the releaser (a woken sleeper), so it runs before
    /// the relock. A vCPU thread on another pCPU gets it only if the thread now blocks
    /// in select() (no timer and no sync left to do); with work left, select() returns
    /// at once and the thread retakes the mutex within a microsecond, before the
    /// waiter's wake-up on its pCPU lands, and the interrupt waits for the next release.
    fn ft_release_mutex(&mut self, h: usize) {
        let helper = &self.st.helpers[h];
        let Some(&first) = helper.irqs_awaiting_mutex.front() else {
            return;
        };
        let idle = helper.timers.is_empty() && helper.jobs.is_empty();
        let here = self.st.tasks[helper.task as usize].last_cpu;
        // The VM has one vCPU thread that waits (seed 003's guest; with more, the first
        // interrupt's vCPU decides).
        let target = match first {
            MutexIrq::Timer(p) => self.st.workloads[p.workload as usize].timer_task,
            MutexIrq::WriteDone(th) => self.st.threads[th as usize].task,
        };
        let same_cpu = self.st.tasks[target as usize].last_cpu == here;
        if idle || same_cpu {
            let c = &mut self.st.helpers[h].c;
            if idle {
                c.mutex_handoffs_idle += 1;
            } else {
                c.mutex_handoffs_same_cpu += 1;
            }
            while let Some(irq) = self.st.helpers[h].irqs_awaiting_mutex.pop_front() {
                match irq {
                    MutexIrq::Timer(p) => self.ft_raise_timer(h, p),
                    MutexIrq::WriteDone(th) => self.wake_thread(th),
                }
            }
        } else {
            self.st.helpers[h].c.mutex_handoffs_lost += 1;
        }
    }

    /// The interrupt goes to the vCPU, after an IPI (the vCPU thread's kick) if the vCPU
    /// last ran on another pCPU.
    fn ft_raise_timer(&mut self, h: usize, p: Packet) {
        let helper = &mut self.st.helpers[h];
        helper.c.timer_irqs += 1;
        let here = self.st.tasks[helper.task as usize].last_cpu;
        let target = self.st.workloads[p.workload as usize].timer_task;
        let there = self.st.tasks[target as usize].last_cpu;
        let ipi = self.st.costs_ipi;
        if there != NONE && there != here && ipi.ns() > 0 {
            let helper = &mut self.st.helpers[h];
            helper.c.timer_irqs_cross_cpu += 1;
            helper.irqs_in_flight.push_back(p);
            self.st.q.push(
                self.st.now + ipi,
                EventKind::Helper {
                    helper: h as u32,
                    what: HELPER_IRQ_ARRIVES,
                },
            );
        } else {
            self.enqueue_inbound(p);
        }
    }

    // ----------------------------------------------------------------- checks & metrics

    fn check_invariants(&mut self) {
        // `vms_paused` is kept beside `vm_paused` so that `vcpu_paused` can return at once.
        let paused = self.st.vm_paused.iter().filter(|&&p| p).count();
        if paused != self.st.vms_paused as usize {
            self.st.error = Some(format!(
                "invariant: {paused} VMs are stopped but vms_paused counts {}",
                self.st.vms_paused
            ));
            return;
        }
        let mut seen = vec![false; self.st.tasks.len()];
        for (c, cpu) in self.st.cpus.iter().enumerate() {
            if self.st.rate_model {
                if cpu.busy != (cpu.curr != NONE) {
                    self.st.error = Some(format!(
                        "invariant: pCPU {c} counted {} for the clock and SMT model but {}",
                        if cpu.busy { "busy" } else { "idle" },
                        if cpu.curr == NONE {
                            "runs nothing"
                        } else {
                            "runs a task"
                        }
                    ));
                }
                let expected = self.speed_of(c);
                if cpu.speed != expected {
                    self.st.error = Some(format!(
                        "invariant: pCPU {c} runs at speed {} but its core and package give {expected}",
                        cpu.speed
                    ));
                }
            }
            if cpu.curr == NONE {
                if self.view.cpu_curr[c].is_some() {
                    self.st.error = Some(format!(
                        "invariant: pCPU {c} idle but the view says it runs a vCPU"
                    ));
                }
                continue;
            }
            let t = cpu.curr as usize;
            if seen[t] {
                self.st.error = Some(format!(
                    "invariant: vCPU task {t} runs on two pCPUs at once"
                ));
                return;
            }
            seen[t] = true;
            if self.view.state[t] != RunState::Running(c as u32) {
                self.st.error = Some(format!(
                    "invariant: pCPU {c} runs task {t} whose state is {:?}",
                    self.view.state[t]
                ));
            }
            if self.st.default_affinity[t]
                && self.st.isolcpus.as_ref().is_some_and(|iso| iso.contains(c))
            {
                self.st.error = Some(format!("invariant: task {t} runs on isolated pCPU {c} without naming it in its affinity"));
            }
            if self.vcpu_paused(t as TaskId) && self.st.tasks[t].executing {
                self.st.error = Some(format!("invariant: vCPU task {t} executes guest code while its VM is stopped for a Kemari sync"));
            }
            if !self.view.tasks[t].affinity.contains(c) {
                self.st.error = Some(format!(
                    "invariant: task {t} runs on pCPU {c} outside its affinity"
                ));
            }
        }
        let now = self.st.now;
        let elapsed = now.since(self.st.metrics_since).ns();
        for (t, s) in self.view.state.iter().enumerate() {
            if matches!(s, RunState::Running(_)) && !seen[t] {
                self.st.error = Some(format!("invariant: task {t} is Running but on no pCPU"));
            }
            let task = &self.st.tasks[t];
            if *s == RunState::Runnable {
                if let Some(bound) = self.st.starvation_bound {
                    let waited = now.since(task.runnable_since);
                    if waited > bound {
                        self.st.error = Some(format!(
                            "invariant: task {t} (VM {:?}, vCPU {}) has been runnable for {waited} without running; the scheduler promises at most {bound}",
                            self.model.vms[task.vm as usize].name, self.view.tasks[t].index
                        ));
                        return;
                    }
                }
            }
            // CPU time conservation per task: accounted run + wait + halted time never
            // exceeds the time since metrics started.
            let accounted = task.c.run_ns + task.c.wait_ns + task.c.halted_ns;
            if accounted > elapsed {
                self.st.error = Some(format!(
                    "invariant: task {t} has {accounted} ns of run+wait+halted time accounted in {elapsed} ns"
                ));
                return;
            }
        }
        if let Err(msg) = self.sched.check(&self.view) {
            self.st.error = Some(format!("invariant: {msg}"));
        }
    }

    /// Accounts every task's time in its current state up to now.
    fn account_all(&mut self) {
        let now = self.st.now;
        for t in 0..self.st.tasks.len() {
            self.settle(t as TaskId);
            let task = &mut self.st.tasks[t];
            let d = now.since(task.state_since).ns();
            match self.view.state[t] {
                RunState::Running(_) => {
                    task.c.run_ns += d;
                    if !task.executing {
                        task.c.overhead_ns += d.min(task.overhead_end.since(task.state_since).ns());
                        task.overhead_end = now.max(task.overhead_end);
                    }
                }
                RunState::Runnable => task.c.wait_ns += d,
                RunState::Halted => task.c.halted_ns += d,
            }
            task.state_since = now;
            task.account_spin(now);
        }
    }

    fn reset_metrics(&mut self) {
        self.account_all();
        self.st.metrics_since = self.st.now;
        for t in &mut self.st.tasks {
            t.run_ns_before_warmup += t.c.run_ns;
            t.c = TaskCounters::default();
        }
        for w in &mut self.st.workloads {
            w.completed = 0;
            w.bytes_done = 0;
            w.latency.clear();
        }
        self.st.h = HostCounters::default();
        for s in &mut self.st.streaks {
            s.clear();
        }
        for h in &mut self.st.boost_to_run {
            h.clear();
        }
        self.st.sched_counters_at_warmup = self.sched.counters();
        for h in &mut self.st.helpers {
            h.jobs_done = 0;
            h.job_latency.clear();
            h.c = HelperCounters::default();
        }
        for vm in 0..self.st.vm_syncs.len() {
            self.st.vm_syncs[vm] = 0;
            self.st.vm_paused_ns[vm] = 0;
        }
    }

    fn summary(&self) -> Summary {
        let model = self.model;
        let measured = model.duration - model.warmup;
        let secs = measured.as_secs_f64();
        let s = |ns: u64| ns as f64 / 1e9;
        let mut vms = Vec::new();
        let mut wl_index = 0usize;
        let mut shares = Vec::new();
        for (vi, vm) in model.vms.iter().enumerate() {
            let base = self.st.vm_task_base[vi] as usize;
            let mut vcpus = Vec::new();
            let mut tot = TaskCounters::default();
            let mut vm_streaks: BTreeMap<u64, u64> = BTreeMap::new();
            let mut vm_boost = Histogram::default();
            for i in 0..vm.vcpus as usize {
                let c = &self.st.tasks[base + i].c;
                let streaks = &self.st.streaks[base + i];
                for (&l, &n) in streaks {
                    *vm_streaks.entry(l).or_default() += n;
                }
                let boost = &self.st.boost_to_run[base + i];
                vm_boost.merge(boost);
                let st = streak_summary(streaks);
                let boost = latency_summary(boost);
                tot.run_ns += c.run_ns;
                tot.wait_ns += c.wait_ns;
                tot.halted_ns += c.halted_ns;
                tot.spin_ns += c.spin_ns;
                tot.ple_exits += c.ple_exits;
                tot.yield_attempts += c.yield_attempts;
                tot.yield_successes += c.yield_successes;
                vcpus.push(VcpuSummary {
                    index: i as u32,
                    cpu_time_s: s(c.run_ns),
                    wait_time_s: s(c.wait_ns),
                    halted_time_s: s(c.halted_ns),
                    spin_time_s: s(c.spin_ns),
                    overhead_time_s: s(c.overhead_ns),
                    dispatches: c.dispatches,
                    preemptions: c.preemptions,
                    halts: c.halts,
                    migrations: MigrationSummary::from(c.migrations),
                    ple_exits: c.ple_exits,
                    yield_attempts: c.yield_attempts,
                    yield_successes: c.yield_successes,
                    pv_waits: c.pv_waits,
                    pv_kicks: c.pv_kicks,
                    ple_streaks: st.count,
                    ple_streak_median: st.median,
                    ple_streak_max: st.max,
                    boost_to_run_mean_ms: boost.as_ref().map(|b| b.mean),
                    boost_to_run_max_ms: boost.as_ref().map(|b| b.max),
                });
            }
            let mut workloads = Vec::new();
            for w in &vm.workloads {
                let rt = &self.st.workloads[wl_index];
                wl_index += 1;
                let latency = if rt.arrivals.is_some() {
                    latency_summary(&rt.latency)
                } else {
                    None
                };
                workloads.push(WorkloadSummary {
                    kind: w.kind.clone(),
                    threads: w.threads,
                    completed: rt.completed,
                    throughput: rt.completed as f64 / secs,
                    throughput_unit: w.unit.clone(),
                    latency_ms: latency,
                    bandwidth_mbps: (rt.request_bytes > 0)
                        .then(|| rt.bytes_done as f64 * 8.0 / secs / 1e6),
                    completion_s: rt.finished_at.map(|t| t.as_secs_f64()),
                    throughput_kbps: (w.bytes_per_unit > 0)
                        .then(|| rt.completed as f64 * w.bytes_per_unit as f64 / 1024.0 / secs),
                });
            }
            let first = workloads.first();
            shares.push(tot.run_ns as f64 / vm.weight as f64);
            vms.push(VmSummary {
                name: vm.name.clone(),
                vcpu_count: vm.vcpus,
                weight: vm.weight,
                cpu_time_s: s(tot.run_ns),
                cpu_share: tot.run_ns as f64 / (measured.ns() as f64 * self.st.cpus.len() as f64),
                wait_time_s: s(tot.wait_ns),
                halted_time_s: s(tot.halted_ns),
                spin_time_s: s(tot.spin_ns),
                throughput: first.map(|w| w.throughput),
                throughput_unit: first.map(|w| w.throughput_unit.clone()),
                latency_ms: first.and_then(|w| w.latency_ms.clone()),
                ple: self.st.kvm.as_ref().map(|_| PleSummary {
                    exits: tot.ple_exits,
                    yield_attempts: tot.yield_attempts,
                    yield_successes: tot.yield_successes,
                    streaks: streak_summary(&vm_streaks),
                    boost_to_run_ms: latency_summary(&vm_boost),
                }),
                workloads,
                vcpus,
                ft: (self.st.vm_kemari[vi] != NONE).then(|| {
                    let k = &self.st.helpers[self.st.vm_kemari[vi] as usize];
                    FtSummary {
                        timer_irqs: k.c.timer_irqs,
                        timer_irqs_queued: k.c.timer_irqs_queued,
                        timer_irqs_cross_cpu: k.c.timer_irqs_cross_cpu,
                        mutex_handoffs_idle: k.c.mutex_handoffs_idle,
                        mutex_handoffs_same_cpu: k.c.mutex_handoffs_same_cpu,
                        mutex_handoffs_lost: k.c.mutex_handoffs_lost,
                        flushes: k.c.flushes,
                        flush_wait_s: s(k.c.flush_ns),
                        syncs: self.st.vm_syncs[vi],
                        paused_time_s: s(self.st.vm_paused_ns[vi]
                            + if self.st.vm_paused[vi] {
                                self.st
                                    .end
                                    .since(self.st.vm_paused_since[vi].max(self.st.metrics_since))
                                    .ns()
                            } else {
                                0
                            }),
                    }
                }),
            });
        }
        let mut host_threads = Vec::new();
        for (hi, h) in model.host_threads.iter().enumerate() {
            let t = self.st.n_vcpu_tasks as usize + hi;
            let c = &self.st.tasks[t].c;
            let w = &self.st.workloads[self.st.n_vm_workloads as usize + hi]; // one per host thread, in order
            let helper = (w.helper != NONE).then(|| &self.st.helpers[w.helper as usize]);
            host_threads.push(HostThreadSummary {
                name: h.name.clone(),
                vm: h.vm.map(|v| model.vms[v as usize].name.clone()),
                helper: helper.map(|x| x.spec.kind().to_string()),
                cpu_time_s: s(c.run_ns),
                wait_time_s: s(c.wait_ns),
                migrations: MigrationSummary::from(c.migrations),
                jobs: helper.map(|x| x.jobs_done),
                job_latency_ms: helper.and_then(|x| latency_summary(&x.job_latency)),
            });
        }
        let busy: u64 = self.st.tasks.iter().map(|t| t.c.run_ns).sum();
        let overhead: u64 = self.st.tasks.iter().map(|t| t.c.overhead_ns).sum();
        let demanding: Vec<f64> = shares.iter().copied().filter(|x| *x > 0.0).collect();
        let warm = &self.st.sched_counters_at_warmup;
        let counters = self
            .sched
            .counters()
            .into_iter()
            .map(|(k, v)| {
                let before = warm.iter().find(|(n, _)| *n == k).map_or(0, |x| x.1);
                (k.to_string(), v - before)
            })
            .collect();
        let h = &self.st.h;
        Summary {
            scenario: model.name.clone(),
            scheduler: model.scheduler.clone(),
            seed: self.st.seed,
            duration_s: model.duration.as_secs_f64(),
            warmup_s: model.warmup.as_secs_f64(),
            events: h.events,
            vms,
            host: HostSummary {
                pcpus: self.st.cpus.len() as u32,
                busy_time_s: s(busy),
                idle_time_s: (measured.ns() as f64 * self.st.cpus.len() as f64 - busy as f64) / 1e9,
                overhead_time_s: s(overhead),
                utilization: busy as f64 / (measured.ns() as f64 * self.st.cpus.len() as f64),
                context_switches: h.context_switches,
                migrations: MigrationSummary::from(h.migrations),
            },
            fairness: FairnessSummary {
                jain_vm: jain(&demanding),
            },
            scheduler_counters: counters,
            event_counts: EventCounts {
                cpu_deadlines: h.ev_cpu,
                thread_wakeups: h.ev_thread_wake,
                arrivals: h.ev_arrival,
                global_timers: h.ev_global,
                op_completions: h.op_completions,
                scheduler_timers: h.timer_fires,
                ipis_sent: h.ipis_sent,
                lock_acquisitions: h.lock_acquisitions,
                backend_packets: h.backend_packets,
                helper_events: h.ev_helper,
            },
            host_threads,
        }
    }
}

/// Prefetches the first `lines` cache lines of `r` (a hint: no effect on results).
#[inline(always)]
fn prefetch_lines<T>(r: &T, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = (r as *const T).cast::<i8>();
        for i in 0..lines.min(std::mem::size_of::<T>().div_ceil(64)) {
            // SAFETY: a prefetch never faults and changes no state; the address lies
            // inside `*r` (at most size_of::<T>() - 1 bytes past its start).
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    p.wrapping_add(i * 64),
                    std::arch::x86_64::_MM_HINT_T0,
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (r, lines);
}

fn latency_summary(h: &Histogram) -> Option<LatencySummary> {
    (h.count > 0).then(|| LatencySummary {
        count: h.count,
        mean: h.mean() / 1e6,
        p50: h.quantile(0.50) as f64 / 1e6,
        p90: h.quantile(0.90) as f64 / 1e6,
        p99: h.quantile(0.99) as f64 / 1e6,
        max: h.max as f64 / 1e6,
    })
}

/// Ends a vCPU's PLE streak, if one is open, counting its length in `lengths`.
fn close_streak(streak: &mut u64, lengths: &mut BTreeMap<u64, u64>) {
    if *streak > 0 {
        *lengths.entry(*streak).or_default() += 1;
        *streak = 0;
    }
}

/// Streak statistics from (length -> number of streaks).
fn streak_summary(lengths: &BTreeMap<u64, u64>) -> StreakSummary {
    let total_ple: u64 = lengths.iter().map(|(l, n)| l * n).sum();
    let mut cdf = Vec::with_capacity(lengths.len());
    let (mut acc, mut median) = (0u64, 0u64);
    for (&l, &n) in lengths {
        acc += l * n;
        if median == 0 && acc * 2 >= total_ple {
            median = l;
        }
        cdf.push((l, acc as f64 / total_ple as f64));
    }
    let ge53: u64 = lengths.range(53..).map(|(l, n)| l * n).sum();
    StreakSummary {
        count: lengths.values().sum(),
        median,
        max: lengths.keys().next_back().copied().unwrap_or(0),
        ge53_frac: if total_ple == 0 {
            0.0
        } else {
            ge53 as f64 / total_ple as f64
        },
        cdf,
    }
}

impl From<[u64; 4]> for MigrationSummary {
    fn from(m: [u64; 4]) -> Self {
        let total: u64 = m.iter().sum();
        let other_socket = m[Distance::OtherSocket as usize - 1];
        let other_numa = m[Distance::OtherNuma as usize - 1];
        MigrationSummary {
            total,
            smt_sibling: m[Distance::SmtSibling as usize - 1],
            same_socket: m[Distance::SameSocket as usize - 1],
            other_socket,
            other_numa,
            cross_socket_share: (total > 0)
                .then(|| (other_socket + other_numa) as f64 / total as f64),
        }
    }
}
