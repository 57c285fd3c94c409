//! One run: memory, vCPU threads (KVM vCPUs or plain host threads), policies, the monitor
//! (start, stop, timeouts, Ctrl-C), the waker, the user-space PLE, and the results.

use crate::cgroup::Cgroups;
use crate::config::{Config, Mode, PlePolicy};
use crate::error::{Error, Result};
use crate::guest::Program;
use crate::guest::*;
use crate::policy::{self, Saved, ThreadGuard};
use crate::stats::{stats_delta, ThreadStats};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------------ memory

/// The shared memory of a run: guest RAM under KVM, an anonymous mapping in thread mode.
/// Same layout either way (see `guest`).
pub struct Memory {
    base: *mut u8,
    len: usize,
    /// Unmapped on drop in thread mode; in KVM mode the GuestMemoryMmap owns the mapping.
    anon: bool,
}

// SAFETY: the memory is only ever accessed through atomics (`word`) or, before the vCPU
// threads start, through plain writes by the thread that set it up.
unsafe impl Send for Memory {}
// SAFETY: as above.
unsafe impl Sync for Memory {}

impl Memory {
    /// Guest RAM mapped by the VMM (not owned here).
    pub(crate) fn from_guest(base: *mut u8, len: usize) -> Memory {
        Memory {
            base,
            len,
            anon: false,
        }
    }

    fn anonymous(len: usize) -> Result<Memory> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Memory(format!(
                "mmap of {len} bytes: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Memory {
            base: p as *mut u8,
            len,
            anon: true,
        })
    }

    /// The 64-bit word at guest address `addr`.
    pub fn word(&self, addr: u64) -> &AtomicU64 {
        assert!(
            addr.is_multiple_of(8) && (addr as usize) + 8 <= self.len,
            "guest address {addr:#x} out of range"
        );
        // SAFETY: in range and 8-byte aligned (checked above; the base is page aligned); the
        // mapping lives as long as `self`; every access to shared words is atomic.
        unsafe { &*(self.base.add(addr as usize) as *const AtomicU64) }
    }

    pub fn get(&self, addr: u64) -> u64 {
        self.word(addr).load(SeqCst)
    }
    pub fn set(&self, addr: u64, v: u64) {
        self.word(addr).store(v, SeqCst)
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        if self.anon {
            // SAFETY: base/len are exactly the mapping made in `anonymous`, no longer used.
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
        }
    }
}

// ------------------------------------------------------------------------- clocks

pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// How far past the stop the stamp of a vCPU woken by the stop lies. The guest still takes
/// its sample, `rdtsc - stamp`, which then wraps to about 2^64 - 2^62 ticks (years at any
/// TSC rate) and is dropped with the other impossible values (`is_latency`). A stamp of
/// `u64::MAX`, used until 2026-12-05, made that sample the TSC itself plus one: the time
/// since the host booted, which passed as a latency on a host up for less than 1,000 s.
const STOP_STAMP_AHEAD: u64 = 1 << 62;

/// The stamp for a vCPU woken by the stop, from the TSC now.
fn stop_stamp(now: u64) -> u64 {
    now.wrapping_add(STOP_STAMP_AHEAD)
}

/// Whether `ticks` (a guest's `rdtsc - stamp`) is a latency: under 1,000 s. A sample taken
/// after the stop (`stop_stamp`), or before a timer's deadline, wraps around and is not.
fn is_latency(ticks: u64, tsc_hz: f64) -> bool {
    (ticks as f64 / tsc_hz) < 1000.0
}

/// `n` iterations of the guest's delay loop (`dec; jnz`), on the host.
#[inline(always)]
pub fn delay_loop(n: u64) {
    if n > 0 {
        // SAFETY: touches only the register it is given (and flags).
        unsafe {
            core::arch::asm!("2:", "dec {0}", "jnz 2b", inout(reg) n => _, options(nomem, nostack))
        };
    }
}

/// TSC ticks per second, measured against CLOCK_MONOTONIC (used when KVM cannot say).
fn measure_tsc_hz() -> f64 {
    let (t0, c0) = (Instant::now(), rdtsc());
    std::thread::sleep(Duration::from_millis(50));
    let (t1, c1) = (Instant::now(), rdtsc());
    (c1 - c0) as f64 / (t1 - t0).as_secs_f64()
}

/// Nanoseconds per delay-loop iteration (best of 5 runs of 2e6 iterations).
fn measure_ns_per_loop(tsc_hz: f64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let c0 = rdtsc();
        delay_loop(2_000_000);
        let c1 = rdtsc();
        best = best.min((c1 - c0) as f64 / tsc_hz * 1e9 / 2e6);
    }
    best
}

// ------------------------------------------------------------------------ signals

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static KICKED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// `kvm_run.immediate_exit` of the vCPU running on this thread (null if none).
    static IMMEDIATE_EXIT: std::cell::Cell<*mut u8> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, SeqCst);
}

extern "C" fn on_kick(_: libc::c_int) {
    // Only async-signal-safe work: a volatile byte store into this thread's kvm_run.
    let _ = IMMEDIATE_EXIT.try_with(|p| {
        let p = p.get();
        if !p.is_null() {
            // SAFETY: p points into the kvm_run mapping of the vCPU this thread runs; it is
            // set before KVM_RUN and cleared before the vCPU fd is dropped.
            unsafe { std::ptr::write_volatile(p, 1) };
        }
    });
}

fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

/// Our signal handlers for SIGINT/SIGTERM (stop the run cleanly) and the kick signal; the
/// previous handlers come back on drop.
struct SignalGuard {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalGuard {
    fn install() -> Result<SignalGuard> {
        INTERRUPTED.store(false, SeqCst);
        KICKED.store(false, SeqCst);
        let mut g = SignalGuard { old: Vec::new() };
        for (sig, handler) in [
            (libc::SIGINT, on_interrupt as extern "C" fn(libc::c_int)),
            (libc::SIGTERM, on_interrupt),
            (kick_signal(), on_kick),
        ] {
            // SAFETY: sigaction structs are plain data; zeroed is a valid empty mask/flags.
            let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
            new.sa_sigaction = handler as usize;
            new.sa_flags = 0; // no SA_RESTART: a blocked read or KVM_RUN returns EINTR
                              // SAFETY: as above.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointers to sigaction structs; the handlers are async-signal-safe.
            if unsafe { libc::sigaction(sig, &new, &mut old) } != 0 {
                return Err(Error::Os(
                    format!("sigaction({sig})"),
                    std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
                ));
            }
            g.old.push((sig, old));
        }
        Ok(g)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, old) in self.old.drain(..).rev() {
            // SAFETY: restores the handler that was installed before ours.
            unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
        }
    }
}

// ----------------------------------------------------------------------- results

#[derive(Debug, Default, Serialize)]
pub struct VcpuResult {
    pub index: usize,
    pub program: &'static str,
    pub group: usize,
    pub tid: i32,
    pub ops: u64,
    /// The op count at the end of the warm-up (`Config::warmup_ns`; None without one).
    pub warm_ops: Option<u64>,
    /// Guest-TSC time from the start barrier to the stop.
    pub wall_s: f64,
    pub spins: u64,
    pub ple_exits: u64,
    /// Latency samples (wake / timer programs, the null-exit round trips, the gaps, the
    /// spin windows), ns.
    pub samples_ns: Vec<f64>,
    /// schedstat/status deltas over the vCPU thread's run.
    pub cpu_time_s: f64,
    pub wait_time_s: f64,
    pub timeslices: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// KVM steal-time MSR (null in thread mode or if the MSR could not be set).
    pub steal_time_s: Option<f64>,
    /// KVM binary stats that changed during the run.
    pub kvm_stats: BTreeMap<String, u64>,
    pub exit: String,
}

#[derive(Debug, Default, Serialize)]
pub struct PleResult {
    pub exits: u64,
    pub yields: u64,
    pub boosts: u64,
    pub migrations: u64,
    pub errors: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct RunResult {
    pub mode: &'static str,
    pub notice: Option<String>,
    pub tsc_hz: f64,
    pub ns_per_loop: f64,
    pub duration_s: f64,
    /// Guest-TSC time from the first vCPU's start to the last vCPU's stop.
    pub wall_s: f64,
    /// Host time from the end of the warm-up to the stop flag (None without a warm-up):
    /// the interval `ops - warm_ops` were done in.
    pub warm_wall_s: Option<f64>,
    pub vcpus: Vec<VcpuResult>,
    pub ple: PleResult,
    pub cgroup_version: &'static str,
    /// What was changed and restored (cgroups created/removed, threads moved back).
    pub restored: Vec<String>,
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------- PLE

/// The active boost: which vCPU, the CPU of the spinner that chose it (where `migrate`
/// moves it, whichever thread makes the call), and when it ends.
struct Boost {
    vcpu: usize,
    cpu: usize,
    until: Instant,
}

struct Ple {
    policy: PlePolicy,
    boost_for: Duration,
    tids: Vec<AtomicI32>,
    /// Each vCPU thread's own policy and affinity, captured once its scenario policy is set:
    /// what the end of a boost puts back.
    base: Vec<OnceLock<Saved>>,
    done: Vec<AtomicBool>,
    /// The handler's state. Held only to read and update it, never across a system call:
    /// a call that changes another thread's priority or affinity can preempt its caller
    /// (the boosted vCPU may preempt the spinner on its own pCPU), and a spinner preempted
    /// while holding a lock would block every other spinner's exit behind it. Until
    /// 2026-12-05 (session 30) one lock was held across the calls: lock-holder preemption
    /// in the harness's own handler, which KVM's handler, keeping its `last_boosted_vcpu`
    /// without a lock, does not have (docs/validation.md).
    state: Mutex<PleState>,
    exits: AtomicU64,
    yields: AtomicU64,
    boosts: AtomicU64,
    migrations: AtomicU64,
    errors: AtomicU64,
}

struct PleState {
    last_boosted: Option<usize>,
    active: Option<Boost>,
    /// Per vCPU, a count of the changes to whether it is the active boost (see `sync`).
    changes: Vec<u64>,
}

impl PleState {
    /// Ends the active boost and makes vCPU `next`'s (if any) the active one; returns the
    /// vCPU whose boost ended.
    fn switch(&mut self, next: Option<Boost>) -> Option<usize> {
        let ended = self.active.take().map(|b| b.vcpu);
        for v in ended.iter().chain(next.as_ref().map(|b| &b.vcpu)) {
            self.changes[*v] += 1;
        }
        self.active = next;
        ended
    }
}

impl Ple {
    /// The handler of `n` vCPUs, before any has started (no thread ids or policies yet).
    fn new(policy: PlePolicy, boost_for: Duration, n: usize) -> Ple {
        Ple {
            policy,
            boost_for,
            tids: (0..n).map(|_| AtomicI32::new(0)).collect(),
            done: (0..n).map(|_| AtomicBool::new(false)).collect(),
            base: (0..n).map(|_| OnceLock::new()).collect(),
            state: Mutex::new(PleState {
                last_boosted: None,
                active: None,
                changes: vec![0; n],
            }),
            exits: AtomicU64::new(0),
            yields: AtomicU64::new(0),
            boosts: AtomicU64::new(0),
            migrations: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// A spin by `spinner` exceeded the window. Like `kvm_vcpu_on_spin`: candidates in round
    /// robin order after the last boosted vCPU, skipping the spinner (and finished vCPUs).
    /// The previous boost ends where the next begins.
    fn on_spin(&self, spinner: usize) {
        self.exits.fetch_add(1, Relaxed);
        match self.policy {
            PlePolicy::None => {}
            PlePolicy::Yield => {
                policy::sched_yield();
                self.yields.fetch_add(1, Relaxed);
            }
            PlePolicy::Boost | PlePolicy::BoostFifo | PlePolicy::Migrate => {
                let n = self.tids.len();
                let cpu = policy::current_cpu();
                let (ended, chosen) = {
                    let mut st = self.state.lock().unwrap();
                    let start = st.last_boosted.map(|l| l + 1).unwrap_or(0);
                    let chosen = (0..n).map(|k| (start + k) % n).find(|&c| {
                        c != spinner && !self.done[c].load(SeqCst) && self.tids[c].load(SeqCst) > 0
                    });
                    if chosen.is_some() {
                        st.last_boosted = chosen;
                        if self.policy == PlePolicy::Migrate {
                            self.migrations.fetch_add(1, Relaxed);
                        } else {
                            self.boosts.fetch_add(1, Relaxed);
                        }
                    }
                    let ended = st.switch(chosen.map(|c| Boost {
                        vcpu: c,
                        cpu,
                        until: Instant::now() + self.boost_for,
                    }));
                    (ended, chosen)
                };
                for v in ended.into_iter().chain(chosen) {
                    self.sync(v);
                }
                policy::sched_yield();
                self.yields.fetch_add(1, Relaxed);
            }
        }
    }

    /// Brings vCPU `v`'s thread in line with the state: the policy's change while it is the
    /// active boost, its own policy otherwise. Every change of the state that concerns `v`
    /// is followed by a `sync(v)`, and the calls of two exits on one vCPU may land in either
    /// order. So a sync makes its call for what the state says, then looks again, and makes
    /// the call again for the new state if the state changed for `v` meanwhile: the last
    /// call to land is then always one made after the last change. No lock is held across
    /// the call. A finished vCPU is left alone: its thread restores itself.
    fn sync(&self, v: usize) {
        let mut seen = None;
        loop {
            let want = {
                let st = self.state.lock().unwrap();
                if self.done[v].load(SeqCst) || seen == Some(st.changes[v]) {
                    return;
                }
                seen = Some(st.changes[v]);
                st.active.as_ref().filter(|b| b.vcpu == v).map(|b| b.cpu)
            };
            let ok = match want {
                Some(cpu) => self.apply(v, cpu),
                None => self.base[v].get().is_some_and(|b| b.restore().is_ok()),
            };
            if !ok && !self.done[v].load(SeqCst) {
                self.errors.fetch_add(1, Relaxed);
            }
        }
    }

    /// The policy's change to vCPU `c`: nice -20, SCHED_FIFO 1, or CPU `cpu` (the
    /// spinner's); false if it failed.
    fn apply(&self, c: usize, cpu: usize) -> bool {
        let (tid, Some(base)) = (self.tids[c].load(SeqCst), self.base[c].get()) else {
            return false;
        };
        let r = match self.policy {
            PlePolicy::Boost => policy::set_attr(
                tid,
                &policy::SchedAttr {
                    sched_policy: base.attr.sched_policy.min(policy::SCHED_BATCH),
                    sched_nice: -20,
                    ..Default::default()
                },
            ),
            PlePolicy::BoostFifo => policy::set_attr(
                tid,
                &policy::SchedAttr {
                    sched_policy: policy::SCHED_FIFO,
                    sched_priority: 1,
                    ..Default::default()
                },
            ),
            _ => policy::set_affinity(tid, &[cpu]),
        };
        r.is_ok()
    }

    /// Ends an expired boost (called by the monitor), or any boost (`all`).
    fn expire(&self, all: bool) {
        let ended = {
            let mut st = self.state.lock().unwrap();
            let due = st
                .active
                .as_ref()
                .is_some_and(|b| all || Instant::now() >= b.until);
            if due {
                st.switch(None)
            } else {
                None
            }
        };
        if let Some(v) = ended {
            self.sync(v);
        }
    }

    /// A vCPU thread is about to restore its own policy and exit: its boost ends, and no
    /// new call touches it. A call already under way may fail (not counted as an error) or
    /// land after the thread's own restore, which leaves it boosted for the last
    /// microseconds before it exits, after its figures were read.
    fn finished(&self, v: usize) {
        let mut st = self.state.lock().unwrap();
        self.done[v].store(true, SeqCst);
        if st.active.as_ref().is_some_and(|b| b.vcpu == v) {
            st.active = None; // its own ThreadGuard restores it
        }
    }
}

// ------------------------------------------------------------------------- waker

struct WakeRequest {
    vcpu: usize,
    at: Instant,
}

/// The "device": wakes halted vCPUs after their io latency. Stamps the TSC into the vCPU's
/// slot, then writes its eventfd.
fn waker_thread(ctx: Arc<Ctx>, rx: mpsc::Receiver<WakeRequest>) {
    let _guard = if ctx.cfg.waker.is_empty() {
        None
    } else {
        ThreadGuard::apply_current(&ctx.cfg.waker).ok()
    };
    let mut pending: Vec<WakeRequest> = Vec::new();
    loop {
        let next = pending.iter().map(|r| r.at).min();
        let got = match next {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
        };
        match got {
            Ok(r) => pending.push(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        let mut i = 0;
        while i < pending.len() {
            if pending[i].at <= now {
                let r = pending.swap_remove(i);
                ctx.mem.set(slot_addr(r.vcpu) + R_STAMP as u64, rdtsc());
                ctx.efds[r.vcpu].signal();
            } else {
                i += 1;
            }
        }
    }
}

/// At stop: writes every vCPU's eventfd, which returns a `wake` vCPU from its blocking read
/// and sends an `irq-wake` vCPU its interrupt. The latter's stamp is set first to what a
/// `wake` vCPU woken by the stop gets, so that its last sample is dropped the same way.
fn release_halted(ctx: &Ctx) {
    for (v, e) in ctx.efds.iter().enumerate() {
        if ctx.cfg.vcpus[v].program == Program::IrqWake {
            ctx.mem
                .set(slot_addr(v) + R_STAMP as u64, stop_stamp(rdtsc()));
        }
        e.signal();
    }
}

struct EventFd(i32);

impl EventFd {
    fn new() -> Result<EventFd> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::Os(
                "eventfd".into(),
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ));
        }
        Ok(EventFd(fd))
    }
    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
        unsafe { libc::write(self.0, &one as *const u64 as *const libc::c_void, 8) };
    }
    /// Blocks until signalled; false if interrupted by a signal.
    fn wait(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from an eventfd we own.
        let n = unsafe { libc::read(self.0, &mut v as *mut u64 as *mut libc::c_void, 8) };
        n == 8
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: closes the fd this value owns, once.
        unsafe { libc::close(self.0) };
    }
}

// ---------------------------------------------------------------------- the run

/// What every vCPU thread shares.
pub(crate) struct Ctx {
    pub(crate) cfg: Config,
    pub(crate) mem: Memory,
    tsc_hz: f64,
    efds: Vec<EventFd>,
    waker: Mutex<Option<mpsc::Sender<WakeRequest>>>,
    ple: Ple,
    cgroups: Mutex<Cgroups>,
    rng: Vec<AtomicU64>,
    /// Set by the monitor at stop; vCPU threads blocked in host waits return at once.
    stopping: AtomicBool,
    finished: AtomicUsize,
    /// vCPUs other than `idle` ones that have finished: before the stop flag, only one
    /// that failed. An `idle` vCPU (a VM's vCPU without a workload thread) finishes right
    /// after the start barrier; until 2026-12-05 (session 30) that ended every run with a
    /// spare vCPU at once.
    finished_busy: AtomicUsize,
    setup_failed: Mutex<Option<Error>>,
}

/// Outcome of one exit to the harness.
pub(crate) enum Next {
    Resume,
    Done,
}

impl Ctx {
    fn stopped(&self) -> bool {
        self.mem.get(GLOBAL + G_STOP as u64) != 0
    }

    /// Handles a port write of vCPU `v` (the same in KVM and thread mode).
    pub(crate) fn on_exit(&self, v: usize, port: u8) -> std::result::Result<Next, String> {
        match port {
            PORT_DONE => Ok(Next::Done),
            PORT_NULL => Ok(Next::Resume),
            PORT_PLE => {
                self.ple.on_spin(v);
                Ok(Next::Resume)
            }
            PORT_HALT => {
                if !self.stopped() {
                    self.schedule_wake(v);
                    while !self.efds[v].wait() {
                        if INTERRUPTED.load(SeqCst) || self.stopping.load(SeqCst) {
                            break;
                        }
                    }
                }
                if self.stopped() {
                    // woken by the stop, not the waker: its last sample is dropped later
                    self.mem
                        .set(slot_addr(v) + R_STAMP as u64, stop_stamp(rdtsc()));
                }
                Ok(Next::Resume)
            }
            PORT_IRQ_ARM => {
                // The interrupt comes from the waker, through the vCPU's eventfd, which is
                // its irqfd; the vCPU resumes at once and halts in the kernel until then.
                if !self.stopped() {
                    self.schedule_wake(v);
                }
                Ok(Next::Resume)
            }
            PORT_SLEEP => {
                let deadline = self.mem.get(slot_addr(v) + R_STAMP as u64);
                let now = rdtsc();
                if deadline > now && !self.stopped() {
                    let ns = ((deadline - now) as f64 / self.tsc_hz * 1e9) as u64;
                    let ts = libc::timespec {
                        tv_sec: (ns / 1_000_000_000) as i64,
                        tv_nsec: (ns % 1_000_000_000) as i64,
                    };
                    // SAFETY: valid timespec; the remaining-time pointer may be null.
                    unsafe {
                        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, std::ptr::null_mut())
                    };
                }
                if self.stopped() {
                    self.mem
                        .set(slot_addr(v) + R_STAMP as u64, stop_stamp(rdtsc()));
                }
                Ok(Next::Resume)
            }
            p => Err(format!("unexpected port write {p:#x}")),
        }
    }

    /// Asks the waker to wake vCPU `v` (write its eventfd) after a draw of its io latency
    /// (default 1 ms).
    fn schedule_wake(&self, v: usize) {
        let d = self.cfg.vcpus[v]
            .io
            .clone()
            .unwrap_or(crate::config::Dist::Fixed {
                value_ns: 1_000_000,
            });
        let u = self.next_uniform(v);
        let at = Instant::now() + Duration::from_nanos(d.draw(u));
        if let Some(tx) = self.waker.lock().unwrap().as_ref() {
            let _ = tx.send(WakeRequest { vcpu: v, at });
        }
    }

    fn next_uniform(&self, v: usize) -> f64 {
        // xorshift64*
        let s = &self.rng[v];
        let mut x = s.load(Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.store(x, Relaxed);
        (x.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A vCPU backend: runs the guest program of vCPU `v` until it is done.
pub(crate) trait VcpuRunner: Send {
    fn run(&mut self, ctx: &Ctx, v: usize) -> std::result::Result<(), String>;
    fn kvm_stats(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
    fn steal_ns(&self, _ctx: &Ctx, _v: usize) -> Option<u64> {
        None
    }
}

fn validate(cfg: &Config) -> Result<()> {
    let n = cfg.vcpus.len();
    if n == 0 || n > MAX_VCPUS {
        return Err(Error::Config(format!("{n} vCPUs: must be 1..{MAX_VCPUS}")));
    }
    if cfg.duration_ns == 0 {
        return Err(Error::Config("duration must be > 0".into()));
    }
    if !(1_000..=1_000_000_000).contains(&cfg.monitor_poll_ns) {
        return Err(Error::Config(format!(
            "monitor_poll_ns {}: must be 1000 (1 us) .. 1000000000 (1 s)",
            cfg.monitor_poll_ns
        )));
    }
    for (i, v) in cfg.vcpus.iter().enumerate() {
        if v.group >= MAX_GROUPS {
            return Err(Error::Config(format!(
                "vcpus[{i}].group {} >= {MAX_GROUPS}",
                v.group
            )));
        }
        if let Some(c) = &v.policy.cgroup {
            if !cfg.cgroups.iter().any(|g| &g.name == c) {
                return Err(Error::Config(format!(
                    "vcpus[{i}].policy.cgroup {c:?} is not defined"
                )));
            }
        }
        if let Some(a) = &v.policy.affinity {
            if a.is_empty() {
                return Err(Error::Config(format!(
                    "vcpus[{i}].policy.affinity is empty"
                )));
            }
        }
    }
    for (i, v) in cfg.vcpus.iter().enumerate() {
        if v.program == Program::PingPong {
            let members = cfg.vcpus.iter().filter(|w| w.group == v.group).count();
            if members != 2 {
                return Err(Error::Config(format!(
                    "vcpus[{i}]: a ping-pong group needs exactly 2 vCPUs, group {} has {members}",
                    v.group
                )));
            }
        }
    }
    for g in &cfg.cgroups {
        if g.name.is_empty()
            || !g
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::Config(format!(
                "cgroup name {:?}: letters, digits, - and _ only",
                g.name
            )));
        }
    }
    Ok(())
}

/// Runs one configuration.
pub fn run(cfg: Config) -> Result<RunResult> {
    validate(&cfg)?;
    let n = cfg.vcpus.len();
    let mut notice = None;
    let kvm = match cfg.mode {
        Mode::Threads => None,
        Mode::Kvm => Some(crate::vmm::Vm::open()?),
        Mode::Auto => match crate::vmm::Vm::open() {
            Ok(k) => Some(k),
            Err(e) => {
                notice = Some(format!("{e}; running the guest programs as plain host threads (no VM exits, no KVM stats or steal time)"));
                None
            }
        },
    };
    let mut vm = match kvm {
        Some(k) => Some(k.build(&cfg)?),
        None => None,
    };
    let mem = match &vm {
        Some(vm) => vm.memory(),
        None => Memory::anonymous(MEM_SIZE as usize)?,
    };
    let tsc_hz = vm
        .as_ref()
        .and_then(|v| v.tsc_hz())
        .unwrap_or_else(measure_tsc_hz);
    let ns_per_loop = measure_ns_per_loop(tsc_hz);

    // parameters
    let loops = |ns: u64| (ns as f64 / ns_per_loop).round() as u64;
    mem.set(GLOBAL + G_NTOTAL as u64, n as u64);
    for (i, v) in cfg.vcpus.iter().enumerate() {
        let s = slot_addr(i);
        mem.set(s + P_NCS as u64, loops(v.ncs_ns));
        mem.set(s + P_CS as u64, loops(v.cs_ns));
        mem.set(s + P_PLE as u64, cfg.ple.window.unwrap_or(u64::MAX).max(1));
        mem.set(
            s + P_SLEEP as u64,
            (v.sleep_ns as f64 * tsc_hz / 1e9) as u64,
        );
        mem.set(s + P_SAMPLES_END as u64, samples_addr(i) + SAMPLES_SIZE);
        let g = group_addr(v.group) + B_N as u64;
        let rank = mem.get(g);
        mem.set(s + P_ROLE as u64, rank & 1);
        mem.set(g, rank + 1);
    }

    let _signals = SignalGuard::install()?;
    let cgroups = Cgroups::create(&cfg.cgroups)?;
    let efds = (0..n).map(|_| EventFd::new()).collect::<Result<Vec<_>>>()?;
    if let Some(vm) = &vm {
        vm.route_interrupts(&efds.iter().map(|e| e.0).collect::<Vec<_>>())?;
    }
    let (wtx, wrx) = mpsc::channel();
    let ctx = Arc::new(Ctx {
        mem,
        tsc_hz,
        efds,
        waker: Mutex::new(Some(wtx)),
        ple: Ple::new(cfg.ple.policy, Duration::from_nanos(cfg.ple.boost_ns), n),
        cgroups: Mutex::new(cgroups),
        rng: (0..n)
            .map(|i| AtomicU64::new((cfg.seed ^ 0x9E3779B97F4A7C15).wrapping_mul(i as u64 + 1) | 1))
            .collect(),
        stopping: AtomicBool::new(false),
        finished: AtomicUsize::new(0),
        finished_busy: AtomicUsize::new(0),
        setup_failed: Mutex::new(None),
        cfg,
    });

    let waker = {
        let ctx = ctx.clone();
        std::thread::Builder::new()
            .name("vcpulab-waker".into())
            .spawn(move || waker_thread(ctx, wrx))
            .map_err(|e| Error::Os(format!("spawn waker: {e}"), 0))?
    };

    let runners: Vec<Box<dyn VcpuRunner>> = match vm.as_mut() {
        Some(vm) => vm.take_vcpus(),
        None => (0..n)
            .map(|_| Box::new(crate::threads::HostThread) as Box<dyn VcpuRunner>)
            .collect(),
    };
    let ready = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::new();
    for (v, mut runner) in runners.into_iter().enumerate() {
        let (tctx, ready) = (ctx.clone(), ready.clone());
        let h = std::thread::Builder::new()
            .name(format!("vcpu{v}"))
            .spawn(move || {
                let ctx = tctx;
                let tid = policy::gettid();
                let setup = (|| -> Result<ThreadGuard> {
                    let g = ThreadGuard::apply_current(&ctx.cfg.vcpus[v].policy)?;
                    if let Some(c) = &ctx.cfg.vcpus[v].policy.cgroup {
                        ctx.cgroups.lock().unwrap().place(c, tid)?;
                    }
                    if ctx.cfg.vcpus[v].program == Program::Timer {
                        // SAFETY: prctl(PR_SET_TIMERSLACK) on the calling thread: hrtimer-like sleeps.
                        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
                    }
                    Ok(g)
                })();
                let guard = match setup {
                    Ok(g) => Some(g),
                    Err(e) => {
                        ctx.setup_failed.lock().unwrap().get_or_insert(e);
                        None
                    }
                };
                if let Ok(saved) = Saved::capture(tid) {
                    let _ = ctx.ple.base[v].set(saved);
                }
                ctx.ple.tids[v].store(tid, SeqCst);
                let s0 = ThreadStats::read(tid);
                let k0 = runner.kvm_stats();
                ready.wait();
                let outcome = if ctx.setup_failed.lock().unwrap().is_some() {
                    ctx.mem.set(GLOBAL + G_STOP as u64, 1);
                    Err("not started: host policy setup failed".to_string())
                } else {
                    runner.run(&ctx, v)
                };
                if ctx.cfg.vcpus[v].program != Program::Idle || outcome.is_err() {
                    ctx.finished_busy.fetch_add(1, SeqCst);
                }
                ctx.finished.fetch_add(1, SeqCst);
                let s1 = ThreadStats::read(tid);
                let k1 = runner.kvm_stats();
                let steal = runner.steal_ns(&ctx, v);
                ctx.ple.finished(v);
                drop(guard); // restore this thread's policy
                drop(runner);
                (tid, s1.delta(&s0), stats_delta(&k0, &k1), steal, outcome)
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                ctx.mem.set(GLOBAL + G_STOP as u64, 1);
                *ctx.setup_failed.lock().unwrap() =
                    Some(Error::Os(format!("spawn vCPU thread: {e}"), 0));
                break;
            }
        }
    }
    let mut warnings = Vec::new();
    let monitor = if handles.len() == n {
        ready.wait();
        monitor(&ctx, &handles)
    } else {
        Ok(None)
    };

    // wind down: stop everything that may still be waiting, join, restore
    ctx.mem.set(GLOBAL + G_STOP as u64, 1);
    ctx.stopping.store(true, SeqCst);
    release_halted(&ctx);
    let mut per = Vec::new();
    for h in handles {
        per.push(
            h.join()
                .map_err(|_| Error::Os("a vCPU thread panicked".into(), 0))?,
        );
    }
    ctx.ple.expire(true);
    *ctx.waker.lock().unwrap() = None;
    let _ = waker.join();
    let restored = ctx.cgroups.lock().unwrap().cleanup();

    if let Some(e) = ctx.setup_failed.lock().unwrap().take() {
        return Err(e);
    }
    let warm = monitor?;
    if INTERRUPTED.load(SeqCst) {
        return Err(Error::Interrupted);
    }

    let mem = &ctx.mem;
    let mut out = RunResult {
        notice,
        tsc_hz,
        ns_per_loop,
        duration_s: ctx.cfg.duration_ns as f64 / 1e9,
        cgroup_version: crate::cgroup::version(),
        restored,
        ..Default::default()
    };
    out.mode = if out.notice.is_some() || ctx.cfg.mode == Mode::Threads {
        "threads"
    } else {
        "kvm"
    };
    let (mut t_min, mut t_max) = (u64::MAX, 0u64);
    for (v, (tid, st, ks, steal, outcome)) in per.into_iter().enumerate() {
        let s = slot_addr(v);
        let (t0, t1) = (mem.get(s + R_TSTART as u64), mem.get(s + R_TEND as u64));
        t_min = t_min.min(t0);
        t_max = t_max.max(t1);
        let end = mem
            .get(s + R_SAMPLES as u64)
            .clamp(samples_addr(v), samples_addr(v) + SAMPLES_SIZE);
        // a sample taken after the stop woke the vCPU (`stop_stamp`) wraps around: drop it
        let samples: Vec<f64> = (0..(end - samples_addr(v)) / 8)
            .map(|k| mem.get(samples_addr(v) + 8 * k))
            .filter(|&ticks| is_latency(ticks, tsc_hz))
            .map(|ticks| ticks as f64 / tsc_hz * 1e9)
            .collect();
        let exit = match &outcome {
            Ok(()) => "done".to_string(),
            Err(e) => e.clone(),
        };
        if let Err(e) = outcome {
            return Err(Error::GuestFault { vcpu: v, exit: e });
        }
        out.vcpus.push(VcpuResult {
            index: v,
            program: ctx.cfg.vcpus[v].program.name(),
            group: ctx.cfg.vcpus[v].group,
            tid,
            ops: mem.get(s + R_OPS as u64),
            warm_ops: warm.as_ref().map(|w| w.ops[v]),
            wall_s: t1.saturating_sub(t0) as f64 / tsc_hz,
            spins: mem.get(s + R_SPINS as u64),
            ple_exits: mem.get(s + R_PLE as u64),
            samples_ns: samples,
            cpu_time_s: st.run_ns as f64 / 1e9,
            wait_time_s: st.wait_ns as f64 / 1e9,
            timeslices: st.timeslices,
            voluntary_switches: st.voluntary,
            involuntary_switches: st.involuntary,
            steal_time_s: steal.map(|s| s as f64 / 1e9),
            kvm_stats: ks,
            exit,
        });
    }
    out.wall_s = t_max.saturating_sub(t_min) as f64 / tsc_hz;
    out.warm_wall_s = warm.map(|w| w.wall_s);
    let p = &ctx.ple;
    out.ple = PleResult {
        exits: p.exits.load(SeqCst),
        yields: p.yields.load(SeqCst),
        boosts: p.boosts.load(SeqCst),
        migrations: p.migrations.load(SeqCst),
        errors: p.errors.load(SeqCst),
    };
    if p.errors.load(SeqCst) > 0 {
        warnings.push(format!(
            "{} PLE boost/restore calls failed",
            p.errors.load(SeqCst)
        ));
    }
    out.warnings = warnings;
    Ok(out)
}

/// What the monitor read at the end of a warm-up.
struct WarmMark {
    /// Every vCPU's op count then (the programs publish it after each op).
    ops: Vec<u64>,
    /// Host time from then to the stop flag.
    wall_s: f64,
}

/// Waits for the start barrier, runs for the duration (reading the op counts at the end
/// of the warm-up, if there is one), sets the stop flag, waits for the vCPUs (kicking them
/// out of KVM_RUN if they overrun). Handles Ctrl-C.
fn monitor<T>(ctx: &Ctx, handles: &[std::thread::JoinHandle<T>]) -> Result<Option<WarmMark>> {
    let n = ctx.cfg.vcpus.len() as u64;
    let t_begin = Instant::now();
    let limit = Duration::from_nanos(ctx.cfg.timeout_ns);
    let step = Duration::from_nanos(monitor_step_ns(&ctx.cfg));
    // 1. everyone at the in-guest start barrier
    loop {
        if ctx.setup_failed.lock().unwrap().is_some() || INTERRUPTED.load(SeqCst) {
            return Ok(None);
        }
        if ctx.mem.get(GLOBAL + G_ARRIVED as u64) >= n {
            break;
        }
        if ctx.finished.load(SeqCst) > 0 {
            break; // a vCPU failed before the start; its error is reported
        }
        if t_begin.elapsed() > limit.min(Duration::from_secs(10)) {
            ctx.mem.set(GLOBAL + G_STOP as u64, 1);
            kick(ctx, handles);
            return Err(Error::Timeout(format!(
                "only {} of {n} vCPUs reached the start barrier",
                ctx.mem.get(GLOBAL + G_ARRIVED as u64)
            )));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    // 2. the measured interval, its warm-up first
    let t0 = Instant::now();
    let dur = Duration::from_nanos(ctx.cfg.duration_ns);
    let warmup = Duration::from_nanos(ctx.cfg.warmup_ns);
    let mut mark: Option<(Vec<u64>, Instant)> = None;
    // When the warm-up ends, while its mark is still to be taken.
    let mut mark_due = (!warmup.is_zero()).then_some(warmup);
    while t0.elapsed() < dur && !INTERRUPTED.load(SeqCst) && ctx.finished_busy.load(SeqCst) == 0 {
        ctx.ple.expire(false);
        if mark_due.is_some_and(|at| t0.elapsed() >= at) {
            let ops = (0..n as usize)
                .map(|v| ctx.mem.get(slot_addr(v) + R_OPS as u64))
                .collect();
            mark = Some((ops, Instant::now()));
            mark_due = None;
        }
        let next = mark_due.map_or(dur, |at| at.min(dur));
        std::thread::sleep(step.min(next.saturating_sub(t0.elapsed())));
    }
    // 3. stop and wait for the vCPUs to leave their loops (the warm interval ends with the
    // stop flag: ops still finish until each vCPU sees it)
    ctx.mem.set(GLOBAL + G_STOP as u64, 1);
    let warm = mark.map(|(ops, at)| WarmMark {
        ops,
        wall_s: at.elapsed().as_secs_f64(),
    });
    ctx.stopping.store(true, SeqCst);
    ctx.ple.expire(true);
    release_halted(ctx);
    let grace = Duration::from_secs(5).max(dur);
    let t1 = Instant::now();
    while ctx.finished.load(SeqCst) < n as usize {
        if t1.elapsed() > grace || t_begin.elapsed() > limit {
            kick(ctx, handles);
            return Err(Error::Timeout(format!(
                "{} of {n} vCPUs did not stop within {:.1} s after the stop flag (guest runaway?)",
                n as usize - ctx.finished.load(SeqCst),
                grace.as_secs_f64()
            )));
        }
        ctx.ple.expire(false);
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(warm)
}

/// How long the monitor sleeps between its checks: the config's period, but at most a PLE
/// boost's length when the policy boosts, since the monitor is what ends an expired boost.
fn monitor_step_ns(cfg: &Config) -> u64 {
    match cfg.ple.policy {
        PlePolicy::Boost | PlePolicy::BoostFifo | PlePolicy::Migrate => {
            cfg.monitor_poll_ns.min(cfg.ple.boost_ns.max(1))
        }
        PlePolicy::None | PlePolicy::Yield => cfg.monitor_poll_ns,
    }
}

/// Interrupts every vCPU thread (KVM_RUN returns EINTR; blocked reads too) until all
/// have finished.
fn kick<T>(ctx: &Ctx, handles: &[std::thread::JoinHandle<T>]) {
    use std::os::unix::thread::JoinHandleExt;
    ctx.stopping.store(true, SeqCst);
    KICKED.store(true, SeqCst);
    for _ in 0..1000 {
        if ctx.finished.load(SeqCst) >= handles.len() {
            return;
        }
        for h in handles {
            if !h.is_finished() {
                // SAFETY: the pthread is alive (not finished, not joined); the signal has
                // an async-signal-safe handler installed by SignalGuard.
                unsafe { libc::pthread_kill(h.as_pthread_t(), kick_signal()) };
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) fn set_immediate_exit_ptr(p: *mut u8) {
    IMMEDIATE_EXIT.with(|c| c.set(p));
}

#[allow(dead_code)]
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(SeqCst)
}

pub(crate) fn kicked() -> bool {
    KICKED.load(SeqCst)
}

pub(crate) fn stopping(ctx: &Ctx) -> bool {
    ctx.stopping.load(SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two spinners exit at once, over and over, under `migrate` (affinity changes need no
    /// privilege), on three busy vCPU threads: each exit ends one boost and begins the
    /// next. Between rounds every thread is as the state says, moved to the CPU of the
    /// spinner that chose it, no call fails, and once the last boost has ended every thread
    /// has its own affinity back. This checks the bookkeeping, not the order race `sync`
    /// guards against: with three candidates a round never re-chooses the vCPU whose boost
    /// it ended, so a restore cannot land after a newer apply here. Leaving out the
    /// restores fails it.
    #[test]
    fn ple_calls_leave_every_thread_as_the_state_says() {
        let cpus = policy::get_affinity(policy::gettid()).unwrap();
        if cpus.len() < 2 {
            return; // one CPU: every move is a no-op
        }
        // Stops the busy threads however the test ends (a failed assertion too).
        struct StopOnDrop(Arc<AtomicBool>);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let _stop_on_drop = StopOnDrop(stop.clone());
        let (tx, rx) = mpsc::channel();
        let parked: Vec<_> = (0..3)
            .map(|_| {
                let (tx, stop) = (tx.clone(), stop.clone());
                std::thread::spawn(move || {
                    tx.send(policy::gettid()).unwrap();
                    // Busy, as a vCPU: moving a running thread takes the stopper (tens of
                    // us), which lets the two exits' calls overlap.
                    while !stop.load(SeqCst) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let tids: Vec<i32> = (0..3).map(|_| rx.recv().unwrap()).collect();
        let ple = Ple::new(PlePolicy::Migrate, Duration::from_millis(1), 3);
        for (v, &tid) in tids.iter().enumerate() {
            ple.base[v].set(Saved::capture(tid).unwrap()).unwrap();
            ple.tids[v].store(tid, SeqCst);
        }
        let ple = Arc::new(ple);
        // Rounds: both spinners exit at once, then, with no call in flight, every thread
        // must be as the state says: the active boost's moved to one CPU, the others back.
        let rounds = 150;
        let gate = Arc::new(Barrier::new(3));
        let failed = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..2)
            .map(|k| {
                let (ple, gate, cpu, failed) = (ple.clone(), gate.clone(), cpus[k], failed.clone());
                std::thread::spawn(move || {
                    // Pinned to one CPU each (a failure only leaves them unpinned).
                    let _ = policy::set_affinity(policy::gettid(), &[cpu]);
                    for round in 0..rounds {
                        gate.wait();
                        // The second spinner exits 0-120 us after the first, so that the
                        // two exits' calls overlap in various ways.
                        let lag = Duration::from_micros(if k == 1 { (round * 7) % 120 } else { 0 });
                        let t = Instant::now();
                        while t.elapsed() < lag {
                            std::hint::spin_loop();
                        }
                        // A panic would leave the others waiting at the gate: note it instead.
                        let exit = std::panic::AssertUnwindSafe(|| ple.on_spin(3)); // not one of the three
                        if std::panic::catch_unwind(exit).is_err() {
                            failed.store(true, SeqCst);
                        }
                        gate.wait();
                    }
                })
            })
            .collect();
        let mut stale = Vec::new();
        for round in 0..rounds {
            gate.wait();
            gate.wait();
            let active = ple
                .state
                .lock()
                .unwrap()
                .active
                .as_ref()
                .map(|b| (b.vcpu, b.cpu));
            for (v, &tid) in tids.iter().enumerate() {
                let now = policy::get_affinity(tid).unwrap();
                let want = match active {
                    Some((a, cpu)) if a == v => vec![cpu],
                    _ => ple.base[v].get().unwrap().affinity.clone(),
                };
                if now != want {
                    stale.push((round, v, now));
                }
            }
        }
        for s in spinners {
            s.join().unwrap();
        }
        assert!(!failed.load(SeqCst), "an exit panicked");
        assert!(
            stale.is_empty(),
            "threads not as the state says (round, vCPU, affinity): {stale:?}"
        );
        ple.expire(true);
        assert_eq!(ple.errors.load(SeqCst), 0);
        assert_eq!(ple.exits.load(SeqCst), 2 * rounds);
        assert_eq!(ple.migrations.load(SeqCst), 2 * rounds); // every exit chose one
        for (v, &tid) in tids.iter().enumerate() {
            let base = &ple.base[v].get().unwrap().affinity;
            assert_eq!(&policy::get_affinity(tid).unwrap(), base, "vCPU {v}");
        }
        stop.store(true, SeqCst);
        for t in parked {
            t.join().unwrap();
        }
    }

    /// The sample a guest takes after the stop woke it must be dropped however long the
    /// host has been up; a real wake-up latency must be kept.
    #[test]
    fn a_sample_after_the_stop_is_dropped_on_a_host_up_for_any_time() {
        let tsc_hz = 2.6e9;
        for uptime_s in [0.5, 200.0, 999.0, 1e4, 1e6] {
            let stop = (uptime_s * tsc_hz) as u64;
            for later_s in [0.0, 40e-6, 0.5] {
                let sample = (stop + (later_s * tsc_hz) as u64).wrapping_sub(stop_stamp(stop));
                assert!(
                    !is_latency(sample, tsc_hz),
                    "uptime {uptime_s} s, {later_s} s after the stop"
                );
            }
        }
        // A real latency is kept up to the filter's 1,000 s.
        assert!(is_latency((40e-6 * tsc_hz) as u64, tsc_hz));
        assert!(is_latency((999.0 * tsc_hz) as u64, tsc_hz));
        assert!(!is_latency((1001.0 * tsc_hz) as u64, tsc_hz));
    }

    /// The monitor wakes every 500 us unless the caller says otherwise (calibrate's noise
    /// runs do), and a period outside 1 us .. 1 s is refused with its key.
    #[test]
    fn the_monitor_period_has_a_default_and_bounds() {
        let cfg = |extra: &str| -> Config {
            serde_json::from_str(&format!(
                r#"{{"duration_ns": 1000000, "vcpus": [{{"program": "compute"}}]{extra}}}"#
            ))
            .unwrap()
        };
        assert_eq!(cfg("").monitor_poll_ns, 500_000);
        assert!(validate(&cfg("")).is_ok());
        assert!(validate(&cfg(r#", "monitor_poll_ns": 100000000"#)).is_ok());
        for ok in ["1000", "1000000000"] {
            assert!(validate(&cfg(&format!(r#", "monitor_poll_ns": {ok}"#))).is_ok());
        }
        for bad in ["999", "1000000001"] {
            let e = validate(&cfg(&format!(r#", "monitor_poll_ns": {bad}"#))).unwrap_err();
            assert!(e.to_string().contains("monitor_poll_ns"), "{e}");
        }
        // The monitor ends expired boosts, so a boosting policy caps its sleep at a boost.
        let slow = r#", "monitor_poll_ns": 100000000"#;
        assert_eq!(monitor_step_ns(&cfg(slow)), 100_000_000);
        for (policy, step) in [
            ("yield", 100_000_000),
            ("boost", 1_000_000),
            ("migrate", 1_000_000),
        ] {
            let c = cfg(&format!(
                r#"{slow}, "ple": {{"window": 4096, "policy": "{policy}"}}"#
            ));
            assert_eq!(monitor_step_ns(&c), step, "{policy}");
        }
    }
}
