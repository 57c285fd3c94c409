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

use super::{
    proportional_share_bound, Counters, CpuId, ParamInfo, ParamKind, Params, RunState, SchedCtx,
    SchedView, Scheduler, TaskId,
};
use crate::reader::{Res, Table};
use crate::time::{SimDuration, SimTime, NS_PER_MS};
use crate::topology::{CpuSet, Distance, Topology};
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
        help: "a still-runnable vCPU keeps its pCPU at least this long, in us (0 = off, else 100-500000, at most the slice)",
    },
];

/// Credits per millisecond of pCPU time (`CSCHED_CREDITS_PER_MSEC`).
pub const CREDITS_PER_MSEC: i64 = 10;
/// The pCPU time one credit pays for (100 us).
pub const TIME_PER_CREDIT: SimDuration = SimDuration::from_ns(NS_PER_MS / CREDITS_PER_MSEC as u64);
/// Ticks per slice (`CSCHED_TICKS_PER_TSLICE`); one for slices under 3 ms.
const TICKS_PER_TSLICE: u64 = 3;

/// Priorities, upstream's numbers: higher runs first.
pub const PRI_BOOST: i8 = 0;
pub const PRI_UNDER: i8 = -1;
pub const PRI_OVER: i8 = -2;
pub const PRI_IDLE: i8 = -64;

/// The tick of a `[scheduler]` table's parameters, in ns (for run-length estimates).
pub fn tick_ns(params: &toml::Table) -> u64 {
    let tslice_ms = params
        .get("tslice_ms")
        .and_then(|v| v.as_integer())
        .unwrap_or(30)
        .clamp(1, 1000) as u64;
    tick_of(tslice_ms).ns()
}

/// The tick for a slice of `tslice_ms`: a third of it, or all of it below 3 ms.
fn tick_of(tslice_ms: u64) -> SimDuration {
    let ticks = if tslice_ms < TICKS_PER_TSLICE {
        1
    } else {
        TICKS_PER_TSLICE
    };
    SimDuration::from_ms(tslice_ms) / ticks
}

/// Checks the parameters beyond their types (Xen's sysctl limits).
pub fn check_params(t: &Table) -> Res<()> {
    let tslice = match t.get("tslice_ms") {
        Some(o) => o.u64_in(1, 1000)?,
        None => 30,
    };
    if let Some(o) = t.get("ratelimit_us") {
        let r = o.u64_in(0, 500_000)?;
        if r != 0 && r < 100 {
            return o.err(format!(
                "{r} is below Xen's minimum of 100 us; use 0 to turn rate limiting off"
            ));
        }
        if r > tslice * 1000 {
            return o.err(format!(
                "{r} us is longer than the time slice (tslice_ms = {tslice})"
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

/// One domain's part in an accounting pass.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DomIn {
    pub weight: u64,
    /// Percent of one pCPU; 0: none.
    pub cap: u64,
    /// Active vCPUs (at least 1).
    pub active: u64,
}

/// What a domain gets from an accounting pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DomShare {
    /// Credit added to each of its active vCPUs.
    pub per_vcpu: i64,
    /// Below minus this, a vCPU of a capped domain is parked (0 for uncapped domains).
    pub cap_per_vcpu: i64,
}

/// The credit split of one accounting pass (`csched_acct`), for domains in list order:
/// `credit` is the period's credit (slice credits x pCPUs), `balance` last period's
/// credit balance. Returns each domain's share and the indices of the domains moved to the
/// head of the list, in the order they were moved.
pub(crate) fn acct_shares(
    credit: u64,
    credits_per_tslice: u64,
    balance: i64,
    doms: &[DomIn],
) -> (Vec<DomShare>, Vec<usize>) {
    let weight_total: u64 = doms.iter().map(|d| d.weight * d.active).sum();
    let mut credit_total = credit;
    if balance < 0 {
        credit_total += balance.unsigned_abs();
    }
    let mut weight_left = weight_total;
    let mut xtra = false;
    let mut shares = Vec::with_capacity(doms.len());
    let mut moved = Vec::new();
    for (i, d) in doms.iter().enumerate() {
        let w = d.weight * d.active;
        weight_left -= w;
        let mut peak = d.active * credits_per_tslice;
        if balance < 0 {
            peak += (balance.unsigned_abs() * w).div_ceil(weight_total);
        }
        let mut cap_per_vcpu = 0;
        if d.cap != 0 {
            let cap_credits = (d.cap * credits_per_tslice).div_ceil(100);
            peak = peak.min(cap_credits);
            cap_per_vcpu = cap_credits.div_ceil(d.active);
        }
        let mut fair = (credit_total * w).div_ceil(weight_total);
        if fair < peak {
            xtra = true;
        } else {
            if weight_left != 0 {
                // What this domain cannot take goes to the domains after it.
                credit_total += ((fair - peak) * weight_total).div_ceil(weight_left);
            }
            if xtra {
                moved.push(i);
            }
            fair = peak;
        }
        shares.push(DomShare {
            per_vcpu: fair.div_ceil(d.active) as i64,
            cap_per_vcpu: cap_per_vcpu as i64,
        });
    }
    (shares, moved)
}

/// xl's automatic NUMA placement (libxl 4.3/4.4, on by default): each domain, in creation
/// (VM) order, whose vCPUs are all unpinned and fit on one node, gets the node holding the
/// fewest vCPUs counted so far as its node affinity (a domain without one counts on every
/// node; ties: the lower node, as free memory, which xl compares next, is not modelled).
/// The others get none. Only on hosts with more than one node.
pub fn numa_place(view: &SchedView, ndoms: usize) -> Vec<Option<CpuSet>> {
    let topo = &view.topo;
    let nnodes = topo.numa_nodes as usize;
    let mut aff = vec![None; ndoms];
    if nnodes < 2 {
        return aff;
    }
    let n = topo.ncpus();
    let mut node_cpus = vec![CpuSet::empty(n); nnodes];
    for c in 0..n {
        node_cpus[topo.cpus[c].node as usize].insert(c);
    }
    // Per domain, in one pass over the tasks: its vCPU count and whether all are unpinned.
    let mut vcpus = vec![0usize; ndoms];
    let mut unpinned = vec![true; ndoms];
    for t in &view.tasks {
        vcpus[t.vm as usize] += 1;
        unpinned[t.vm as usize] &= t.affinity.len() == n;
    }
    let smallest_node = node_cpus.iter().map(|c| c.len()).min().unwrap_or(0);
    let mut counted = vec![0usize; nnodes];
    for (d, slot) in aff.iter_mut().enumerate() {
        if vcpus[d] == 0 {
            continue;
        }
        if unpinned[d] && vcpus[d] <= smallest_node {
            let best = (0..nnodes).min_by_key(|&k| (counted[k], k)).expect("nodes");
            counted[best] += vcpus[d];
            *slot = Some(node_cpus[best].clone());
        } else {
            for c in counted.iter_mut() {
                *c += vcpus[d];
            }
        }
    }
    aff
}

/// What one balance step of the placement chose.
struct Pick {
    cpu: usize,
    /// The chosen pCPU is idle (or the vCPU's own, with nothing waiting there).
    idle: bool,
    /// The group whose `idle_bias` the choice advances, if it moved into one.
    biased: Option<usize>,
}

/// The next member of `set` after `after`, wrapping around (`cpumask_cycle`).
fn cycle(set: &CpuSet, after: usize) -> Option<usize> {
    set.next_after(after).or_else(|| set.first())
}

/// The walk over idle pCPUs of `_csched_cpu_pick`, from `cpu` over the candidates `cpus`
/// (idle pCPUs of the affinity, `cpu` excluded): Xen visits every candidate in cycle
/// order and moves to the next one's core (same socket) or socket (other socket) when
/// that has more idlers than the current one's (twice as many across sockets), choosing
/// inside it from that group's `idle_bias`; a candidate that does not win is dropped
/// with its group. Returns the choice and the candidate whose group it moved into last.
///
/// Instead of visiting the losers one by one (a walk linear in the idle pCPUs, run on
/// every wake and every tick), this jumps to the next candidate that would win from the
/// current choice (`winners`). Same answer: idle counts do not change during the walk and
/// a move only raises the current core's or socket's count, so a candidate that loses
/// once loses against every later choice too, and dropping it or not changes nothing
/// (`tests::pick_walk_matches_xen_loop` checks this against the literal loop).
fn pick_walk(
    topo: &Topology,
    idlers: &CpuSet,
    mut cpus: CpuSet,
    mut cpu: usize,
    idle_bias: &[usize],
) -> (usize, Option<usize>) {
    let mut biased = None;
    loop {
        let w = winners(topo, idlers, &cpus, cpu);
        let Some(nxt) = cycle(&w, cpu) else {
            return (cpu, biased);
        };
        let group = if topo.cpus[nxt].socket == topo.cpus[cpu].socket {
            topo.core_cpus(topo.cpus[nxt].core)
        } else {
            topo.socket_cpus(topo.cpus[nxt].socket)
        };
        let cand = cpus.within(group);
        biased = Some(nxt);
        cpu = cycle(&cand, idle_bias[nxt]).expect("nxt is a candidate");
        cpus.remove_range(topo.core_cpus(topo.cpus[cpu].core));
    }
}

/// The candidates that would win against `cpu` in the walk above: in `cpu`'s socket,
/// those whose core has more idlers than `cpu`'s core; elsewhere, those in a socket with
/// more than twice the idlers of `cpu`'s socket.
fn winners(topo: &Topology, idlers: &CpuSet, cpus: &CpuSet, cpu: usize) -> CpuSet {
    let my_socket = topo.cpus[cpu].socket;
    let socket_idle = idlers.count_in(topo.socket_cpus(my_socket));
    let mut w = CpuSet::empty(topo.ncpus());
    for s in (0..topo.sockets).filter(|&s| s != my_socket) {
        let r = topo.socket_cpus(s);
        if idlers.count_in(r.clone()) > 2 * socket_idle {
            w.union_with(&cpus.within(r));
        }
    }
    let tpc = topo.threads_per_core as usize;
    let core_idle = idlers.count_in(topo.core_cpus(topo.cpus[cpu].core));
    let mine = cpus.within(topo.socket_cpus(my_socket));
    if core_idle == 0 {
        // Every candidate's core has at least the candidate idle.
        w.union_with(&mine);
    } else if tpc == 2 && core_idle == 1 {
        w.union_with(&mine.intersect(&idlers.whole_pairs()));
    } else if core_idle < tpc {
        let first_core = my_socket * topo.cores_per_socket;
        for core in first_core..first_core + topo.cores_per_socket {
            let r = topo.core_cpus(core);
            if mine.count_in(r.clone()) > 0 && idlers.count_in(r.clone()) > core_idle {
                w.union_with(&mine.within(r));
            }
        }
    }
    w
}

pub struct Credit<P: CreditPolicy = Plain> {
    /// What a Credit-derived scheduler changes (see `CreditPolicy`).
    pub(super) policy: P,
    // global
    pub(super) tslice: SimDuration,
    pub(super) tick: SimDuration,
    pub(super) ratelimit: SimDuration,
    pub(super) credits_per_tslice: i64,
    /// The period's credit: slice credits x pCPUs (`prv->credit`).
    pub(super) credit: i64,
    pub(super) credit_balance: i64,
    /// Accounting passes so far; a pCPU resorts its queue when it has not seen the latest.
    pub(super) runq_sort: u64,
    pub(super) next_acct: SimTime,
    /// Domains with active vCPUs, in list order.
    pub(super) active_doms: Vec<u32>,
    pub(super) idlers: CpuSet,
    pub(super) last_tickle: usize,
    /// The first violation of the cap bound found by accounting (see `check`).
    pub(super) violation: Option<String>,
    pub(super) counters: Counters<NCOUNTERS>,
    // per pCPU
    pub(super) runq: Vec<VecDeque<TaskId>>,
    pub(super) curr: Vec<Option<TaskId>>,
    pub(super) runq_sort_last: Vec<u64>,
    pub(super) next_tick: Vec<Option<SimTime>>,
    pub(super) slice_end: Vec<Option<SimTime>>,
    pub(super) idle_bias: Vec<usize>,
    /// pCPUs of each NUMA node, in id order.
    pub(super) node_cpus: Vec<Vec<usize>>,
    // per domain
    pub(super) dom_weight: Vec<u32>,
    pub(super) dom_cap: Vec<u32>,
    pub(super) dom_vcpus: Vec<u32>,
    /// Active vCPUs, newest first (upstream adds at the list head).
    pub(super) dom_active: Vec<VecDeque<TaskId>>,
    // per vCPU
    pub(super) dom: Vec<u32>,
    pub(super) credit_of: Vec<i64>,
    pub(super) pri: Vec<i8>,
    pub(super) processor: Vec<CpuId>,
    pub(super) active: Vec<bool>,
    pub(super) on_runq: Vec<bool>,
    pub(super) parked: Vec<bool>,
    pub(super) migrating: Vec<bool>,
    /// When it was put on its pCPU (for the rate limit).
    pub(super) run_start: Vec<SimTime>,
    /// Paid for up to here while running.
    pub(super) paid_to: Vec<SimTime>,
    /// Run time not yet paid for, below one credit.
    pub(super) residual: Vec<SimDuration>,
    /// For an active vCPU of a capped domain: its credit after the last accounting pass
    /// and whether that pass left it parked (see `check`).
    pub(super) cap_mark: Vec<Option<(i64, bool)>>,
    /// pCPUs each vCPU may use: its affinity, narrowed by the policy's pools.
    pub(super) pool: Vec<CpuSet>,
    /// pCPUs whose queue may hold a vCPU (a superset: bits are cleared when a queue
    /// empties through the usual paths), so that balancers need not walk every pCPU.
    pub(super) maybe_queued: CpuSet,
    /// Per domain: the pCPUs of its NUMA node affinity, from xl's automatic placement
    /// (None: no preference). See `numa_place`.
    pub(super) node_aff: Vec<Option<CpuSet>>,
    /// Some domain has a node affinity (else the node step is skipped everywhere).
    pub(super) any_node_aff: bool,
    /// Each vCPU's time slice: `tslice` unless the policy gives it another.
    pub(super) slice_of: Vec<SimDuration>,
    /// Each vCPU's rate limit: `ratelimit` unless the policy gives it another.
    pub(super) ratelimit_of: Vec<SimDuration>,
}

/// The hooks through which `flms`, `vslicer`, `vturbo` and `io-bound` change Credit. Each
/// is a function of the whole scheduler (so it may read and change Credit's state) with
/// Credit's own behaviour as the default.
pub trait CreditPolicy: Sized {
    /// After Credit's own set-up and before any vCPU is placed: narrow `pool`s, set
    /// `slice_of`s and `ratelimit_of`s.
    fn init(_c: &mut Credit<Self>, _ctx: &mut SchedCtx) {}
    /// After every accounting pass.
    fn after_acct(_c: &mut Credit<Self>, _ctx: &mut SchedCtx) {}
    /// The policy's own decision counters, listed after Credit's.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![]
    }
    /// The policy's own invariants, checked after Credit's.
    fn check(_c: &Credit<Self>, _view: &SchedView) -> Result<(), String> {
        Ok(())
    }
    /// The starvation bound under the policy, given Credit's (`credit`, computed as if
    /// every vCPU could use every pCPU of its affinity).
    fn starvation_bound(
        _c: &Credit<Self>,
        _view: &SchedView,
        credit: Option<SimDuration>,
    ) -> Option<SimDuration> {
        credit
    }
    /// Whether `t`, being queued on `cpu`, goes ahead of `other` of the same priority
    /// (Credit: never, so equal priorities are first in, first out).
    fn runs_before(_c: &Credit<Self>, _t: TaskId, _other: TaskId, _cpu: usize) -> bool {
        false
    }
    /// `t` has just paid `credits` for running on its pCPU (`processor`).
    fn charged(_c: &mut Credit<Self>, _t: TaskId, _credits: i64) {}
    /// `t` has just been given a slice on `cpu` (also when it continues there after its
    /// slice; not when the rate limit keeps it).
    fn dispatched(_c: &mut Credit<Self>, _t: TaskId, _cpu: usize) {}
    /// `csched_load_balance`: a queued vCPU of priority above `pri` that `cpu` takes from a
    /// peer (it then lives on `cpu`), or None.
    fn load_balance(c: &mut Credit<Self>, ctx: &SchedCtx, cpu: usize, pri: i8) -> Option<TaskId> {
        c.steal(ctx, cpu, pri)
    }
}

/// Credit itself: no hooks.
pub struct Plain;
impl CreditPolicy for Plain {}

impl Credit<Plain> {
    pub fn new(p: &Params) -> Credit<Plain> {
        Credit::with_policy(p, Plain)
    }
}

impl<P: CreditPolicy> Credit<P> {
    pub fn with_policy(p: &Params, policy: P) -> Credit<P> {
        let tslice_ms = p.int("tslice_ms").clamp(1, 1000) as u64;
        Credit {
            policy,
            pool: vec![],
            node_aff: vec![],
            any_node_aff: false,
            maybe_queued: CpuSet::empty(1),
            slice_of: vec![],
            ratelimit_of: vec![],
            tslice: SimDuration::from_ms(tslice_ms),
            tick: tick_of(tslice_ms),
            ratelimit: SimDuration::from_us(p.int("ratelimit_us").max(0) as u64),
            credits_per_tslice: CREDITS_PER_MSEC * tslice_ms as i64,
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

    pub(super) fn tick_credits(&self) -> i64 {
        (self.tick / TIME_PER_CREDIT) as i64
    }

    pub(super) fn cur_pri(&self, cpu: usize) -> i8 {
        self.curr[cpu].map_or(PRI_IDLE, |t| self.pri[t as usize])
    }

    /// Xen's `vcpu_runnable`: wants to run and is neither paused (parked) nor migrating.
    pub(super) fn xen_runnable(&self, view: &SchedView, t: TaskId) -> bool {
        view.state[t as usize] != RunState::Halted
            && !self.parked[t as usize]
            && !self.migrating[t as usize]
    }

    /// `__runq_insert`: after every vCPU of equal or higher priority.
    pub(super) fn runq_insert(&mut self, t: TaskId, cpu: usize) {
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

    pub(super) fn runq_remove(&mut self, t: TaskId) {
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

    /// `burn_credits`: the running vCPU pays for the time since it last paid.
    pub(super) fn burn(&mut self, t: TaskId, now: SimTime) {
        let ti = t as usize;
        let ran = now.since(self.paid_to[ti]) + self.residual[ti];
        let credits = (ran / TIME_PER_CREDIT) as i64;
        self.credit_of[ti] -= credits;
        self.residual[ti] = ran % TIME_PER_CREDIT;
        self.paid_to[ti] = now;
        P::charged(self, t, credits);
    }

    /// Arms the pCPU's timer for the earlier of its next tick and its slice end.
    pub(super) fn arm(&self, ctx: &mut SchedCtx, cpu: usize) {
        let at = match (self.next_tick[cpu], self.slice_end[cpu]) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match at {
            Some(at) => ctx.set_timer(cpu as CpuId, at),
            None => ctx.cancel_timer(cpu as CpuId),
        }
    }

    pub(super) fn next_grid_tick(&self, now: SimTime) -> SimTime {
        now.first_multiple_after(self.tick)
    }

    pub(super) fn acct_start(&mut self, t: TaskId) {
        let ti = t as usize;
        self.active[ti] = true;
        let d = self.dom[ti];
        self.dom_active[d as usize].push_front(t);
        if !self.active_doms.contains(&d) {
            self.active_doms.insert(0, d);
        }
    }

    /// The wake-up path shared by wakes, unparks and migrations: boost, queue, tickle.
    /// Returns whether it boosted.
    pub(super) fn enqueue_wake(&mut self, ctx: &mut SchedCtx, t: TaskId) -> bool {
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
    pub(super) fn tickle(&mut self, ctx: &mut SchedCtx, new: TaskId) {
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

    /// `_csched_cpu_pick`: where `t` would best run (see the header). `commit` records the
    /// choice in the chosen group's `idle_bias`.
    pub(super) fn cpu_pick(&mut self, view: &SchedView, t: TaskId, commit: bool) -> usize {
        // Node-affinity step first: settle there only on an idle pCPU.
        let near = self
            .node_step_mask(t)
            .map(|near| self.pick_within(view, t, &near))
            .filter(|pick| pick.idle);
        let pick = match near {
            Some(pick) => {
                self.counters.bump(PICK_NODE_STEP);
                pick
            }
            None => self.pick_within(view, t, &self.pool[t as usize]),
        };
        if commit {
            if let Some(b) = pick.biased {
                self.idle_bias[b] = pick.cpu;
            }
        }
        pick.cpu
    }

    /// The pCPUs of `t`'s pool in its domain's node affinity, if that narrows the pool
    /// (the node-affinity balance step applies), else None.
    pub(super) fn node_step_mask(&self, t: TaskId) -> Option<CpuSet> {
        let near = self.node_aff[self.dom[t as usize] as usize].as_ref()?;
        let mask = self.pool[t as usize].intersect(near);
        (!mask.is_empty() && mask != self.pool[t as usize]).then_some(mask)
    }

    /// One balance step of `_csched_cpu_pick` within `aff`.
    fn pick_within(&self, view: &SchedView, t: TaskId, aff: &CpuSet) -> Pick {
        let topo = &view.topo;
        let proc = self.processor[t as usize] as usize;
        let mut cpu = if aff.contains(proc) {
            proc
        } else {
            cycle(aff, proc).expect("affinity is never empty")
        };
        let mut idlers = self.idlers.clone();
        if proc == cpu && self.runq[cpu].is_empty() {
            idlers.insert(cpu);
        }
        let mut cpus = aff.intersect(&idlers);
        if !cpus.contains(cpu) {
            if let Some(c) = cycle(&cpus, cpu) {
                cpu = c;
            }
        }
        cpus.remove(cpu);
        let (cpu, biased) = pick_walk(topo, &idlers, cpus, cpu, &self.idle_bias);
        Pick {
            cpu,
            idle: idlers.contains(cpu),
            biased,
        }
    }

    /// `csched_load_balance`: the first queued vCPU of priority above `pri` on a busy
    /// peer, own NUMA node first; it now lives on `cpu`.
    pub(super) fn steal(&mut self, ctx: &SchedCtx, cpu: usize, pri: i8) -> Option<TaskId> {
        let topo = &ctx.view.topo;
        let nnodes = self.node_cpus.len();
        let node = topo.cpus[cpu].node as usize;
        // Balance steps: vCPUs whose node affinity holds `cpu` first (only when some domain
        // has one), then any vCPU whose pool holds it; each step walks every peer.
        let steps: &[bool] = if self.any_node_aff {
            &[true, false]
        } else {
            &[false]
        };
        for &node_step in steps {
            for k in 0..nnodes {
                let n = (node + k) % nnodes;
                for &peer in &self.node_cpus[n] {
                    if peer == cpu || self.idlers.contains(peer) || self.curr[peer].is_none() {
                        continue;
                    }
                    let mut found = None;
                    for (i, &t) in self.runq[peer].iter().enumerate() {
                        if self.pri[t as usize] <= pri {
                            break;
                        }
                        let fits = if node_step {
                            self.node_step_mask(t).is_some_and(|m| m.contains(cpu))
                        } else {
                            self.pool[t as usize].contains(cpu)
                        };
                        if fits {
                            found = Some((i, t));
                            break;
                        }
                    }
                    if let Some((i, t)) = found {
                        if node_step {
                            self.counters.bump(STEAL_NODE_STEP);
                        }
                        self.runq[peer].remove(i);
                        if self.runq[peer].is_empty() {
                            self.maybe_queued.remove(peer);
                        }
                        self.on_runq[t as usize] = false;
                        self.processor[t as usize] = cpu as CpuId;
                        self.counters.bump(match topo.distance(peer, cpu) {
                            Distance::SmtSibling => STEAL_SMT,
                            Distance::SameSocket | Distance::SameCpu => STEAL_SOCKET,
                            Distance::OtherSocket => STEAL_OTHER_SOCKET,
                            Distance::OtherNuma => STEAL_OTHER_NODE,
                        });
                        return Some(t);
                    }
                }
            }
        }
        None
    }

    /// `vcpu_migrate` for a vCPU that left its pCPU marked for migration.
    pub(super) fn migrate(&mut self, ctx: &mut SchedCtx, t: TaskId) {
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
    pub(super) fn tick(&mut self, ctx: &mut SchedCtx, cpu: usize) {
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

    pub(super) fn park(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        self.parked[t as usize] = true;
        self.counters.bump(PARK);
        match ctx.view.state[t as usize] {
            RunState::Running(c) => ctx.resched(c),
            _ if self.on_runq[t as usize] => self.runq_remove(t),
            _ => {}
        }
    }

    pub(super) fn unpark(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        self.counters.bump(UNPARK);
        // Woken while still flagged parked, so not boosted; then the flag goes.
        if ctx.view.state[t as usize] == RunState::Runnable && !self.on_runq[t as usize] {
            self.enqueue_wake(ctx, t);
        }
        self.parked[t as usize] = false;
    }

    /// Binds `t` to `pool` (within its affinity) and moves it if it lives outside: a
    /// running vCPU is marked for migration and its pCPU reschedules; a queued one is
    /// re-placed and woken there (without a boost unless it is UNDER, as upstream's
    /// migration); a halted one just gets a new pCPU.
    pub(super) fn set_pool(&mut self, ctx: &mut SchedCtx, t: TaskId, pool: CpuSet) {
        let ti = t as usize;
        let pool = pool.intersect(&ctx.view.tasks[ti].affinity);
        assert!(!pool.is_empty(), "a pool outside the vCPU's affinity");
        self.pool[ti] = pool;
        if self.pool[ti].contains(self.processor[ti] as usize) {
            return;
        }
        match ctx.view.state[ti] {
            RunState::Running(c) => {
                if !self.migrating[ti] {
                    self.migrating[ti] = true;
                    ctx.resched(c);
                }
            }
            _ if self.on_runq[ti] => {
                self.runq_remove(t);
                let to = self.cpu_pick(ctx.view, t, true);
                self.processor[ti] = to as CpuId;
                self.enqueue_wake(ctx, t);
            }
            _ => {
                self.processor[ti] = self.cpu_pick(ctx.view, t, true) as CpuId;
            }
        }
    }

    /// `csched_acct`: one accounting pass.
    pub(super) fn acct(&mut self, ctx: &mut SchedCtx) {
        let doms = self.active_doms.clone();
        let ins: Vec<DomIn> = doms
            .iter()
            .map(|&d| DomIn {
                weight: self.dom_weight[d as usize] as u64,
                cap: self.dom_cap[d as usize] as u64,
                active: self.dom_active[d as usize].len() as u64,
            })
            .collect();
        if ins.iter().all(|d| d.active == 0) {
            self.credit_balance = 0;
            self.counters.bump(ACCT_NO_WORK);
            return;
        }
        self.counters.bump(ACCT_RUN);
        let cpt = self.credits_per_tslice;
        let (shares, moved) =
            acct_shares(self.credit as u64, cpt as u64, self.credit_balance, &ins);
        let tick_credits = self.tick_credits();
        let mut balance = 0i64;
        for (k, &d) in doms.iter().enumerate() {
            let share = shares[k];
            let capped = self.dom_cap[d as usize] != 0;
            let vcpus: Vec<TaskId> = self.dom_active[d as usize].iter().copied().collect();
            for t in vcpus {
                let ti = t as usize;
                if let Some((after, parked)) = self.cap_mark[ti] {
                    // Paid since the last pass: at most what was not yet paid for then (a
                    // tick's run at most) plus, unless parked, one period's run.
                    let paid = after - self.credit_of[ti];
                    let most = if parked { 0 } else { cpt } + tick_credits + 1;
                    if paid > most && self.violation.is_none() {
                        self.violation = Some(format!(
                            "credit: vCPU task {t} of a capped VM{} paid {paid} credits between two accounting passes; at most {most} are possible",
                            if parked { ", parked by the first," } else { "" },
                        ));
                    }
                }
                self.credit_of[ti] += share.per_vcpu;
                let c = self.credit_of[ti];
                if self.pri[ti] == PRI_BOOST {
                    self.counters.bump(ACCT_BOOST_END);
                }
                if c < 0 {
                    self.pri[ti] = PRI_OVER;
                    if capped && c < -share.cap_per_vcpu && !self.parked[ti] {
                        self.park(ctx, t);
                    }
                    if c < -cpt {
                        self.credit_of[ti] = -cpt;
                        self.counters.bump(ACCT_CLIP);
                    }
                } else {
                    self.pri[ti] = PRI_UNDER;
                    if self.parked[ti] {
                        self.unpark(ctx, t);
                    }
                    if c > cpt {
                        // Full: stops earning until a tick finds it running again.
                        self.active[ti] = false;
                        let q = &mut self.dom_active[d as usize];
                        q.retain(|&o| o != t);
                        self.credit_of[ti] = c / 2;
                        self.counters.bump(ACCT_DEACTIVATE);
                    }
                }
                self.cap_mark[ti] =
                    (capped && self.active[ti]).then_some((self.credit_of[ti], self.parked[ti]));
                balance += self.credit_of[ti];
            }
        }
        // Domains moved to the head, the last moved first, then the others in order.
        let mut order: Vec<u32> = moved.iter().rev().map(|&i| doms[i]).collect();
        for _ in &moved {
            self.counters.bump(ACCT_REORDER);
        }
        order.extend(
            doms.iter()
                .enumerate()
                .filter(|(i, _)| !moved.contains(i))
                .map(|(_, &d)| d),
        );
        // Domains that became active during the pass (none here) stay at the head.
        let mut list: Vec<u32> = self
            .active_doms
            .iter()
            .copied()
            .filter(|d| !doms.contains(d))
            .collect();
        list.extend(order);
        list.retain(|&d| !self.dom_active[d as usize].is_empty());
        self.active_doms = list;
        self.credit_balance = balance;
        self.runq_sort += 1;
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
        self.next_acct = ctx.now + self.tslice + self.tick / 2;
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
                self.slice_end[c] = Some(now + ratelimit);
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
                self.slice_end[c] = Some(now + self.slice_of[n as usize]);
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
        self.next_acct += self.tslice;
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
        let base = proportional_share_bound(view, self.tslice + self.tick);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::sched::{SchedOut, TaskInfo};
    use crate::time::SimTime;

    /// The walk of `_csched_cpu_pick` as Xen writes it: visit every candidate in cycle
    /// order, comparing idle counts of cores (same socket) or sockets (factor 2).
    fn xen_loop(
        topo: &Topology,
        idlers: &CpuSet,
        mut cpus: CpuSet,
        mut cpu: usize,
        idle_bias: &[usize],
    ) -> (usize, Option<usize>) {
        let mut biased = None;
        while let Some(nxt) = cycle(&cpus, cpu) {
            let same_socket = topo.cpus[cpu].socket == topo.cpus[nxt].socket;
            let group = |c: usize| {
                if same_socket {
                    topo.core_cpus(topo.cpus[c].core)
                } else {
                    topo.socket_cpus(topo.cpus[c].socket)
                }
            };
            let factor = if same_socket { 1 } else { 2 };
            let idle_mine = group(cpu).filter(|&c| idlers.contains(c)).count();
            let theirs: Vec<usize> = group(nxt).filter(|&c| idlers.contains(c)).collect();
            if idle_mine * factor < theirs.len() {
                let mut cand = CpuSet::empty(topo.ncpus());
                for &c in theirs.iter().filter(|&&c| cpus.contains(c)) {
                    cand.insert(c);
                }
                biased = Some(nxt);
                cpu = cycle(&cand, idle_bias[nxt]).unwrap();
                for c in topo.core_cpus(topo.cpus[cpu].core) {
                    cpus.remove(c);
                }
            } else {
                for c in theirs {
                    cpus.remove(c);
                }
            }
        }
        (cpu, biased)
    }

    #[test]
    fn pick_walk_matches_xen_loop() {
        let mut rng = Rng::from_state(0x9E37_79B9_7F4A_7C15);
        // (sockets, cores per socket, threads per core): SMT 1, 2 and 4, one to four
        // sockets, and a host past one 64-bit word.
        let shapes = [
            (1, 8, 2),
            (2, 4, 2),
            (2, 3, 1),
            (2, 2, 4),
            (4, 2, 2),
            (2, 40, 2),
            (3, 5, 3),
        ];
        let mut moved = 0;
        for &(s, c, t) in &shapes {
            let topo = Topology::new(s, c, t, 1);
            let n = topo.ncpus();
            for _ in 0..3000 {
                // Sparse, half and dense idle sets.
                let density = [4, 2, 1][rng.below(3) as usize];
                let mut idlers = CpuSet::empty(n);
                let mut aff = CpuSet::empty(n);
                for cpu in 0..n {
                    if rng.below(4) < 4 / density {
                        idlers.insert(cpu);
                    }
                    if rng.below(5) != 0 {
                        aff.insert(cpu);
                    }
                }
                let cpu = rng.below(n as u64) as usize;
                let mut cpus = aff.intersect(&idlers);
                cpus.remove(cpu);
                let bias: Vec<usize> = (0..n).map(|_| rng.below(n as u64) as usize).collect();
                let want = xen_loop(&topo, &idlers, cpus.clone(), cpu, &bias);
                let got = pick_walk(&topo, &idlers, cpus, cpu, &bias);
                assert_eq!(got, want, "shape {s}x{c}x{t}, idlers {idlers}, cpu {cpu}");
                moved += (want.1.is_some()) as u32;
            }
        }
        assert!(moved > 1000, "the random states rarely move: {moved}");
    }

    /// A scheduler on `ncpus` pCPUs of one socket with tasks (vm, weight, cap, affinity).
    fn setup(ncpus: usize, tasks: &[(u32, u32, u32, &str)]) -> (SchedView, Credit) {
        let view = SchedView {
            topo: Topology::new(1, ncpus as u32, 1, 1),
            tasks: tasks
                .iter()
                .enumerate()
                .map(|(i, &(vm, weight, cap, aff))| TaskInfo {
                    vm,
                    index: i as u32,
                    affinity: CpuSet::parse(aff).unwrap(),
                    weight,
                    cap,
                    class: None,
                    latency_vcpu: false,
                })
                .collect(),
            state: vec![RunState::Halted; tasks.len()],
            cpu_curr: vec![None; ncpus],
            nvms: tasks.iter().map(|t| t.0 + 1).max().unwrap(),
        };
        let sched = started(&view, &toml::Table::new(), PARAMS, |_| Plain);
        (view, sched)
    }

    fn out_for(ncpus: usize) -> SchedOut {
        SchedOut {
            resched_pending: vec![false; ncpus],
            ..Default::default()
        }
    }

    /// Puts `t` on `cpu` as the engine would after `pick_next` chose it.
    fn running(view: &mut SchedView, sched: &mut Credit, t: TaskId, cpu: usize, pri: i8) {
        view.state[t as usize] = RunState::Running(cpu as CpuId);
        view.cpu_curr[cpu] = Some(t);
        sched.curr[cpu] = Some(t);
        sched.processor[t as usize] = cpu as CpuId;
        sched.idlers.remove(cpu);
        sched.pri[t as usize] = pri;
    }

    /// Wakes `t` (last on pCPU 0) with priority `pri`; returns the pCPUs asked to
    /// reschedule.
    fn wake(view: &mut SchedView, sched: &mut Credit, t: TaskId, pri: i8) -> Vec<CpuId> {
        view.state[t as usize] = RunState::Runnable;
        sched.pri[t as usize] = pri;
        sched.processor[t as usize] = 0;
        let mut out = out_for(view.cpu_curr.len());
        sched.wake(
            &mut SchedCtx {
                now: SimTime(5_000_000),
                view,
                out: &mut out,
            },
            t,
        );
        out.resched
    }

    /// A waking vCPU is boosted only from UNDER, and tickles (preempts) the pCPU it last
    /// ran on only if it then outranks the running vCPU.
    #[test]
    fn a_wake_up_preempts_only_lower_priorities() {
        let cases = [
            // (running, waking before, waking after, preempts)
            (PRI_UNDER, PRI_UNDER, PRI_BOOST, true),
            (PRI_OVER, PRI_UNDER, PRI_BOOST, true),
            (PRI_BOOST, PRI_UNDER, PRI_BOOST, false),
            (PRI_UNDER, PRI_OVER, PRI_OVER, false),
            (PRI_OVER, PRI_OVER, PRI_OVER, false),
        ];
        for (cur, before, after, preempts) in cases {
            let (mut view, mut sched) = setup(1, &[(0, 256, 0, "0"), (1, 256, 0, "0")]);
            running(&mut view, &mut sched, 0, 0, cur);
            let asked = wake(&mut view, &mut sched, 1, before);
            assert_eq!(sched.pri[1], after, "{cur} {before}");
            assert_eq!(asked == vec![0], preempts, "{cur} {before}: {asked:?}");
            assert_eq!(sched.runq[0], [1]);
        }
    }

    /// With an idle pCPU the waker may use, that idler is tickled and the running vCPU
    /// is left alone; with idlers it may not use, a lower-priority running vCPU is kicked
    /// away (marked for migration) and the pCPU reschedules.
    #[test]
    fn a_wake_up_tickles_an_idler_or_kicks_the_running_vcpu_away() {
        let (mut view, mut sched) = setup(2, &[(0, 256, 0, "0-1"), (1, 256, 0, "0-1")]);
        running(&mut view, &mut sched, 0, 0, PRI_UNDER);
        assert_eq!(wake(&mut view, &mut sched, 1, PRI_UNDER), vec![1]);
        assert!(!sched.migrating[0]);
        let (mut view, mut sched) = setup(2, &[(0, 256, 0, "0-1"), (1, 256, 0, "0")]);
        running(&mut view, &mut sched, 0, 0, PRI_UNDER);
        assert_eq!(wake(&mut view, &mut sched, 1, PRI_UNDER), vec![0]);
        assert!(sched.migrating[0]);
        assert_eq!(sched.counters.values[TICKLE_KICK_AWAY], 1);
    }

    /// The in-scheduler cap check fails when a capped vCPU paid for more run time
    /// between two accounting passes than was possible (a period plus a tick, or a tick if
    /// the first pass parked it), and passes otherwise.
    #[test]
    fn the_cap_check_can_fail() {
        for (paid, parked, fails) in [
            (250, false, false),
            (450, false, true),
            (100, true, false),
            (250, true, true),
        ] {
            let (mut view, mut sched) = setup(2, &[(0, 256, 50, "0-1")]);
            running(&mut view, &mut sched, 0, 0, PRI_UNDER);
            sched.acct_start(0);
            if parked {
                sched.credit_of[0] = -1000;
            }
            let mut out = out_for(2);
            let mut ctx = SchedCtx {
                now: SimTime(35_000_000),
                view: &view,
                out: &mut out,
            };
            // Cap 50: 150 credits per period; -1000 + 150 is below -150: parked, clipped.
            sched.global_timer(&mut ctx);
            assert_eq!(sched.parked[0], parked);
            let after = if parked { -300 } else { 150 };
            assert_eq!(sched.cap_mark[0], Some((after, parked)));
            if parked {
                assert_eq!(out.resched, vec![0]);
                // The engine takes the parked vCPU off its pCPU: runnable, queued nowhere.
                let mut out = out_for(2);
                let next = sched.pick_next(
                    &mut SchedCtx {
                        now: SimTime(35_000_000),
                        view: &view,
                        out: &mut out,
                    },
                    0,
                    Some(0),
                );
                assert_eq!(next, None);
                view.state[0] = RunState::Runnable;
                view.cpu_curr[0] = None;
            }
            assert!(sched.check(&view).is_ok());
            sched.credit_of[0] = after - paid;
            let mut out = out_for(2);
            sched.global_timer(&mut SchedCtx {
                now: SimTime(65_000_000),
                view: &view,
                out: &mut out,
            });
            let checked = sched.check(&view);
            assert_eq!(checked.is_err(), fails, "{paid} {parked}: {checked:?}");
            if fails {
                assert!(checked.unwrap_err().contains("capped"));
            }
        }
    }

    fn dom(weight: u64, cap: u64, active: u64) -> DomIn {
        DomIn {
            weight,
            cap,
            active,
        }
    }

    fn handed_out(shares: &[DomShare], doms: &[DomIn]) -> i64 {
        shares
            .iter()
            .zip(doms)
            .map(|(s, d)| s.per_vcpu * d.active as i64)
            .sum()
    }

    /// With no domain at its peak, a period hands out exactly its credit (300 per pCPU),
    /// split by weight x active vCPUs.
    #[test]
    fn accounting_hands_out_the_periods_credit_split_by_weight() {
        // 2 pCPUs: 600 credits. Weights 256 and 512, two active vCPUs each.
        let doms = [dom(256, 0, 2), dom(512, 0, 2)];
        let (s, moved) = acct_shares(600, 300, 0, &doms);
        assert_eq!(handed_out(&s, &doms), 600);
        assert_eq!(s[0].per_vcpu * 2, s[1].per_vcpu);
        assert!(moved.is_empty());
        // 8 pCPUs, uneven weights: the rounding (up, once per domain and once per vCPU)
        // adds at most a credit per domain and per active vCPU.
        let doms = [
            dom(100, 0, 3),
            dom(300, 0, 5),
            dom(1000, 0, 7),
            dom(256, 0, 9),
        ];
        let (s, _) = acct_shares(2400, 300, 0, &doms);
        let total = handed_out(&s, &doms);
        let slack: i64 = doms.iter().map(|d| 1 + d.active as i64).sum();
        assert!((2400..=2400 + slack).contains(&total), "{total}");
        let w_total: u64 = doms.iter().map(|d| d.weight * d.active).sum();
        for (sh, d) in s.iter().zip(&doms) {
            let exact = 2400.0 * (d.weight * d.active) as f64 / w_total as f64;
            let got = (sh.per_vcpu * d.active as i64) as f64;
            assert!(
                (got - exact).abs() <= 1.0 + d.active as f64,
                "{got} vs {exact}"
            );
        }
    }

    /// A domain held to its peak (one slice per vCPU) or its cap leaves the rest to the
    /// domains after it; met after an unlimited one, it moves to the head of the list, and
    /// the next period hands out the whole credit again.
    #[test]
    fn credit_a_limited_domain_cannot_take_goes_to_the_others() {
        // 2 pCPUs. A capped domain (cap 50: 150 credits) of weight 2048 first.
        let doms = [dom(2048, 50, 1), dom(256, 0, 1), dom(256, 0, 1)];
        let (s, moved) = acct_shares(600, 300, 0, &doms);
        assert_eq!(s[0].per_vcpu, 150);
        assert_eq!(s[0].cap_per_vcpu, 150);
        assert_eq!(s[1], s[2]);
        assert_eq!(handed_out(&s, &doms), 600);
        assert!(moved.is_empty());
        // The same domain last: its leftover is lost this period and it moves to the head.
        let doms = [dom(256, 0, 1), dom(256, 0, 1), dom(2048, 50, 1)];
        let (s, moved) = acct_shares(600, 300, 0, &doms);
        assert_eq!(s[2].per_vcpu, 150);
        assert!(handed_out(&s, &doms) < 600);
        assert_eq!(moved, vec![2]);
        let doms = [doms[2], doms[0], doms[1]];
        let (s, _) = acct_shares(600, 300, 0, &doms);
        assert_eq!(handed_out(&s, &doms), 600);
        // A cap split over active vCPUs, rounded up.
        let (s, _) = acct_shares(1200, 300, 0, &[dom(256, 150, 2)]);
        assert_eq!(s[0].cap_per_vcpu, 225);
        assert_eq!(s[0].per_vcpu, 225);
    }

    /// A negative balance last period raises the total (and the peaks) by the shortfall.
    #[test]
    fn a_negative_balance_is_paid_back_next_period() {
        let doms = [dom(256, 0, 2), dom(256, 0, 2)];
        let (s, _) = acct_shares(600, 300, -200, &doms);
        assert_eq!(handed_out(&s, &doms), 800);
        let (s, _) = acct_shares(600, 300, 200, &doms);
        assert_eq!(handed_out(&s, &doms), 600);
    }

    /// xl's placement: equal unpinned domains alternate between the nodes; a pinned domain
    /// and one larger than a node get no node affinity and count on every node.
    #[test]
    fn numa_placement_alternates_and_skips_pinned_or_large_domains() {
        let info = |vm: u32, aff: &str| TaskInfo {
            vm,
            index: 0,
            affinity: CpuSet::parse(aff).unwrap(),
            weight: 256,
            cap: 0,
            class: None,
            latency_vcpu: false,
        };
        // 2 sockets x 4 cores, one node each: node 0 = pCPUs 0-3, node 1 = 4-7.
        let mut tasks = vec![];
        for vm in 0..3 {
            tasks.extend([info(vm, "0-7"), info(vm, "0-7")]);
        }
        tasks.extend([info(3, "0-1"), info(3, "0-1")]); // pinned
        tasks.extend((0..5).map(|_| info(4, "0-7"))); // 5 vCPUs > 4 pCPUs per node
        tasks.push(info(5, "0-7"));
        let view = SchedView {
            topo: Topology::new(2, 4, 1, 2),
            state: vec![RunState::Halted; tasks.len()],
            tasks,
            cpu_curr: vec![None; 8],
            nvms: 6,
        };
        let nodes: Vec<Option<String>> = numa_place(&view, 6)
            .into_iter()
            .map(|a| a.map(|c| format!("{:?}", c.iter().collect::<Vec<_>>())))
            .collect();
        let n0 = Some(format!("{:?}", (0..4).collect::<Vec<usize>>()));
        let n1 = Some(format!("{:?}", (4..8).collect::<Vec<usize>>()));
        // vm0 -> node 0, vm1 -> node 1, vm2 -> node 0 (tie, lower node); vm3, vm4: none
        // (each adds its vCPUs to both nodes); vm5 -> node 1 (2 + 7 against 4 + 7).
        assert_eq!(nodes, vec![n0.clone(), n1.clone(), n0, None, None, n1]);
        // One node: no placement.
        let flat = SchedView {
            topo: Topology::new(2, 4, 1, 1),
            ..view
        };
        assert!(numa_place(&flat, 6).iter().all(Option::is_none));
    }

    #[test]
    fn cycle_wraps() {
        let mut s = CpuSet::empty(8);
        s.insert(2);
        s.insert(5);
        assert_eq!(cycle(&s, 2), Some(5));
        assert_eq!(cycle(&s, 5), Some(2));
        assert_eq!(cycle(&s, 7), Some(2));
        assert_eq!(cycle(&CpuSet::empty(8), 0), None);
    }
}
