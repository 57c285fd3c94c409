//! `credit` — the Xen Credit scheduler ("credit1") as of Xen 4.4.
//!
//! ## Policy (xen/common/sched_credit.c, Xen 4.4)
//! Each VM is a Xen domain with a `weight` (default 256) and a `cap` (percent of one pCPU
//! the whole domain may use; 0 = no cap). Its vCPUs are scheduled on per-pCPU run queues.
//!
//! **Credits.** CPU time is counted in credits: 10 per millisecond (one credit = 100 us).
//! The running vCPU pays for the time it ran at every tick and at every scheduling
//! decision on its pCPU; the part of a credit not yet paid is carried to the next charge.
//!
//! **Active vCPUs.** Only *active* vCPUs earn credits. A vCPU becomes active when a tick
//! finds it running, and stops being active when an accounting pass finds it holding more
//! than one slice's worth of credit (`tslice_ms` x 10 = 300): its credit is then halved.
//! Accounting recomputes the priority of active vCPUs only, so an inactive vCPU keeps the
//! priority it had (UNDER, or BOOST after a wake-up) whatever it burns.
//!
//! **Accounting** (the master ticker, every `tslice_ms`, 30 ms). The credit of the period is
//! `tslice_ms` x 10 x pCPUs (300 per pCPU). Domains with active vCPUs are visited in the
//! order of the active-domain list. A domain's fair share is the total x its weight x its
//! active vCPUs / the sum of weight x active vCPUs over all active domains (rounded up).
//! It is limited to a peak of 300 per active vCPU (when last period's credit balance, the
//! sum of all active vCPUs' credits, was negative, the peak and the total both grow by the
//! shortfall, shared by weight), and for a capped domain to cap x 300 / 100. What a
//! limited domain cannot take is added to the total so that the domains after it in the
//! list share it; a limited domain met after one that was not limited moves to the head
//! of the list, so that next period its leftover reaches every other domain. The share is
//! split evenly over the domain's active vCPUs (rounded up), and for each vCPU:
//! - credit += share;
//! - credit < 0: priority OVER; a vCPU of a capped domain whose credit is below minus its
//!   slice of the cap (cap credits / active vCPUs, rounded up) is *parked* (paused: taken
//!   off its pCPU or run queue until unparked); credit is clipped at -300;
//! - credit >= 0: priority UNDER; a parked vCPU is unparked (woken, without a boost); a
//!   credit above 300 makes the vCPU inactive with half its credit.
//!
//! The resulting priorities reorder the run queues only at each pCPU's next tick.
//!
//! **Priorities**: BOOST (0) > UNDER (-1) > OVER (-2) > IDLE (-64). A run queue is kept in
//! priority order: a vCPU is inserted after every vCPU of equal or higher priority, so
//! equal priorities are served first in, first out, and a preempted vCPU goes behind its
//! equals.
//!
//! **Tick** (every `tslice_ms` / 3, 10 ms, on each busy pCPU; ticks of all pCPUs are on one
//! grid): the running vCPU loses BOOST, pays its credits and, if inactive, becomes active.
//! If it was already active, the placement rule below is asked where it would best run;
//! if that is another pCPU, the vCPU is migrated there (it leaves its pCPU, which
//! reschedules). Then the run queue is resorted if an accounting pass happened since the
//! last sort: UNDER-or-better vCPUs move ahead of OVER ones, the order otherwise kept.
//!
//! **Wake-up** (`csched_vcpu_wake`): a vCPU waking while UNDER, and not parked, becomes
//! BOOST. It is queued on the pCPU it last ran on (Credit picks no pCPU at wake-up) and
//! that pCPU is "tickled" (`__runq_tickle`):
//! - if it is idle, or if no pCPU at all is idle and the waker outranks the vCPU running
//!   there, it reschedules (the waker preempts, subject to the rate limit);
//! - otherwise, if some pCPU is idle: if the waker may run on one, the next such idle
//!   pCPU after the one tickled last reschedules (and steals the waker, below); if it may
//!   run on none and outranks the running vCPU, the running vCPU is marked for migration
//!   ("kicked away") and the pCPU reschedules;
//! - otherwise nothing happens: the waker waits its turn.
//!
//! **Scheduling** (`csched_schedule`): the running vCPU pays its credits. If it is still
//! runnable (not blocked, parked or marked for migration) and has run less than
//! `ratelimit_us` since it was put on the pCPU, it continues for another `ratelimit_us`.
//! Otherwise it is queued by priority and the head of the queue is taken. If that head is
//! OVER (or the queue is empty), the pCPU first tries to steal: it walks the busy pCPUs,
//! those of its own NUMA node first in id order and then each following node's, and takes
//! the first queued vCPU of strictly higher priority that may run on it (scanning each
//! queue from its head and giving up on a queue at its first vCPU not of higher
//! priority). The chosen vCPU runs for `tslice_ms`. An idle pCPU arms no timer: it sleeps
//! until tickled.
//!
//! **Migration** (`vcpu_migrate`): a vCPU that left its pCPU marked for migration gets a
//! pCPU from the placement rule and is then woken there as above (so an UNDER vCPU is
//! boosted: Xen 4.4 has no flag to spare migrating vCPUs the boost).
//!
//! **Placement** (`_csched_cpu_pick`): start from the vCPU's current pCPU (or the next one
//! its affinity allows). Candidates are the idle pCPUs it may use, plus its own pCPU when
//! nothing waits there (so a lone running vCPU does not count against its own pCPU). If
//! the start is not a candidate, take the next candidate. Then walk the other candidates
//! and move to one whose neighbourhood is idler: within a socket, a core with strictly
//! more idle SMT threads than the current one's core; across sockets, a socket with more
//! than twice as many idle pCPUs. Moving into a group takes the group's next idle pCPU
//! after the last one chosen there (`idle_bias`). The effect: idle cores before idle SMT
//! siblings, idle sockets before busy ones.
//!
//! ## Parameters
//! - `tslice_ms` (integer, ms, default 30, 1..1000): time slice and accounting period
//!   (`sched_credit_tslice_ms`); the tick is a third of it (the whole of it below 3 ms).
//! - `ratelimit_us` (integer, us, default 1000): minimum run before a still-runnable vCPU
//!   is descheduled (`sched_ratelimit_us`); 0 turns it off, else 100..500000 and at most
//!   the slice.
//! - `tslice_us` (integer, us, default 0 = off, 1..1000000; not with `tslice_ms`): PvCC's
//!   patch (Tsujimoto et al., Middleware'24; `build-xen/pvcc/pvcc.patch` of the artifact
//!   github.com/sslab-keio/PvCC, on Xen 4.12.1): the slice is given in microseconds
//!   (`sched_credit_tslice_us`), credits are one per microsecond
//!   (`CSCHED_CREDITS_PER_USEC` 1, so a slice is worth `tslice_us` credits), ticks per
//!   slice stay 3 unless the slice is under 3 us, and the rate limit's minimum drops to
//!   1 us (`XEN_SYSCTL_SCHED_RATELIMIT_MIN` 1). Everything else is Credit as below.
//! - Per VM: `weight` (1..65535, default 256) and `cap` (percent of one pCPU, default 0).
//!
//! ## Sources
//! `xen/common/sched_credit.c`, read in two later copies: one of the Xen 4.5 era (soft
//! affinity; the tickle kicks the running vCPU away without checking it has an idle pCPU
//! to go to; no flag sparing migrating vCPUs the boost; a rate-limited vCPU gets a whole
//! `ratelimit_us`) and one of the 4.7 era (which adds those refinements and
//! `CSCHED_MIN_TIMER`). Xen 4.4 is taken as the 4.5 copy with NUMA node affinity in place
//! of soft affinity (node affinity came in 4.3, soft affinity replaced it in 4.5).
//! Constants: `CSCHED_CREDITS_PER_MSEC` 10, `CSCHED_TICKS_PER_TSLICE` 3,
//! `CSCHED_DEFAULT_TSLICE_MS` 30, `CSCHED_DEFAULT_WEIGHT` 256, rate limit 1000 us by
//! default (`XEN_SYSCTL_SCHED_RATELIMIT_*`: 100..500000), tslice 1..1000 ms,
//! `vcpu_migration_delay` 0 (no cache-hot test when stealing), `tickle_one_idle_cpu` on.
//!
//! ## Deviations
//! - NUMA (Xen 4.3+ with xl's automatic placement, on by default): on a host with more
//!   than one node, each VM whose vCPUs are unpinned and fit on one node gets, in VM order,
//!   the node with the fewest vCPUs placed so far as its node affinity (`numa_place`; xl
//!   compares free memory next, which is not modelled, so ties go to the lower node).
//!   Placement, tickling and stealing then take two balance steps: first only pCPUs of the
//!   node affinity (placement settles there only on an idle pCPU; stealing walks every
//!   peer for vCPUs whose node affinity holds the stealer), then the whole affinity. The
//!   rules are read from the 4.5-era soft-affinity copy, whose steps are the 4.4 node-
//!   affinity steps renamed; 4.4's exact peer order when stealing was not available, and
//!   the own node first is kept. Guest memory itself is not modelled (no remote-access
//!   cost beyond the migration's cache refill).
//! - Ticks of all pCPUs share one grid (upstream aligns a pCPU's ticker to the tick period
//!   when it resumes from idle); an idle pCPU's tick, which only resorts an empty queue,
//!   is not simulated. Accounting runs half a tick after a tick (upstream: whatever phase
//!   the master ticker got at boot), so the two never coincide.
//! - The cursor of idle pCPUs to tickle is one for the host (upstream: one per waking
//!   pCPU), and it cycles over the idle pCPUs the waker may use (the 4.5 copy cycles over
//!   all idle pCPUs, which can tickle one that cannot take the waker).
//! - The sub-credit remainder is carried in nanoseconds (upstream keeps it twice: in a
//!   residual and in the unpaid part of the run, a slight overcharge); accounting
//!   arithmetic is 64-bit (upstream's 32-bit products can overflow on very large hosts).
//! - Initial placement: the i-th vCPU of the host starts on the i-th pCPU of its affinity.
//! - Not modelled: yield (`SCHEDOP_yield`), tasklets, dom0, cpupools, failed trylocks
//!   while stealing, CPU hotplug, `sched_smt_power_savings`.
//! - Host threads that are not vCPUs belong to their VM's domain (an unowned one to one
//!   extra domain, weighted by its first thread's weight, uncapped).
//!
//! ## Files
//! This file holds the parameters, the state and the ops (wake-up and tickle, scheduling,
//! the tick, parking, migration, the invariants). Beside it, in `credit/`:
//! `accounting.rs` (paying for run time, the accounting pass), `placement.rs` (NUMA
//! placement, `_csched_cpu_pick`, stealing), `policy.rs` (the `CreditPolicy` hooks and the
//! methods through which `flms`, `vslicer`, `vturbo` and `io-bound` reach Credit's state),
//! `pools.rs` (the static pCPU split `io-bound` and `vturbo` share) and `tests.rs`.

use super::{
    proportional_share_bound, Counters, CpuId, ParamInfo, ParamKind, Params, RunState, SchedCtx,
    SchedView, Scheduler, TaskId,
};
use crate::reader::{Res, Table};
use crate::time::{SimDuration, SimTime, NS_PER_MS};
use crate::topology::CpuSet;
use std::collections::VecDeque;

pub const DESCRIPTION: &str = "Xen 4.4 Credit (credit1): weights and caps by credits, BOOST/UNDER/OVER priorities, 30 ms slice, 1 ms rate limit, per-pCPU queues with stealing";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "tslice_ms",
        kind: ParamKind::Int,
        default: "30",
        help: "time slice and accounting period in ms (1-1000); the tick is a third of it",
    },
    ParamInfo {
        name: "ratelimit_us",
        kind: ParamKind::Int,
        default: "1000",
        help: "a still-runnable vCPU keeps its pCPU at least this long, in us (0 = off, else 100-500000, at most the slice; 1-500000 with tslice_us)",
    },
    ParamInfo {
        name: "tslice_us",
        kind: ParamKind::Int,
        default: "0",
        help: "PvCC's microsecond time slice (Middleware'24 artifact's patch to Xen 4.12.1), 1-1000000 us, in place of tslice_ms: credits are counted per us; 0 = off",
    },
];

/// Credits per millisecond of pCPU time (`CSCHED_CREDITS_PER_MSEC`).
pub const CREDITS_PER_MSEC: i64 = 10;
/// The pCPU time one credit pays for (100 us).
pub const TIME_PER_CREDIT: SimDuration = SimDuration::from_ns(NS_PER_MS / CREDITS_PER_MSEC as u64);
/// Ticks per slice (`CSCHED_TICKS_PER_TSLICE`); one for slices under 3 ms.
const TICKS_PER_TSLICE: u64 = 3;
/// PvCC's patch counts one credit per microsecond (`CSCHED_CREDITS_PER_USEC`).
const PVCC_TIME_PER_CREDIT: SimDuration = SimDuration::from_us(1);

/// Priorities, upstream's numbers: higher runs first.
pub const PRI_BOOST: i8 = 0;
pub const PRI_UNDER: i8 = -1;
pub const PRI_OVER: i8 = -2;
pub const PRI_IDLE: i8 = -64;

/// The tick of a `[scheduler]` table's parameters, in ns (for run-length estimates).
pub fn tick_ns(params: &toml::Table) -> u64 {
    let int = |k: &str| params.get(k).and_then(|v| v.as_integer());
    match int("tslice_us").filter(|&us| us > 0) {
        Some(us) => tick_of(us.clamp(1, 1_000_000) as u64, SimDuration::from_us(1)).ns(),
        None => {
            let ms = int("tslice_ms").unwrap_or(30).clamp(1, 1000) as u64;
            tick_of(ms, SimDuration::from_ms(1)).ns()
        }
    }
}

/// The tick for a slice of `slice` units: a third of it, or all of it when `slice` is
/// under 3 (Xen compares the slice in ms, PvCC's patch in us).
fn tick_of(slice: u64, unit: SimDuration) -> SimDuration {
    let ticks = if slice < TICKS_PER_TSLICE {
        1
    } else {
        TICKS_PER_TSLICE
    };
    unit.saturating_mul(slice) / ticks
}

/// Checks the parameters beyond their types (Xen's sysctl limits; PvCC's with
/// `tslice_us`, where the rate limit's minimum is 1 us).
pub fn check_params(t: &Table) -> Res<()> {
    let tslice_us = match t.get("tslice_us") {
        Some(o) => {
            let us = o.u64_in(0, 1_000_000)?;
            if us > 0 && t.has("tslice_ms") {
                return o.err("tslice_ms and tslice_us both give the time slice; set only one");
            }
            us
        }
        None => 0,
    };
    let (tslice, min_rate, slice_text) = if tslice_us > 0 {
        (tslice_us, 1, format!("tslice_us = {tslice_us}"))
    } else {
        let ms = match t.get("tslice_ms") {
            Some(o) => o.u64_in(1, 1000)?,
            None => 30,
        };
        (ms * 1000, 100, format!("tslice_ms = {ms}"))
    };
    if let Some(o) = t.get("ratelimit_us") {
        let r = o.u64_in(0, 500_000)?;
        if r != 0 && r < min_rate {
            return o.err(format!(
                "{r} is below Xen's minimum of 100 us; use 0 to turn rate limiting off (PvCC's tslice_us allows down to 1 us)"
            ));
        }
        if r > tslice {
            return o.err(format!(
                "{r} us is longer than the time slice ({slice_text})"
            ));
        }
    } else if tslice < 1000 {
        // xl sched-credit passes the pool's rate limit with the new slice, and Xen
        // refuses a rate limit longer than the slice (csched_sys_cntl).
        if let Some(o) = t.get("tslice_us") {
            return o.err(format!(
                "{tslice_us} us is shorter than the default rate limit (ratelimit_us = 1000); set ratelimit_us to at most {tslice_us}, or 0"
            ));
        }
    }
    Ok(())
}

// Counters, one per decision branch.
super::counters::declare_counters! {
    WAKE_BOOST => "wake_boosted",
    WAKE_ALREADY_BOOST => "wake_already_boosted",
    WAKE_OVER => "wake_over_not_boosted",
    WAKE_PARKED => "wake_while_parked",
    TICKLE_IDLE => "tickle_idle_pcpu",
    TICKLE_PREEMPT => "tickle_preempt_lower",
    TICKLE_KICK_AWAY => "tickle_kick_away_lower",
    TICKLE_IDLER => "tickle_other_idler",
    TICKLE_NONE => "tickle_none",
    RATELIMITED => "ratelimit_kept_running",
    PICK_SAME => "pick_same_vcpu",
    PICK_LOCAL => "pick_local_queue",
    STEAL_SMT => "steal_smt_sibling",
    STEAL_SOCKET => "steal_same_socket",
    STEAL_OTHER_SOCKET => "steal_other_socket",
    STEAL_OTHER_NODE => "steal_other_node",
    PICK_IDLE => "pick_went_idle",
    SLICE_END => "slice_end",
    TICK => "tick",
    TICK_BOOST_END => "tick_boost_end",
    TICK_ACTIVATE => "tick_vcpu_activated",
    TICK_MIGRATE => "tick_migrate_running",
    MIGRATE_BOOST => "migrate_wake_boosted",
    MIGRATE_NO_BOOST => "migrate_wake_not_boosted",
    ACCT_RUN => "acct_run",
    ACCT_NO_WORK => "acct_no_work",
    ACCT_BOOST_END => "acct_boost_end",
    ACCT_DEACTIVATE => "acct_vcpu_deactivated",
    ACCT_CLIP => "acct_credit_clipped",
    ACCT_REORDER => "acct_domain_reordered",
    PARK => "park",
    UNPARK => "unpark",
    PICK_NODE_STEP => "cpu_pick_idle_in_node_affinity",
    STEAL_NODE_STEP => "steal_in_node_affinity_step",
}

mod accounting;
mod placement;
mod policy;
pub(super) mod pools;
#[cfg(test)]
mod tests;

use placement::{cycle, numa_place};
pub use policy::{CreditPolicy, Plain};

/// The Credit scheduler, changed by policy `P` at the hooks of `CreditPolicy` (`Plain`:
/// Credit itself). Its state is private to `credit`; variants reach it through the
/// methods in `credit/policy.rs`.
pub struct Credit<P: CreditPolicy = Plain> {
    /// What a Credit-derived scheduler changes (see `CreditPolicy`).
    policy: P,
    // global
    tslice: SimDuration,
    tick: SimDuration,
    /// The pCPU time one credit pays for: `TIME_PER_CREDIT`, or 1 us with `tslice_us`.
    time_per_credit: SimDuration,
    ratelimit: SimDuration,
    credits_per_tslice: i64,
    /// The period's credit: slice credits x pCPUs (`prv->credit`).
    credit: i64,
    credit_balance: i64,
    /// Accounting passes so far; a pCPU resorts its queue when it has not seen the latest.
    runq_sort: u64,
    next_acct: SimTime,
    /// Domains with active vCPUs, in list order.
    active_doms: Vec<u32>,
    idlers: CpuSet,
    last_tickle: usize,
    /// The first violation of the cap bound found by accounting (see `check`).
    violation: Option<String>,
    counters: Counters<NCOUNTERS>,
    // per pCPU
    runq: Vec<VecDeque<TaskId>>,
    curr: Vec<Option<TaskId>>,
    runq_sort_last: Vec<u64>,
    next_tick: Vec<Option<SimTime>>,
    slice_end: Vec<Option<SimTime>>,
    idle_bias: Vec<usize>,
    /// pCPUs of each NUMA node, in id order.
    node_cpus: Vec<Vec<usize>>,
    // per domain
    dom_weight: Vec<u32>,
    dom_cap: Vec<u32>,
    dom_vcpus: Vec<u32>,
    /// Active vCPUs, newest first (upstream adds at the list head).
    dom_active: Vec<VecDeque<TaskId>>,
    // per vCPU
    dom: Vec<u32>,
    credit_of: Vec<i64>,
    pri: Vec<i8>,
    processor: Vec<CpuId>,
    active: Vec<bool>,
    on_runq: Vec<bool>,
    parked: Vec<bool>,
    migrating: Vec<bool>,
    /// When it was put on its pCPU (for the rate limit).
    run_start: Vec<SimTime>,
    /// Paid for up to here while running.
    paid_to: Vec<SimTime>,
    /// Run time not yet paid for, below one credit.
    residual: Vec<SimDuration>,
    /// For an active vCPU of a capped domain: its credit after the last accounting pass
    /// and whether that pass left it parked (see `check`).
    cap_mark: Vec<Option<(i64, bool)>>,
    /// pCPUs each vCPU may use: its affinity, narrowed by the policy's pools.
    pool: Vec<CpuSet>,
    /// pCPUs whose queue may hold a vCPU (a superset: bits are cleared when a queue
    /// empties through the usual paths), so that balancers need not walk every pCPU.
    maybe_queued: CpuSet,
    /// Per domain: the pCPUs of its NUMA node affinity, from xl's automatic placement
    /// (None: no preference). See `numa_place`.
    node_aff: Vec<Option<CpuSet>>,
    /// Some domain has a node affinity (else the node step is skipped everywhere).
    any_node_aff: bool,
    /// Each vCPU's time slice: `tslice` unless the policy gives it another.
    slice_of: Vec<SimDuration>,
    /// Each vCPU's rate limit: `ratelimit` unless the policy gives it another.
    ratelimit_of: Vec<SimDuration>,
}

impl Credit<Plain> {
    pub fn new(p: &Params) -> Credit<Plain> {
        Credit::with_policy(p, Plain)
    }
}

impl<P: CreditPolicy> Credit<P> {
    pub fn with_policy(p: &Params, policy: P) -> Credit<P> {
        // PvCC's patch: the slice in us and one credit per us; else Xen's ms and 100 us.
        let (slice, unit, time_per_credit) = match p.given_int("tslice_us").filter(|&us| us > 0) {
            Some(us) => (
                us.clamp(1, 1_000_000) as u64,
                SimDuration::from_us(1),
                PVCC_TIME_PER_CREDIT,
            ),
            None => (
                p.int("tslice_ms").clamp(1, 1000) as u64,
                SimDuration::from_ms(1),
                TIME_PER_CREDIT,
            ),
        };
        let tslice = unit.saturating_mul(slice);
        Credit {
            policy,
            pool: vec![],
            node_aff: vec![],
            any_node_aff: false,
            maybe_queued: CpuSet::empty(1),
            slice_of: vec![],
            ratelimit_of: vec![],
            tslice,
            tick: tick_of(slice, unit),
            time_per_credit,
            ratelimit: SimDuration::from_us(p.int("ratelimit_us").max(0) as u64),
            credits_per_tslice: (tslice / time_per_credit) as i64,
            credit: 0,
            credit_balance: 0,
            runq_sort: 0,
            next_acct: SimTime::ZERO,
            active_doms: vec![],
            idlers: CpuSet::empty(1),
            last_tickle: 0,
            violation: None,
            counters: Counters::new(COUNTER_NAMES),
            runq: vec![],
            curr: vec![],
            runq_sort_last: vec![],
            next_tick: vec![],
            slice_end: vec![],
            idle_bias: vec![],
            node_cpus: vec![],
            dom_weight: vec![],
            dom_cap: vec![],
            dom_vcpus: vec![],
            dom_active: vec![],
            dom: vec![],
            credit_of: vec![],
            pri: vec![],
            processor: vec![],
            active: vec![],
            on_runq: vec![],
            parked: vec![],
            migrating: vec![],
            run_start: vec![],
            paid_to: vec![],
            residual: vec![],
            cap_mark: vec![],
        }
    }

    fn cur_pri(&self, cpu: usize) -> i8 {
        self.curr[cpu].map_or(PRI_IDLE, |t| self.pri[t as usize])
    }

    /// Xen's `vcpu_runnable`: wants to run and is neither paused (parked) nor migrating.
    fn xen_runnable(&self, view: &SchedView, t: TaskId) -> bool {
        view.state[t as usize] != RunState::Halted
            && !self.parked[t as usize]
            && !self.migrating[t as usize]
    }

    /// `__runq_insert`: after every vCPU of equal or higher priority.
    fn runq_insert(&mut self, t: TaskId, cpu: usize) {
        let p = self.pri[t as usize];
        let q = &self.runq[cpu];
        let pos = q
            .iter()
            .position(|&o| {
                let po = self.pri[o as usize];
                p > po || (p == po && P::runs_before(self, t, o, cpu))
            })
            .unwrap_or(q.len());
        self.runq[cpu].insert(pos, t);
        self.maybe_queued.insert(cpu);
        self.on_runq[t as usize] = true;
    }

    fn runq_remove(&mut self, t: TaskId) {
        let q = &mut self.runq[self.processor[t as usize] as usize];
        let pos = q
            .iter()
            .position(|&o| o == t)
            .expect("queued where it lives");
        q.remove(pos);
        if q.is_empty() {
            let cpu = self.processor[t as usize] as usize;
            self.maybe_queued.remove(cpu);
        }
        self.on_runq[t as usize] = false;
    }

    /// Arms the pCPU's timer for the earlier of its next tick and its slice end.
    fn arm(&self, ctx: &mut SchedCtx, cpu: usize) {
        let at = match (self.next_tick[cpu], self.slice_end[cpu]) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match at {
            Some(at) => ctx.set_timer(cpu as CpuId, at),
            None => ctx.cancel_timer(cpu as CpuId),
        }
    }

    fn next_grid_tick(&self, now: SimTime) -> SimTime {
        now.first_multiple_after(self.tick)
    }

    /// The wake-up path shared by wakes, unparks and migrations: boost, queue, tickle.
    /// Returns whether it boosted.
    fn enqueue_wake(&mut self, ctx: &mut SchedCtx, t: TaskId) -> bool {
        let ti = t as usize;
        let boost = self.pri[ti] == PRI_UNDER && !self.parked[ti];
        if boost {
            self.pri[ti] = PRI_BOOST;
        }
        let cpu = self.processor[ti] as usize;
        self.runq_insert(t, cpu);
        self.tickle(ctx, t);
        boost
    }

    /// `__runq_tickle` for a vCPU just queued on its pCPU.
    fn tickle(&mut self, ctx: &mut SchedCtx, new: TaskId) {
        let cpu = self.processor[new as usize] as usize;
        let cur_pri = self.cur_pri(cpu);
        let new_pri = self.pri[new as usize];
        if cur_pri == PRI_IDLE || (self.idlers.is_empty() && new_pri > cur_pri) {
            self.counters.bump(if cur_pri == PRI_IDLE {
                TICKLE_IDLE
            } else {
                TICKLE_PREEMPT
            });
            ctx.resched(cpu as CpuId);
        } else if !self.idlers.is_empty() {
            // Idlers in the node affinity first (the node-affinity balance step).
            let near = self
                .node_step_mask(new)
                .map(|m| self.idlers.intersect(&m))
                .filter(|m| !m.is_empty());
            let idle_mask = near.unwrap_or_else(|| self.idlers.intersect(&self.pool[new as usize]));
            if idle_mask.is_empty() && new_pri > cur_pri {
                let cur = self.curr[cpu].expect("a busy pCPU");
                self.migrating[cur as usize] = true;
                self.counters.bump(TICKLE_KICK_AWAY);
                ctx.resched(cpu as CpuId);
            } else if let Some(idler) = cycle(&idle_mask, self.last_tickle) {
                self.last_tickle = idler;
                self.counters.bump(TICKLE_IDLER);
                ctx.resched(idler as CpuId);
            } else {
                self.counters.bump(TICKLE_NONE);
            }
        } else {
            self.counters.bump(TICKLE_NONE);
        }
    }

    /// `vcpu_migrate` for a vCPU that left its pCPU marked for migration.
    fn migrate(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        self.migrating[t as usize] = false;
        let to = self.cpu_pick(ctx.view, t, true);
        self.processor[t as usize] = to as CpuId;
        if self.xen_runnable(ctx.view, t) {
            let boosted = self.enqueue_wake(ctx, t);
            self.counters.bump(if boosted {
                MIGRATE_BOOST
            } else {
                MIGRATE_NO_BOOST
            });
        }
    }

    /// `csched_tick` on a busy pCPU.
    fn tick(&mut self, ctx: &mut SchedCtx, cpu: usize) {
        self.counters.bump(TICK);
        if let Some(t) = self.curr[cpu] {
            let ti = t as usize;
            if self.pri[ti] == PRI_BOOST {
                self.pri[ti] = PRI_UNDER;
                self.counters.bump(TICK_BOOST_END);
            }
            self.burn(t, ctx.now);
            if !self.active[ti] {
                self.acct_start(t);
                self.counters.bump(TICK_ACTIVATE);
            } else if !self.migrating[ti] && self.cpu_pick(ctx.view, t, false) != cpu {
                self.migrating[ti] = true;
                self.counters.bump(TICK_MIGRATE);
                ctx.resched(cpu as CpuId);
            }
        }
        if self.runq_sort_last[cpu] != self.runq_sort {
            self.runq_sort_last[cpu] = self.runq_sort;
            // `csched_runq_sort`: UNDER-or-better ahead of OVER, otherwise in order.
            let pri = &self.pri;
            let (mut ahead, behind): (VecDeque<TaskId>, VecDeque<TaskId>) = self.runq[cpu]
                .iter()
                .partition(|&&t| pri[t as usize] >= PRI_UNDER);
            ahead.extend(behind);
            self.runq[cpu] = ahead;
        }
    }

    fn park(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        self.parked[t as usize] = true;
        self.counters.bump(PARK);
        match ctx.view.state[t as usize] {
            RunState::Running(c) => ctx.resched(c),
            _ if self.on_runq[t as usize] => self.runq_remove(t),
            _ => {}
        }
    }

    fn unpark(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        self.counters.bump(UNPARK);
        // Woken while still flagged parked, so not boosted; then the flag goes.
        if ctx.view.state[t as usize] == RunState::Runnable && !self.on_runq[t as usize] {
            self.enqueue_wake(ctx, t);
        }
        self.parked[t as usize] = false;
    }
}

impl<P: CreditPolicy> Scheduler for Credit<P> {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let v = ctx.view;
        let n = v.topo.ncpus();
        let nt = v.tasks.len();
        self.credit = self.credits_per_tslice * n as i64;
        self.idlers = CpuSet::full(n);
        self.runq = vec![VecDeque::new(); n];
        self.maybe_queued = CpuSet::empty(n);
        self.curr = vec![None; n];
        self.runq_sort_last = vec![0; n];
        self.next_tick = vec![None; n];
        self.slice_end = vec![None; n];
        self.idle_bias = vec![n - 1; n];
        self.node_cpus = vec![vec![]; v.topo.numa_nodes as usize];
        for c in 0..n {
            self.node_cpus[v.topo.cpus[c].node as usize].push(c);
        }
        let ndoms = v.tasks.iter().map(|t| t.vm + 1).max().unwrap_or(0) as usize;
        self.dom_weight = vec![0; ndoms];
        self.dom_cap = vec![0; ndoms];
        self.dom_vcpus = vec![0; ndoms];
        self.dom_active = vec![VecDeque::new(); ndoms];
        for t in &v.tasks {
            let d = t.vm as usize;
            if self.dom_vcpus[d] == 0 {
                self.dom_weight[d] = t.weight;
                self.dom_cap[d] = t.cap;
            }
            self.dom_vcpus[d] += 1;
        }
        self.dom = v.tasks.iter().map(|t| t.vm).collect();
        self.credit_of = vec![0; nt];
        self.pri = vec![PRI_UNDER; nt];
        self.pool = v.tasks.iter().map(|t| t.affinity.clone()).collect();
        self.node_aff = numa_place(v, ndoms);
        self.any_node_aff = self.node_aff.iter().any(Option::is_some);
        self.slice_of = vec![self.tslice; nt];
        self.ratelimit_of = vec![self.ratelimit; nt];
        P::init(self, ctx);
        self.processor = self
            .pool
            .iter()
            .enumerate()
            .map(|(i, p)| p.nth_wrapping(i).expect("a pool is never empty") as CpuId)
            .collect();
        self.active = vec![false; nt];
        self.on_runq = vec![false; nt];
        self.parked = vec![false; nt];
        self.migrating = vec![false; nt];
        self.run_start = vec![SimTime::ZERO; nt];
        self.paid_to = vec![SimTime::ZERO; nt];
        self.residual = vec![SimDuration::ZERO; nt];
        self.cap_mark = vec![None; nt];
        self.next_acct = ctx.now.plus(self.tslice).plus(self.tick / 2);
        ctx.set_global_timer(self.next_acct);
    }

    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        if self.parked[t as usize] {
            // Paused: it runs once accounting unparks it.
            self.counters.bump(WAKE_PARKED);
            return;
        }
        let was = self.pri[t as usize];
        let boosted = self.enqueue_wake(ctx, t);
        self.counters.bump(if boosted {
            WAKE_BOOST
        } else if was == PRI_BOOST {
            WAKE_ALREADY_BOOST
        } else {
            WAKE_OVER
        });
    }

    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        self.burn(t, ctx.now);
        if self.curr[cpu as usize] == Some(t) {
            self.curr[cpu as usize] = None;
        }
        if self.migrating[t as usize] {
            // Migrated while blocked: only its pCPU changes.
            self.migrating[t as usize] = false;
            self.processor[t as usize] = self.cpu_pick(ctx.view, t, true) as CpuId;
        }
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        let now = ctx.now;
        let c = cpu as usize;
        if let Some(p) = prev {
            self.burn(p, now);
            let runnable = self.xen_runnable(ctx.view, p);
            let ratelimit = self.ratelimit_of[p as usize];
            if runnable
                && ratelimit > SimDuration::ZERO
                && now.since(self.run_start[p as usize]) < ratelimit
            {
                self.counters.bump(RATELIMITED);
                self.slice_end[c] = Some(now.plus(ratelimit));
                self.arm(ctx, c);
                return Some(p);
            }
            if runnable {
                self.runq_insert(p, c);
            }
        }
        let head = self.runq[c].front().copied();
        let head_pri = head.map_or(PRI_IDLE, |t| self.pri[t as usize]);
        let stolen = if head_pri > PRI_OVER {
            None
        } else {
            P::load_balance(self, ctx, c, head_pri)
        };
        let next = match stolen {
            Some(t) => Some(t),
            None => {
                if let Some(h) = head {
                    self.runq[c].pop_front();
                    if self.runq[c].is_empty() {
                        self.maybe_queued.remove(c);
                    }
                    self.on_runq[h as usize] = false;
                    self.counters.bump(if Some(h) == prev {
                        PICK_SAME
                    } else {
                        PICK_LOCAL
                    });
                } else {
                    self.counters.bump(PICK_IDLE);
                }
                head
            }
        };
        self.curr[c] = next;
        match next {
            Some(n) => {
                self.idlers.remove(c);
                if Some(n) != prev {
                    self.run_start[n as usize] = now;
                    self.paid_to[n as usize] = now;
                }
                P::dispatched(self, n, c);
                self.slice_end[c] = Some(now.plus(self.slice_of[n as usize]));
                if self.next_tick[c].is_none() {
                    self.next_tick[c] = Some(self.next_grid_tick(now));
                }
            }
            None => {
                self.idlers.insert(c);
                self.slice_end[c] = None;
                self.next_tick[c] = None;
            }
        }
        self.arm(ctx, c);
        if let Some(p) = prev {
            if next != Some(p) && self.migrating[p as usize] {
                self.migrate(ctx, p);
            }
        }
        next
    }

    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let now = ctx.now;
        let c = cpu as usize;
        if self.next_tick[c].is_some_and(|t| t <= now) {
            self.tick(ctx, c);
            self.next_tick[c] = self.curr[c].map(|_| self.next_grid_tick(now));
        }
        if self.slice_end[c].is_some_and(|t| t <= now) {
            self.slice_end[c] = None;
            self.counters.bump(SLICE_END);
            ctx.resched(cpu);
        }
        self.arm(ctx, c);
    }

    /// The master ticker: one accounting pass every slice.
    fn global_timer(&mut self, ctx: &mut SchedCtx) {
        self.acct(ctx);
        P::after_acct(self, ctx);
        self.next_acct = self.next_acct.plus(self.tslice);
        ctx.set_global_timer(self.next_acct);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut list = self.counters.list();
        list.extend(self.policy.counters());
        list
    }

    /// Proportional share over turns of a slice plus a tick, plus the periods a vCPU may
    /// wait for its credit to climb back to 0: an OVER vCPU waits behind UNDER ones,
    /// and a parked one is off its queue, until accounting has paid its debt (at most a
    /// slice's worth plus tick lag) at its smallest possible rate per period — its
    /// weight's share of the host with every vCPU active, or its slice of the cap.
    fn starvation_bound(&self, view: &SchedView) -> Option<SimDuration> {
        let base = proportional_share_bound(view, self.tslice.plus(self.tick));
        let total_w: u64 = (0..self.dom_vcpus.len())
            .map(|d| self.dom_weight[d] as u64 * self.dom_vcpus[d] as u64)
            .sum();
        let debt = (self.credits_per_tslice + 2 * self.tick_credits()) as u64;
        let mut periods = 0u64;
        for d in 0..self.dom_vcpus.len() {
            let n = self.dom_vcpus[d] as u64;
            if n == 0 {
                continue;
            }
            let mut earn = self.credit as u64 * self.dom_weight[d] as u64 / total_w.max(1);
            if self.dom_cap[d] != 0 {
                let cap_credits =
                    (self.dom_cap[d] as u64 * self.credits_per_tslice as u64).div_ceil(100);
                earn = earn.min(cap_credits / n);
            }
            periods = periods.max(debt.div_ceil(earn.max(1)) + 2);
        }
        let bound = base + self.tslice.saturating_mul(periods);
        P::starvation_bound(self, view, Some(bound))
    }

    /// The scheduler and the engine agree on what runs; no parked vCPU runs or waits in a
    /// queue; every runnable vCPU that is not parked waits in exactly the queue of its
    /// pCPU; idle pCPUs run nothing; and between two accounting passes an active vCPU of a
    /// capped VM pays for at most a period plus a tick of run time, and for at most a tick
    /// (what it ran before it was taken off its pCPU) if the first pass parked it.
    fn check(&self, view: &SchedView) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        let mut queued = vec![0u32; view.tasks.len()];
        for c in 0..self.curr.len() {
            if view.cpu_curr[c] != self.curr[c] {
                return Err(format!(
                    "credit: pCPU {c} runs {:?} but the scheduler has {:?} there",
                    view.cpu_curr[c], self.curr[c]
                ));
            }
            if let Some(t) = self.curr[c] {
                if self.parked[t as usize] {
                    return Err(format!("credit: parked vCPU task {t} runs on pCPU {c}"));
                }
                if self.idlers.contains(c) {
                    return Err(format!("credit: pCPU {c} is an idler but runs task {t}"));
                }
            }
            for &t in &self.runq[c] {
                let ti = t as usize;
                queued[ti] += 1;
                if self.parked[ti]
                    || view.state[ti] != RunState::Runnable
                    || self.processor[ti] as usize != c
                    || !self.on_runq[ti]
                {
                    return Err(format!(
                        "credit: task {t} waits in the queue of pCPU {c} but is {:?}, parked {}, on pCPU {}",
                        view.state[ti], self.parked[ti], self.processor[ti]
                    ));
                }
            }
        }
        for (t, s) in view.state.iter().enumerate() {
            let want = u32::from(*s == RunState::Runnable && !self.parked[t]);
            if queued[t] != want || self.on_runq[t] != (want == 1) {
                return Err(format!(
                    "credit: task {t} ({s:?}, parked {}) is queued {} times",
                    self.parked[t], queued[t]
                ));
            }
        }
        P::check(self, view)
    }
}

/// `credit`: Credit without a policy. Its periodic events are ticks (a third of the slice).
impl super::Registered for Credit<Plain> {
    type Sched = Credit<Plain>;
    const NAME: &'static str = "credit";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: true,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Credit<Plain> {
        Credit::new(p)
    }
    fn check_params(t: &Table) -> Res<()> {
        self::check_params(t)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(SimDuration(tick_ns(p.table)))
    }
}

/// For unit tests: the Credit-derived scheduler `policy` builds from `table` (parameters
/// `infos`), started on `view` at time 0.
#[cfg(test)]
pub(super) fn started<P: CreditPolicy>(
    view: &SchedView,
    table: &toml::Table,
    infos: &'static [ParamInfo],
    policy: impl FnOnce(&Params) -> P,
) -> Credit<P> {
    let p = Params { table, infos };
    let mut sched = Credit::with_policy(&p, policy(&p));
    let mut out = super::SchedOut {
        resched_pending: vec![false; view.cpu_curr.len()],
        ..Default::default()
    };
    sched.init(&mut SchedCtx {
        now: SimTime::ZERO,
        view,
        out: &mut out,
    });
    sched
}
