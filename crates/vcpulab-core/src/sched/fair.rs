//! The Linux fair scheduling class, `kernel/sched/fair.c`, as two kernels have it: CFS of
//! Linux 4.15 (`cfs`, the seed papers' host kernel) and EEVDF of Linux 6.6 to 6.14
//! (`eevdf`). Both keep the same run queues, group scheduling, wake-up placement, directed
//! yield and load balancing, modelled once in this file; they differ in how an entity is
//! picked, placed, preempted, ticked and yields, which `FairPolicy` isolates (`cfs.rs` and
//! `eevdf.rs` implement it and list each rule with its kernel source).
//!
//! ## Policy: what both kernels do
//! **Entities and queues.** Every vCPU thread is a scheduling entity with a load weight:
//! a VM's `weight` of 256 (the default) is nice 0, load 1024 (`NICE_0_LOAD`, or
//! `cpu.shares` 1024), other weights in proportion. Each pCPU has a run queue (`cfs_rq`)
//! of entities ordered by virtual runtime; the running entity (`curr`) leaves the tree
//! while it runs. Running for `delta` advances vruntime by delta x 1024 / weight
//! (`calc_delta_fair`), charged at every decision on its pCPU (`update_curr`); a queue's
//! `min_vruntime` only moves forward. Virtual times (vruntime, deadline, lag) are signed
//! nanoseconds of weighted time (`i64`), not instants of the run (`SimTime`).
//!
//! **Group scheduling** (`group_per_vm`; libvirt puts each VM in a cgroup): each VM has a
//! group entity on every pCPU, queued on the pCPU's root queue and owning a queue of the
//! VM's vCPUs there. Its weight is the VM's shares x (its runnable vCPUs on this pCPU / all
//! its runnable vCPUs), at least 2: the runnable-count form of `calc_group_shares`. Picking
//! descends from the root queue; charging, buddies and yields apply at every level. Host
//! threads no VM owns are tasks of the root cgroup (`root_host_threads`): entities of the
//! root queue with their own weight, beside the group entities, as Linux queues a task that
//! was never moved into a cgroup (`set_task_rq` in `kernel/sched/sched.h`: the root task
//! group has no group entities, so `se->parent` is NULL and `se->cfs_rq` is `rq->cfs`;
//! 6.x and 4.15 alike). A wake-up then meets a vCPU at its group entity
//! (`find_matching_se`). This is where a measurement harness's own threads, kernel threads
//! and other processes compete with cgroups of VMs: the time such a thread takes on a pCPU
//! comes out of whichever group entity runs there (docs/models.md, "Cgroup shares against
//! the root cgroup").
//!
//! **Wake-up** (`select_task_rq_fair`, then `enqueue_task_fair`). A wake-up a running
//! task causes (the engine names it: a vCPU's IPI or pv kick, a guest mutex's release
//! waking a waiter on a halted vCPU, a backend thread handing a packet over) first picks a target (`wake_affine`, on): the waker records its wakee
//! (`record_wakee`: a flip when it wakes another task than last time, flips halved once
//! a second); `wake_wide` (both kernels) keeps the previous pCPU when the lesser of the
//! two tasks' flips is at least the LLC's (socket's) pCPU count and the greater at least
//! that many times the lesser; so does a waker's pCPU outside the affinity or equal to
//! the previous one. Else `wake_affine` in the waker's innermost domain spanning the
//! previous pCPU: `wake_affine_idle` (an idle waker's pCPU sharing the socket: it, or the
//! previous pCPU if that is idle too; 6.x, since 4.16: an idle previous pCPU), then
//! `wake_affine_weight`: the waker's pCPU if (its load + the task's) x 100 is at most
//! (4.15; below, 6.x) (the previous pCPU's load - the task's) x (100 + (imbalance_pct -
//! 100) / 2). Loads are the balancer's (root queue weights), the task's its
//! `task_h_load` as it would be queued (its weight, or its VM's shares / its runnable
//! vCPUs). Timers and interrupts have no waker: the target is the previous pCPU. Then
//! `select_idle_sibling(prev, target)`: the target if idle; else the previous pCPU if idle
//! and in the target's socket; else an idle pCPU of the target's socket, searched from
//! the target (with SMT, a wholly idle core first); else the target (if the affinity
//! forbids it, the least loaded allowed one). A task's first wake-up is `wake_up_new_task` and places it as a
//! new entity, later ones as a sleeper (policy). Then `check_preempt_wakeup`: an idle pCPU
//! just reschedules; otherwise the woken task and the running one are compared at the
//! level where they share a queue (tasks of two VMs: their group entities on the root
//! queue), and the policy decides.
//!
//! **Scheduling** (`pick_next_task_fair`): the previous task is put back; a pCPU left with
//! nothing runnable whose idle periods average at least `migration_cost` (`avg_idle`, an
//! EWMA of 1/8 capped at twice that) first pulls a task (`idle_balance`); then the policy
//! picks, level by level. A busy pCPU ticks every `tick`: it charges every level, lets the
//! policy check for preemption, balances, and with two or more runnable tasks kicks one
//! pCPU idle long enough to have stopped its tick (nohz) that may take one of them. The
//! ticks of all pCPUs fall on one grid of multiples of `tick` (`tick_grid`, on: Linux's
//! periodic `tick_sched_timer`, forwarded by whole periods, `skew_tick=0`); a switch
//! between ticks does not move it, and a pCPU leaving idle restarts it on the grid
//! (`tick_nohz_restart`).
//!
//! **Directed yield** (`yield_to` in core.c, `yield_to_task_fair`; KVM's PLE handler
//! calls it): -ESRCH when the yielder's and the target's run queues hold one task each; 0
//! when the target runs or is not runnable; else the target becomes the next buddy at
//! every level, the yielder yields (`yield_task_fair`, policy), the target's pCPU is
//! kicked and the yielder's reschedules. With the seed papers' fixes (`[kvm.features]`):
//! (b) `ignore_vcpu_fairness` honours that buddy unconditionally at the vCPU level when
//! the target waits on the yielder's own queue; (c) `migrate_to_yielder` first moves the
//! target there.
//!
//! **Load balancing** over three scheduling domains per pCPU (its SMT siblings, its socket,
//! the machine). A pCPU about to idle pulls one queued task from the busiest pCPU with two
//! or more runnable, innermost domain first, least recently run task first, skipping
//! cache-hot ones (ran within `migration_cost`). A busy pCPU balances each domain every
//! span x busy_factor ms (32 in 4.15, 16 in 6.x; phases staggered by a tick per pCPU) when
//! the busiest pCPU's load exceeds its own by imbalance_pct (110/117/125 %), pulling tasks
//! of hierarchical load (`task_h_load`) up to half the difference (a task whose half load
//! exceeds what is left is skipped; EEVDF, as 6.x: whose load shifted right by the domain's
//! failed attempts does). A domain spanning the same pCPUs as its child is not balanced:
//! `sd_parent_degenerate` removes it when the domains are built (a one-socket machine has
//! no machine level). After cache_nice_tries (0/1/1) failed attempts cache-hot tasks may
//! move too, and two failures later the busiest pCPU's running task is pushed (active
//! balance). A pulled task may preempt at once (`attach_task`, `check_preempt_curr`).
//!
//! ## Policy: where CFS and EEVDF differ (`FairPolicy`)
//! - **Pick** (`pick_next_entity`). CFS: the leftmost vruntime, or the next, last or skip
//!   buddy's alternative when within the wakeup granularity of the leftmost. EEVDF: the
//!   eligible entity (vruntime at most V, the queue's load-weighted average) with the
//!   earliest virtual deadline, curr kept while eligible until its deadline moves
//!   (RUN_TO_PARITY); the next buddy if eligible (6.14+ PICK_BUDDY) or never (6.6-6.13).
//! - **Placement** (`place_entity`). CFS: a sleeper at max(its vruntime, min_vruntime -
//!   latency / 2) (GENTLE_FAIR_SLEEPERS), a new entity one slice after min_vruntime
//!   (START_DEBIT). EEVDF: at V - lag x (W + w) / W with the lag saved at dequeue
//!   (PLACE_LAG), deadline a base slice later (half one for a new entity).
//! - **Slice.** CFS: `sched_slice` = period x weight / queue weight, through the hierarchy
//!   (period: latency, or nr x min_granularity above 8 tasks). EEVDF: base_slice x 1024 /
//!   weight of vruntime, renewed at the deadline (`update_deadline`).
//! - **Wake-up preemption.** CFS: when curr is ahead of the woken entity by more than the
//!   wakeup granularity; the woken task becomes the next buddy (and with 8+ tasks curr the
//!   last one). EEVDF: when the woken entity is what the pick would choose.
//! - **Tick.** CFS: `check_preempt_tick` (ran more than its slice, or at least
//!   min_granularity and ahead of the leftmost by a slice). EEVDF: nothing beyond a used-up
//!   slice's new deadline, which reschedules if others wait.
//! - **Yield.** CFS: skip buddy at every level. EEVDF: deadline one slice later.
//! - **Migration.** CFS: vruntime kept relative to min_vruntime. EEVDF: placed anew from
//!   the lag it keeps.
//!
//! ## Parameters
//! Shared (both schedulers): `tick` (duration, default 4 ms: HZ=250 as Ubuntu's 4.15
//! kernels), `migration_cost` (duration, 0.5 ms: `sysctl_sched_migration_cost`),
//! `group_per_vm` (boolean, false), `root_host_threads` (boolean, true: with
//! `group_per_vm`, unowned host threads are root-cgroup tasks; false: one group of their
//! own, vcpulab's model before 2026-11-27), `tunable_scaling` (boolean, true: the policy's
//! granularities or base slice are multiplied by 1 + ilog2(min(ncpus, 8)),
//! SCHED_TUNABLESCALING_LOG), `busy_factor` (integer 1-1024; 32 for CFS as 4.15, 16 for
//! EEVDF as 6.x; vcpulab used 32 for both before 2026-11-27), `tick_grid` (boolean, true:
//! the tick on its grid; false: re-armed a whole tick after every pick, vcpulab's rule
//! before 2026-11-27), `wake_affine` (boolean, true: the waker's pCPU may be the target,
//! as upstream; false: the previous pCPU always is, vcpulab's rule before 2026-11-27). CFS
//! only: `latency` 6 ms, `min_granularity` 0.75 ms,
//! `wakeup_granularity` 1 ms (all unscaled), `gentle_fair_sleepers`, `start_debit`,
//! `wakeup_preemption` (booleans, true). EEVDF only: `base_slice` 0.75 ms (unscaled),
//! `buddy_rule` ("6.14", "6.6" or "6.19"). Constants: `NICE_0_LOAD` 1024,
//! `sched_nr_latency` 8.
//!
//! ## Sources
//! `kernel/time/tick-sched.c` (`tick_sched_timer`, `tick_setup_sched_timer`,
//! `tick_nohz_restart`) for the tick's grid; `kernel/sched/fair.c`, `core.c` (`yield_to`),
//! `features.h` and `topology.c` (domain
//! flags, imbalance_pct, busy_factor, cache_nice_tries) of Linux 4.15 for CFS and of 6.6
//! to 6.19 for EEVDF (`pick_eevdf`, `place_entity`, `update_deadline`,
//! `update_entity_lag`, `yield_task_fair` of 6.6-6.18 and of 6.19, PICK_BUDDY of 6.14).
//! Wake-up placement: `select_task_rq_fair`, `record_wakee`, `wake_wide`, `wake_affine`,
//! `wake_affine_idle`, `wake_affine_weight`, `select_idle_sibling` of `fair.c`, 4.15 and
//! 6.x; the two 4.16 changes are Mel Gorman's 806486c377e3 ("Do not migrate if the
//! prev_cpu is idle") and 082f764a2f3f ("Do not migrate on wake_affine_weight() if
//! weights are equal").
//!
//! ## Deviations
//! - Runnable counts stand in for PELT load averages (group weights, balancing), with two
//!   stand-ins for PELT's smoothing: a task the balancer moved is not moved again within
//!   that domain's interval, and balancing phases are staggered by one tick per pCPU.
//! - wake_affine: no sync wake-ups (WF_SYNC: `wake_affine_idle`'s and
//!   `wake_affine_weight`'s sync rules never apply), no `recent_used_cpu` or per-CPU
//!   kthread stacking (6.x `select_idle_sibling`), no `wake_cap`/asymmetric capacity
//!   (capacities are equal), no SD_BALANCE_WAKE slow path (off upstream too). The loads
//!   are runnable weights, not PELT: the sleeping wakee is in neither pCPU's load, so the
//!   kernel's "prev load - task load" can go below zero (as 4.15's runnable load, unlike
//!   6.x's `cpu_load`, which keeps the wakee's decaying blocked load); the wakee itself
//!   weighs its full weight, or with `wakee_load = "pelt"` its load average
//!   (`fair/pelt.rs`). Only wake-ups the engine attributes have a waker (IPIs, pv
//!   kicks, mutex releases, backend and receive-path hand-overs, a held response's
//!   send); the others (timers, disk completions, fault-tolerance helpers) are wakes
//!   without one, and `record_wakee` is not charged to whatever an interrupt
//!   interrupted.
//! - No NUMA balancing, no CFS bandwidth throttling, no SCHED_IDLE/BATCH.
//! - Fork balancing (`fork_balance`, on): the parent a task is forked from is not
//!   modelled, so the i-th pCPU of the task's affinity stands for the parent's (the
//!   "local" CPU of `find_idlest_cpu`). Groups are compared by idle CPUs, then runnable
//!   tasks per CPU (runnable counts stand in for load, as above); the NUMA level's
//!   allowed imbalance (`adjust_numa_imbalance`) and idle-state exit latencies are not
//!   modelled.
//! - EEVDF: DELAY_DEQUEUE (6.12+) as `delay_dequeue` (`fair/delay.rs`, on by default);
//!   no PREEMPT_SHORT or custom slices; V is computed exactly over the queue instead of from
//!   the kernel's running sums.
//!
//! ## Files
//! This file: the state, the shared operations and `FairPolicy`; `fair/balance.rs`: load
//! balancing and task migration; `fair/delay.rs`: EEVDF's delayed dequeue;
//! `fair/reweight.rs`: EEVDF's nice changes at run time;
//! `fair/tests.rs`: unit tests. The policies: `cfs.rs`,
//! `eevdf.rs`.

use super::{
    proportional_share_bound, Counters, CpuId, SchedCtx, SchedView, Scheduler, TaskId, Waker,
    YieldRequest, YieldResult,
};
use crate::time::{SimDuration, SimTime};
use std::collections::BTreeSet;

mod balance;
mod core_sched;
mod delay;
mod pelt;
mod reweight;
pub use pelt::WAKEE_LOAD_PARAM;
#[cfg(test)]
mod tests;

pub use core_sched::{CoreSched, CoreSchedMode, PARAM as CORE_SCHED_PARAM};

pub const NICE_0_LOAD: u64 = 1024;

/// Tunables both policies share; the policy's own (granularities, slices) are in `P`.
#[derive(Clone, Debug)]
pub struct Tunables {
    pub tick: SimDuration,
    pub migration_cost: SimDuration,
    pub group_per_vm: bool,
    /// Scale the policy's tunables by 1 + ilog2(min(ncpus, 8)) (`FairPolicy::scale`).
    pub tunable_scaling: bool,
    /// A task's first wake-up searches the idlest pCPU (`find_idlest_cpu`, SD_BALANCE_FORK)
    /// instead of taking the i-th pCPU of its affinity.
    pub fork_balance: bool,
    /// With `group_per_vm`: host threads no VM owns are tasks of the root cgroup, queued on
    /// the pCPU's root queue beside the VMs' group entities, as upstream queues a task that
    /// was never moved into a cgroup (`set_task_rq`: `root_task_group` has no group
    /// entities). Off: they share one group of their own (vcpulab before 2026-11-27).
    pub root_host_threads: bool,
    /// The tick fires on one grid of multiples of `tick` shared by all pCPUs (the periodic
    /// tick, `tick_sched_timer`, with `skew_tick=0`), whatever the switches between ticks;
    /// off: re-armed a whole tick after every pick (vcpulab before 2026-11-27).
    pub tick_grid: bool,
    /// `sd->busy_factor`: a busy pCPU balances a domain every span ms times this.
    pub busy_factor: u64,
    /// A wake-up caused by a running task may be placed on the waker's pCPU
    /// (`wake_affine`, `wake_wide`); off: every wake-up starts from the previous pCPU
    /// (vcpulab before 2026-11-27).
    pub wake_affine: bool,
    /// `wakee_load = "pelt"`: `wake_affine_weight` weighs the wakee by its load average
    /// (`fair/pelt.rs`); false: by its full weight.
    pub wakee_pelt: bool,
}

/// The shared `busy_factor` parameter, with its default per kernel version: 32 in 4.15's
/// `sd_init` (kernel/sched/topology.c), 16 since "sched/fair: Reduce busy load balance
/// interval" (Vincent Guittot, 2021; 6.x `sd_init` has 16).
pub const fn busy_factor_param(default: &'static str) -> super::ParamInfo {
    super::ParamInfo {
        name: "busy_factor",
        kind: super::ParamKind::Int,
        default,
        help: "a busy pCPU balances each scheduling domain every (its pCPUs) ms times this (sd->busy_factor: 32 in Linux 4.15, 16 in 6.x); 1-1024",
    }
}

/// `busy_factor` within 1..1024 (the kernel's own is 16 or 32; 0 would balance on every
/// tick, which no kernel does).
pub fn check_busy_factor(t: &crate::reader::Table) -> crate::reader::Res<()> {
    if let Some(o) = t.get("busy_factor") {
        o.u64_in(1, 1024)?;
    }
    Ok(())
}

/// The shared `tick_grid` parameter (see `Tunables::tick_grid` and "Tick" in the header).
pub const TICK_GRID_PARAM: super::ParamInfo = super::ParamInfo {
    name: "tick_grid",
    kind: super::ParamKind::Bool,
    default: "true",
    help: "the tick fires on a jiffy grid shared by all pCPUs, whatever the switches between ticks (periodic tick, skew_tick=0); false: re-armed a whole tick after every pick",
};

/// The shared `wake_affine` parameter (see `Tunables::wake_affine` and "Wake-up" in the
/// header).
pub const WAKE_AFFINE_PARAM: super::ParamInfo = super::ParamInfo {
    name: "wake_affine",
    kind: super::ParamKind::Bool,
    default: "true",
    help: "a wake-up by a running task (IPI, kick, host thread) may move the woken task to the waker's pCPU (select_task_rq_fair: wake_wide, wake_affine_idle, wake_affine_weight), as upstream; false: the search always starts from the previous pCPU",
};

pub fn scale_factor(ncpus: usize) -> u64 {
    let n = ncpus.clamp(1, 8) as u64;
    1 + (63 - n.leading_zeros() as u64)
}

// Counter indices (one per decision branch).
super::counters::declare_counters! {
    pub(super)
    C_WAKE_PREV_IDLE => "wake_prev_cpu_idle",
    C_WAKE_IDLE_SIBLING => "wake_idle_sibling",
    C_WAKE_BUSY_PREV => "wake_prev_cpu_busy",
    C_FORK_LOCAL => "fork_balance_stayed_local",
    C_FORK_MOVED => "fork_balance_moved",
    C_WAKEUP_PREEMPT => "wakeup_preempt",
    C_WAKEUP_NO_PREEMPT => "wakeup_no_preempt",
    C_TICK_PREEMPT => "tick_preempt",
    C_PICK_NEXT_BUDDY => "pick_next_buddy",
    C_PICK_NEXT_BUDDY_REFUSED => "pick_next_buddy_refused",
    C_PICK_SKIP_AVOIDED => "pick_skip_buddy_avoided",
    C_PICK_LAST_BUDDY => "pick_last_buddy",
    C_YIELD_OK => "yield_to_ok",
    C_YIELD_ESRCH => "yield_to_esrch",
    C_YIELD_TARGET_RUNNING => "yield_to_target_running_or_blocked",
    C_YIELD_MIGRATED => "yield_to_migrated_target",
    C_BALANCE_PULL => "periodic_balance_pull",
    C_NEWIDLE_PULL => "newidle_balance_pull",
    C_NOHZ_KICK => "nohz_idle_kick",
    C_PICK_IDLE => "pick_went_idle",
    C_BALANCE_FAILED => "periodic_balance_failed",
    C_ACTIVE_PUSH => "active_balance_push",
    C_TICK_KEPT_ON_SWITCH => "tick_kept_on_switch",
    C_TICK_RESTARTED_ON_GRID => "tick_restarted_on_grid",
}

/// Counters of the root-cgroup branches (`root_host_threads`), listed only when a
/// scenario has such tasks under `group_per_vm`, so every other summary keeps its counters.
mod root_cgroup {
    crate::sched::counters::declare_counters! {
        pub(super)
        C_ROOT_ENQUEUE => "root_cgroup_task_enqueue",
        C_ROOT_MATCH => "root_cgroup_task_vs_group_wakeup",
    }
}

/// Counters of the wake_affine branches, listed only with `wake_affine` on, so a summary
/// with it off keeps exactly the counters it had.
mod affine {
    crate::sched::counters::declare_counters! {
        pub(super)
        // `wake_wide`: the waker and the wakee switch partners often; no affine wake-up.
        C_WAKE_WIDE => "wake_wide",
        // The waker runs on the wakee's previous pCPU: nothing to decide.
        C_WA_SAME_CPU => "wake_affine_same_cpu",
        // The waker's pCPU is outside the wakee's affinity.
        C_WA_NOT_ALLOWED => "wake_affine_not_allowed",
        // `wake_affine_idle` chose the waker's pCPU.
        C_WA_IDLE => "wake_affine_idle",
        // `wake_affine_idle` chose the previous pCPU (it is idle).
        C_WA_IDLE_PREV => "wake_affine_idle_prev",
        // `wake_affine_weight` chose the waker's pCPU.
        C_WA_WEIGHT_PULLED => "wake_affine_weight_pulled",
        // Neither rule chose the waker's pCPU: the previous one stays the target.
        C_WA_KEPT_PREV => "wake_affine_kept_prev",
        // `select_idle_sibling` from the waker's pCPU: it is idle.
        C_WA_TARGET_IDLE => "wake_affine_target_idle",
        // ... nothing idle near it: the waker's pCPU.
        C_WA_TARGET_BUSY => "wake_affine_target_busy",
    }
}

/// What CFS and EEVDF do differently (see "where CFS and EEVDF differ" above). The shared
/// code calls these hooks where the kernels' functions of the same name differ; each is a
/// function of the whole `Fair` (it may read and change entities and queues), and the
/// policy's own tunables live in `Self`. `Fair<P>` is compiled once per policy, so a hook
/// is a static call, usually inlined.
pub trait FairPolicy: Sized {
    /// Whether a queued task the balancer moves is placed on its new queue as on a
    /// wake-up (EEVDF: from the lag it keeps) instead of keeping its vruntime relative to
    /// min_vruntime (CFS).
    const PLACE_MIGRATED: bool;
    /// Whether periodic balancing skips a task whose load shifted right by the domain's
    /// failed attempts exceeds the imbalance (6.x `detach_tasks`), instead of one whose half
    /// load does (4.15).
    const RELAXED_DETACH: bool = false;
    /// `wake_affine` as Linux 4.16 changed it (Mel Gorman, "sched/fair: Do not migrate if
    /// the prev_cpu is idle", 806486c377e3, and "Do not migrate on wake_affine_weight() if
    /// weights are equal", 082f764a2f3f): an idle previous pCPU keeps the task
    /// (`wake_affine_idle`), and equal effective loads keep it too (`<`, not 4.15's `<=`).
    const WAKE_AFFINE_4_16: bool = false;
    /// Multiplies the policy's time tunables by `k` = 1 + ilog2(min(ncpus, 8)), once at
    /// `init` when `tunable_scaling` is on.
    fn scale(&mut self, k: u64);
    /// Wake-ups may preempt (`WAKEUP_PREEMPTION`).
    fn wakeup_preemption(&self) -> bool {
        true
    }
    /// The longest turn a task may get before the others' turns, under scheduler tick
    /// `tick` (for the starvation bound).
    fn longest_turn(&self, tick: SimDuration) -> SimDuration;
    /// `place_entity`: sets the vruntime (EEVDF: and deadline) of `e` as it enters `rq`
    /// after sleeping or, when `initial`, for the first time (`wake_up_new_task`).
    fn place_entity(f: &mut Fair<Self>, rq: u32, e: u32, initial: bool);
    /// The end of `update_curr`: `curr`, running from `rq` on `cpu`, has just been
    /// charged (EEVDF: `update_deadline`).
    fn update_deadline(_f: &mut Fair<Self>, _ctx: &mut SchedCtx, _rq: u32, _curr: u32, _cpu: u32) {}
    /// `e` is about to leave `rq`, whose curr has just been charged (EEVDF:
    /// `update_entity_lag`).
    fn update_entity_lag(_f: &mut Fair<Self>, _rq: u32, _e: u32) {}
    /// `pick_next_entity` on `rq`, curr put back, `left` its leftmost (least vruntime)
    /// entity: the entity to run. The caller clears its buddy marks.
    fn pick_next_entity(f: &mut Fair<Self>, rq: u32, left: u32) -> u32;
    /// `check_preempt_wakeup` where the woken task `t` (entity `pse`) and the running one
    /// (`se`) meet on `rq` of `cpu`, curr just charged: whether `pse` preempts (then the
    /// caller reschedules `cpu`); it may set buddies.
    fn check_preempt_wakeup(
        f: &mut Fair<Self>,
        t: TaskId,
        rq: u32,
        se: u32,
        pse: u32,
        cpu: u32,
    ) -> bool;
    /// `entity_tick` for `e`, running from `rq` on `cpu`, just charged (CFS:
    /// `check_preempt_tick`).
    fn entity_tick(_f: &mut Fair<Self>, _ctx: &mut SchedCtx, _rq: u32, _e: u32, _cpu: u32) {}
    /// `yield_task_fair` for `me`, running on `cpu` with others waiting, just charged.
    fn yield_task(f: &mut Fair<Self>, me: TaskId, cpu: u32);
    /// The part of `yield_to_task_fair` between `set_next_buddy` and `yield_task_fair`:
    /// `me` (running on `cpu`, not yet charged) yields to `target`, queued on `p_cpu` and
    /// just made the next buddy. Upstream does nothing here; proposed series do (EEVDF's
    /// `yield_series`).
    fn yield_to_task(
        _f: &mut Fair<Self>,
        _ctx: &mut SchedCtx,
        _me: TaskId,
        _cpu: u32,
        _target: TaskId,
        _p_cpu: u32,
    ) {
    }
    /// Counters of decision branches that only a policy option has, appended after the
    /// shared ones, and only when the option is on: a summary under the other options
    /// keeps exactly the counters it had.
    fn policy_counters(&self, _out: &mut Vec<(&'static str, u64)>) {}
    /// Whether the policy delays dequeues at all (EEVDF's `delay_dequeue`): its
    /// counters are listed only then.
    fn delays_dequeue(&self) -> bool {
        false
    }
    /// DELAY_DEQUEUE's test (`dequeue_entity` of 6.12+): whether task entity `e`, going
    /// to sleep from `rq` (curr just charged), stays queued as a delayed entity.
    fn delay_dequeue(_f: &Fair<Self>, _rq: u32, _e: u32) -> bool {
        false
    }
    /// Task `t`'s nice value becomes `nice` (`set_user_nice`); false: the policy does not
    /// model nice changes (nothing changed).
    fn set_nice(_f: &mut Fair<Self>, _ctx: &mut SchedCtx, _t: TaskId, _nice: i8) -> bool {
        false
    }
}

/// A scheduling entity (`sched_entity`): a task, or with `group_per_vm` a VM's group on
/// one pCPU.
#[derive(Clone, Debug, Default)]
pub(super) struct Entity {
    pub(super) vruntime: i64,
    pub(super) deadline: i64,
    pub(super) vlag: i64,
    pub(super) weight: u64,
    pub(super) on_rq: bool,
    /// The run queue this entity is queued on (valid when on_rq or last queued there).
    pub(super) rq: u32,
    pub(super) exec_start: SimTime,
    pub(super) sum_exec: SimDuration,
    pub(super) prev_sum_exec: SimDuration,
    /// Group entity: its own run queue.
    pub(super) child: Option<u32>,
    /// EEVDF RUN_TO_PARITY: picked with this deadline; protected until it changes.
    pub(super) protect: Option<i64>,
    /// DELAY_DEQUEUE: a task that went to sleep ineligible and is still queued
    /// (`fair/delay.rs`); it is not runnable, but counts in its queue's V and load.
    pub(super) delayed: bool,
}

/// A run queue (`cfs_rq`): a pCPU's root queue or a group's own queue on one pCPU.
#[derive(Clone, Debug, Default)]
pub(super) struct Rq {
    pub(super) tree: BTreeSet<(i64, u32)>,
    pub(super) curr: Option<u32>,
    pub(super) nr_running: u64,
    pub(super) load: u64,
    pub(super) min_vruntime: i64,
    pub(super) next: Option<u32>,
    /// The next buddy was set by a directed yield with fix (b): honour it unconditionally.
    pub(super) next_forced: bool,
    pub(super) last: Option<u32>,
    pub(super) skip: Option<u32>,
}

/// The fair class under policy `P` (`Fair<Cfs>`, `Fair<Eevdf>`). The policy, the
/// tunables, the counters, the entities and the queues are open to the policies in
/// `cfs.rs` and `eevdf.rs`; the per-pCPU and balancing state is this file's.
pub struct Fair<P: FairPolicy> {
    pub(super) policy: P,
    pub(super) tun: Tunables,
    pub(super) counters: Counters<NCOUNTERS>,
    ncpus: usize,
    ntasks: usize,
    nvms: usize,
    /// Tasks first (entity t is task t), then with `group_per_vm` one group entity per
    /// VM and pCPU.
    pub(super) ents: Vec<Entity>,
    /// pCPUs' root queues first (queue c is pCPU c's), then the groups' own queues.
    pub(super) rqs: Vec<Rq>,
    // per pCPU
    running: Vec<Option<TaskId>>,
    /// Runnable tasks on this pCPU (queued + running), all levels.
    h_nr: Vec<u64>,
    /// Delayed tasks (`fair/delay.rs`) still queued on this pCPU: asleep, so not in
    /// `h_nr`, but in the kernel's `rq->nr_running`.
    nr_delayed: Vec<u64>,
    /// Tasks queued or running on each pCPU.
    cpu_tasks: Vec<BTreeSet<TaskId>>,
    /// pCPUs with nothing queued or running.
    idle_cpus: BTreeSet<u32>,
    last_balance: Vec<[SimTime; 3]>,
    /// `rq->avg_idle`: EWMA (1/8) of idle period lengths, capped at 2 x migration_cost.
    avg_idle: Vec<SimDuration>,
    /// When the pCPU went idle, while it is idle.
    idle_since: Vec<Option<SimTime>>,
    nr_balance_failed: Vec<[u32; 3]>,
    /// Active balance: the running task of this pCPU is to move to that pCPU when it
    /// next reschedules.
    active_move: Vec<Option<(TaskId, u32)>>,
    // per task
    task_cpu: Vec<u32>,
    /// When the balancer last moved the task (hysteresis standing in for PELT smoothing).
    pulled_at: Vec<SimTime>,
    /// Not yet queued since the run started: its first wake is `wake_up_new_task`.
    never_queued: Vec<bool>,
    /// Per task: its load average (`fair/pelt.rs`; kept only with `wakee_pelt`).
    load_avg: Vec<pelt::LoadAvg>,
    task_vm: Vec<u32>,
    /// Domains of each pCPU, innermost first: SMT siblings, socket, all.
    domains: Vec<[Vec<u32>; 3]>,
    vm_shares: Vec<u64>,
    /// Runnable vCPUs per VM (for group entity weights).
    vm_runnable: Vec<u64>,
    /// Per task: a root-cgroup task (`Tunables::root_host_threads`): an entity of the root
    /// queue itself, with no group entity above it.
    root_task: Vec<bool>,
    /// Counters of the root-cgroup branches; listed only when some task is in the root
    /// cgroup.
    root_counters: Counters<{ root_cgroup::NCOUNTERS }>,
    /// Core scheduling (`core_sched` "vm" or "vcpu"; None: "off", no core-wide picks).
    core: Option<Box<CoreSched>>,
    /// Per task, as waker (`record_wakee`): the task it last woke (`last_wakee`), how
    /// often it switched wakees (`wakee_flips`, halved once a second) and the jiffy of
    /// the last halving (`wakee_flip_decay_ts`).
    last_wakee: Vec<Option<TaskId>>,
    wakee_flips: Vec<u32>,
    wakee_flip_decay: Vec<u64>,
    /// Counters of the wake_affine branches; listed only with `wake_affine` on.
    affine_counters: Counters<{ affine::NCOUNTERS }>,
    /// Counters of the delayed-dequeue branches; listed only when the policy delays.
    delay_counters: Counters<{ delay::NCOUNTERS }>,
    /// Nice values changed while running (`fair/reweight.rs`, EEVDF only); None until the
    /// first change.
    reweight: Option<Box<reweight::Reweight>>,
    /// `sched_yield` calls (a user-space PLE handler's); listed only once there was one.
    sched_yields: u64,
    /// Affinity changes at run time, by what they did (`fair/balance.rs`,
    /// `affinity_changed`); listed only once there was one.
    affinity_moves: [u64; 4],
}

impl<P: FairPolicy> Fair<P> {
    pub fn new(policy: P, tun: Tunables) -> Fair<P> {
        Fair {
            policy,
            tun,
            counters: Counters::new(COUNTER_NAMES),
            ncpus: 0,
            ntasks: 0,
            nvms: 0,
            ents: vec![],
            rqs: vec![],
            running: vec![],
            h_nr: vec![],
            nr_delayed: vec![],
            cpu_tasks: vec![],
            idle_cpus: BTreeSet::new(),
            last_balance: vec![],
            avg_idle: vec![],
            idle_since: vec![],
            nr_balance_failed: vec![],
            active_move: vec![],
            task_cpu: vec![],
            pulled_at: vec![],
            never_queued: vec![],
            load_avg: vec![],
            task_vm: vec![],
            domains: vec![],
            vm_shares: vec![],
            vm_runnable: vec![],
            root_task: vec![],
            root_counters: Counters::new(root_cgroup::COUNTER_NAMES),
            core: None,
            last_wakee: vec![],
            wakee_flips: vec![],
            wakee_flip_decay: vec![],
            affine_counters: Counters::new(affine::COUNTER_NAMES),
            delay_counters: Counters::new(delay::COUNTER_NAMES),
            reweight: None,
            sched_yields: 0,
            affinity_moves: [0; 4],
        }
    }

    /// Turns on core scheduling as `[scheduler] core_sched` asks ("off": nothing).
    pub fn with_core_sched(mut self, p: &super::Params) -> Fair<P> {
        self.core = CoreSchedMode::parse(&p.choice(CORE_SCHED_PARAM.name))
            .map(|m| Box::new(CoreSched::new(m)));
        self
    }

    fn init(&mut self, ctx: &mut SchedCtx) {
        if self.tun.tunable_scaling {
            self.policy.scale(scale_factor(ctx.ncpus()));
        }
        let v = ctx.view;
        self.ncpus = v.topo.ncpus();
        self.ntasks = v.tasks.len();
        self.nvms = v.nvms as usize;
        let ngroups = if self.tun.group_per_vm {
            self.nvms * self.ncpus
        } else {
            0
        };
        self.ents = vec![Entity::default(); self.ntasks + ngroups];
        self.rqs = vec![Rq::default(); self.ncpus + ngroups];
        // A host thread whose VM has no vCPUs is one no VM owns (the engine gives them all
        // one VM id of their own).
        let mut has_vcpus = vec![false; self.nvms];
        for info in &v.tasks {
            has_vcpus[info.vm as usize] |= !info.host_thread;
        }
        self.root_task = v
            .tasks
            .iter()
            .map(|info| {
                self.tun.group_per_vm
                    && self.tun.root_host_threads
                    && info.host_thread
                    && !has_vcpus[info.vm as usize]
            })
            .collect();
        let mut shares = vec![NICE_0_LOAD; self.nvms];
        for (t, info) in v.tasks.iter().enumerate() {
            // VM weight 256 (the default) is nice 0 / cpu.shares 1024.
            let own = info.weight as u64 * NICE_0_LOAD / 256;
            shares[info.vm as usize] = own;
            // A task in a group weighs nice 0 inside it; a root-cgroup task weighs its own
            // weight on the root queue, as a task does without group scheduling.
            self.ents[t].weight = if self.tun.group_per_vm && !self.root_task[t] {
                NICE_0_LOAD
            } else {
                own
            };
        }
        for g in 0..ngroups {
            let e = &mut self.ents[self.ntasks + g];
            e.child = Some((self.ncpus + g) as u32);
            e.weight = shares[g / self.ncpus];
        }
        self.vm_shares = shares;
        self.vm_runnable = vec![0; self.nvms];
        self.running = vec![None; self.ncpus];
        self.h_nr = vec![0; self.ncpus];
        self.nr_delayed = vec![0; self.ncpus];
        self.cpu_tasks = vec![BTreeSet::new(); self.ncpus];
        self.idle_cpus = (0..self.ncpus as u32).collect();
        // Stagger balancing by one tick per pCPU, so two pCPUs never balance against each
        // other in the same instant (and undo each other's pull before the task runs).
        self.last_balance = (0..self.ncpus as u64)
            .map(|c| [SimTime::ZERO + self.tun.tick * c; 3])
            .collect();
        self.nr_balance_failed = vec![[0; 3]; self.ncpus];
        self.avg_idle = vec![self.tun.migration_cost * 2; self.ncpus];
        self.idle_since = vec![Some(SimTime::ZERO); self.ncpus];
        self.active_move = vec![None; self.ncpus];
        self.task_vm = v.tasks.iter().map(|t| t.vm).collect();
        self.pulled_at = vec![SimTime::ZERO; self.ntasks];
        self.never_queued = vec![true; self.ntasks];
        self.load_avg = vec![pelt::LoadAvg::NEW; self.ntasks];
        self.last_wakee = vec![None; self.ntasks];
        self.wakee_flips = vec![0; self.ntasks];
        self.wakee_flip_decay = vec![0; self.ntasks];
        self.task_cpu = v
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| t.affinity.nth_wrapping(i).unwrap() as u32)
            .collect();
        if v.topo.threads_per_core == 1 {
            // PR_SCHED_CORE fails with ENODEV without SMT: no task gets a cookie.
            self.core = None;
        }
        if let Some(cs) = &mut self.core {
            cs.init(v);
        }
        let topo = &v.topo;
        self.domains = (0..self.ncpus)
            .map(|c| {
                let smt: Vec<u32> = topo
                    .core_cpus(topo.cpus[c].core)
                    .map(|x| x as u32)
                    .collect();
                let sock: Vec<u32> = (0..self.ncpus)
                    .filter(|&x| topo.cpus[x].socket == topo.cpus[c].socket)
                    .map(|x| x as u32)
                    .collect();
                let all: Vec<u32> = (0..self.ncpus as u32).collect();
                [smt, sock, all]
            })
            .collect();
    }

    // ------------------------------------------------------------- hierarchy helpers

    fn group_ent(&self, vm: u32, cpu: u32) -> u32 {
        (self.ntasks + vm as usize * self.ncpus + cpu as usize) as u32
    }

    /// The group entity whose own queue `rq` is (None: `rq` is a pCPU's root queue).
    pub(super) fn group_of_queue(&self, rq: u32) -> Option<&Entity> {
        (rq as usize >= self.ncpus).then(|| &self.ents[self.ntasks + rq as usize - self.ncpus])
    }

    /// Tasks queued or running under `rq` at every level (`h_nr_queued`).
    pub(super) fn h_nr_queued(&self, rq: u32) -> u64 {
        if (rq as usize) < self.ncpus {
            self.nr_running(rq)
        } else {
            self.rqs[rq as usize].nr_running
        }
    }

    /// The pCPU's `rq->nr_running`: its runnable tasks and the delayed ones still queued.
    pub(super) fn nr_running(&self, cpu: u32) -> u64 {
        self.h_nr[cpu as usize] + self.nr_delayed[cpu as usize]
    }

    /// Whether task `t` sits under a group entity (`group_per_vm`, and not a root-cgroup
    /// task).
    pub(super) fn grouped(&self, t: TaskId) -> bool {
        self.tun.group_per_vm && !self.root_task[t as usize]
    }

    pub(super) fn leaf_rq(&self, t: TaskId, cpu: u32) -> u32 {
        if self.grouped(t) {
            (self.ncpus + self.task_vm[t as usize] as usize * self.ncpus + cpu as usize) as u32
        } else {
            cpu
        }
    }

    /// The entities from the task up to the root (task, then its group entity).
    pub(super) fn path(&self, t: TaskId, cpu: u32) -> ([u32; 2], usize) {
        if self.grouped(t) {
            ([t, self.group_ent(self.task_vm[t as usize], cpu)], 2)
        } else {
            ([t, 0], 1)
        }
    }

    fn key(&self, e: u32) -> (i64, u32) {
        (self.ents[e as usize].vruntime, e)
    }

    pub(super) fn calc_delta_fair(delta: SimDuration, weight: u64) -> i64 {
        (delta.ns() as u128 * NICE_0_LOAD as u128 / weight.max(1) as u128) as i64
    }

    /// Charges the running entity of `rq` for time since its last update.
    fn update_curr(&mut self, ctx: &mut SchedCtx, rq: u32, cpu: u32) {
        let now = ctx.now;
        let Some(c) = self.rqs[rq as usize].curr else {
            return;
        };
        let e = &mut self.ents[c as usize];
        let delta = now.since(e.exec_start);
        if delta > SimDuration::ZERO {
            e.exec_start = now;
            e.sum_exec = e.sum_exec.plus(delta);
            e.vruntime += Self::calc_delta_fair(delta, e.weight);
        }
        P::update_deadline(self, ctx, rq, c, cpu);
        self.update_min_vruntime(rq);
    }

    pub(super) fn update_min_vruntime(&mut self, rq: u32) {
        let r = &self.rqs[rq as usize];
        let mut v = r.min_vruntime;
        let curr = r
            .curr
            .filter(|c| self.ents[*c as usize].on_rq)
            .map(|c| self.ents[c as usize].vruntime);
        let left = r.tree.first().map(|k| k.0);
        let cand = match (curr, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(c) = cand {
            v = v.max(c);
        }
        self.rqs[rq as usize].min_vruntime = v;
    }

    fn enqueue_entity(
        &mut self,
        ctx: &mut SchedCtx,
        rq: u32,
        e: u32,
        cpu: u32,
        wakeup: bool,
        initial: bool,
    ) {
        self.update_curr(ctx, rq, cpu);
        if wakeup || initial {
            P::place_entity(self, rq, e, initial);
        }
        let ent = &mut self.ents[e as usize];
        ent.on_rq = true;
        ent.rq = rq;
        let (w, key) = (ent.weight, (ent.vruntime, e));
        let r = &mut self.rqs[rq as usize];
        if r.curr != Some(e) {
            r.tree.insert(key);
        }
        r.nr_running += 1;
        r.load += w;
    }

    fn dequeue_entity(&mut self, ctx: &mut SchedCtx, rq: u32, e: u32, cpu: u32) {
        self.update_curr(ctx, rq, cpu);
        P::update_entity_lag(self, rq, e);
        self.clear_buddies(rq, e);
        let key = self.key(e);
        let ent = &mut self.ents[e as usize];
        ent.on_rq = false;
        let w = ent.weight;
        let r = &mut self.rqs[rq as usize];
        if r.curr != Some(e) {
            r.tree.remove(&key);
        }
        r.nr_running -= 1;
        r.load -= w;
        self.update_min_vruntime(rq);
    }

    /// Places entity `e`, queued on `rq` (curr or not), again as a wake-up places it
    /// (`place_entity`, not a new entity), with `change` applied to it first: it is out of
    /// the queue's V and load while placed, and back with the weight `change` left. For a
    /// lag changed in place (DELAY_ZERO) or a weight changed on the queue (a nice change).
    pub(super) fn place_again(&mut self, rq: u32, e: u32, change: impl FnOnce(&mut Entity)) {
        let is_curr = self.rqs[rq as usize].curr == Some(e);
        let (old_w, key) = (self.ents[e as usize].weight, self.key(e));
        let r = &mut self.rqs[rq as usize];
        if !is_curr {
            r.tree.remove(&key);
        }
        r.nr_running -= 1;
        r.load -= old_w;
        let ent = &mut self.ents[e as usize];
        ent.on_rq = false; // curr leaves V too
        change(ent);
        P::place_entity(self, rq, e, false);
        let ent = &mut self.ents[e as usize];
        ent.on_rq = true;
        let (w, key) = (ent.weight, (ent.vruntime, e));
        let r = &mut self.rqs[rq as usize];
        if !is_curr {
            r.tree.insert(key);
        }
        r.nr_running += 1;
        r.load += w;
    }

    pub(super) fn clear_buddies(&mut self, rq: u32, e: u32) {
        let r = &mut self.rqs[rq as usize];
        if r.next == Some(e) {
            r.next = None;
            r.next_forced = false;
        }
        if r.last == Some(e) {
            r.last = None;
        }
        if r.skip == Some(e) {
            r.skip = None;
        }
    }

    pub(super) fn clear_next(&mut self, rq: u32) {
        let r = &mut self.rqs[rq as usize];
        r.next = None;
        r.next_forced = false;
    }

    /// Re-weights a VM's group entity on `cpu`: shares x (runnable here / runnable total),
    /// the runnable-count form of `calc_group_shares`.
    fn update_group_weight(&mut self, vm: u32, cpu: u32) {
        if !self.tun.group_per_vm {
            return;
        }
        let g = self.group_ent(vm, cpu);
        let child = self.ents[g as usize].child.unwrap();
        let here = self.rqs[child as usize].nr_running;
        let total = self.vm_runnable[vm as usize].max(1);
        let w = (self.vm_shares[vm as usize] * here / total).max(2);
        let ent = &mut self.ents[g as usize];
        let old = ent.weight;
        ent.weight = w;
        if ent.on_rq {
            let r = &mut self.rqs[ent.rq as usize];
            r.load = r.load - old + w;
        }
    }

    fn refresh_vm_weights(&mut self, vm: u32) {
        // The root cgroup's tasks (their VM id has no vCPUs) have no group entities.
        if self.tun.group_per_vm {
            for c in 0..self.ncpus as u32 {
                if self.ents[self.group_ent(vm, c) as usize].on_rq {
                    self.update_group_weight(vm, c);
                }
            }
        }
    }

    /// Queues task `t` on `cpu` (and its group entity on the root queue if needed).
    fn enqueue_task(
        &mut self,
        ctx: &mut SchedCtx,
        t: TaskId,
        cpu: u32,
        wakeup: bool,
        initial: bool,
    ) {
        let vm = self.task_vm[t as usize];
        self.task_cpu[t as usize] = cpu;
        self.vm_runnable[vm as usize] += 1;
        self.pelt_enqueue(t, ctx.now);
        let leaf = self.leaf_rq(t, cpu);
        self.enqueue_entity(ctx, leaf, t, cpu, wakeup, initial);
        if self.root_task[t as usize] {
            self.root_counters.bump(root_cgroup::C_ROOT_ENQUEUE);
        } else if self.tun.group_per_vm {
            let g = self.group_ent(vm, cpu);
            if !self.ents[g as usize].on_rq {
                self.enqueue_entity(ctx, cpu, g, cpu, true, false);
            }
            self.refresh_vm_weights(vm);
        }
        self.count_runnable(t, cpu);
    }

    /// Task `t`, queued on `cpu`, becomes runnable there for the counts the balancer,
    /// idleness and core scheduling read (`h_nr`, `cpu_tasks`, `idle_cpus`).
    #[inline]
    fn count_runnable(&mut self, t: TaskId, cpu: u32) {
        self.h_nr[cpu as usize] += 1;
        self.cpu_tasks[cpu as usize].insert(t);
        self.idle_cpus.remove(&cpu);
        if let Some(cs) = &mut self.core {
            cs.touched(cpu);
        }
    }

    /// The reverse of `count_runnable`: `t` leaves `cpu`'s runnable counts (it may stay
    /// queued: a delayed dequeue, `fair/delay.rs`).
    #[inline]
    fn uncount_runnable(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        self.h_nr[cpu as usize] -= 1;
        self.cpu_tasks[cpu as usize].remove(&t);
        if self.h_nr[cpu as usize] == 0 {
            self.idle_cpus.insert(cpu);
        }
        if let Some(cs) = &mut self.core {
            cs.touched(cpu);
            if self.h_nr[cpu as usize] == 0 {
                cs.set_forced_idle(cpu, false, ctx.now);
            }
        }
    }

    fn dequeue_task(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        self.dequeue_entities(ctx, t, cpu);
        self.uncount_runnable(ctx, t, cpu);
    }

    /// Takes task `t`'s entity off its queue on `cpu` (and its group entity off the root
    /// queue if that empties the group's queue).
    #[inline]
    fn dequeue_entities(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        let vm = self.task_vm[t as usize];
        self.vm_runnable[vm as usize] -= 1;
        self.pelt_dequeue(t, ctx.now);
        let leaf = self.leaf_rq(t, cpu);
        self.dequeue_entity(ctx, leaf, t, cpu);
        if self.grouped(t) {
            let g = self.group_ent(vm, cpu);
            if self.rqs[leaf as usize].nr_running == 0 && self.ents[g as usize].on_rq {
                self.dequeue_entity(ctx, cpu, g, cpu);
            }
            self.refresh_vm_weights(vm);
        }
    }

    // ------------------------------------------------------------- picking

    /// `pick_next_entity` on one queue (curr has been put back already): the policy's
    /// choice, whose buddy marks are then cleared.
    #[inline(always)]
    fn pick_entity(&mut self, rq: u32) -> Option<u32> {
        let left = self.rqs[rq as usize].tree.first().map(|k| k.1)?;
        let se = P::pick_next_entity(self, rq, left);
        self.clear_buddies(rq, se);
        Some(se)
    }

    fn set_next_entity(&mut self, rq: u32, e: u32, now: SimTime) {
        let key = self.key(e);
        let r = &mut self.rqs[rq as usize];
        r.tree.remove(&key);
        r.curr = Some(e);
        let ent = &mut self.ents[e as usize];
        ent.exec_start = now;
        ent.prev_sum_exec = ent.sum_exec;
        ent.protect = Some(ent.deadline);
    }

    fn put_prev_entity(&mut self, ctx: &mut SchedCtx, rq: u32, e: u32, cpu: u32) {
        if self.rqs[rq as usize].curr != Some(e) {
            return;
        }
        self.update_curr(ctx, rq, cpu);
        let key = self.key(e);
        let on = self.ents[e as usize].on_rq;
        let r = &mut self.rqs[rq as usize];
        r.curr = None;
        if on {
            r.tree.insert(key);
        }
    }

    fn put_prev_task(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        let (p, n) = self.path(t, cpu);
        for &e in &p[..n] {
            let rq = self.ents[e as usize].rq;
            self.put_prev_entity(ctx, rq, e, cpu);
        }
    }

    /// Picks the task to run on `cpu`, descending from the root queue.
    fn pick_task(&mut self, ctx: &mut SchedCtx, cpu: u32) -> Option<TaskId> {
        if self.policy.delays_dequeue() {
            return self.pick_task_delayed(ctx, cpu);
        }
        let now = ctx.now;
        let mut rq = cpu;
        loop {
            let e = self.pick_entity(rq)?;
            self.set_next_entity(rq, e, now);
            match self.ents[e as usize].child {
                Some(child) => rq = child,
                None => return Some(e),
            }
        }
    }

    // ------------------------------------------------------------- engine hooks

    /// A wake-up, or for a task's first one `wake_up_new_task`: placed as a new task
    /// (CFS `START_DEBIT`: one slice behind min_vruntime; EEVDF: half a first slice)
    /// instead of as a sleeper, on the pCPU fork balancing finds (`find_idlest_cpu`)
    /// or, with `fork_balance` off, on the i-th pCPU of its affinity (task i, see `init`)
    /// when that pCPU is idle.
    /// `waker`: the task whose action woke `t` and its pCPU (None: a timer or an
    /// interrupt); a first wake-up is a fork (SD_BALANCE_FORK), which ignores it.
    fn wake_with(&mut self, ctx: &mut SchedCtx, t: TaskId, waker: Option<Waker>) {
        if self.ents[t as usize].delayed {
            if ctx.allowed(t, self.task_cpu[t as usize]) {
                // Still queued: woken where it is, without placement (`ttwu_runnable`).
                self.requeue_delayed(ctx, t);
                return;
            }
            // Its affinity changed after it slept (`set_affinity`, whose push it missed by
            // blocking first): it leaves that queue and is placed as any wake-up, as the
            // kernel's `affine_move_task` moves a queued task off a forbidden CPU.
            self.finish_delayed_dequeue(ctx, t);
        }
        let cpu = if self.never_queued[t as usize] {
            if self.tun.fork_balance {
                self.find_idlest_cpu(ctx, t)
            } else {
                self.select_task_rq(ctx, t, None)
            }
        } else {
            self.select_task_rq(ctx, t, waker)
        };
        let new = std::mem::replace(&mut self.never_queued[t as usize], false);
        self.enqueue_task(ctx, t, cpu, !new, new);
        self.check_preempt_wakeup(ctx, t, cpu);
    }

    /// Nothing runs on pCPU `c` and nothing is queued there: the idleness every placement
    /// rule (fork balancing, `wake_affine_idle`, `select_idle_sibling`) tests.
    #[inline]
    fn cpu_idle(&self, c: u32) -> bool {
        self.h_nr[c as usize] == 0 && self.running[c as usize].is_none()
    }

    /// `find_idlest_cpu` (6.x `sched_balance_find_dst_cpu`; 4.15 the same walk) for a new
    /// task: from the top domain down, the idlest group (socket, then core) and in the
    /// last one the idlest CPU. A group with idle CPUs beats one without; among those,
    /// more idle CPUs win (6.x `group_has_spare`); among busy ones, fewer runnable tasks
    /// per CPU win, by more than the domain's imbalance_pct (117%). The local group (the
    /// task's start pCPU's) wins ties, as in the kernel. In the chosen core: an idle CPU,
    /// the lowest-numbered one, else the one with the fewest runnable tasks.
    fn find_idlest_cpu(&mut self, ctx: &SchedCtx, t: TaskId) -> u32 {
        let local = self.task_cpu[t as usize];
        let aff = &ctx.view.tasks[t as usize].affinity;
        let topo = &ctx.view.topo;
        let idle = |c: usize| self.cpu_idle(c as u32);
        // (idle CPUs, runnable tasks, allowed CPUs) of a set of pCPUs.
        let stats = |cpus: &mut dyn Iterator<Item = usize>| {
            cpus.filter(|&c| aff.contains(c))
                .fold((0u64, 0u64, 0u64), |(i, r, n), c| {
                    (i + idle(c) as u64, r + self.h_nr[c], n + 1)
                })
        };
        // Whether group `a` is idler than group `b` (both (idle, runnable, allowed)).
        let idler = |a: (u64, u64, u64), b: (u64, u64, u64)| {
            if a.2 == 0 {
                return false;
            }
            if b.2 == 0 {
                return true;
            }
            match (a.0 > 0, b.0 > 0) {
                (true, false) => true,
                (false, true) => false,
                (true, true) => a.0 > b.0,
                // Fewer runnable per CPU by more than imbalance_pct: a.r/a.n * 117 < b.r/b.n * 100.
                (false, false) => a.1 * b.2 * 117 < b.1 * a.2 * 100,
            }
        };
        // The domains from the top down, each split into its groups: the machine into
        // sockets, a socket into cores, a core into its CPUs. `group(level, c)` names the
        // group of pCPU `c` at that level; `span(level, c)` says whether `c` is in the
        // domain of the current CPU at that level.
        let group = |level: usize, c: usize| match level {
            0 => topo.cpus[c].socket as usize,
            1 => topo.cpus[c].core as usize,
            _ => c,
        };
        let n = self.ncpus;
        let mut cpu = local as usize;
        for level in 0..3 {
            let in_domain = |c: usize| level == 0 || group(level - 1, c) == group(level - 1, cpu);
            let members = |g: usize| (0..n).filter(move |&c| in_domain(c) && group(level, c) == g);
            let local_group = group(level, cpu);
            let mut best = stats(&mut members(local_group));
            let mut idlest = None;
            let mut groups: Vec<usize> = (0..n)
                .filter(|&c| in_domain(c))
                .map(|c| group(level, c))
                .collect();
            groups.dedup();
            for g in groups {
                let st = stats(&mut members(g));
                if g != local_group && idler(st, best) {
                    (idlest, best) = (Some(g), st);
                }
            }
            if let Some(g) = idlest {
                // find_idlest_group_cpu: an idle CPU, else the least loaded. Among idle
                // CPUs the kernel takes the most recently idled (warmest cache); at a
                // run's start all have idled since boot and it takes the lowest-numbered,
                // which is what this takes at any time.
                cpu = members(g)
                    .filter(|&c| aff.contains(c))
                    .min_by_key(|&c| (!idle(c), self.h_nr[c], c))
                    .unwrap_or(cpu);
            }
        }
        let cpu = cpu as u32;
        let cpu = if aff.contains(cpu as usize) {
            cpu
        } else {
            self.select_task_rq(ctx, t, None)
        };
        self.counters.bump(if cpu == local {
            C_FORK_LOCAL
        } else {
            C_FORK_MOVED
        });
        cpu
    }

    /// `select_task_rq_fair` for a wake-up: with a waker (and `wake_affine`), the target
    /// `wake_affine` picks between the waker's pCPU and the previous one; without, the
    /// previous pCPU. Then `select_idle_sibling` from that target.
    fn select_task_rq(&mut self, ctx: &SchedCtx, t: TaskId, waker: Option<Waker>) -> u32 {
        let prev = self.task_cpu[t as usize];
        let target = match waker {
            Some(w) if self.tun.wake_affine && w.task != t => {
                self.wake_affine_target(ctx, t, w, prev)
            }
            _ => prev,
        };
        self.select_idle_sibling(ctx, t, prev, target)
    }

    /// `record_wakee` (4.15 and 6.x alike): the waker counts a flip when it wakes another
    /// task than last time; its flips halve once a second (`wakee_flip_decay_ts` + HZ,
    /// in jiffies of one tick).
    fn record_wakee(&mut self, now: SimTime, waker: TaskId, wakee: TaskId) {
        let w = waker as usize;
        let tick = self.tun.tick.ns().max(1);
        let jiffies = now.ns() / tick;
        let hz = (crate::time::NS_PER_S / tick).max(1); // HZ: a jiffy is one tick
        if jiffies > self.wakee_flip_decay[w] + hz {
            self.wakee_flips[w] >>= 1;
            self.wakee_flip_decay[w] = jiffies;
        }
        if self.last_wakee[w] != Some(wakee) {
            self.last_wakee[w] = Some(wakee);
            self.wakee_flips[w] = self.wakee_flips[w].saturating_add(1);
        }
    }

    /// `wake_wide` (4.15 and 6.x alike): a waker and wakee that switch partners often (a
    /// 1:N pattern) spread over the LLC instead of being pulled together: with
    /// factor = `sd_llc_size` of the waker's pCPU (its socket here), wide when the lesser
    /// flip count is at least factor and the greater at least lesser x factor.
    fn wake_wide(&self, waker: TaskId, wakee: TaskId, this: u32) -> bool {
        let a = self.wakee_flips[waker as usize];
        let b = self.wakee_flips[wakee as usize];
        let (master, slave) = (a.max(b) as u64, a.min(b) as u64);
        let factor = self.domains[this as usize][1].len() as u64;
        slave >= factor && master >= slave * factor
    }

    /// The wake path of `select_task_rq_fair` up to `select_idle_sibling`: `record_wakee`,
    /// `want_affine` = !`wake_wide` and the waker's pCPU allowed, then in the waker's
    /// innermost domain spanning the previous pCPU (all levels have SD_WAKE_AFFINE),
    /// `wake_affine` unless the waker runs on the previous pCPU. The target it returns.
    fn wake_affine_target(&mut self, ctx: &SchedCtx, t: TaskId, w: Waker, prev: u32) -> u32 {
        let this = w.cpu;
        self.record_wakee(ctx.now, w.task, t);
        if self.wake_wide(w.task, t, this) {
            self.affine_counters.bump(affine::C_WAKE_WIDE);
            return prev;
        }
        if !ctx.allowed(t, this) {
            self.affine_counters.bump(affine::C_WA_NOT_ALLOWED);
            return prev;
        }
        if this == prev {
            self.affine_counters.bump(affine::C_WA_SAME_CPU);
            return prev;
        }
        // The machine level spans every pCPU, so some level is found.
        let level = (0..3)
            .find(|&l| self.domains[this as usize][l].contains(&prev))
            .unwrap_or(2);
        self.wake_affine(t, this, prev, level)
    }

    /// `wake_affine` with `sync` = 0 (WF_SYNC is not modelled): `wake_affine_idle`, then
    /// `wake_affine_weight`; the waker's pCPU `this` or the previous pCPU `prev`.
    fn wake_affine(&mut self, t: TaskId, this: u32, prev: u32, level: usize) -> u32 {
        let idle = |c: u32| self.cpu_idle(c);
        // wake_affine_idle. An idle waker's pCPU means an interrupt woke the task: move it
        // only within the cache, and not away from an idle previous pCPU.
        let share_cache = self.domains[this as usize][1].contains(&prev);
        if idle(this) && share_cache {
            if idle(prev) {
                self.affine_counters.bump(affine::C_WA_IDLE_PREV);
                return prev;
            }
            self.affine_counters.bump(affine::C_WA_IDLE);
            return this;
        }
        // 4.16+: an idle previous pCPU keeps the task (806486c377e3).
        if P::WAKE_AFFINE_4_16 && idle(prev) {
            self.affine_counters.bump(affine::C_WA_IDLE_PREV);
            return prev;
        }
        // wake_affine_weight: the waker's pCPU with the task against the previous one
        // without it, the latter favoured by half the domain's imbalance_pct (WA_BIAS);
        // capacities are equal, so the capacity factors cancel. Loads are the balancer's
        // stand-ins for PELT (`cpu_load`, the root queue's weight); signed, as the kernel's
        // s64, since the previous pCPU's load may be below the task's.
        let task_load = self.wakee_h_load(t) as i128;
        let pct = [110i128, 117, 125][level];
        let this_eff = (self.cpu_load(this) as i128 + task_load) * 100;
        let prev_eff = (self.cpu_load(prev) as i128 - task_load) * (100 + (pct - 100) / 2);
        // 4.15 pulls on equal loads (`<=`), 4.16+ does not (`<`, 082f764a2f3f).
        let pull = if P::WAKE_AFFINE_4_16 {
            this_eff < prev_eff
        } else {
            this_eff <= prev_eff
        };
        if pull {
            self.affine_counters.bump(affine::C_WA_WEIGHT_PULLED);
            this
        } else {
            self.affine_counters.bump(affine::C_WA_KEPT_PREV);
            prev
        }
    }

    /// `task_h_load` of a sleeping task, as it would be once queued again: its own weight,
    /// or under its VM's group its share of the group entity, shares / (its VM's runnable
    /// vCPUs + itself) in the runnable-count form of `calc_group_shares` (what
    /// `task_h_load` of balance.rs gives a queued task).
    /// With `wakee_load = "pelt"`, that times its load average (`fair/pelt.rs`).
    fn wakee_h_load(&self, t: TaskId) -> u64 {
        let full = if !self.grouped(t) {
            self.ents[t as usize].weight
        } else {
            let vm = self.task_vm[t as usize] as usize;
            self.vm_shares[vm] / (self.vm_runnable[vm] + 1)
        };
        self.wakee_load(t, full)
    }

    /// `select_idle_sibling(p, prev, target)`: `target` if idle; else `prev` if it is idle
    /// and shares the cache (socket) with `target`; else an idle pCPU of `target`'s socket
    /// searched from `target` (an idle core first with SMT); else `target` (if the
    /// affinity forbids it, the least loaded allowed pCPU). Without a waker `target` is
    /// `prev`: the previous pCPU if idle, else an idle pCPU of its socket, else itself.
    fn select_idle_sibling(&mut self, ctx: &SchedCtx, t: TaskId, prev: u32, target: u32) -> u32 {
        let affine = target != prev;
        let aff = &ctx.view.tasks[t as usize].affinity;
        let idle = |c: u32| self.cpu_idle(c);
        if aff.contains(target as usize) && idle(target) {
            if affine {
                self.affine_counters.bump(affine::C_WA_TARGET_IDLE);
            } else {
                self.counters.bump(C_WAKE_PREV_IDLE);
            }
            return target;
        }
        if affine
            && aff.contains(prev as usize)
            && idle(prev)
            && self.domains[target as usize][1].contains(&prev)
        {
            self.counters.bump(C_WAKE_PREV_IDLE);
            return prev;
        }
        let topo = &ctx.view.topo;
        let sock = &self.domains[target as usize][1];
        let start = sock.iter().position(|&c| c == target).unwrap_or(0);
        let order = || (0..sock.len()).map(|i| sock[(start + i) % sock.len()]);
        if topo.threads_per_core > 1 {
            for c in order() {
                if aff.contains(c as usize)
                    && topo
                        .core_cpus(topo.cpus[c as usize].core)
                        .all(|s| idle(s as u32))
                {
                    self.counters.bump(C_WAKE_IDLE_SIBLING);
                    return c;
                }
            }
        }
        // Core scheduling: an idle pCPU whose core runs another cookie is passed over.
        let cookie_ok = |c: u32| {
            self.core
                .as_ref()
                .is_none_or(|cs| cs.cookie_matches_core(t, c))
        };
        let mut skipped = 0;
        let mut found = None;
        for c in order() {
            if aff.contains(c as usize) && idle(c) {
                if !cookie_ok(c) {
                    skipped += 1;
                    continue;
                }
                found = Some(c);
                break;
            }
        }
        if let Some(cs) = &mut self.core {
            cs.counters.values[core_sched::C_CORE_WAKE_SKIP] += skipped;
        }
        if let Some(c) = found {
            self.counters.bump(C_WAKE_IDLE_SIBLING);
            return c;
        }
        if affine {
            // `target` is the waker's pCPU, which `want_affine` found allowed.
            self.affine_counters.bump(affine::C_WA_TARGET_BUSY);
            return target;
        }
        self.counters.bump(C_WAKE_BUSY_PREV);
        if aff.contains(prev as usize) {
            prev
        } else {
            // The least loaded allowed pCPU.
            aff.iter().min_by_key(|&c| (self.h_nr[c], c)).unwrap() as u32
        }
    }

    /// `find_matching_se` for the task running on `cpu`, `curr`, and task `t` queued there:
    /// the tasks if they share a queue, else what each has on the root queue (its group
    /// entity, or a root-cgroup task itself).
    pub(super) fn matching_ses(&self, curr: TaskId, t: TaskId, cpu: u32) -> (u32, u32) {
        if self.leaf_rq(curr, cpu) == self.leaf_rq(t, cpu) {
            return (curr, t);
        }
        let top = |x: TaskId| {
            if self.grouped(x) {
                self.group_ent(self.task_vm[x as usize], cpu)
            } else {
                x
            }
        };
        (top(curr), top(t))
    }

    fn check_preempt_wakeup(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) {
        let Some(curr) = self.running[cpu as usize] else {
            ctx.resched(cpu);
            return;
        };
        if !self.policy.wakeup_preemption() || curr == t {
            return;
        }
        let (se, pse) = self.matching_ses(curr, t, cpu);
        if self.root_task[curr as usize] != self.root_task[t as usize] {
            self.root_counters.bump(root_cgroup::C_ROOT_MATCH);
        }
        let rq = self.ents[se as usize].rq;
        self.update_curr(ctx, rq, cpu);
        if P::check_preempt_wakeup(self, t, rq, se, pse, cpu) {
            self.counters.bump(C_WAKEUP_PREEMPT);
            ctx.resched(cpu);
        } else {
            self.counters.bump(C_WAKEUP_NO_PREEMPT);
        }
    }

    pub(super) fn set_next_buddy(&mut self, t: TaskId, cpu: u32, forced: bool) {
        let (p, n) = self.path(t, cpu);
        for &e in &p[..n] {
            let rq = self.ents[e as usize].rq as usize;
            self.rqs[rq].next = Some(e);
            // Fix (b) forces the task level only: fairness between VMs (the root level)
            // keeps its usual rule.
            self.rqs[rq].next_forced = forced && e == t;
        }
    }

    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        if !self.delay_dequeue_task(ctx, t, cpu) {
            self.dequeue_task(ctx, t, cpu);
        }
        // Put it back now, as schedule() does under the same run-queue lock: the task may
        // be woken and queued elsewhere before this pCPU picks again.
        if self.running[cpu as usize] == Some(t) {
            self.running[cpu as usize] = None;
            self.put_prev_task(ctx, t, cpu);
        }
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        _prev: Option<TaskId>,
    ) -> Option<TaskId> {
        if let Some(p) = self.running[cpu as usize].take() {
            self.put_prev_task(ctx, p, cpu);
            if let Some((t, dst)) = self.active_move[cpu as usize].take() {
                // active_load_balance_cpu_stop: push the task that was running here.
                if t == p && self.ents[t as usize].on_rq && ctx.allowed(t, dst) {
                    self.counters.bump(C_ACTIVE_PUSH);
                    self.pull_task(ctx, t, dst);
                    if self.running[dst as usize].is_none() {
                        ctx.resched(dst);
                    }
                }
            }
        }
        if self.h_nr[cpu as usize] == 0 && self.nr_delayed[cpu as usize] > 0 {
            // Nothing runnable: the pick takes every delayed task off first, and only then
            // does the pCPU balance as it goes idle (`pick_next_task_fair`).
            let none = self.pick_task_delayed(ctx, cpu);
            debug_assert!(none.is_none());
        }
        // idle_balance() is skipped when this pCPU's idle periods are short on average.
        if self.h_nr[cpu as usize] == 0 && self.avg_idle[cpu as usize] >= self.tun.migration_cost {
            self.newidle_balance(ctx, cpu, false);
        }
        let picked = if self.core.is_some() {
            let picked = self.core_pick_next(ctx, cpu);
            let forced = picked.is_none() && self.h_nr[cpu as usize] > 0;
            if let Some(cs) = &mut self.core {
                cs.set_forced_idle(cpu, forced, ctx.now);
            }
            picked
        } else {
            self.pick_task(ctx, cpu)
        };
        match picked {
            Some(t) => {
                let was_idle = self.idle_since[cpu as usize].is_some();
                if let Some(since) = self.idle_since[cpu as usize].take() {
                    let idle = ctx.now.minus(since).ns();
                    let avg = self.avg_idle[cpu as usize].ns() as i64;
                    let new = SimDuration((avg + (idle as i64 - avg) / 8) as u64);
                    self.avg_idle[cpu as usize] = new.min(self.tun.migration_cost * 2);
                }
                self.running[cpu as usize] = Some(t);
                ctx.set_timer(cpu, self.next_tick(ctx.now, was_idle));
                Some(t)
            }
            None => {
                self.idle_since[cpu as usize].get_or_insert(ctx.now);
                self.counters.bump(C_PICK_IDLE);
                ctx.cancel_timer(cpu);
                None
            }
        }
    }

    /// The scheduler tick on a busy pCPU: account, preempt, balance.
    fn tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        let Some(t) = self.running[cpu as usize] else {
            return;
        };
        let (p, n) = self.path(t, cpu);
        for &e in &p[..n] {
            let rq = self.ents[e as usize].rq;
            self.update_curr(ctx, rq, cpu);
            P::entity_tick(self, ctx, rq, e, cpu);
        }
        if self.core.is_some() {
            self.core_tick(ctx, cpu, t);
        }
        self.periodic_balance(ctx, cpu);
        if self.nr_running(cpu) >= 2 {
            // nohz idle balance: kick an idle pCPU that could take one of our tasks.
            // Only pCPUs idle long enough to have stopped their tick (nohz) are balanced
            // on behalf; a pCPU whose vCPU halts for microseconds is not.
            let kick = self.idle_cpus.iter().copied().find(|&c| {
                self.running[c as usize].is_none()
                    && self.avg_idle[c as usize] >= self.tun.migration_cost
                    && self.queued_tasks(cpu).any(|q| ctx.allowed(q, c))
            });
            if let Some(c) = kick {
                self.counters.bump(C_NOHZ_KICK);
                self.newidle_balance(ctx, c, false);
                if self.h_nr[c as usize] > 0 {
                    ctx.resched(c);
                }
            }
        }
        ctx.set_timer(cpu, self.next_tick(ctx.now, false));
    }

    /// When the tick after `now` fires. Linux's tick is a per-CPU hrtimer forwarded by
    /// whole periods from the jiffy grid (`tick_sched_timer`, `hrtimer_forward`; all CPUs
    /// on one grid unless `skew_tick`), and a CPU leaving idle restarts it on that grid
    /// (`tick_nohz_restart`), so a context switch between ticks does not move it.
    /// `leaving_idle`: the pick ends an idle period (only counted).
    #[inline]
    fn next_tick(&mut self, now: SimTime, leaving_idle: bool) -> SimTime {
        let tick = self.tun.tick.ns().max(1);
        if !self.tun.tick_grid {
            return now + self.tun.tick;
        }
        let next = SimTime((now.ns() / tick + 1) * tick);
        if next.since(now) < self.tun.tick {
            // The old rule would have put this tick a whole period after `now`.
            self.counters.bump(if leaving_idle {
                C_TICK_RESTARTED_ON_GRID
            } else {
                C_TICK_KEPT_ON_SWITCH
            });
        }
        next
    }

    // ------------------------------------------------------------- directed yield

    /// core.c `yield_to` + `yield_to_task_fair`, with the papers' fixes (b) and (c).
    fn yield_to(&mut self, ctx: &mut SchedCtx, req: YieldRequest) -> YieldResult {
        let (me, cpu, target) = (req.from, req.from_cpu, req.target);
        let p_cpu = self.task_cpu[target as usize];
        if self.nr_running(cpu) == 1 && self.nr_running(p_cpu) == 1 {
            self.counters.bump(C_YIELD_ESRCH);
            return YieldResult::NoSuchTarget;
        }
        let runnable_queued = self.ents[target as usize].on_rq
            && !self.ents[target as usize].delayed
            && self.running[p_cpu as usize] != Some(target);
        if !runnable_queued {
            self.counters.bump(C_YIELD_TARGET_RUNNING);
            return YieldResult::Failed;
        }
        let mut p_cpu = p_cpu;
        if req.migrate_to_yielder && p_cpu != cpu && ctx.allowed(target, cpu) {
            self.counters.bump(C_YIELD_MIGRATED);
            self.migrate_task(ctx, target, cpu);
            p_cpu = cpu;
        }
        // Fix (b): when the spinner itself keeps the boosted vCPU from running (both on this
        // run queue), the target is picked regardless of per-vCPU fairness ("the spinner
        // lowers its own priority", seed 004). Its CPU time is charged to its VM's group
        // entity as usual, which keeps fairness between VMs; like the long paper (seed 000,
        // sec. 6) no per-vCPU charge-back is made. A target on another pCPU keeps that pCPU's
        // usual rule: forcing picks there lets two spinners that boost two vCPUs of one pCPU
        // preempt each other endlessly.
        let force = req.ignore_vcpu_fairness && p_cpu == cpu;
        self.set_next_buddy(target, p_cpu, force);
        P::yield_to_task(self, ctx, me, cpu, target, p_cpu);
        self.yield_task(ctx, me, cpu);
        self.counters.bump(C_YIELD_OK);
        if p_cpu != cpu {
            ctx.resched(p_cpu);
        }
        ctx.resched(cpu);
        YieldResult::Yielded
    }

    /// `yield_task_fair` for the running task.
    fn yield_task(&mut self, ctx: &mut SchedCtx, me: TaskId, cpu: u32) {
        let leaf = self.leaf_rq(me, cpu);
        if self.rqs[leaf as usize].nr_running <= 1 && self.rqs[cpu as usize].nr_running <= 1 {
            return;
        }
        self.update_curr(ctx, leaf, cpu);
        P::yield_task(self, me, cpu);
    }
}

impl<P: FairPolicy> Scheduler for Fair<P> {
    fn init(&mut self, ctx: &mut SchedCtx) {
        Fair::init(self, ctx)
    }
    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        Fair::wake_with(self, ctx, t, None)
    }
    fn wake_from(&mut self, ctx: &mut SchedCtx, t: TaskId, waker: Option<Waker>) {
        Fair::wake_with(self, ctx, t, waker)
    }
    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        Fair::block(self, ctx, cpu, t)
    }
    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        Fair::pick_next(self, ctx, cpu, prev)
    }
    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        self.tick(ctx, cpu)
    }
    fn yield_to(&mut self, ctx: &mut SchedCtx, req: YieldRequest) -> YieldResult {
        Fair::yield_to(self, ctx, req)
    }
    /// `do_sched_yield`: `yield_task_fair` (which does nothing with no one else queued),
    /// then `schedule()`.
    fn sched_yield(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) -> bool {
        self.sched_yields += 1;
        self.yield_task(ctx, t, cpu);
        ctx.resched(cpu);
        true
    }
    fn set_nice(&mut self, ctx: &mut SchedCtx, t: TaskId, nice: i8) -> bool {
        P::set_nice(self, ctx, t, nice)
    }
    fn set_affinity(&mut self, ctx: &mut SchedCtx, t: TaskId) -> bool {
        self.affinity_changed(ctx, t);
        true
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut list = self.counters.list();
        if self.root_task.iter().any(|&r| r) {
            list.extend(self.root_counters.list());
        }
        if self.tun.wake_affine {
            list.extend(self.affine_counters.list());
        }
        if self.policy.delays_dequeue() {
            list.extend(self.delay_counters.list());
        }
        self.policy.policy_counters(&mut list);
        if self.sched_yields > 0 {
            list.push(("sched_yield", self.sched_yields));
        }
        if self.affinity_moves.iter().any(|&n| n > 0) {
            for (name, n) in balance::AFFINITY_COUNTER_NAMES
                .iter()
                .zip(self.affinity_moves)
            {
                list.push((name, n));
            }
        }
        if let Some(rw) = &self.reweight {
            list.extend(rw.counters.list());
        }
        if let Some(cs) = &self.core {
            list.extend(cs.counters.list());
        }
        list
    }
    /// Core scheduling: never two cookies running on one core at once. Delayed dequeue:
    /// a delayed task is queued and asleep, and a runnable one is never delayed.
    fn check(&self, view: &SchedView) -> Result<(), String> {
        if self.policy.delays_dequeue() {
            self.check_delayed(view)?;
        }
        match &self.core {
            Some(cs) => cs.check(view),
            None => Ok(()),
        }
    }
    fn forced_idle_ns(&self, now: SimTime) -> Option<Vec<u64>> {
        self.core.as_ref().map(|cs| cs.forced_idle_ns(now))
    }
    /// A task's turn is at most the policy's longest (`FairPolicy::longest_turn`), which
    /// bounds every other task's turn.
    fn starvation_bound(&self, view: &SchedView) -> Option<SimDuration> {
        let turn = self.policy.longest_turn(self.tun.tick);
        Some(proportional_share_bound(view, turn))
    }
}
