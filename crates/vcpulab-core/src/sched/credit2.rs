//! `credit2` — Xen's Credit2 scheduler, the default since Xen 4.12.
//!
//! ## Policy
//! **Credits are time, scaled by weight.** Every unit (vCPU) holds a credit in
//! nanoseconds. Running burns it: a unit of the highest weight on its runqueue burns one
//! credit per nanosecond, a unit of weight w burns `max_weight / w` per nanosecond (the
//! remainder of that division is carried in a per-unit residual so that short runs add
//! up). A unit starts with `CSCHED2_CREDIT_INIT` (10 ms) and never drops below
//! `CSCHED2_CREDIT_MIN` (-10 ms).
//!
//! **Runqueues.** pCPUs share runqueues by topology (`runqueue`: one per socket by
//! default), at most `max_cpus_runqueue` pCPUs each with SMT siblings kept together. A
//! runqueue is ordered by credit, highest first; a unit is inserted after every unit with
//! at least its credit. Any pCPU of a runqueue may take any unit of it whose affinity
//! allows.
//!
//! **Reset.** When a pCPU has chosen what to run and the larger of that unit's credit and
//! the runqueue head's is at or below zero (`CSCHED2_CREDIT_RESET`), an epoch ends: every
//! unit of the runqueue (running ones pay for their run first) gets `CSCHED2_CREDIT_INIT`
//! added (twice that if the chosen unit sits at `CREDIT_MIN`), then is clipped to
//! `CREDIT_INIT + CSCHED2_CARRYOVER_MAX` (10.5 ms): the carryover. A balancing pass
//! follows the reset.
//!
//! **Scheduling** (`csched2_schedule`, `runq_candidate`). The running unit pays for its
//! run. If it is still runnable and has run less than `ratelimit_us` since it was put on
//! the pCPU it continues. Otherwise it is the candidate if runnable (else idle is), and the
//! runqueue is scanned from the head while the queued unit has more credit than the
//! candidate: a unit is skipped if its affinity forbids this pCPU, if another pCPU was
//! tickled for it and has not rescheduled yet, if it last ran on another pCPU and its
//! credit is not at least `migrate_resist_us` above the candidate's, or if its capped
//! domain has no budget for it (it is then parked); the first unit not skipped is taken.
//! A unit that moves pCPU gets `CSCHED2_MIGRATE_COMPENSATION` (50 us) of credit. The
//! unit that was running, if runnable and not chosen, goes back on the runqueue after the
//! switch (and a pCPU is tickled for it).
//!
//! **Run time** (`csched2_runtime`): the chosen unit runs until its credit would reach
//! zero, or, if the runqueue head waits with positive credit, until the chosen unit's
//! credit falls to the head's; the difference is turned back into time at the unit's
//! burn rate. A capped unit runs at most its budget. The result is clamped to
//! [`CSCHED2_MIN_TIMER` (500 us) or what remains of the rate limit, whichever is longer;
//! `CSCHED2_MAX_TIMER` = `CREDIT_INIT` (10 ms)]. `runtime_rule` selects which unit counts
//! as "waiting":
//! - `"4.19"` (Xen 4.12 to 4.20): only the runqueue's head. The unit that was just
//!   running is not yet back on the runqueue when this is computed, so with two busy
//!   units the one switched in sees an empty runqueue and is given its whole credit,
//!   up to 10 ms;
//! - `"2025"` (commit ae648e9f8013, July 2025, "xen/credit2: factor in previous active
//!   unit's credit in csched2_runtime()", first released in Xen 4.21): the credit of the
//!   unit being switched out counts too, if it is to go back on the runqueue (read after
//!   a reset, so never negative), so the switched-in unit runs only until the two
//!   credits meet, or `MIN_TIMER`.
//!
//! **Tickling** (`runq_tickle`, when a unit is queued): a fully idle core of the runqueue
//! (every SMT sibling idle and not tickled) in the unit's affinity, its own pCPU first,
//! else any idle untickled pCPU, else the busy untickled pCPU whose running unit it beats
//! by the most credit (minus `migrate_resist_us` if that is not the unit's own pCPU; its
//! own pCPU wins outright if it beats the unit there; a unit that has run less than the
//! rate limit minus 50 us cannot be preempted). The tickled pCPU reschedules.
//!
//! **Load tracking and balancing.** Each runqueue and unit keeps an exponentially
//! weighted moving average of its instantaneous load (runnable units; for a unit, 1 or
//! 0) over a window of 2^30 ns (time sampled in 1024 ns steps, 18 fractional bits). A
//! runqueue remembers a second average, `b_avgload`, moved at once by the load of units
//! assigned to or taken from it. After a reset, the runqueue looks for the runqueue whose
//! `b_avgload` differs most from its own; if the difference is at least 1.0 (0.125 when
//! either is overloaded: `credit2_balance_under` 0, `credit2_balance_over` -3), it tries
//! every push, pull and swap of one unit each way and makes the one that leaves the
//! smallest difference. A queued unit moves at once (queued and tickled on the other
//! runqueue); a running one is marked and moves when it is next descheduled.
//! New units go to the runqueue of least `b_avgload` their affinity allows.
//!
//! **Caps** (`cap` of a VM, percent of one pCPU). A capped domain gets a budget of
//! `cap_period_ms` x cap / 100 every `cap_period_ms` (10 ms), refilled to at most that by
//! a per-domain timer (any overrun is paid from the refill). A unit about to run takes a
//! quota from the domain's pool (`max(budget / units, MIN_TIMER)`, or what is left) and
//! returns the unused part when it stops. A unit that finds the pool empty is *parked*:
//! off the runqueue until a refill or a returned budget unparks it (queued and tickled).
//!
//! **Counters**, one per decision branch: see `declare_counters!` below.
//!
//! ## Parameters
//! | key | default | meaning |
//! |---|---|---|
//! | `ratelimit_us` | `1000` | µs; `sched_ratelimit_us`; 0 = off, else 100 to 500000 |
//! | `runqueue` | `"socket"` | `credit2_runqueue`: `"cpu"`, `"core"`, `"socket"`, `"node"`, `"all"` |
//! | `max_cpus_runqueue` | `16` | `sched_credit2_max_cpus_runqueue`, 1 to 64 |
//! | `migrate_resist_us` | `500` | µs; `sched_credit2_migrate_resist` |
//! | `cap_period_ms` | `10` | ms; `credit2_cap_period_ms`, 1 to 10000 |
//! | `runtime_rule` | `"2025"` | `"4.19"` or `"2025"`: `csched2_runtime()` before or after ae648e9f8013 |
//! Per VM: `weight` (default 256) and `cap` (percent of one pCPU, 0 = none).
//!
//! "node" groups pCPUs by the host's NUMA node (`[host] numa_nodes`); with the default
//! one node per socket it is the same as "socket".
//!
//! ## Source
//! `xen/common/sched/credit2.c`, read at commit c447b7308b13 (4.23 development, August
//! 2026), and commit ae648e9f8013 (its only change to `csched2_runtime()` and
//! `csched2_schedule()` since Xen 4.12: the `"4.19"` rule is that commit's parent, the
//! `"2025"` rule the code since). Constants: `CSCHED2_CREDIT_INIT` 10 ms,
//! `CSCHED2_CREDIT_MIN` -10 ms, `CSCHED2_CARRYOVER_MAX` = `CSCHED2_MIN_TIMER` 500 us,
//! `CSCHED2_MAX_TIMER` 10 ms, `CSCHED2_MIGRATE_COMPENSATION` 50 us,
//! `CSCHED2_RATELIMIT_TICKLE_TOLERANCE` 50 us, `opt_migrate_resist` 500 us,
//! `LOADAVG_WINDOW_SHIFT` 30, `LOADAVG_GRANULARITY_SHIFT` 10, `LOADAVG_PRECISION_SHIFT`
//! 18, `opt_cap_period` 10 ms, `MAX_CPUS_RUNQ` 16, `sched_ratelimit_us` 1000 us.
//!
//! ## Deviations
//! - Soft affinity: vcpulab has hard affinity only, so every unit has Xen's default soft
//!   affinity (all pCPUs). Its effects are kept: a busy pCPU that the unit beats gets the
//!   soft-affinity bonus in the tickle score, and its own pCPU is taken outright.
//! - Not modelled: yield (`CSFLAG_unit_yield`; no vcpulab workload yields under Xen),
//!   tasklets, the exclusive-pinning fast path of the tickle (it picks what the general
//!   path picks), `sched_smt_power_savings`, cpupools (a cpupool of N pCPUs is a host
//!   of N pCPUs), CPU hotplug, and the trylock failures of the balancer and of
//!   `csched2_res_pick` (every lock is taken).
//! - Context switches complete at once: the unit switched out is queued again (and
//!   returns its budget) in the same decision, as `csched2_context_saved` does right after.
//!   A unit that blocks pays for its run, returns its budget and leaves the load at the
//!   block, before its pCPU picks again.
//! - Runqueue arrangement: pCPUs are walked in id order and join the first runqueue of
//!   the same topology key that still has room for their whole core (Xen builds the same
//!   groups as pCPUs come online, and also spreads them evenly, which the room test does
//!   for the usual equal-sized sockets).
//! - Host threads that are not vCPUs are units of their VM's domain (an unowned one of an
//!   extra, uncapped domain with its first thread's weight).

use super::{
    proportional_share_bound, Counters, CpuId, ParamInfo, ParamKind, Params, RunState, SchedCtx,
    SchedView, Scheduler, TaskId,
};
use crate::reader::{Res, Table};
use crate::time::{SimDuration, SimTime};
use crate::topology::{CpuSet, Topology};

pub const DESCRIPTION: &str = "Xen Credit2 (default since 4.12): credits burnt by weight, reset epochs, shared per-socket runqueues with load balancing, caps by budget";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "ratelimit_us",
        kind: ParamKind::Int,
        default: "1000",
        help: "a still-runnable unit keeps its pCPU at least this long, in us (0 = off, else 100-500000)",
    },
    ParamInfo {
        name: "runqueue",
        kind: ParamKind::Choice(&["cpu", "core", "socket", "node", "all"]),
        default: "socket",
        help: "which pCPUs share a runqueue (credit2_runqueue)",
    },
    ParamInfo {
        name: "max_cpus_runqueue",
        kind: ParamKind::Int,
        default: "16",
        help: "most pCPUs in one runqueue, SMT siblings kept together (1-64)",
    },
    ParamInfo {
        name: "migrate_resist_us",
        kind: ParamKind::Int,
        default: "500",
        help: "credit a unit from another pCPU must have above the candidate's to be pulled, in us",
    },
    ParamInfo {
        name: "cap_period_ms",
        kind: ParamKind::Int,
        default: "10",
        help: "budget replenishment period of capped VMs, in ms (1-10000)",
    },
    ParamInfo {
        name: "runtime_rule",
        kind: ParamKind::Choice(&["4.19", "2025"]),
        default: "2025",
        help: "csched2_runtime(): \"4.19\" ignores the unit being switched out, \"2025\" (ae648e9f8013, Xen 4.21+) counts its credit",
    },
];

/// `CSCHED2_CREDIT_INIT`: what a unit starts with and a reset adds (ns of credit).
pub const CREDIT_INIT: i64 = 10_000_000;
/// `CSCHED2_CREDIT_MIN`: credit never goes below this.
pub const CREDIT_MIN: i64 = -CREDIT_INIT;
/// `CSCHED2_MIN_TIMER`.
pub const MIN_TIMER: i64 = 500_000;
/// `CSCHED2_CARRYOVER_MAX`: credit above `CREDIT_INIT` kept over a reset.
pub const CARRYOVER_MAX: i64 = MIN_TIMER;
/// `CSCHED2_MAX_TIMER`.
pub const MAX_TIMER: i64 = CREDIT_INIT;
/// `CSCHED2_CREDIT_RESET`: the top credit at or below which an epoch ends.
pub const CREDIT_RESET: i64 = 0;
/// `CSCHED2_MIGRATE_COMPENSATION`.
const MIGRATE_COMPENSATION: i64 = 50_000;
/// `CSCHED2_RATELIMIT_TICKLE_TOLERANCE`.
const RATELIMIT_TICKLE_TOLERANCE: i64 = 50_000;
/// Load averages: time in 2^10 ns steps, a window of 2^(30-10) steps, 18 fraction bits.
const LOAD_GRANULARITY_SHIFT: u32 = 10;
const LOAD_WINDOW_SHIFT: u32 = 30 - LOAD_GRANULARITY_SHIFT;
const LOAD_PRECISION_SHIFT: u32 = 18;
/// `opt_underload_balance_tolerance` and `opt_overload_balance_tolerance`.
const BALANCE_UNDER: i32 = 0;
const BALANCE_OVER: i32 = -3;

/// `csched2_runtime()`'s rule (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeRule {
    /// Before ae648e9f8013: only the runqueue head counts.
    V419,
    /// Since ae648e9f8013: the unit being switched out counts too.
    V2025,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arrangement {
    Cpu,
    Core,
    Socket,
    Node,
    All,
}

super::counters::declare_counters! {
    WAKE_QUEUED => "wake_queued",
    WAKE_PARKED => "wake_while_parked",
    BLOCK => "block",
    TICKLE_IDLE_CORE => "tickle_idle_core",
    TICKLE_IDLE => "tickle_idle_cpu",
    TICKLE_BUSY_OWN => "tickle_busy_own_cpu",
    TICKLE_BUSY => "tickle_busy_cpu",
    TICKLE_NONE => "tickle_no_cpu",
    RATELIMITED => "ratelimit_kept_running",
    PICK_CURRENT => "pick_current",
    PICK_QUEUED => "pick_queued",
    PICK_IDLE => "pick_idle",
    SKIP_AFFINITY => "skip_affinity",
    SKIP_TICKLED_ELSEWHERE => "skip_deferred_to_tickled_cpu",
    SKIP_MIGRATE_RESIST => "skip_migrate_resisted",
    SKIP_NO_BUDGET => "skip_no_budget",
    MIGRATED => "migrated_to_pcpu",
    RESET => "credit_reset",
    RESET_DOUBLE => "credit_reset_from_min",
    RUNTIME_MIN => "runtime_min_timer",
    RUNTIME_MAX => "runtime_max_timer",
    RUNTIME_INFLIGHT => "runtime_prev_unit_counted",
    RUNTIME_BUDGET => "runtime_budget_limited",
    REQUEUE_PREV => "requeue_prev",
    BALANCE_CHECK => "balance_check",
    BALANCE_MIGRATE => "balance_migrate",
    BALANCE_MIGRATE_RUNNING => "balance_migrate_running",
    PARK => "park",
    UNPARK => "unpark",
    REPLENISH => "budget_replenish",
}

/// One runqueue (`csched2_runqueue_data`).
#[derive(Clone, Debug)]
struct Runq {
    cpus: CpuSet,
    /// Queued units, highest credit first.
    queue: Vec<TaskId>,
    /// Units assigned to this runqueue, in assignment order.
    svc: Vec<TaskId>,
    max_weight: u32,
    load: i64,
    avgload: i64,
    b_avgload: i64,
    load_last_update: i64,
    idle: CpuSet,
    tickled: CpuSet,
    pick_bias: usize,
    /// The topology key its pCPUs share.
    key: u32,
}

#[derive(Clone, Debug)]
struct Unit {
    dom: usize,
    weight: u32,
    credit: i64,
    residual: i64,
    /// Paid for up to here while running.
    start_time: SimTime,
    /// When it was put on its pCPU (`state_entry_time`, for the rate limit).
    run_start: SimTime,
    rq: usize,
    /// `sched_unit_master`: the pCPU it last ran on or was placed on.
    processor: usize,
    on_runq: bool,
    tickled_cpu: Option<usize>,
    /// Budget taken from the domain (capped domains only; None = no cap).
    budget: Option<i64>,
    budget_quota: i64,
    parked: bool,
    avgload: i64,
    load_last_update: i64,
    /// A balancing decision to move it to this runqueue when it next stops running.
    migrate_to: Option<usize>,
}

#[derive(Clone, Debug, Default)]
struct Dom {
    cap: u32,
    units: u32,
    tot_budget: i64,
    budget: i64,
    next_repl: SimTime,
    parked: Vec<TaskId>,
    /// Run time paid and budget granted (initial budget plus refills), for `check`.
    used: i64,
    granted: i64,
}

pub struct Credit2 {
    rule: RuntimeRule,
    ratelimit: i64,
    arrangement: Arrangement,
    max_cpus_runqueue: usize,
    migrate_resist: i64,
    cap_period: i64,
    counters: Counters<NCOUNTERS>,
    /// The first broken rule found while scheduling (see `check`).
    violation: Option<String>,
    rqs: Vec<Runq>,
    rq_of: Vec<usize>,
    curr: Vec<Option<TaskId>>,
    /// Per pCPU: the core's pCPUs (its SMT siblings and itself).
    siblings: Vec<CpuSet>,
    units: Vec<Unit>,
    doms: Vec<Dom>,
    affinity: Vec<CpuSet>,
    any_cap: bool,
}

fn ns(t: SimTime) -> i64 {
    t.ns() as i64
}

impl Credit2 {
    pub fn new(p: &Params) -> Credit2 {
        let arrangement = match p.choice("runqueue").as_str() {
            "cpu" => Arrangement::Cpu,
            "core" => Arrangement::Core,
            "node" => Arrangement::Node,
            "all" => Arrangement::All,
            _ => Arrangement::Socket,
        };
        let rule = if p.choice("runtime_rule") == "4.19" {
            RuntimeRule::V419
        } else {
            RuntimeRule::V2025
        };
        Credit2 {
            rule,
            ratelimit: p.int("ratelimit_us").max(0) * 1000,
            arrangement,
            max_cpus_runqueue: p.int("max_cpus_runqueue").clamp(1, 64) as usize,
            migrate_resist: p.int("migrate_resist_us").max(0) * 1000,
            cap_period: p.int("cap_period_ms").clamp(1, 10_000) * 1_000_000,
            counters: Counters::new(COUNTER_NAMES),
            violation: None,
            rqs: vec![],
            rq_of: vec![],
            curr: vec![],
            siblings: vec![],
            units: vec![],
            doms: vec![],
            affinity: vec![],
            any_cap: false,
        }
    }

    fn key(&self, topo: &Topology, cpu: usize) -> u32 {
        let c = &topo.cpus[cpu];
        match self.arrangement {
            Arrangement::Cpu => cpu as u32,
            Arrangement::Core => c.core,
            Arrangement::Socket => c.socket,
            Arrangement::Node => c.node,
            Arrangement::All => 0,
        }
    }

    /// `cpu_add_to_runqueue` for every pCPU in id order (see Deviations).
    fn arrange(&mut self, topo: &Topology) {
        let n = topo.ncpus();
        let min_rqs = (n - 1) / self.max_cpus_runqueue + 1;
        let max_per_rq = (n / min_rqs).max(1);
        self.rq_of = vec![0; n];
        for cpu in 0..n {
            let key = self.key(topo, cpu);
            let core = &self.siblings[cpu];
            let found = self.rqs.iter().position(|rq| {
                rq.key == key
                    && (!rq.cpus.intersect(core).is_empty()
                        || self.arrangement == Arrangement::Cpu
                        || whole_cores(&rq.cpus, &self.siblings) + core.len() <= max_per_rq)
            });
            let r = match found {
                Some(r) if self.arrangement != Arrangement::Cpu => r,
                _ => {
                    self.rqs.push(Runq {
                        cpus: CpuSet::empty(n),
                        queue: vec![],
                        svc: vec![],
                        max_weight: 1,
                        load: 0,
                        avgload: 0,
                        b_avgload: 0,
                        load_last_update: 0,
                        idle: CpuSet::empty(n),
                        tickled: CpuSet::empty(n),
                        pick_bias: cpu,
                        key,
                    });
                    self.rqs.len() - 1
                }
            };
            self.rqs[r].cpus.insert(cpu);
            self.rqs[r].idle.insert(cpu);
            self.rq_of[cpu] = r;
        }
    }

    fn running(&self, t: TaskId) -> bool {
        self.curr[self.units[t as usize].processor] == Some(t)
    }

    /// Xen's `unit_runnable_state`: wants to run, not parked, not marked to migrate.
    fn runnable(&self, view: &SchedView, t: TaskId) -> bool {
        let u = &self.units[t as usize];
        view.state[t as usize] != RunState::Halted && !u.parked && u.migrate_to.is_none()
    }

    // Load tracking and balancing: credit2/balance.rs.

    // ---- runqueue membership -------------------------------------------------------

    fn update_max_weight(&mut self, r: usize) {
        let w = self.rqs[r]
            .svc
            .iter()
            .map(|&t| self.units[t as usize].weight)
            .max()
            .unwrap_or(1);
        self.rqs[r].max_weight = w.max(1);
    }

    fn runq_assign(&mut self, t: TaskId, r: usize) {
        self.units[t as usize].rq = r;
        self.rqs[r].svc.push(t);
        self.update_max_weight(r);
        self.rqs[r].b_avgload += self.units[t as usize].avgload;
    }

    fn runq_deassign(&mut self, t: TaskId) {
        let r = self.units[t as usize].rq;
        self.rqs[r].svc.retain(|&o| o != t);
        self.update_max_weight(r);
        let rq = &mut self.rqs[r];
        rq.b_avgload = (rq.b_avgload - self.units[t as usize].avgload).max(0);
    }

    /// `runq_insert`: before the first unit with less credit.
    fn runq_insert(&mut self, t: TaskId) {
        let r = self.units[t as usize].rq;
        let credit = self.units[t as usize].credit;
        let q = &self.rqs[r].queue;
        let pos = q
            .iter()
            .position(|&o| credit > self.units[o as usize].credit)
            .unwrap_or(q.len());
        self.rqs[r].queue.insert(pos, t);
        self.units[t as usize].on_runq = true;
    }

    fn runq_remove(&mut self, t: TaskId) {
        let r = self.units[t as usize].rq;
        self.rqs[r].queue.retain(|&o| o != t);
        self.units[t as usize].on_runq = false;
    }

    // ---- credits -------------------------------------------------------------------

    /// `burn_credits` for a running unit: `t2c_update` and the budget.
    fn burn(&mut self, t: TaskId, now: SimTime) {
        let max_weight = self.rqs[self.units[t as usize].rq].max_weight as i64;
        let u = &mut self.units[t as usize];
        let delta = ns(now) - ns(u.start_time);
        if delta <= 0 {
            return;
        }
        let val = delta * max_weight + u.residual;
        let w = u.weight.max(1) as i64;
        u.residual = val % w;
        u.credit = (u.credit - val / w).max(CREDIT_MIN);
        if let Some(b) = &mut u.budget {
            *b -= delta;
            self.doms[u.dom].used += delta;
        }
        u.start_time = now;
    }

    /// `c2t`: credit back to run time at the unit's burn rate.
    fn c2t(&self, t: TaskId, credit: i64) -> i64 {
        let u = &self.units[t as usize];
        credit * u.weight as i64 / self.rqs[u.rq].max_weight as i64
    }

    /// `reset_credit`, when the epoch of runqueue `r` ends with `snext` chosen.
    fn reset_credit(&mut self, ctx: &mut SchedCtx, r: usize, snext: TaskId) {
        let mut reset = CREDIT_INIT;
        if self.units[snext as usize].credit == CREDIT_MIN {
            reset += CREDIT_INIT;
            self.counters.bump(RESET_DOUBLE);
        }
        self.counters.bump(RESET);
        let svc = self.rqs[r].svc.clone();
        for t in svc {
            if self.running(t) {
                self.burn(t, ctx.now);
                if self.units[t as usize].budget.is_some_and(|b| b <= 0) {
                    let cpu = self.units[t as usize].processor;
                    self.tickle_cpu(ctx, cpu);
                }
            }
            let u = &mut self.units[t as usize];
            u.credit = (u.credit + reset).min(CREDIT_INIT + CARRYOVER_MAX);
            u.start_time = ctx.now;
        }
    }

    /// `csched2_runtime`. `inflight` is the credit of the unit being switched out if it
    /// goes back on the runqueue (0 otherwise); only the 2025 rule reads it.
    fn runtime(
        &mut self,
        cpu: usize,
        snext: TaskId,
        continuing: bool,
        now: SimTime,
        inflight: i64,
    ) -> i64 {
        let mut min_time = MIN_TIMER;
        if self.ratelimit > 0 {
            let mut ratelimit_min = self.ratelimit;
            if continuing {
                ratelimit_min = ns(self.units[snext as usize].run_start) + self.ratelimit - ns(now);
            }
            min_time = min_time.max(ratelimit_min);
        }
        let credit = self.units[snext as usize].credit;
        let mut rt_credit = credit;
        let r = self.rq_of[cpu];
        let mut swait = 0;
        if let Some(&h) = self.rqs[r].queue.first() {
            swait = self.units[h as usize].credit.max(0);
        }
        if self.rule == RuntimeRule::V2025 && inflight > swait {
            swait = inflight;
            self.counters.bump(RUNTIME_INFLIGHT);
        }
        if swait > 0 {
            rt_credit = credit - swait;
        }
        let mut time = if rt_credit > 0 {
            self.c2t(snext, rt_credit)
        } else {
            0
        };
        if let Some(b) = self.units[snext as usize].budget {
            if b < time {
                time = b;
                self.counters.bump(RUNTIME_BUDGET);
            }
        }
        if time < min_time {
            self.counters.bump(RUNTIME_MIN);
            min_time
        } else if time > MAX_TIMER {
            self.counters.bump(RUNTIME_MAX);
            MAX_TIMER
        } else {
            time
        }
    }

    // ---- tickling ------------------------------------------------------------------

    fn tickle_cpu(&mut self, ctx: &mut SchedCtx, cpu: usize) {
        self.rqs[self.rq_of[cpu]].tickled.insert(cpu);
        ctx.resched(cpu as CpuId);
    }

    fn preemptable(&self, t: TaskId, now: SimTime) -> bool {
        if self.ratelimit <= RATELIMIT_TICKLE_TOLERANCE {
            return true;
        }
        ns(now) - ns(self.units[t as usize].run_start) > self.ratelimit - RATELIMIT_TICKLE_TOLERANCE
    }

    /// `tickle_score`: how much `new` beats what runs on `cpu` (negative: it does not).
    fn tickle_score(&mut self, now: SimTime, new: TaskId, cpu: usize) -> i64 {
        let Some(cur) = self.curr[cpu] else {
            return -1;
        };
        if !self.preemptable(cur, now) {
            return -1;
        }
        self.burn(cur, now);
        let mut score = self.units[new as usize].credit - self.units[cur as usize].credit;
        if self.units[new as usize].processor != cpu {
            score -= self.migrate_resist;
        }
        if score > 0 {
            // Default soft affinity (all pCPUs): in the new unit's, and in the current's.
            score += CREDIT_INIT;
        }
        score
    }

    /// `runq_tickle` for a unit just queued.
    fn runq_tickle(&mut self, ctx: &mut SchedCtx, new: TaskId) {
        let now = ctx.now;
        let cpu = self.units[new as usize].processor;
        let r = self.units[new as usize].rq;
        let aff = self.affinity[new as usize].intersect(&self.rqs[r].cpus);
        let idle_free = self.rqs[r].idle.subtract(&self.rqs[r].tickled);
        let mut idle_cores = CpuSet::empty(self.curr.len());
        for c in idle_free.iter() {
            if self.siblings[c]
                .intersect(&self.rqs[r].cpus)
                .iter()
                .all(|s| idle_free.contains(s))
            {
                idle_cores.insert(c);
            }
        }
        for (mask, counter) in [(idle_cores, TICKLE_IDLE_CORE), (idle_free, TICKLE_IDLE)] {
            if let Some(i) = test_or_cycle(cpu, &mask.intersect(&aff)) {
                self.counters.bump(counter);
                self.tickle_cpu(ctx, i);
                self.units[new as usize].tickled_cpu = Some(i);
                return;
            }
        }
        let mut busy = aff
            .subtract(&self.rqs[r].idle)
            .subtract(&self.rqs[r].tickled);
        let mut best: Option<usize> = None;
        let mut max = 0;
        if busy.contains(cpu) {
            busy.remove(cpu);
            let score = self.tickle_score(now, new, cpu);
            if score > max {
                // Its own pCPU is in its (default, full) soft affinity: taken outright.
                self.counters.bump(TICKLE_BUSY_OWN);
                self.tickle_cpu(ctx, cpu);
                self.units[new as usize].tickled_cpu = Some(cpu);
                return;
            }
        }
        for i in busy.iter() {
            let score = self.tickle_score(now, new, i);
            if score > max {
                max = score;
                best = Some(i);
            }
        }
        match best {
            Some(i) => {
                self.counters.bump(TICKLE_BUSY);
                self.tickle_cpu(ctx, i);
                self.units[new as usize].tickled_cpu = Some(i);
            }
            None => self.counters.bump(TICKLE_NONE),
        }
    }

    // Caps (budgets, parking, replenishment): credit2/caps.rs.

    // ---- scheduling ----------------------------------------------------------------

    /// `runq_candidate`: the unit to run on `cpu` (None: idle).
    fn candidate(
        &mut self,
        view: &SchedView,
        scurr: Option<TaskId>,
        cpu: usize,
        now: SimTime,
    ) -> Option<TaskId> {
        let mut snext = None;
        if let Some(c) = scurr {
            if self.runnable(view, c) {
                if self.ratelimit > 0
                    && ns(now) - ns(self.units[c as usize].run_start) < self.ratelimit
                {
                    self.counters.bump(RATELIMITED);
                    return Some(c);
                }
                snext = Some(c);
            }
        }
        let snext_credit =
            |s: &Self, n: Option<TaskId>| n.map_or(CREDIT_MIN - 1, |t| s.units[t as usize].credit);
        let r = self.rq_of[cpu];
        let mut i = 0;
        while i < self.rqs[r].queue.len() {
            let t = self.rqs[r].queue[i];
            let (credit, tickled_cpu, processor) = {
                let u = &self.units[t as usize];
                (u.credit, u.tickled_cpu, u.processor)
            };
            let base = snext_credit(self, snext);
            if credit <= base {
                break;
            }
            i += 1;
            if !self.affinity[t as usize].contains(cpu) {
                self.counters.bump(SKIP_AFFINITY);
                continue;
            }
            if let Some(tc) = tickled_cpu {
                if tc != cpu && self.rqs[r].tickled.contains(tc) {
                    self.counters.bump(SKIP_TICKLED_ELSEWHERE);
                    continue;
                }
            }
            if processor != cpu && base + self.migrate_resist > credit {
                self.counters.bump(SKIP_MIGRATE_RESIST);
                continue;
            }
            if !self.grab_budget(view, t, now) {
                // Parked: it left the queue.
                i -= 1;
                self.counters.bump(SKIP_NO_BUDGET);
                continue;
            }
            snext = Some(t);
            break;
        }
        snext
    }

    /// Records a broken promise for `check` (the first one only).
    fn violated(&mut self, msg: impl FnOnce() -> String) {
        if self.violation.is_none() {
            self.violation = Some(msg());
        }
    }

    /// `csched2_context_saved` for `p`, switched out while runnable or not.
    fn context_saved(&mut self, ctx: &mut SchedCtx, p: TaskId, requeue: bool) {
        let parked = self.return_budget(p);
        if requeue {
            self.counters.bump(REQUEUE_PREV);
            self.runq_insert(p);
            self.runq_tickle(ctx, p);
        } else {
            self.update_load(ctx.view, p, -1, ctx.now);
            if let Some(to) = self.units[p as usize].migrate_to.take() {
                // `vcpu_migrate_finish`: moved, then woken on the new runqueue.
                self.move_to(p, to);
                if ctx.view.state[p as usize] != RunState::Halted && !self.units[p as usize].parked
                {
                    self.update_load(ctx.view, p, 1, ctx.now);
                    self.runq_insert(p);
                    self.runq_tickle(ctx, p);
                }
            }
        }
        self.unpark(ctx, parked);
    }
}

fn ewma(avg: i64, delta: i64, load: i64) -> i64 {
    avg + ((delta * (load << LOAD_PRECISION_SHIFT)) >> LOAD_WINDOW_SHIFT)
        - ((delta * avg) >> LOAD_WINDOW_SHIFT)
}

/// pCPUs of `cpus` counted by whole cores (a core with a pCPU there counts all of it).
fn whole_cores(cpus: &CpuSet, siblings: &[CpuSet]) -> usize {
    let mut seen = CpuSet::empty(siblings.len());
    let mut n = 0;
    for c in cpus.iter() {
        if !seen.contains(c) {
            seen.union_with(&siblings[c]);
            n += siblings[c].len();
        }
    }
    n
}

/// `cpumask_test_or_cycle`: `cpu` if in `mask`, else the next one after it, wrapping.
fn test_or_cycle(cpu: usize, mask: &CpuSet) -> Option<usize> {
    if mask.contains(cpu) {
        Some(cpu)
    } else {
        cycle_after(cpu, mask)
    }
}

/// `cpumask_cycle`: the first pCPU of `mask` after `cpu`, wrapping.
fn cycle_after(cpu: usize, mask: &CpuSet) -> Option<usize> {
    mask.next_after(cpu).or_else(|| mask.first())
}

impl Scheduler for Credit2 {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let v = ctx.view;
        let n = v.topo.ncpus();
        self.siblings = (0..n)
            .map(|c| {
                let mut s = CpuSet::empty(n);
                for o in v.topo.core_cpus(v.topo.cpus[c].core) {
                    s.insert(o);
                }
                s
            })
            .collect();
        self.curr = vec![None; n];
        self.arrange(&v.topo);
        let ndoms = v.tasks.iter().map(|t| t.vm + 1).max().unwrap_or(0) as usize;
        self.doms = vec![Dom::default(); ndoms];
        for t in &v.tasks {
            let d = &mut self.doms[t.vm as usize];
            if d.units == 0 {
                d.cap = t.cap;
            }
            d.units += 1;
        }
        self.affinity = v.tasks.iter().map(|t| t.affinity.clone()).collect();
        let avg0 = 1i64 << (LOAD_PRECISION_SHIFT - 1);
        self.units = v
            .tasks
            .iter()
            .map(|t| Unit {
                dom: t.vm as usize,
                weight: t.weight.max(1),
                credit: CREDIT_INIT,
                residual: 0,
                start_time: ctx.now,
                run_start: ctx.now,
                rq: 0,
                processor: 0,
                on_runq: false,
                tickled_cpu: None,
                budget: None,
                budget_quota: 0,
                parked: false,
                avgload: avg0,
                load_last_update: ns(ctx.now) >> LOAD_GRANULARITY_SHIFT,
                migrate_to: None,
            })
            .collect();
        for d in &mut self.doms {
            if d.cap != 0 {
                d.tot_budget = self.cap_period * d.cap as i64 / 100;
                d.budget = d.tot_budget;
                d.granted = d.tot_budget;
                d.next_repl = ctx.now.plus(SimDuration(self.cap_period as u64));
                self.any_cap = true;
            }
        }
        for t in 0..self.units.len() {
            let d = &self.doms[self.units[t].dom];
            if d.cap != 0 {
                self.units[t].budget = Some(0);
                self.units[t].budget_quota = (d.tot_budget / d.units as i64).max(MIN_TIMER);
            }
            self.initial_place(t as TaskId);
        }
        self.arm_replenish(ctx);
    }

    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        if self.units[t as usize].parked {
            self.counters.bump(WAKE_PARKED);
            return;
        }
        self.counters.bump(WAKE_QUEUED);
        self.update_load(ctx.view, t, 1, ctx.now);
        self.runq_insert(t);
        self.runq_tickle(ctx, t);
    }

    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        self.counters.bump(BLOCK);
        self.burn(t, ctx.now);
        let c = cpu as usize;
        if self.curr[c] == Some(t) {
            self.curr[c] = None;
        }
        self.context_saved(ctx, t, false);
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        let now = ctx.now;
        let c = cpu as usize;
        let r = self.rq_of[c];
        self.rqs[r].tickled.remove(c);
        if let Some(p) = prev {
            self.burn(p, now);
            if self.units[p as usize].budget.is_some_and(|b| b <= 0) {
                self.grab_budget(ctx.view, p, now);
            }
        }
        let snext = self.candidate(ctx.view, prev, c, now);
        let requeue = match prev {
            Some(p) => snext != Some(p) && self.runnable(ctx.view, p),
            None => false,
        };
        let mut inflight = 0;
        match snext {
            Some(n) => {
                let continuing = prev == Some(n);
                if continuing {
                    self.counters.bump(PICK_CURRENT);
                    self.update_load(ctx.view, n, 0, now);
                } else {
                    self.counters.bump(PICK_QUEUED);
                    self.runq_remove(n);
                }
                self.rqs[r].idle.remove(c);
                let head = self.rqs[r]
                    .queue
                    .first()
                    .map(|&h| self.units[h as usize].credit);
                let top = head.map_or(self.units[n as usize].credit, |h| {
                    h.max(self.units[n as usize].credit)
                });
                if top <= CREDIT_RESET {
                    self.reset_credit(ctx, r, n);
                    self.balance_load(ctx, r);
                }
                if requeue {
                    inflight = self.units[prev.unwrap() as usize].credit;
                }
                let u = &mut self.units[n as usize];
                u.start_time = now;
                u.tickled_cpu = None;
                if u.processor != c {
                    u.credit += MIGRATE_COMPENSATION;
                    u.processor = c;
                    self.counters.bump(MIGRATED);
                }
                if !continuing {
                    u.run_start = now;
                }
                let credit = u.credit;
                if credit < CREDIT_MIN {
                    self.violated(|| format!("credit2: task {n} dispatched on pCPU {c} with credit {credit} ns, below CREDIT_MIN"));
                }
                let top_now = self.rqs[r]
                    .queue
                    .first()
                    .map_or(credit, |&h| self.units[h as usize].credit.max(credit));
                if top_now <= CREDIT_RESET {
                    self.violated(|| format!("credit2: task {n} dispatched on pCPU {c} with top credit {top_now} ns and no reset"));
                }
                if self.units[n as usize].budget.is_some_and(|b| b <= 0) {
                    self.violated(|| format!("credit2: task {n} of a capped VM dispatched on pCPU {c} with no budget"));
                }
            }
            None => {
                self.counters.bump(PICK_IDLE);
                self.rqs[r].idle.insert(c);
                self.update_runq_load(r, 0, now);
            }
        }
        let runtime = snext.map(|n| self.runtime(c, n, prev == Some(n), now, inflight));
        self.curr[c] = snext;
        if let Some(p) = prev {
            if snext != Some(p) {
                self.context_saved(ctx, p, requeue);
            }
        }
        match runtime {
            Some(rt) => ctx.set_timer(cpu, now.plus(SimDuration(rt as u64))),
            None => ctx.cancel_timer(cpu),
        }
        snext
    }

    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        ctx.resched(cpu);
    }

    fn global_timer(&mut self, ctx: &mut SchedCtx) {
        self.replenish(ctx);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    /// Proportional share over turns of at most `MAX_TIMER` plus the rate limit, plus a
    /// cap period per turn for capped VMs (a parked unit waits for the refill).
    fn starvation_bound(&self, view: &SchedView) -> Option<SimDuration> {
        let turn = SimDuration((MAX_TIMER + self.ratelimit + MIN_TIMER) as u64);
        let turn = if self.any_cap {
            turn.plus(SimDuration(self.cap_period as u64))
        } else {
            turn
        };
        Some(proportional_share_bound(view, turn.saturating_mul(2)))
    }

    /// The scheduler and the engine agree on what runs; every runnable unit that is not
    /// parked is queued once, on its runqueue, or runs; no credit is below CREDIT_MIN (above
    /// the carryover, only migration compensations can lift it); no unit was dispatched below
    /// CREDIT_MIN or while the epoch should have been reset; and a capped VM has used no
    /// more than it was granted, plus one `MIN_TIMER` (or rate limit) overrun per unit.
    fn check(&self, view: &SchedView) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        let mut queued = vec![0u32; self.units.len()];
        for (r, rq) in self.rqs.iter().enumerate() {
            for w in rq.queue.windows(2) {
                if self.units[w[0] as usize].credit < self.units[w[1] as usize].credit {
                    return Err(format!(
                        "credit2: runqueue {r} is out of credit order at tasks {} and {}",
                        w[0], w[1]
                    ));
                }
            }
            for &t in &rq.queue {
                queued[t as usize] += 1;
                if self.units[t as usize].rq != r {
                    return Err(format!(
                        "credit2: task {t} waits on runqueue {r} but is assigned to {}",
                        self.units[t as usize].rq
                    ));
                }
            }
        }
        for c in 0..self.curr.len() {
            if view.cpu_curr[c] != self.curr[c] {
                return Err(format!(
                    "credit2: pCPU {c} runs {:?} but the scheduler has {:?}",
                    view.cpu_curr[c], self.curr[c]
                ));
            }
            if let Some(t) = self.curr[c] {
                if self.units[t as usize].parked {
                    return Err(format!("credit2: parked task {t} runs on pCPU {c}"));
                }
            }
        }
        for (t, u) in self.units.iter().enumerate() {
            let want = u32::from(view.state[t] == RunState::Runnable && !u.parked);
            if queued[t] != want || u.on_runq != (want == 1) {
                return Err(format!(
                    "credit2: task {t} ({:?}, parked {}) is queued {} times",
                    view.state[t], u.parked, queued[t]
                ));
            }
            if u.credit < CREDIT_MIN {
                return Err(format!("credit2: task {t} holds {} ns of credit", u.credit));
            }
        }
        let overrun = MIN_TIMER.max(self.ratelimit);
        for (d, dom) in self.doms.iter().enumerate() {
            if dom.cap == 0 {
                continue;
            }
            if dom.used > dom.granted + dom.units as i64 * overrun {
                return Err(format!(
                    "credit2: capped VM {d} ran {} ns but was granted {} ns of budget",
                    dom.used, dom.granted
                ));
            }
        }
        Ok(())
    }
}

/// Checks the parameters beyond their types (Xen's sysctl and boot-option limits).
fn check_params(t: &Table) -> Res<()> {
    if let Some(o) = t.get("ratelimit_us") {
        let r = o.u64_in(0, 500_000)?;
        if r != 0 && r < 100 {
            return o.err(format!(
                "{r} is below Xen's minimum of 100 us; use 0 to turn rate limiting off"
            ));
        }
    }
    if let Some(o) = t.get("max_cpus_runqueue") {
        o.u64_in(1, 64)?;
    }
    if let Some(o) = t.get("migrate_resist_us") {
        o.u64_in(0, 100_000)?;
    }
    if let Some(o) = t.get("cap_period_ms") {
        o.u64_in(1, 10_000)?;
    }
    Ok(())
}

/// `credit2`: a busy pCPU gets a scheduling event at least every `MAX_TIMER`.
impl super::Registered for Credit2 {
    type Sched = Credit2;
    const NAME: &'static str = "credit2";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Credit2 {
        Credit2::new(p)
    }
    fn check_params(t: &Table) -> Res<()> {
        self::check_params(t)
    }
    fn event_period(_p: &Params) -> Option<SimDuration> {
        Some(SimDuration(MAX_TIMER as u64))
    }
}

mod balance;
mod caps;
#[cfg(test)]
mod tests;
