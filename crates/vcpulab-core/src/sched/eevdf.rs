//! `eevdf` — Linux 6.6+ EEVDF (Earliest Eligible Virtual Deadline First), with KVM's
//! directed yield; the buddy rule of 6.6-6.13 or 6.14+ is selectable.
//!
//! ## Policy (kernel/sched/fair.c of 6.6 .. 6.14)
//! - Virtual runtime as in CFS (`delta x 1024 / weight`). V, the queue's weighted average
//!   vruntime (current task included), defines eligibility: an entity is eligible when its
//!   lag V - vruntime >= 0.
//! - Each entity has a virtual deadline = vruntime + base_slice x 1024 / weight, renewed
//!   when its vruntime reaches it, which also asks for a reschedule if others are queued
//!   (`update_deadline`; there is no tick-slice check any more). `base_slice` 0.75 ms,
//!   scaled by 1 + ilog2(min(ncpus, 8)).
//! - Pick (`pick_eevdf`): the eligible entity with the earliest deadline. RUN_TO_PARITY:
//!   the running entity keeps the pCPU while eligible until it gets a new deadline, so a
//!   wake-up preempts only if it is what `pick_eevdf` would choose anyway.
//! - Placement (`place_entity`, PLACE_LAG): vruntime = V - lag x (W + w) / W, where lag was
//!   saved at dequeue, clamped to +-max(2 x slice, tick) x 1024 / weight; a new entity's
//!   first deadline is half a slice away (PLACE_DEADLINE_INITIAL).
//! - Buddies: 6.6-6.13 honour the next buddy only with NEXT_BUDDY (default off), so the
//!   buddy `yield_to` sets is ignored; 6.14+ (PICK_BUDDY) honour it if it is eligible.
//!   `buddy_rule` selects "6.14" (default) or "6.6".
//! - Yield (`yield_task_fair`, 6.6-6.16): the yielder's deadline moves one slice later; no
//!   skip buddy. `yield_to` as in core.c (see `cfs`).
//! - Wake-up placement, load balancing and group scheduling as in `cfs`.
//!
//! ## Parameters
//! `base_slice` 0.75 ms (unscaled), `tick` 4 ms, `migration_cost` 0.5 ms, `group_per_vm`
//! false, `buddy_rule` "6.14", `tunable_scaling` true.
//!
//! ## Fixes from the seed papers
//! (b): on the spinner's own run queue the yield_to buddy is honoured even if ineligible;
//! (c): the target moves to the spinner's queue. See `cfs`.
//!
//! ## Deviations
//! - No DELAY_DEQUEUE (6.12+) or PREEMPT_SHORT; no custom slices. V is computed exactly
//!   (O(queue length)) rather than with the kernel's incremental sums.
//! - As in `cfs`: runnable counts instead of PELT, no wake_affine, no NUMA balancing.

use super::fair::{Fair, Policy, Tunables};
use super::{ParamInfo, ParamKind, Params};
use crate::time::SimDuration;

pub const DESCRIPTION: &str = "Linux 6.6+ EEVDF: eligibility by lag, earliest virtual deadline, 6.6 or 6.14 buddy rule, yield_to";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "base_slice",
        kind: ParamKind::Duration,
        default: "750us",
        help: "sysctl_sched_base_slice (unscaled)",
    },
    ParamInfo {
        name: "tunable_scaling",
        kind: ParamKind::Bool,
        default: "true",
        help: "scale base_slice by 1 + ilog2(min(ncpus, 8))",
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
        name: "buddy_rule",
        kind: ParamKind::Choice(&["6.14", "6.6"]),
        default: "6.14",
        help: "6.14: next buddy honoured if eligible (PICK_BUDDY); 6.6: ignored (NEXT_BUDDY off)",
    },
];

/// EEVDF over the shared fair-class machinery. The CFS-only tunables (latency,
/// granularities, sleeper placement) are unused by the EEVDF policy.
pub fn new(p: &Params) -> Fair {
    let pick_buddy = p.choice("buddy_rule") == "6.14";
    Fair::new(
        Policy::Eevdf { pick_buddy },
        Tunables {
            latency: SimDuration::from_ms(6),
            min_granularity: SimDuration::from_us(750),
            wakeup_granularity: SimDuration::from_ms(1),
            base_slice: p.duration("base_slice"),
            tick: p.duration("tick"),
            migration_cost: p.duration("migration_cost"),
            group_per_vm: p.bool("group_per_vm"),
            tunable_scaling: p.bool("tunable_scaling"),
            gentle_fair_sleepers: true,
            start_debit: false,
            wakeup_preemption: true,
        },
    )
}
