//! `cfs` — Linux CFS as of 4.15 (the seed papers' host kernel), with KVM's directed yield.
//!
//! ## Policy (kernel/sched/fair.c, core.c, features.h of 4.15)
//! - Per-pCPU run queues ordered by virtual runtime; vruntime advances by
//!   `delta x 1024 / weight`. Weight: 1024 for a nice-0 vCPU thread; a VM's `weight` of 256
//!   (the default) maps to 1024 (cpu.shares), others in proportion.
//! - Tunables scaled by 1 + ilog2(min(ncpus, 8)): `sched_latency` 6 ms, `min_granularity`
//!   0.75 ms, `wakeup_granularity` 1 ms (x4 at 8+ pCPUs). `sched_slice` = period x
//!   weight / queue weight through the hierarchy, period = latency, or nr x min_granularity
//!   above 8 tasks.
//! - Placement: a waking task gets max(its vruntime, min_vruntime - latency/2)
//!   (GENTLE_FAIR_SLEEPERS); a new one (a thread's first wake-up) min_vruntime + its
//!   vslice (START_DEBIT).
//! - Tick (`check_preempt_tick`, every `tick`): preempt when the task ran more than its
//!   ideal slice, or ran at least min_granularity and is ahead of the leftmost by more
//!   than the ideal slice.
//! - Wake-up (`check_preempt_wakeup`): preempt when curr's vruntime exceeds the waker's by
//!   more than the wakeup granularity (scaled by the waker's weight), compared at the level
//!   where both sit in one queue; the preempting task becomes the next buddy; with 8+
//!   tasks, curr becomes the last buddy.
//! - Pick (`pick_next_entity`): leftmost; avoid the skip buddy; then the last buddy, then
//!   the next buddy, each only if within the wakeup granularity of the leftmost
//!   (`wakeup_preempt_entity(buddy, left) < 1`) — the rule that refuses KVM's boosts.
//! - `yield_to` (core.c): -ESRCH if both run queues hold exactly one task; 0 if the target
//!   runs or is not runnable; else `yield_to_task_fair`: next buddy on the target (every
//!   level), skip buddy on the yielder; the target's pCPU is kicked and the yielder
//!   reschedules.
//! - Wake-up placement (`select_task_rq_fair`): with a waker (`wake_affine`), unless
//!   `wake_wide`, the waker's pCPU is the target if `wake_affine_weight` finds it no more
//!   loaded (`<=`, 4.15; no 4.16 idle-prev rule); then the target if idle, else the
//!   previous pCPU if idle and sharing the socket, else an idle pCPU of the target's
//!   socket (an idle core first with SMT), else the target. Without a waker the target is
//!   the previous pCPU. See `fair.rs`.
//! - Load balancing: a pCPU about to idle pulls a queued task from the busiest pCPU,
//!   innermost domain first (SMT, socket, machine), skipping cache-hot tasks (ran within
//!   `migration_cost` 0.5 ms); busy pCPUs balance each domain every weight x 32 ms
//!   (busy_factor) when the busiest exceeds them by imbalance_pct (110/117/125%), a domain
//!   no wider than its child excepted (`sd_parent_degenerate`); an overloaded pCPU kicks an
//!   idle one to pull (nohz idle balance).
//! - Group scheduling (`group_per_vm`): each VM is a cgroup; its group entity on each pCPU
//!   weighs shares x (its runnable vCPUs there / all its runnable vCPUs).
//!
//! ## Parameters
//! `latency` 6 ms, `min_granularity` 0.75 ms, `wakeup_granularity` 1 ms (unscaled),
//! `tick` 4 ms (HZ=250, Ubuntu's 4.15 kernels), `migration_cost` 0.5 ms, `group_per_vm`
//! false (libvirt puts each VM in a cgroup: the reproductions set it), `root_host_threads`
//! true (see `fair.rs`), `gentle_fair_sleepers`
//! true, `start_debit` true, `wakeup_preemption` true, `tunable_scaling` true, `tick_grid`
//! true (the tick on one jiffy grid for all pCPUs; see `fair.rs`), `busy_factor` 32 (4.15's
//! `sd_init`), `wake_affine` true (upstream; false: no target but the previous pCPU),
//! `wakee_load` "weight" ("pelt", upstream: the wakee's load average; `fair/pelt.rs`).
//!
//! ## Fixes from the seed papers (the scenario's `[kvm.features]`)
//! (b) `boost_ignores_vcpu_fairness`: when the spinner and the boosted vCPU share a run
//! queue (the spinner is what keeps the target from running), the next buddy is honoured
//! unconditionally at the vCPU level; the VM level keeps its rule. The target's CPU time
//! is charged to its VM's group entity as usual, which is what keeps fairness between VMs
//! (with `group_per_vm`); like the long paper's implementation (seed 000, sec. 6) there is
//! no per-vCPU charge-back. (Charging the spinner the target's lead was tried: with ticket
//! locks the spinner is usually the next waiter, so the charge manufactured lock-waiter
//! preemption.) A target on another pCPU keeps the usual buddy rule: forcing picks there
//! lets two spinners that boost two vCPUs of one pCPU preempt each other every few
//! microseconds, a livelock the papers do not report. (c) `migrate_boosted_to_spinner`:
//! the target first moves to the spinner's queue, which makes (b) apply.
//!
//! ## Deviations
//! - Group weights use runnable counts, not PELT load averages; balancing uses runnable
//!   weight, not load averages; wake_affine without sync wake-ups (see `fair.rs`); no NUMA
//!   balancing.
//! - No throttling (CFS bandwidth), no SCHED_IDLE/BATCH, no child-runs-first.
//!
//! ## Files
//! The machinery CFS shares with EEVDF (queues, groups, wake-up placement, `yield_to`,
//! balancing) is `fair.rs`; this file holds the parameters and CFS's part, `Cfs` as a
//! `FairPolicy`: sleeper and START_DEBIT placement, `sched_slice`, the buddy rules of the
//! pick, wake-up and tick preemption, the skip buddy on yield.

use super::fair::{
    Fair, FairPolicy, Tunables, C_PICK_LAST_BUDDY, C_PICK_NEXT_BUDDY, C_PICK_NEXT_BUDDY_REFUSED,
    C_PICK_SKIP_AVOIDED, C_TICK_PREEMPT,
};
use super::{ParamInfo, ParamKind, Params, SchedCtx, TaskId};
use crate::time::SimDuration;

pub const DESCRIPTION: &str = "Linux 4.15 CFS: vruntime queues, buddies, yield_to as upstream, load balancing, optional cgroup per VM";

pub const PARAMS: &[ParamInfo] = &[
    super::fair::CORE_SCHED_PARAM,
    super::fair::TICK_GRID_PARAM,
    super::fair::WAKE_AFFINE_PARAM,
    super::fair::WAKEE_LOAD_PARAM,
    super::fair::busy_factor_param("32"),
    ParamInfo {
        name: "latency",
        kind: ParamKind::Duration,
        default: "6ms",
        help: "sched_latency (unscaled)",
    },
    ParamInfo {
        name: "min_granularity",
        kind: ParamKind::Duration,
        default: "750us",
        help: "sched_min_granularity (unscaled)",
    },
    ParamInfo {
        name: "wakeup_granularity",
        kind: ParamKind::Duration,
        default: "1ms",
        help: "sched_wakeup_granularity (unscaled)",
    },
    ParamInfo {
        name: "tunable_scaling",
        kind: ParamKind::Bool,
        default: "true",
        help: "scale the three above by 1 + ilog2(min(ncpus, 8))",
    },
    ParamInfo {
        name: "tick",
        kind: ParamKind::Duration,
        default: "4ms",
        help: "scheduler tick (HZ=250)",
    },
    ParamInfo {
        name: "migration_cost",
        kind: ParamKind::Duration,
        default: "500us",
        help: "a task that ran this recently is cache-hot",
    },
    ParamInfo {
        name: "group_per_vm",
        kind: ParamKind::Bool,
        default: "false",
        help: "each VM is a cgroup (fair share per VM)",
    },
    ParamInfo {
        name: "fork_balance",
        kind: ParamKind::Bool,
        default: "true",
        help: "a new task starts on the idlest pCPU (find_idlest_cpu: socket, then core, then CPU); false: on the i-th pCPU of its affinity",
    },
    ParamInfo {
        name: "root_host_threads",
        kind: ParamKind::Bool,
        default: "true",
        help: "with group_per_vm, host threads no VM owns are root-cgroup tasks on the root run queue beside the VMs' groups (upstream); false: they share one group of their own",
    },
    ParamInfo {
        name: "gentle_fair_sleepers",
        kind: ParamKind::Bool,
        default: "true",
        help: "sleeper credit is latency/2",
    },
    ParamInfo {
        name: "start_debit",
        kind: ParamKind::Bool,
        default: "true",
        help: "new tasks start one vslice late",
    },
    ParamInfo {
        name: "wakeup_preemption",
        kind: ParamKind::Bool,
        default: "true",
        help: "wake-ups may preempt",
    },
];

/// CFS 4.15 over the shared fair-class machinery.
pub fn new(p: &Params) -> Fair<Cfs> {
    Fair::new(
        Cfs {
            latency: p.duration("latency"),
            min_granularity: p.duration("min_granularity"),
            wakeup_granularity: p.duration("wakeup_granularity"),
            gentle_fair_sleepers: p.bool("gentle_fair_sleepers"),
            start_debit: p.bool("start_debit"),
            wakeup_preemption: p.bool("wakeup_preemption"),
        },
        Tunables {
            tick: p.duration("tick"),
            migration_cost: p.duration("migration_cost"),
            group_per_vm: p.bool("group_per_vm"),
            tunable_scaling: p.bool("tunable_scaling"),
            fork_balance: p.bool("fork_balance"),
            root_host_threads: p.bool("root_host_threads"),
            tick_grid: p.bool(super::fair::TICK_GRID_PARAM.name),
            busy_factor: p.int("busy_factor") as u64,
            wake_affine: p.bool(super::fair::WAKE_AFFINE_PARAM.name),
            wakee_pelt: p.choice(super::fair::WAKEE_LOAD_PARAM.name) == "pelt",
        },
    )
}

/// `sched_nr_latency`: above this many tasks the period stretches.
const SCHED_NR_LATENCY: u64 = 8;

/// CFS's tunables (scaled at `init` when `tunable_scaling` is on) and features.
#[derive(Clone, Debug)]
pub struct Cfs {
    /// `sysctl_sched_latency`: the period in which each of up to 8 tasks runs once.
    pub(super) latency: SimDuration,
    /// `sysctl_sched_min_granularity`: the least a task runs before the tick preempts it.
    pub(super) min_granularity: SimDuration,
    /// `sysctl_sched_wakeup_granularity`: how far ahead curr must be for a wake-up (or a
    /// buddy) to win.
    pub(super) wakeup_granularity: SimDuration,
    pub(super) gentle_fair_sleepers: bool,
    pub(super) start_debit: bool,
    pub(super) wakeup_preemption: bool,
}

impl FairPolicy for Cfs {
    const PLACE_MIGRATED: bool = false;

    fn scale(&mut self, k: u64) {
        self.latency *= k;
        self.min_granularity *= k;
        self.wakeup_granularity *= k;
    }

    #[inline]
    fn wakeup_preemption(&self) -> bool {
        self.wakeup_preemption
    }

    /// A period: latency, or min_granularity per task beyond sched_nr_latency (at least a
    /// tick, which is when the tick check comes).
    fn longest_turn(&self, tick: SimDuration) -> SimDuration {
        self.latency.max(self.min_granularity).max(tick)
    }

    /// A sleeper at max(its vruntime, min_vruntime - latency / 2, or a whole latency
    /// without GENTLE_FAIR_SLEEPERS); a new entity one vslice after min_vruntime
    /// (START_DEBIT; without it at min_vruntime).
    #[inline]
    fn place_entity(f: &mut Fair<Self>, rq: u32, e: u32, initial: bool) {
        let r = &f.rqs[rq as usize];
        let mut v = r.min_vruntime;
        if initial && f.policy.start_debit {
            v += Fair::<Self>::calc_delta_fair(f.sched_slice(rq, e), f.ents[e as usize].weight);
        } else if !initial {
            let thresh = if f.policy.gentle_fair_sleepers {
                f.policy.latency / 2
            } else {
                f.policy.latency
            };
            v -= thresh.ns() as i64;
        }
        let ent = &mut f.ents[e as usize];
        ent.vruntime = if initial { v } else { ent.vruntime.max(v) };
    }

    /// The leftmost; the second instead if the leftmost is the skip buddy and the second
    /// is within the wakeup granularity of it; then the last buddy, then the next buddy,
    /// each if within the wakeup granularity of the leftmost (the next one also when
    /// forced by fix (b)) — the rule that refuses KVM's boosts.
    #[inline]
    fn pick_next_entity(f: &mut Fair<Self>, rq: u32, left: u32) -> u32 {
        let r = &f.rqs[rq as usize];
        let mut se = left;
        if r.skip == Some(se) {
            if let Some(second) = r.tree.iter().nth(1).map(|k| k.1) {
                if f.wakeup_preempt_entity(second, left) < 1 {
                    f.counters.bump(C_PICK_SKIP_AVOIDED);
                    se = second;
                }
            }
        }
        if let Some(l) = r.last {
            if f.wakeup_preempt_entity(l, left) < 1 {
                f.counters.bump(C_PICK_LAST_BUDDY);
                se = l;
            }
        }
        if let Some(n) = r.next {
            if r.next_forced || f.wakeup_preempt_entity(n, left) < 1 {
                f.counters.bump(C_PICK_NEXT_BUDDY);
                se = n;
            } else {
                f.counters.bump(C_PICK_NEXT_BUDDY_REFUSED);
            }
        }
        se
    }

    /// Preempts when curr is ahead by more than the wakeup granularity; the woken task
    /// then becomes the next buddy, and with sched_nr_latency tasks or more curr the last.
    #[inline]
    fn check_preempt_wakeup(
        f: &mut Fair<Self>,
        t: TaskId,
        rq: u32,
        se: u32,
        pse: u32,
        cpu: u32,
    ) -> bool {
        if f.wakeup_preempt_entity(se, pse) != 1 {
            return false;
        }
        f.set_next_buddy(t, cpu, false);
        if f.rqs[rq as usize].nr_running >= SCHED_NR_LATENCY {
            f.rqs[rq as usize].last = Some(se);
        }
        true
    }

    #[inline]
    fn entity_tick(f: &mut Fair<Self>, ctx: &mut SchedCtx, rq: u32, e: u32, cpu: u32) {
        if f.rqs[rq as usize].nr_running > 1 {
            f.check_preempt_tick(ctx, rq, e, cpu);
        }
    }

    /// The yielder becomes the skip buddy at every level.
    #[inline]
    fn yield_task(f: &mut Fair<Self>, me: TaskId, cpu: u32) {
        let (p, n) = f.path(me, cpu);
        for &e in &p[..n] {
            let rq = f.ents[e as usize].rq;
            f.clear_buddies(rq, e);
            f.rqs[rq as usize].skip = Some(e);
        }
    }
}

impl Fair<Cfs> {
    /// CFS `sched_slice`: the entity's share of the period, through the hierarchy.
    fn sched_slice(&self, rq: u32, e: u32) -> SimDuration {
        let r = &self.rqs[rq as usize];
        let on = self.ents[e as usize].on_rq;
        let nr = r.nr_running + u64::from(!on);
        let period = if nr > SCHED_NR_LATENCY {
            self.policy.min_granularity * nr
        } else {
            self.policy.latency
        };
        let load = r.load + if on { 0 } else { self.ents[e as usize].weight };
        let mut slice =
            period.ns() as u128 * self.ents[e as usize].weight as u128 / load.max(1) as u128;
        if let Some(ge) = self.group_of_queue(rq) {
            // A group queue: scale by the group entity's share of the root.
            let root = &self.rqs[ge.rq as usize];
            slice = slice * ge.weight as u128 / root.load.max(ge.weight) as u128;
        }
        SimDuration(slice as u64)
    }

    /// `wakeup_preempt_entity(curr, se)`: 1 if se should preempt curr by more than the
    /// wakeup granularity (scaled by se's weight), -1 if curr is not ahead, else 0.
    fn wakeup_preempt_entity(&self, curr: u32, se: u32) -> i32 {
        let vdiff = self.ents[curr as usize].vruntime - self.ents[se as usize].vruntime;
        if vdiff <= 0 {
            return -1;
        }
        let gran = Self::calc_delta_fair(
            self.policy.wakeup_granularity,
            self.ents[se as usize].weight,
        );
        if vdiff > gran {
            1
        } else {
            0
        }
    }

    /// `check_preempt_tick`: `curr` ran longer than its ideal slice, or at least
    /// min_granularity and ahead of the leftmost by more than that slice.
    fn check_preempt_tick(&mut self, ctx: &mut SchedCtx, rq: u32, curr: u32, cpu: u32) {
        let ideal = self.sched_slice(rq, curr);
        let e = &self.ents[curr as usize];
        let ran = e.sum_exec.minus(e.prev_sum_exec);
        if ran > ideal {
            self.counters.bump(C_TICK_PREEMPT);
            ctx.resched(cpu);
            self.clear_buddies(rq, curr);
            return;
        }
        if ran < self.policy.min_granularity {
            return;
        }
        if let Some(&(lv, _)) = self.rqs[rq as usize].tree.first() {
            let delta = e.vruntime - lv;
            if delta > ideal.ns() as i64 {
                self.counters.bump(C_TICK_PREEMPT);
                ctx.resched(cpu);
            }
        }
    }
}

/// `cfs`: `Fair` with the CFS policy. Its periodic events are ticks and, with a task
/// waiting, slice ends, no shorter than `min_granularity`.
impl super::Registered for Cfs {
    type Sched = Fair<Cfs>;
    const NAME: &'static str = "cfs";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Fair<Cfs> {
        new(p).with_core_sched(p)
    }
    fn check_params(t: &crate::reader::Table) -> crate::reader::Res<()> {
        super::fair::check_busy_factor(t)
    }
    fn event_period(p: &Params) -> Option<crate::time::SimDuration> {
        Some(p.duration("tick").min(p.duration("min_granularity")))
    }
}
