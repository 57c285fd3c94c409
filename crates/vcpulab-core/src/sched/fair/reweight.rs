//! A task's nice value changes while the system runs (EEVDF's `set_nice`): what a
//! user-space VMM's PLE handler does when it raises a vCPU thread to nice -20 for a while
//! and puts it back (`[kvm] ple_handler = "nice-boost"`, engine/ple.rs).
//!
//! ## Policy (mainline v6.18: `__sched_setscheduler` / `set_user_nice`, `reweight_task_fair`,
//! `reweight_entity`, `prio_changed_fair`)
//! - The weight is `sched_prio_to_weight[nice + 20]` (kernel/sched/core.c): nice 0 is 1024,
//!   -20 is 88761, 19 is 15. In vcpulab a task's nice-0 weight is the one `init` gave it
//!   (its VM's weight outside a group, 1024 inside one); nice n scales that by
//!   `sched_prio_to_weight[n + 20] / 1024`.
//! - **A sleeping task** keeps its lag in real time: `vlag *= old / new`. Its next wake-up's
//!   placement uses it. No reschedule.
//! - **A queued or running task** is taken off its queue for the change (DEQUEUE_SAVE):
//!   curr is charged, its buddies are cleared, its lag is taken (`update_entity_lag`,
//!   clamped at the old weight) and its deadline made relative (PLACE_REL_DEADLINE). Lag
//!   and relative deadline are scaled by old / new (the lag and the remaining request in
//!   real time stay), the weight changes, and it is put back (ENQUEUE_RESTORE):
//!   `place_entity` with the scaled lag against the others' V, deadline = vruntime + the
//!   scaled relative deadline. V and the task's eligibility are unchanged, up to rounding.
//!   A running task's slice protection is re-armed at its new deadline (`set_next_task`
//!   -> `set_next_entity` -> `set_protect_slice`).
//! - **Then `prio_changed_fair`**: nothing if the pCPU's root queue holds one entity. For
//!   the running task: a reschedule only if its priority went down (nice raised), and the
//!   pick that follows keeps it while it is eligible and protected. For a queued task: the
//!   wake-up preemption test (`wakeup_preempt` -> `check_preempt_wakeup_fair`): preempt
//!   if the queue's protected pick (`pick_eevdf` with curr protected) is this task. A
//!   raised task waits for a protected current task's slice to end unless the current
//!   task is ineligible.
//!
//! ## Sources
//! Read from 6.18.y stable context (`reweight_entity` and `set_next_entity` of the
//! [PATCH 6.18 023/314] and 024/314 backports of bcd74b2ffdd0 and ff38424030f9) and the
//! `prio_changed_fair` diffs around 6.18 (2026-12-05, session 31: a helper's reading).
//! `set_user_nice`, `set_load_weight` and `place_entity` as of 6.12-6.18 were recalled,
//! not re-read against a v6.18 tree.
//!
//! ## Deviations
//! - The model's full pick is unprotected (`eevdf.rs`): a reschedule that does not come at
//!   a deadline may switch out a task the kernel would keep. For the running task whose
//!   nice went up, the protected pick is evaluated here and no reschedule is asked while
//!   it would keep the task.
//! - With `group_per_vm`, the VM's group entity keeps its weight: upstream
//!   `calc_group_shares` follows the group queue's load at once; the model's group
//!   weights follow runnable counts (`update_group_weight`).
//! - A delayed task (`fair/delay.rs`) is re-weighed and stays delayed; no preemption
//!   test is made for it.
//! - 6.18.y from March 2026 and 7.0 no longer re-arm the protection of a running task
//!   (bcd74b2ffdd0), and bound the lag by the largest slice plus a tick; the model
//!   follows mainline v6.18.
//! - The load balancer and `wake_affine` read a queue's load as it is now, so a boosted
//!   task weighs 87 times a nice-0 one at once; upstream they read PELT averages, which
//!   move ~2 % of the way in 1 ms. (With `wakee_load = "pelt"` the wakee's own load is
//!   averaged; the queues' are not.)
//! - With `group_per_vm`, only the task's own entity re-arms its protection, and the test
//!   that keeps a running task whose nice went up looks at its VM's queue only.
//! - The starvation bound of `--check-invariants` is asked once, with the weights at
//!   `init`: a boost longer than the bound's slack (100 ms) against nice-0 tasks may
//!   trip it.

use super::{Fair, NICE_0_LOAD};
use crate::sched::eevdf::Eevdf;
use crate::sched::{SchedCtx, TaskId};

crate::sched::counters::declare_counters! {
    pub(super)
    // The nice value given was the task's already (`set_user_nice` returns early).
    C_UNCHANGED => "reweight_unchanged",
    // A sleeping task: its lag scaled, nothing else.
    C_SLEEPING => "reweight_sleeping",
    // A queued task that does not run: the wake-up preemption test preempted.
    C_QUEUED_PREEMPT => "reweight_queued_preempt",
    // ... or did not (or its pCPU's root queue held only it).
    C_QUEUED_NO_PREEMPT => "reweight_queued_no_preempt",
    // The running task's priority went up (nice lowered): no reschedule.
    C_RUNNING_RAISED => "reweight_running_raised",
    // The running task's priority went down: the protected pick keeps it.
    C_RUNNING_LOWERED_KEPT => "reweight_running_lowered_kept",
    // ... or does not: a reschedule.
    C_RUNNING_LOWERED_RESCHED => "reweight_running_lowered_resched",
    // A delayed task (asleep, still queued): re-weighed in place, stays delayed.
    C_DELAYED => "reweight_delayed",
    // The lag taken at the change hit its clamp.
    C_LAG_CLAMPED => "reweight_lag_clamped",
}

/// `sched_prio_to_weight` (kernel/sched/core.c): nice -20 .. 19.
pub const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904,
    3906, 3121, 2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87,
    70, 56, 45, 36, 29, 23, 18, 15,
];

/// Per-task nice state, made at the first change (a run that never changes a nice value
/// carries none, and lists no counters).
pub(super) struct Reweight {
    /// Each task's nice value now.
    nice: Vec<i8>,
    /// Each task's weight at nice 0 (its weight at `init`).
    nice0_weight: Vec<u64>,
    pub(super) counters: crate::sched::Counters<NCOUNTERS>,
}

/// `x * num / den`, truncated toward zero like the kernel's `div_s64`.
fn scale(x: i64, num: u64, den: u64) -> i64 {
    (x as i128 * num as i128 / den.max(1) as i128) as i64
}

impl Fair<Eevdf> {
    /// Task `t`'s nice value becomes `nice` (see the module notes).
    pub(crate) fn reweight_task(&mut self, ctx: &mut SchedCtx, t: TaskId, nice: i8) {
        let nice = nice.clamp(-20, 19);
        if self.reweight.is_none() {
            self.reweight = Some(Box::new(Reweight {
                nice: vec![0; self.ntasks],
                nice0_weight: self.ents[..self.ntasks].iter().map(|e| e.weight).collect(),
                counters: crate::sched::Counters::new(COUNTER_NAMES),
            }));
        }
        let rw = self.reweight.as_mut().expect("made above");
        let ti = t as usize;
        if rw.nice[ti] == nice {
            rw.counters.bump(C_UNCHANGED);
            return;
        }
        // Up or down by the nice value, as the kernel's `p->prio` comparison (a weight
        // rounded at a small VM weight could tie).
        let raised = nice < rw.nice[ti];
        rw.nice[ti] = nice;
        let new_w =
            (rw.nice0_weight[ti] * PRIO_TO_WEIGHT[(nice + 20) as usize] / NICE_0_LOAD).max(1);
        let old_w = self.ents[ti].weight;
        if !self.ents[ti].on_rq {
            let e = &mut self.ents[ti];
            e.vlag = scale(e.vlag, old_w, new_w);
            e.weight = new_w;
            self.bump(C_SLEEPING);
            return;
        }
        let cpu = self.task_cpu[ti];
        let rq = self.leaf_rq(t, cpu);
        self.update_curr(ctx, rq, cpu);
        self.clear_buddies(rq, t);
        let raw_lag = self.avg_vruntime(rq) - self.ents[ti].vruntime;
        <Eevdf as super::FairPolicy>::update_entity_lag(self, rq, t);
        if self.ents[ti].vlag != raw_lag {
            self.bump(C_LAG_CLAMPED);
        }
        // Lag and remaining request scaled to the new weight, then placed again.
        let rel_deadline = scale(
            self.ents[ti].deadline - self.ents[ti].vruntime,
            old_w,
            new_w,
        );
        self.place_again(rq, t, |e| {
            e.vlag = scale(e.vlag, old_w, new_w);
            e.weight = new_w;
        });
        let e = &mut self.ents[ti];
        e.deadline = e.vruntime + rel_deadline;
        self.update_min_vruntime(rq);
        if self.ents[ti].delayed {
            self.bump(C_DELAYED);
            return;
        }
        let running = self.running[cpu as usize] == Some(t);
        if running {
            // set_next_entity: a new slice's protection, at the new deadline.
            let e = &mut self.ents[ti];
            e.prev_sum_exec = e.sum_exec;
            e.protect = Some(e.deadline);
        }
        if self.rqs[cpu as usize].nr_running <= 1 {
            if !running {
                self.bump(C_QUEUED_NO_PREEMPT);
            } else if raised {
                self.bump(C_RUNNING_RAISED);
            } else {
                self.bump(C_RUNNING_LOWERED_KEPT);
            }
            return;
        }
        if running {
            if raised {
                self.bump(C_RUNNING_RAISED);
            } else if self.pick_eevdf(rq, Some(t)) == Some(t) {
                // resched_curr, then a pick that keeps the eligible, protected task.
                self.bump(C_RUNNING_LOWERED_KEPT);
            } else {
                self.bump(C_RUNNING_LOWERED_RESCHED);
                ctx.resched(cpu);
            }
            return;
        }
        let Some(curr) = self.running[cpu as usize] else {
            self.bump(C_QUEUED_NO_PREEMPT);
            return;
        };
        let (se, pse) = self.matching_ses(curr, t, cpu);
        let rq = self.ents[se as usize].rq;
        self.update_curr(ctx, rq, cpu);
        if self.pick_eevdf(rq, Some(se)) == Some(pse) {
            self.bump(C_QUEUED_PREEMPT);
            ctx.resched(cpu);
        } else {
            self.bump(C_QUEUED_NO_PREEMPT);
        }
    }

    fn bump(&mut self, c: usize) {
        if let Some(rw) = &mut self.reweight {
            rw.counters.bump(c);
        }
    }
}
