//! `flms` — FLMS, a flexible Xen Credit scheduler: Xen 4.4.2 Credit (see `credit.rs`) with
//! latency and CPU vCPUs isolated on two resizable pCPU pools, short slices and an
//! `IO_Boost` order for latency vCPUs, and a topology- and load-aware idle balancer.
//!
//! ## Policy (Liu et al., Journal of Software 28(2), 2017, section 3)
//! Everything not said here is Credit's: credits, accounting, priorities, BOOST on wake-up,
//! tickling, the rate limit, placement (`cpu_pick`) and the tick's migration of a running
//! vCPU to an idler, all within the vCPU's pool.
//!
//! **Classes and pools (3.1).** A VM is an LSVM, an NLSVM or a MixVM (`class`). Latency
//! vCPUs — every vCPU of an LSVM and the `reserved_vcpus` of a MixVM — run only on the
//! short-slice pCPUs (SPs, bitmap `ForIO`); all other vCPUs, host threads included, run
//! only on the long-slice pCPUs (LPs, `ForCPU`, the complement). A latency vCPU's slice is
//! `short_slice_us`, any other's `tslice_ms` (the slice is the pCPU's in the paper; since
//! each class keeps to its own pool, giving it to the vCPU is the same).
//!
//! **Pool sizes (eqs. 1-4)**, every accounting period (`tslice_ms`): SampleIO / SampleCPU
//! are the credits (run time, 100 us each) paid in the period by latency / CPU vCPUs;
//! EstIO = (1 - alpha) EstIO + alpha SampleIO, EstCPU likewise; SPNum = EstIO x PNum /
//! (EstIO + EstCPU), *rounded to the nearest integer* (the split closest to the
//! proportional one; floor would give I/O nothing until it owns a whole pCPU's worth), then
//! held to at least one SP and at least one LP while the class has vCPUs — the minimum is
//! needed because a latency vCPU bound to an empty pool would have nowhere to run, and an
//! I/O load of a few percent rounds to zero SPs. A class without vCPUs gets no pCPU; with
//! both classes on a one-pCPU host no split is possible and everyone shares it (ForIO
//! empty). Before the first sample (EstIO = EstCPU = 0) SPNum is that minimum: the
//! paper's "initially all CPU" (ForIO all zero) plus the one SP the latency vCPUs need.
//!
//! A consequence of eq. 3 (the sample is run time, not demand): when both pools are
//! saturated, each class's run time is its pool's size and the split is a fixed point; a
//! pool grows only into pCPUs the other class leaves idle, and shrinks when its own vCPUs
//! leave it idle. That is the paper's rule and the default. `pool_sample = "demand"` (our
//! variant, not the paper's) also counts a whole period for each vCPU found runnable but
//! waiting at the period's end, so a class squeezed into too few pCPUs shows its demand
//! and its pool can grow against a saturated other pool.
//!
//! **Which pCPUs move** (the paper gives no rule): pCPUs are ordered by (socket, core,
//! thread), and the SPs are the last SPNum of that order, so the pools are two contiguous
//! ranges: they grow and shrink a whole core's SMT threads at a time and at most one core
//! is shared between them, and SPs stay on the last socket (a latency vCPU keeps its
//! cache neighbours). After a resize each vCPU whose pool changed is rebound with
//! `set_pool` (a running one migrates at once, a queued one is re-placed).
//!
//! **IO_Boost (3.2, eqs. 5-7).** Per vCPU, 0 at start; each time the vCPU is scheduled
//! (given a slice, also when it continues after its slice), IO_Boost += 1 / (credit it
//! paid so far this period, at least 1); each period, historyLoad += the credit it paid in
//! the period and IO_Boost = 1 / historyLoad (0 while historyLoad is 0). On an SP, a vCPU
//! that enters a queue (wakes, migrates, is rebound) goes ahead of the vCPUs of its
//! priority with a strictly larger IO_Boost (equal IO_Boosts: first in, first out); a vCPU
//! put back after its slice goes behind its equals, as in Credit (see deviations).
//!
//! **Idle balancing (3.3, eq. 8).** pCPU load historyBusy = beta historyBusy + (1 - beta)
//! currentBusy, currentBusy = credits paid on the pCPU in the period, updated every period.
//! Where Credit would steal (its queue is empty or its head is OVER), a pCPU looks only at
//! busy pCPUs of its own pool holding a queued vCPU it may take (priority above its head,
//! pool containing it), and takes from (counter per branch): its SMT sibling; else the
//! busiest such pCPU of its socket if that one's historyBusy exceeds its own by more than
//! `balance_a`; else the busiest on another socket if by more than `balance_b`; else none.
//! The victim: on an SP the candidate with the smallest IO_Boost; on an LP the one whose
//! load best solves eq. 9, busy_src - load = busy_dst + load (ties: queue order), where a
//! vCPU's load is the beta-average of the credits it paid per period (see deviations).
//!
//! ## Parameters
//! - `tslice_ms` (integer, ms, default 30), `ratelimit_us` (integer, us, default 1000):
//!   Credit's, and the long slice is `tslice_ms` (Xen's default; the paper keeps Credit's
//!   30 ms for LPs).
//! - `short_slice_us` (integer, us, default 1000, 100..tslice): the SPs' slice. The paper
//!   prints no value. 1 ms because Xen 4.4's default rate limit already keeps any vCPU on
//!   its pCPU for 1 ms, so with the default `ratelimit_us` nothing shorter would take
//!   effect; it is the finest slice reachable without changing Credit's defaults, and it
//!   is still 30x shorter than the long one (vSlicer's micro slices are of this order;
//!   vTurbo's 0.1 ms turbo slice needs `ratelimit_us` <= 100). `ratelimit_us` must not
//!   exceed it.
//! - `alpha` (number, default 0.125, 0..1): weight of the last period in EstIO / EstCPU.
//! - `beta` (number, default 0.875, 0..1): weight of history in historyBusy (and in the
//!   vCPU load of eq. 9, see deviations).
//! - `balance_a` (integer, credits, default 40), `balance_b` (integer, credits, default 80):
//!   how much busier (historyBusy, credits per period) a same-socket / other-socket pCPU
//!   must be to be balanced from. alpha, beta, A, B are the paper's values (section 4).
//! - Per VM: `class` (`lsvm` / `nlsvm` / `mixvm`, none = CPU), `reserved_vcpus` (MixVM,
//!   default 1), and Credit's `weight` and `cap`.
//!
//! ## Sources
//! Liu K, Tong W, Feng D, Liu J, Zhang J, "Flexible and efficient VCPU scheduling
//! algorithm", Ruan Jian Xue Bao 2017 28(2):398-410: sections 3.1 (eqs. 1-4, ForIO/ForCPU),
//! 3.2 (eqs. 5-7), 3.3 (the balancing steps (1)-(8), eqs. 8-9), 4 (alpha, beta, A, B).
//! Built on Xen 4.4.2's Credit as modelled in `credit.rs`.
//!
//! ## Deviations and readings
//! - historyLoad is eq. 6's running total (for IO_Boost). Eq. 9 sets a vCPU's historyLoad
//!   against historyBusy, an average of credits per period, which a total since boot would
//!   dwarf; the LP victim rule therefore uses the vCPU's counterpart of historyBusy,
//!   beta load + (1 - beta) credits of the period. (An earlier reading used that average
//!   for IO_Boost too: a starved vCPU's average decays, its IO_Boost grows without bound,
//!   and it starves for good behind a busy vCPU of its priority.)
//! - The paper also orders a vCPU put back after its slice by IO_Boost. Taken literally
//!   that starves: 1 / historyLoad puts the busiest vCPU first, and eq. 5's increments
//!   (1 / credits paid this period, about 0.1 per 1 ms slice) need more than a period to
//!   outgrow the IO_Boost of a vCPU that has paid only a few credits in total, so a
//!   CPU-bound vCPU of an LSVM keeps its pCPU for good against a sibling vCPU of equal
//!   priority (found by the property tests: 128 ms and more without running). Requeued
//!   vCPUs therefore rotate first in, first out among equals; IO_Boost orders arrivals.
//! - BOOST is kept: IO_Boost orders vCPUs of equal Credit priority (so an OVER vCPU still
//!   waits behind UNDER ones and weights hold).
//! - The sibling step takes the sibling only if it has a vCPU to give (the paper stops
//!   there even if it has none); steps (3)-(6) likewise only consider pCPUs with a vCPU to
//!   give. Step (3)'s "other pCPUs" exclude the sibling already tried.
//! - The pool-resize and historyBusy timers are the accounting period (the paper's timers
//!   have no stated period).
//! - A vCPU whose affinity misses its pool entirely keeps its affinity (counted).
//! - Not modelled: moving a MixVM's low-CPU processes to its reserved vCPU (a scenario
//!   places those workloads with `vcpus = [0]`).

use super::credit::{self, Credit, CreditPolicy};
use super::{Counters, ParamInfo, ParamKind, Params, SchedCtx, SchedView, TaskId};
use crate::reader::{Res, Table};
use crate::time::SimDuration;
use crate::topology::{CpuSet, Topology};

pub const DESCRIPTION: &str = "FLMS (Xen 4.4.2 Credit + latency/CPU pCPU pools resized by load, 1 ms short slices ordered by IO_Boost, sibling/socket-aware idle balancing)";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "tslice_ms",
        kind: ParamKind::Int,
        default: "30",
        help: "long slice (LPs) and accounting period in ms (1-1000); the tick is a third of it",
    },
    ParamInfo {
        name: "ratelimit_us",
        kind: ParamKind::Int,
        default: "1000",
        help: "a still-runnable vCPU keeps its pCPU at least this long, in us (0 = off, else 100-500000, at most the short slice)",
    },
    ParamInfo {
        name: "short_slice_us",
        kind: ParamKind::Int,
        default: "1000",
        help: "slice of latency vCPUs on the short-slice pCPUs, in us (100 up to the long slice)",
    },
    ParamInfo {
        name: "alpha",
        kind: ParamKind::Float,
        default: "0.125",
        help: "weight of the last period in the I/O and CPU load estimates (0-1)",
    },
    ParamInfo {
        name: "beta",
        kind: ParamKind::Float,
        default: "0.875",
        help: "weight of history in pCPU and vCPU load averages (0-1)",
    },
    ParamInfo {
        name: "balance_a",
        kind: ParamKind::Int,
        default: "40",
        help: "credits per period a same-socket pCPU must be busier by to be balanced from",
    },
    ParamInfo {
        name: "balance_b",
        kind: ParamKind::Int,
        default: "80",
        help: "credits per period a pCPU on another socket must be busier by to be balanced from",
    },
    ParamInfo {
        name: "pool_sample",
        kind: ParamKind::Choice(&["run", "demand"]),
        default: "run",
        help: "what SampleIO/SampleCPU count: \"run\" = run time (the paper), \"demand\" = run time plus a period for each vCPU found waiting at its end",
    },
];

/// Checks the parameters beyond their types: Credit's, and a short slice between Xen's
/// 100 us rate-limit floor and the long slice, no shorter than the rate limit.
pub fn check_params(t: &Table) -> Res<()> {
    credit::check_params(t)?;
    let tslice = match t.get("tslice_ms") {
        Some(o) => o.u64_in(1, 1000)?,
        None => 30,
    };
    let short = match t.get("short_slice_us") {
        Some(o) => {
            let s = o.u64_in(100, 1_000_000)?;
            if s > tslice * 1000 {
                return o.err(format!(
                    "{s} us is longer than the long slice (tslice_ms = {tslice})"
                ));
            }
            s
        }
        None => 1000,
    };
    let too_long = |r: u64| r != 0 && r > short;
    match t.get("ratelimit_us") {
        Some(o) => {
            let r = o.u64_in(0, 500_000)?;
            if too_long(r) {
                return o.err(format!(
                    "{r} us is longer than the short slice (short_slice_us = {short}); short slices would not take effect"
                ));
            }
        }
        None if too_long(1000) => {
            let o = t
                .get("short_slice_us")
                .expect("a short slice below the default");
            return o.err(format!(
                "{short} us is shorter than the rate limit (ratelimit_us, default 1000); lower ratelimit_us too"
            ));
        }
        None => {}
    }
    for name in ["alpha", "beta"] {
        if let Some(o) = t.get(name) {
            o.f64_in(0.0, 1.0)?;
        }
    }
    Ok(())
}

// Counters, one per decision branch.
super::counters::declare_counters! {
    RESIZE_GROW_SP => "flms_resize_grow_sp",
    RESIZE_SHRINK_SP => "flms_resize_shrink_sp",
    RESIZE_NONE => "flms_resize_none",
    REBIND_MOVED => "flms_rebind_moved",
    REBIND_IN_PLACE => "flms_rebind_in_place",
    POOL_OUTSIDE_AFFINITY => "flms_pool_outside_affinity",
    BALANCE_SIBLING => "flms_balance_sibling",
    BALANCE_SAME_SOCKET => "flms_balance_same_socket_above_a",
    BALANCE_OTHER_SOCKET => "flms_balance_other_socket_above_b",
    BALANCE_NONE => "flms_balance_none_busy_enough",
    BALANCE_NOTHING_TO_TAKE => "flms_balance_nothing_to_take",
    VICTIM_SP => "flms_victim_sp_smallest_io_boost",
    VICTIM_LP => "flms_victim_lp_equalising_load",
    DISPATCH_SHORT => "flms_dispatch_short_slice",
    DISPATCH_LONG => "flms_dispatch_long_slice",
    SAMPLED_WAITING => "flms_sampled_waiting_vcpu",
}

/// The number of SPs (eqs. 3-4 plus the minimum pool sizes; see the header).
pub fn sp_count(est_io: f64, est_cpu: f64, pnum: usize, has_io: bool, has_cpu: bool) -> usize {
    match (has_io, has_cpu) {
        (false, _) => 0,
        (true, false) => pnum,
        (true, true) if pnum < 2 => 0,
        (true, true) => {
            let total = est_io + est_cpu;
            let raw = if total > 0.0 {
                (est_io * pnum as f64 / total).round() as usize
            } else {
                0
            };
            raw.clamp(1, pnum - 1)
        }
    }
}

/// pCPUs in pool order: by (socket, core, thread); the SPs are the last of them.
fn pool_order(topo: &Topology) -> Vec<usize> {
    let mut order: Vec<usize> = (0..topo.ncpus()).collect();
    order.sort_by_key(|&c| {
        let i = &topo.cpus[c];
        (i.socket, i.core, i.thread, c)
    });
    order
}

/// ForIO for `sp_num` SPs: the last `sp_num` pCPUs of `order`.
fn for_io_of(order: &[usize], sp_num: usize) -> CpuSet {
    let mut set = CpuSet::empty(order.len());
    for &c in &order[order.len() - sp_num..] {
        set.insert(c);
    }
    set
}

/// Which balancing branch found a pCPU to take from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BalanceFrom {
    Sibling(usize),
    SameSocket(usize),
    OtherSocket(usize),
    None,
}

/// Steps (2)-(8) of section 3.3 for idle pCPU `cpu`: `givers` are the pCPUs of its pool
/// with a vCPU it may take, `busy` every pCPU's historyBusy. The paper's rule written
/// literally: the scheduler runs `balance_source_lazy`, and the tests keep this as its
/// oracle.
#[cfg(test)]
pub fn balance_source(
    topo: &Topology,
    cpu: usize,
    givers: &CpuSet,
    busy: &[f64],
    a: f64,
    b: f64,
) -> BalanceFrom {
    let me = &topo.cpus[cpu];
    if let Some(s) = givers
        .iter()
        .find(|&c| c != cpu && topo.cpus[c].core == me.core)
    {
        return BalanceFrom::Sibling(s);
    }
    // The busiest of a set, the lowest id on ties.
    let busiest = |pred: &dyn Fn(usize) -> bool| {
        givers
            .iter()
            .filter(|&c| c != cpu && pred(c))
            .fold(None, |best: Option<usize>, c| match best {
                Some(x) if busy[x] >= busy[c] => Some(x),
                _ => Some(c),
            })
    };
    if let Some(s) = busiest(&|c| topo.cpus[c].socket == me.socket) {
        if busy[s] - busy[cpu] > a {
            return BalanceFrom::SameSocket(s);
        }
    }
    if let Some(s) = busiest(&|c| topo.cpus[c].socket != me.socket) {
        if busy[s] - busy[cpu] > b {
            return BalanceFrom::OtherSocket(s);
        }
    }
    BalanceFrom::None
}

/// `balance_source` without building the set of givers: `peers` are the pCPUs that may
/// be givers and `is_giver` decides (it scans a run queue, so it is asked only where the
/// answer can change the result: the siblings, and the pCPUs busier than `cpu` by more
/// than the step's threshold that would beat the best so far). `None` when no peer is a
/// giver at all (the "nothing to take" branch), else what `balance_source` would return
/// for the givers among `peers` (`tests::lazy_balance_matches_balance_source`).
pub fn balance_source_lazy(
    topo: &Topology,
    cpu: usize,
    peers: &CpuSet,
    mut is_giver: impl FnMut(usize) -> bool,
    busy: &[f64],
    a: f64,
    b: f64,
) -> Option<BalanceFrom> {
    let me = &topo.cpus[cpu];
    if let Some(s) = topo
        .core_cpus(me.core)
        .find(|&c| c != cpu && peers.contains(c) && is_giver(c))
    {
        return Some(BalanceFrom::Sibling(s));
    }
    let (mut same, mut other): (Option<usize>, Option<usize>) = (None, None);
    for c in peers.iter().filter(|&c| c != cpu) {
        let on_socket = topo.cpus[c].socket == me.socket;
        let threshold = if on_socket { a } else { b };
        if busy[c] - busy[cpu] <= threshold {
            continue;
        }
        let best = if on_socket { &mut same } else { &mut other };
        if best.is_some_and(|x| busy[x] >= busy[c]) {
            continue;
        }
        if is_giver(c) {
            *best = Some(c);
        }
    }
    if let Some(s) = same {
        return Some(BalanceFrom::SameSocket(s));
    }
    if let Some(s) = other {
        return Some(BalanceFrom::OtherSocket(s));
    }
    peers
        .iter()
        .any(|c| c != cpu && is_giver(c))
        .then_some(BalanceFrom::None)
}

/// SP victim: the candidate (task, IO_Boost), in queue order, with the smallest IO_Boost.
pub fn sp_victim(cands: &[(TaskId, f64)]) -> Option<TaskId> {
    cands
        .iter()
        .fold(None, |best: Option<(TaskId, f64)>, &(t, b)| match best {
            Some((_, bb)) if bb <= b => best,
            _ => Some((t, b)),
        })
        .map(|(t, _)| t)
}

/// LP victim (eq. 9): the candidate (task, historyLoad), in queue order, that best
/// equalises busy_src - load and busy_dst + load.
pub fn lp_victim(busy_src: f64, busy_dst: f64, cands: &[(TaskId, f64)]) -> Option<TaskId> {
    cands
        .iter()
        .map(|&(t, load)| (t, ((busy_src - load) - (busy_dst + load)).abs()))
        .fold(None, |best: Option<(TaskId, f64)>, (t, gap)| match best {
            Some((_, g)) if g <= gap => best,
            _ => Some((t, gap)),
        })
        .map(|(t, _)| t)
}

pub struct Flms {
    short_slice: SimDuration,
    alpha: f64,
    beta: f64,
    balance_a: f64,
    balance_b: f64,
    /// `pool_sample = "demand"`: waiting vCPUs count in SampleIO / SampleCPU.
    sample_demand: bool,
    /// SPs (`ForIO`) and LPs (`ForCPU`), complementary.
    for_io: CpuSet,
    for_cpu: CpuSet,
    order: Vec<usize>,
    est_io: f64,
    est_cpu: f64,
    /// Per vCPU: a latency (I/O) vCPU.
    io_vcpu: Vec<bool>,
    has_io: bool,
    has_cpu: bool,
    /// Per vCPU: credits paid this period, in total (historyLoad), on average per period
    /// (for eq. 9), and its IO_Boost.
    period_load: Vec<i64>,
    history_load: Vec<i64>,
    load_avg: Vec<f64>,
    io_boost: Vec<f64>,
    /// Per pCPU: credits paid on it this period, and its load average.
    current_busy: Vec<i64>,
    history_busy: Vec<f64>,
    /// Reused for the victim's candidates on every balance (no allocation per call).
    victim_scratch: Vec<(TaskId, f64)>,
    counters: Counters<NCOUNTERS>,
}

impl Flms {
    pub fn new(p: &Params) -> Flms {
        Flms {
            short_slice: SimDuration::from_us(p.int("short_slice_us").max(1) as u64),
            alpha: p.float("alpha"),
            beta: p.float("beta"),
            balance_a: p.int("balance_a") as f64,
            balance_b: p.int("balance_b") as f64,
            sample_demand: p.choice("pool_sample") == "demand",
            for_io: CpuSet::empty(1),
            for_cpu: CpuSet::empty(1),
            order: vec![],
            est_io: 0.0,
            est_cpu: 0.0,
            io_vcpu: vec![],
            has_io: false,
            has_cpu: false,
            period_load: vec![],
            history_load: vec![],
            load_avg: vec![],
            io_boost: vec![],
            current_busy: vec![],
            history_busy: vec![],
            victim_scratch: vec![],
            counters: Counters::new(COUNTER_NAMES),
        }
    }

    /// The pool vCPU `t` belongs to, before its affinity.
    fn class_pool(&self, t: usize) -> &CpuSet {
        match (
            self.io_vcpu[t],
            self.for_io.is_empty(),
            self.for_cpu.is_empty(),
        ) {
            (true, false, _) | (false, _, true) => &self.for_io,
            _ => &self.for_cpu,
        }
    }

    /// The pool vCPU `t` is bound to: its class's pool within its affinity, or its
    /// affinity when the two do not meet.
    fn bound_pool(&self, view: &SchedView, t: usize) -> CpuSet {
        let aff = &view.tasks[t].affinity;
        let p = self.class_pool(t).intersect(aff);
        if p.is_empty() {
            aff.clone()
        } else {
            p
        }
    }

    fn set_split(&mut self, sp_num: usize) {
        self.for_io = for_io_of(&self.order, sp_num);
        self.for_cpu = CpuSet::full(self.order.len()).subtract(&self.for_io);
    }
}

impl CreditPolicy for Flms {
    fn init(c: &mut Credit<Self>, ctx: &mut SchedCtx) {
        let v = ctx.view;
        let n = v.topo.ncpus();
        let nt = v.tasks.len();
        let f = c.policy_mut();
        f.order = pool_order(&v.topo);
        f.io_vcpu = v.tasks.iter().map(|t| t.latency_vcpu).collect();
        f.has_io = f.io_vcpu.iter().any(|&x| x);
        f.has_cpu = f.io_vcpu.iter().any(|&x| !x);
        f.set_split(sp_count(0.0, 0.0, n, f.has_io, f.has_cpu));
        f.period_load = vec![0; nt];
        f.history_load = vec![0; nt];
        f.load_avg = vec![0.0; nt];
        f.io_boost = vec![0.0; nt];
        f.current_busy = vec![0; n];
        f.history_busy = vec![0.0; n];
        for t in 0..nt {
            let f = c.policy_mut();
            let pool = f.bound_pool(v, t);
            if f.class_pool(t).intersect(&v.tasks[t].affinity).is_empty() {
                f.counters.bump(POOL_OUTSIDE_AFFINITY);
            }
            let short = f.io_vcpu[t].then_some(f.short_slice);
            c.set_initial_pool(t as TaskId, pool);
            if let Some(short) = short {
                c.set_slice(t as TaskId, short);
            }
        }
    }

    fn after_acct(c: &mut Credit<Self>, ctx: &mut SchedCtx) {
        let (beta, alpha) = (c.policy().beta, c.policy().alpha);
        let (mut sample_io, mut sample_cpu) = (0i64, 0i64);
        let period_credits = c.credits_per_tslice();
        for t in 0..ctx.view.tasks.len() {
            // pool_sample = "demand": a vCPU found waiting counts as wanting the period.
            let waiting = c.policy().sample_demand
                && ctx.view.state[t] == super::RunState::Runnable
                && !c.is_parked(t as TaskId);
            let f = c.policy_mut();
            let paid = std::mem::take(&mut f.period_load[t]);
            let sample = paid + if waiting { period_credits } else { 0 };
            if waiting {
                f.counters.bump(SAMPLED_WAITING);
            }
            if f.io_vcpu[t] {
                sample_io += sample;
            } else {
                sample_cpu += sample;
            }
            f.history_load[t] += paid;
            f.load_avg[t] = beta * f.load_avg[t] + (1.0 - beta) * paid as f64;
            f.io_boost[t] = if f.history_load[t] > 0 {
                1.0 / f.history_load[t] as f64
            } else {
                0.0
            };
        }
        let f = c.policy_mut();
        for p in 0..f.current_busy.len() {
            let paid = std::mem::take(&mut f.current_busy[p]);
            f.history_busy[p] = beta * f.history_busy[p] + (1.0 - beta) * paid as f64;
        }
        f.est_io = (1.0 - alpha) * f.est_io + alpha * sample_io as f64;
        f.est_cpu = (1.0 - alpha) * f.est_cpu + alpha * sample_cpu as f64;
        let pnum = f.order.len();
        let sp_num = sp_count(f.est_io, f.est_cpu, pnum, f.has_io, f.has_cpu);
        let before = f.for_io.len();
        if sp_num == before {
            f.counters.bump(RESIZE_NONE);
            return;
        }
        f.counters.bump(if sp_num > before {
            RESIZE_GROW_SP
        } else {
            RESIZE_SHRINK_SP
        });
        f.set_split(sp_num);
        for t in 0..ctx.view.tasks.len() as TaskId {
            let ti = t as usize;
            let pool = c.policy().bound_pool(ctx.view, ti);
            if pool == *c.pool(t) {
                continue;
            }
            let in_place = pool.contains(c.processor(t) as usize);
            let f = c.policy_mut();
            let aff = &ctx.view.tasks[ti].affinity;
            if f.class_pool(ti).intersect(aff).is_empty() {
                f.counters.bump(POOL_OUTSIDE_AFFINITY);
            }
            f.counters.bump(if in_place {
                REBIND_IN_PLACE
            } else {
                REBIND_MOVED
            });
            c.set_pool(ctx, t, pool);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    /// Pools complementary and covering the host, both non-empty when both classes
    /// exist on a host of two pCPUs or more; every vCPU bound to its class's pool; no
    /// vCPU queued outside its pool, and none running outside it unless already marked
    /// for migration (it leaves at its pCPU's next decision).
    fn check(c: &Credit<Self>, view: &SchedView) -> Result<(), String> {
        let f = c.policy();
        let n = view.topo.ncpus();
        if !f.for_io.intersect(&f.for_cpu).is_empty() || f.for_io.len() + f.for_cpu.len() != n {
            return Err(format!(
                "flms: ForIO {:?} and ForCPU {:?} are not complementary",
                f.for_io, f.for_cpu
            ));
        }
        if f.has_io && f.has_cpu && n >= 2 && (f.for_io.is_empty() || f.for_cpu.is_empty()) {
            return Err("flms: a class with vCPUs has an empty pool".into());
        }
        for t in 0..view.tasks.len() {
            if *c.pool(t as TaskId) != f.bound_pool(view, t) {
                return Err(format!(
                    "flms: task {t} is bound to {:?}, not to its class's pool",
                    c.pool(t as TaskId)
                ));
            }
        }
        for (cpu, curr) in view.cpu_curr.iter().enumerate() {
            if let Some(t) = *curr {
                if !c.pool(t).contains(cpu) && !c.is_migrating(t) {
                    return Err(format!(
                        "flms: task {t} runs on pCPU {cpu}, outside its pool {:?}",
                        c.pool(t)
                    ));
                }
            }
            for &t in c.queue(cpu) {
                if !c.pool(t).contains(cpu) {
                    return Err(format!(
                        "flms: task {t} waits on pCPU {cpu}, outside its pool {:?}",
                        c.pool(t)
                    ));
                }
            }
        }
        Ok(())
    }

    /// On an SP, an arriving vCPU goes ahead of equals with a larger IO_Boost; the vCPU
    /// being put back after its slice (still `curr` while it is requeued) does not.
    fn runs_before(c: &Credit<Self>, t: TaskId, other: TaskId, cpu: usize) -> bool {
        let f = c.policy();
        f.for_io.contains(cpu)
            && c.running(cpu) != Some(t)
            && f.io_boost[t as usize] < f.io_boost[other as usize]
    }

    fn charged(c: &mut Credit<Self>, t: TaskId, credits: i64) {
        let cpu = c.processor(t) as usize;
        let f = c.policy_mut();
        f.period_load[t as usize] += credits;
        f.current_busy[cpu] += credits;
    }

    fn dispatched(c: &mut Credit<Self>, t: TaskId, _cpu: usize) {
        let f = c.policy_mut();
        let ti = t as usize;
        f.io_boost[ti] += 1.0 / f.period_load[ti].max(1) as f64;
        f.counters.bump(if f.io_vcpu[ti] {
            DISPATCH_SHORT
        } else {
            DISPATCH_LONG
        });
    }

    fn load_balance(c: &mut Credit<Self>, ctx: &SchedCtx, cpu: usize, pri: i8) -> Option<TaskId> {
        let f = c.policy();
        let on_sp = f.for_io.contains(cpu);
        let own = if on_sp { &f.for_io } else { &f.for_cpu };
        let mut peers = c.maybe_queued().intersect(own);
        peers.remove(cpu);
        let from = balance_source_lazy(
            &ctx.view.topo,
            cpu,
            &peers,
            |peer| {
                c.running(peer).is_some() && !c.is_idler(peer) && has_candidate(c, peer, cpu, pri)
            },
            &f.history_busy,
            f.balance_a,
            f.balance_b,
        );
        let Some(from) = from else {
            c.policy_mut().counters.bump(BALANCE_NOTHING_TO_TAKE);
            return None;
        };
        let (src, branch) = match from {
            BalanceFrom::Sibling(s) => (s, BALANCE_SIBLING),
            BalanceFrom::SameSocket(s) => (s, BALANCE_SAME_SOCKET),
            BalanceFrom::OtherSocket(s) => (s, BALANCE_OTHER_SOCKET),
            BalanceFrom::None => {
                c.policy_mut().counters.bump(BALANCE_NONE);
                return None;
            }
        };
        let mut with = std::mem::take(&mut c.policy_mut().victim_scratch);
        with.clear();
        let f = c.policy();
        with.extend(candidates(c, src, cpu, pri).map(|t| {
            let key = if on_sp {
                f.io_boost[t as usize]
            } else {
                f.load_avg[t as usize]
            };
            (t, key)
        }));
        let victim = if on_sp {
            sp_victim(&with)
        } else {
            lp_victim(f.history_busy[src], f.history_busy[cpu], &with)
        }
        .expect("a giver has a candidate");
        let f = c.policy_mut();
        f.victim_scratch = with;
        f.counters.bump(branch);
        f.counters.bump(if on_sp { VICTIM_SP } else { VICTIM_LP });
        c.take_queued(victim, cpu);
        Some(victim)
    }
}

/// Whether idle `cpu` may take anything from `peer` (`candidates` without the list: this
/// runs for every pCPU of the pool on each balance attempt).
fn has_candidate(c: &Credit<Flms>, peer: usize, cpu: usize, pri: i8) -> bool {
    c.queue(peer)
        .iter()
        .take_while(|&&t| c.priority(t) > pri)
        .any(|&t| c.pool(t).contains(cpu))
}

/// What idle `cpu` may take from `peer`: its queued vCPUs of priority above `pri` whose
/// pool contains `cpu`, in queue order (a queue is in priority order).
fn candidates<'a>(
    c: &'a Credit<Flms>,
    peer: usize,
    cpu: usize,
    pri: i8,
) -> impl Iterator<Item = TaskId> + 'a {
    c.queue(peer)
        .iter()
        .copied()
        .take_while(move |&t| c.priority(t) > pri)
        .filter(move |&t| c.pool(t).contains(cpu))
}

/// `flms`: Credit with the FLMS policy. Its periodic events are Credit's ticks (short
/// slices end only where latency vCPUs run).
impl super::Registered for Flms {
    type Sched = Credit<Flms>;
    const NAME: &'static str = "flms";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: true,
        pools: super::Pools::Resized,
    };
    fn build(p: &Params) -> Credit<Flms> {
        Credit::with_policy(p, Flms::new(p))
    }
    fn check_params(t: &Table) -> Res<()> {
        self::check_params(t)
    }
    fn event_period(p: &Params) -> Option<crate::time::SimDuration> {
        Some(crate::time::SimDuration(credit::tick_ns(p.table)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::sched::{RunState, TaskInfo};

    /// FLMS on `ncpus` pCPUs of one socket; tasks are latency vCPUs or not.
    fn setup(ncpus: usize, latency: &[bool]) -> (SchedView, Credit<Flms>) {
        let view = SchedView {
            topo: Topology::new(1, ncpus as u32, 1, 1),
            tasks: latency
                .iter()
                .enumerate()
                .map(|(i, &l)| TaskInfo {
                    vm: i as u32,
                    index: 0,
                    affinity: CpuSet::full(ncpus),
                    weight: 256,
                    cap: 0,
                    class: None,
                    latency_vcpu: l,
                    host_thread: false,
                    rt: Default::default(),
                })
                .collect(),
            state: vec![RunState::Halted; latency.len()],
            cpu_curr: vec![None; ncpus],
            nvms: latency.len() as u32,
        };
        let sched = credit::started(&view, &toml::Table::new(), PARAMS, Flms::new);
        (view, sched)
    }

    /// At start one SP (the last pCPU) holds the latency vCPUs with the short slice; the
    /// others are LPs. On the SP, arriving vCPUs of one priority queue by IO_Boost
    /// (smallest first, ties first in first out), a requeued one behind its equals; on an
    /// LP, first in first out whatever IO_Boost.
    #[test]
    fn sp_queues_are_ordered_by_io_boost_lp_queues_are_fifo() {
        let (_view, mut c) = setup(3, &[true, true, true, false, false, false]);
        assert_eq!(c.policy().for_io.iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(c.pool(0).iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(c.pool(3).iter().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(c.slice_of(0), SimDuration(1_000_000));
        assert_eq!(c.slice_of(3), SimDuration(30_000_000));
        for (t, b) in [(0, 0.5), (1, 0.1), (2, 0.5), (3, 0.5), (4, 0.1), (5, 0.3)] {
            c.policy_mut().io_boost[t] = b;
        }
        for t in 0..3 {
            c.test_enqueue(t, 2);
        }
        assert_eq!(*c.queue(2), [1, 0, 2]);
        for t in 3..6 {
            c.test_enqueue(t, 0);
        }
        assert_eq!(*c.queue(0), [3, 4, 5]);
        // The vCPU put back after its slice goes behind its equals whatever its IO_Boost.
        c.test_queue_mut(2).clear();
        c.test_enqueue(0, 2);
        c.test_set_running(2, Some(1));
        c.test_enqueue(1, 2);
        assert_eq!(*c.queue(2), [0, 1]);
        c.test_set_running(2, None);
        // Priority still comes first: a BOOSTed vCPU goes ahead of a smaller IO_Boost.
        c.test_queue_mut(2).clear();
        c.test_set_priority(1, credit::PRI_UNDER);
        c.test_set_priority(0, credit::PRI_BOOST);
        c.test_enqueue(1, 2);
        c.test_enqueue(0, 2);
        assert_eq!(*c.queue(2), [0, 1]);
    }

    /// Eq. 3 rounded to the nearest, with one SP and one LP kept while both classes have
    /// vCPUs, none for a class without; a one-pCPU host cannot split.
    #[test]
    fn pool_sizes_follow_the_io_share_rounded_with_one_pcpu_minimum() {
        // 8 pCPUs: I/O a quarter of the run time -> 2 SPs; 30% -> 2.4 -> 2; 32% -> 2.56 -> 3.
        assert_eq!(sp_count(25.0, 75.0, 8, true, true), 2);
        assert_eq!(sp_count(30.0, 70.0, 8, true, true), 2);
        assert_eq!(sp_count(32.0, 68.0, 8, true, true), 3);
        // A ping-like load (1%) still gets one SP; an I/O-only load leaves one LP.
        assert_eq!(sp_count(1.0, 99.0, 8, true, true), 1);
        assert_eq!(sp_count(100.0, 0.0, 8, true, true), 7);
        // No history yet: the minimum.
        assert_eq!(sp_count(0.0, 0.0, 8, true, true), 1);
        // A class without vCPUs gets nothing.
        assert_eq!(sp_count(50.0, 50.0, 8, false, true), 0);
        assert_eq!(sp_count(50.0, 50.0, 8, true, false), 8);
        assert_eq!(sp_count(50.0, 50.0, 1, true, true), 0);
    }

    /// The estimates are exponential averages with alpha: one period of pure I/O moves
    /// the split by an eighth of the way.
    #[test]
    fn estimates_move_by_alpha_per_period() {
        let (mut io, mut cpu) = (0.0f64, 300.0f64);
        let a = 0.125;
        for _ in 0..3 {
            io = (1.0 - a) * io + a * 300.0;
            cpu = (1.0 - a) * cpu + a * 0.0;
        }
        // io = 300 (1 - 0.875^3) = 99.0, cpu = 300 x 0.875^3 = 201.0.
        assert!((io - 99.0234375).abs() < 1e-9 && (cpu - 200.9765625).abs() < 1e-9);
        assert_eq!(sp_count(io, cpu, 4, true, true), 1);
        assert_eq!(sp_count(io, cpu, 8, true, true), 3);
    }

    /// The SPs are the last pCPUs in (socket, core, thread) order: whole cores, last
    /// socket first.
    #[test]
    fn pools_grow_by_whole_cores_from_the_last_socket() {
        let topo = Topology::new(2, 2, 2, 1);
        let order = pool_order(&topo);
        let sp2 = for_io_of(&order, 2);
        assert_eq!(sp2.iter().collect::<Vec<_>>(), vec![6, 7]);
        assert_eq!(topo.cpus[6].core, topo.cpus[7].core);
        let sp4 = for_io_of(&order, 4);
        assert!(sp4.iter().all(|c| topo.cpus[c].socket == 1));
    }

    /// SP victim: the smallest IO_Boost, the earliest queued on ties.
    #[test]
    fn sp_victim_is_the_smallest_io_boost() {
        assert_eq!(sp_victim(&[(3, 0.5), (4, 0.1), (5, 0.3)]), Some(4));
        assert_eq!(sp_victim(&[(3, 0.2), (4, 0.2)]), Some(3));
        assert_eq!(sp_victim(&[]), None);
    }

    /// LP victim: the load closest to half the gap between source and destination, so
    /// that both end equally busy (eq. 9); not the heaviest, not the lightest.
    #[test]
    fn lp_victim_equalises_source_and_destination() {
        // Source 280, destination 40: ideal load 120.
        let cands = [(1, 250.0), (2, 110.0), (3, 10.0), (4, 135.0)];
        assert_eq!(lp_victim(280.0, 40.0, &cands), Some(2));
        // Ties (100 and 140 are both 20 off): queue order.
        assert_eq!(lp_victim(280.0, 40.0, &[(7, 140.0), (8, 100.0)]), Some(7));
    }

    /// Sibling first (no threshold); then the busiest on the socket if busier by more
    /// than A; then the busiest elsewhere if by more than B; else none.
    #[test]
    fn balancing_prefers_sibling_then_socket_above_a_then_anywhere_above_b() {
        // 2 sockets x 2 cores x 2 threads: pCPU 0's sibling is 1; 2, 3 same socket.
        let topo = Topology::new(2, 2, 2, 1);
        let set = |v: &[usize]| {
            let mut s = CpuSet::empty(8);
            v.iter().for_each(|&c| s.insert(c));
            s
        };
        let mut busy = vec![0.0; 8];
        busy[1] = 5.0;
        busy[2] = 30.0;
        busy[3] = 45.0;
        busy[4] = 300.0;
        let src = |g: &[usize], busy: &[f64]| balance_source(&topo, 0, &set(g), busy, 40.0, 80.0);
        assert_eq!(src(&[1, 2, 3, 4], &busy), BalanceFrom::Sibling(1));
        assert_eq!(src(&[2, 3, 4], &busy), BalanceFrom::SameSocket(3));
        // 2 is only 30 busier: not above A; the other socket's 300 is above B.
        assert_eq!(src(&[2, 4], &busy), BalanceFrom::OtherSocket(4));
        busy[4] = 70.0;
        assert_eq!(src(&[2, 4], &busy), BalanceFrom::None);
        assert_eq!(src(&[], &busy), BalanceFrom::None);
    }

    #[test]
    fn lazy_balance_matches_balance_source() {
        let mut rng = Rng::from_state(0x2545_F491_4F6C_DD1D);
        let mut branches = [0u32; 5];
        for &(s, c, t) in &[(1, 4, 2), (2, 4, 2), (2, 3, 1), (4, 2, 2), (2, 40, 2)] {
            let topo = Topology::new(s, c, t, 1);
            let n = topo.ncpus();
            for _ in 0..3000 {
                let cpu = rng.below(n as u64) as usize;
                let (mut peers, mut givers) = (CpuSet::empty(n), CpuSet::empty(n));
                for p in 0..n {
                    if rng.below(3) != 0 {
                        peers.insert(p);
                        if rng.below(4) != 0 {
                            givers.insert(p);
                        }
                    }
                }
                // Coarse values so that ties happen.
                let busy: Vec<f64> = (0..n).map(|_| rng.below(12) as f64 * 15.0).collect();
                let lazy = balance_source_lazy(
                    &topo,
                    cpu,
                    &peers,
                    |p| givers.contains(p),
                    &busy,
                    40.0,
                    80.0,
                );
                let mut real = givers.clone();
                real.remove(cpu);
                let want = if real.is_empty() {
                    None
                } else {
                    Some(balance_source(&topo, cpu, &real, &busy, 40.0, 80.0))
                };
                assert_eq!(lazy, want, "cpu {cpu}, givers {real}, busy {busy:?}");
                branches[match want {
                    None => 0,
                    Some(BalanceFrom::Sibling(_)) => 1,
                    Some(BalanceFrom::SameSocket(_)) => 2,
                    Some(BalanceFrom::OtherSocket(_)) => 3,
                    Some(BalanceFrom::None) => 4,
                }] += 1;
            }
        }
        assert!(
            branches.iter().all(|&k| k > 50),
            "every branch is exercised: {branches:?}"
        );
    }
}
