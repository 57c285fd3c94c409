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
//!
//! ## Where things live
//! One `Sim` over one `State`, its methods split by concern (each file adds an
//! `impl Sim` block; feature state sits in a sub-struct of `State` defined beside it):
//! - here: the records (`Task`, `Thread`, `Cpu`, `WorkloadRt`) and their layout, `State`,
//!   and the event loop, which hands each event to the file that owns it;
//! - `build`: `Sim::new` lays the tasks, threads and workloads out from the `Model`, and
//!   `start` makes the first tasks runnable;
//! - `host`: dispatch, deschedule, reschedule, halt, pCPU deadlines: the only caller of
//!   the scheduler's hooks;
//! - `clock`: the turbo and SMT speed of each pCPU;
//! - `guest`: the guest thread interpreter (`step_thread`), guest time slices, wake-ups;
//! - `sync`: locks, pv spinlocks, IPIs;
//! - `io`: disk requests and the guest's CFQ limit on writeback;
//! - `net`: request arrivals, the split-driver backend, receive paths;
//! - `ple`: KVM's pause-loop exits and its directed yield (`kvm_vcpu_on_spin`);
//! - `ft`: software fault tolerance (Kemari, DRBD helper threads);
//! - `invariants`: the checks of `--check-invariants`;
//! - `steal`: steal time as the guest sees it, per VM over one-second windows;
//! - `report`: metrics accounting, the warm-up reset, counters to `Summary`, trace labels.

pub mod queue;
pub mod trace;

// Before the modules: a `macro_rules!` is visible only in the text after it.
/// The scheduler's context for a hook: the time, the view, and the output buffer.
macro_rules! ctx {
    ($s:expr) => {
        &mut SchedCtx {
            now: $s.st.now,
            view: &$s.view,
            out: &mut $s.out,
        }
    };
}

mod build;
mod clock;
mod ft;
mod guest;
mod host;
mod invariants;
mod io;
mod net;
mod noise;
mod ple;
mod report;
mod steal;
mod sync;

use crate::error::SimError;
use crate::metrics::Histogram;
use crate::model::{Model, RtOp};
use crate::rng::Rng;
use crate::sched::{CpuId, RunState, SchedOut, SchedView, Scheduler, TaskId};
use crate::summary::Summary;
use crate::time::{SimDuration, SimTime};
use crate::topology::CpuSet;
use crate::workload::{Arrivals, Mode};
use clock::Clock;
use ft::Ft;
use guest::LookbusyState;
use io::Cfq;
use net::Packet;
use ple::{KvmState, KvmTask};
use queue::{EventKind, EventQueue};
use report::HostCounters;
use std::collections::VecDeque;
use sync::Lock;

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
    /// It took a unit of its finite workload (`units_left`) for the loop it is in; a
    /// thread that blocks on its first operation and retries it must not take another.
    holds_unit: bool,
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
            holds_unit: false,
            lookbusy: None,
        }
    }
}

/// A workload's run-time state: its program, request queue, counters and links to the
/// engine's own workloads (helper, receive path, timer).
struct WorkloadRt {
    vm: u32,
    ops: Vec<RtOp>,
    counts_requests: bool,
    arrivals: Option<Arrivals>,
    rng: Rng,
    /// Requests (servers) or packets (backends) that arrived while no thread waited.
    queue: VecDeque<Packet>,
    waiting: VecDeque<ThreadId>,
    /// The senders of its held responses (`RtOp::RespondHeld`) not yet taken by the
    /// backend, in the order sent.
    held_by: VecDeque<ThreadId>,
    completed: u64,
    latency: Histogram,
    /// `arrivals.latency = "taken"`: latency is recorded by `RtOp::Taken`, from the
    /// request's reaching the guest, instead of at its response.
    latency_taken: bool,
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
            held_by: VecDeque::new(),
            completed: 0,
            latency: Histogram::default(),
            latency_taken: false,
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

pub struct Sim<'m, S: Scheduler> {
    /// What the run was built from; read again only by the summary and traces.
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
    /// Per VM: its idle loop spins (`idle = "poll"`) instead of halting.
    vm_idle_poll: Vec<bool>,
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
    clock: Clock,
    costs_switch: SimDuration,
    costs_migration: [SimDuration; 4],
    costs_ipi: SimDuration,
    /// Mutex waiters a `futex_wake` made ready at this instant, with the running task that
    /// woke them (their `ThreadWake` event carries only the thread): the waker the fair
    /// class's `wake_affine` places a halted vCPU by. Taken by that event.
    futex_wakers: Vec<(ThreadId, crate::sched::Waker)>,
    /// `[host.costs] cacheline_transfer` (engine/sync.rs).
    costs_line: SimDuration,
    /// `[host.noise]` (engine/noise.rs).
    noise: Option<noise::Noise>,
    sched_counters_at_warmup: Vec<(&'static str, u64)>,
    /// The scheduler's forced-idle time per pCPU at the end of the warm-up (core
    /// scheduling; empty otherwise).
    forced_idle_at_warmup: Vec<u64>,
    trace: Option<trace::Tracer>,
    kvm: KvmState,
    /// Tasks 0..n_vcpu_tasks are vCPUs; the rest are host threads.
    n_vcpu_tasks: u32,
    /// Workloads 0..n_vm_workloads belong to VMs; the rest to host threads.
    n_vm_workloads: u32,
    /// The netback workload every packet passes through (split-driver path); NONE: direct.
    io_backend: u32,
    /// Per thread (grown on first use): NONE, or the thread holds the backend's queue lock
    /// after a `RtOp::RespondHeld`, with the backend thread waiting for it (or none).
    held: Vec<ThreadId>,
    ft: Ft,
    cfq: Cfq,
    /// Per task: its affinity was defaulted (so it must avoid isolated pCPUs).
    default_affinity: Vec<bool>,
    isolcpus: Option<CpuSet>,
    /// The scheduler's promise for `--check-invariants` (asked after init).
    starvation_bound: Option<SimDuration>,
    /// Metrics count from here (0, or the end of the warm-up).
    metrics_since: SimTime,
    /// rt-app timers (`RtOp::Timer`): the next expiry of each (thread, slot) in use.
    rtapp_timers: std::collections::BTreeMap<(ThreadId, u32), SimTime>,
    /// Each VM's steal time per window (`steal`).
    steal: steal::StealWindows,
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
        self.start();
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
                    let waker = match self.st.futex_wakers.iter().position(|w| w.0 == thread) {
                        Some(i) => Some(self.st.futex_wakers.swap_remove(i).1),
                        None => None,
                    };
                    if !self.ft_write_done_awaits_mutex(thread) {
                        self.wake_thread_from(thread, waker);
                    }
                }
                EventKind::Helper { helper, what } => {
                    self.st.h.ev_helper += 1;
                    self.helper_event(helper, what);
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
                    self.global_timer();
                }
                EventKind::Warmup => {
                    self.reset_metrics();
                    continue;
                }
                EventKind::StealWindow => {
                    // Reads counters only: like the warm-up, not an event of the model.
                    self.steal_window_event();
                    continue;
                }
                EventKind::Noise { cpu } => {
                    self.noise_event(cpu);
                }
                EventKind::PleBoostEnd { vm, gen } => {
                    if !self.ple_boost_end(vm, gen) {
                        continue; // superseded by a later boost
                    }
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
                let message = self.st.error.take().expect("tested");
                return Err(self.error(message));
            }
        }
        if let Some(message) = self.st.error.take() {
            return Err(self.error(message));
        }
        Ok(self.finish())
    }

    /// The run's failure with `message`, now.
    #[cold]
    fn error(&self, message: String) -> SimError {
        SimError {
            scenario: self.model.name.clone(),
            seed: self.st.seed,
            at_ns: self.st.now.0,
            message,
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
