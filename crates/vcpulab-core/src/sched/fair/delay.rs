//! DELAY_DEQUEUE and DELAY_ZERO (Linux 6.12+, EEVDF's `delay_dequeue`): a task that goes
//! to sleep while ineligible stays on its queue until it would be picked, so that its
//! negative lag is paid off by the others' running, not carried through the sleep.
//!
//! ## Policy (kernel/sched/fair.c of 6.12 .. 6.18)
//! - **Sleep** (`dequeue_entity` with DEQUEUE_SLEEP): if the feature is on and the task's
//!   entity is not eligible on its queue (vruntime past V, curr included), it is marked
//!   delayed and left queued: it stays in the tree, in the queue's load and in V, and its
//!   group entity stays queued too. It is no longer runnable: it leaves the pCPU's
//!   runnable count (6.13+ `h_nr_runnable`, which load balancing reads) and is never
//!   migrated. An eligible sleeper leaves at once, as before.
//! - **Pick** (`pick_next_entity`, `pick_task_fair`): when the pick would run a delayed
//!   task, the task leaves its queue instead (DEQUEUE_DELAYED) and the pick starts again
//!   from the root. Its lag is taken then; DELAY_ZERO clips a positive lag to 0, since the
//!   task was meant to leave at its zero-lag point. A pCPU with nothing runnable left so
//!   takes off all its delayed tasks before it balances as it goes idle, so an idle pCPU
//!   never holds one (the kernel's `idle_cpu` counts them in `nr_running`; with this, the
//!   model's runnable count gives the same answer).
//! - **Wake-up** (`ttwu_runnable`, ENQUEUE_DELAYED, `requeue_delayed_entity`): a delayed
//!   task is still queued, so it wakes on its own pCPU, with no wake-up placement
//!   (`select_task_rq`, `wake_affine`, `record_wakee` are not called). With DELAY_ZERO,
//!   if its lag has become positive while it waited, it is placed anew with lag 0; else it
//!   keeps its vruntime and deadline. Then the usual wake-up preemption check.
//!
//! ## Sources
//! torvalds/linux 152e11f6df29 ("sched/fair: Implement delayed dequeue"), 54a58a787791
//! ("sched/fair: Implement DELAY_ZERO"), 781773e3b680 ("sched/fair: Implement
//! ENQUEUE_DELAYED") and "sched/fair: Prepare pick_next_task() for delayed dequeue", all
//! Peter Zijlstra, merged for 6.12 (tip sched-core-2024-09-19); both features default on
//! in `kernel/sched/features.h` since. 6.13's "sched/eevdf: More PELT vs
//! DELAYED_DEQUEUE" for the runnable counts.
//!
//! ## Deviations
//! - Group entities are never delayed themselves: a group entity leaves the root queue
//!   when its group's queue empties, as before. Upstream, the group entity's dequeue is a
//!   sleep too and can be delayed; a task alone in its group is always eligible inside
//!   it, so there the delay happens one level up, which the model misses.
//! - The balancer's pCPU load (the root queue's weight) keeps a delayed task's weight
//!   until it leaves, as 6.x's PELT load keeps accruing it while the entity is queued;
//!   the runnable counts leave it out, as 6.13+'s `h_nr_runnable`. The kernel's
//!   `rq->nr_running` counts it (the model's `nr_running`: `yield_to`'s -ESRCH test, the
//!   nohz kick, the series' task count); its group classification (`sum_nr_running`) does
//!   too, which the model's runnable-count balancer does not.
//! - A delayed task is never migrated. 6.14+'s `can_migrate_task` lets the balancer pull
//!   one in `migrate_load` mode only, after failed attempts; it then stays delayed there.
//! - The lag limit is 6.12's max(2 x slice, tick) (`eevdf.rs`); later kernels bound it
//!   by the queue's largest slice plus a tick.
//! - DEQUEUE_SPECIAL (stopped, traced, frozen tasks are never delayed) has no case here:
//!   every block in the simulator is a sleep.

use super::{Fair, FairPolicy};
use crate::sched::{RunState, SchedCtx, SchedView, TaskId};

crate::sched::counters::declare_counters! {
    pub(super)
    // A task went to sleep ineligible and stayed queued.
    C_DELAYED => "delay_dequeue_delayed",
    // A delayed task was picked and left its queue; its lag was then 0 or less.
    C_PICKED => "delay_dequeue_picked",
    // ... and it had positive lag, clipped to 0 (DELAY_ZERO).
    C_PICKED_ZEROED => "delay_dequeue_picked_lag_zeroed",
    // A delayed task was woken with its lag still 0 or less: it keeps its place.
    C_WOKEN_IN_PLACE => "delay_dequeue_woken_in_place",
    // ... with positive lag: placed anew at lag 0 (DELAY_ZERO).
    C_WOKEN_REPLACED => "delay_dequeue_woken_replaced",
}

impl<P: FairPolicy> Fair<P> {
    /// `t`, running on or queued at `cpu`, goes to sleep: if the policy delays its
    /// dequeue, it stays queued as a delayed task and this returns true (the caller
    /// dequeues it otherwise).
    #[inline]
    pub(super) fn delay_dequeue_task(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: u32) -> bool {
        if !self.policy.delays_dequeue() {
            return false;
        }
        let leaf = self.leaf_rq(t, cpu);
        self.update_curr(ctx, leaf, cpu);
        if !P::delay_dequeue(self, leaf, t) {
            return false;
        }
        self.delay_counters.bump(C_DELAYED);
        self.clear_buddies(leaf, t);
        self.ents[t as usize].delayed = true;
        self.nr_delayed[cpu as usize] += 1;
        self.uncount_runnable(ctx, t, cpu);
        true
    }

    /// `pick_task` when dequeues may be delayed: a delayed task that the pick reaches
    /// leaves its queue instead, and the pick starts again from the root
    /// (`pick_next_entity` and `pick_task_fair` of 6.12+). Each level is chosen before any
    /// is made current, so a restart leaves no level half-picked. (`pick_task` keeps the
    /// one-pass descent when nothing can be delayed: this form, for every pick, cost a
    /// third more instructions in `pick_task` and 1.2 % of a whole run, callgrind,
    /// 2026-11-27.)
    pub(super) fn pick_task_delayed(&mut self, ctx: &mut SchedCtx, cpu: u32) -> Option<TaskId> {
        'again: loop {
            let mut path = [(0u32, 0u32); 2];
            let mut n = 0;
            let mut rq = cpu;
            loop {
                let e = self.pick_entity(rq)?;
                if self.ents[e as usize].delayed {
                    self.finish_delayed_dequeue(ctx, e);
                    continue 'again;
                }
                path[n] = (rq, e);
                n += 1;
                match self.ents[e as usize].child {
                    Some(child) => rq = child,
                    None => break,
                }
            }
            for &(rq, e) in &path[..n] {
                self.set_next_entity(rq, e, ctx.now);
            }
            return Some(path[n - 1].1);
        }
    }

    /// The pick chose delayed task `t`: it leaves its queue now (DEQUEUE_DELAYED), its
    /// positive lag clipped to 0 (DELAY_ZERO).
    pub(super) fn finish_delayed_dequeue(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let cpu = self.task_cpu[t as usize];
        self.dequeue_entities(ctx, t, cpu);
        self.nr_delayed[cpu as usize] -= 1;
        let ent = &mut self.ents[t as usize];
        ent.delayed = false;
        if ent.vlag > 0 {
            ent.vlag = 0;
            self.delay_counters.bump(C_PICKED_ZEROED);
        } else {
            self.delay_counters.bump(C_PICKED);
        }
    }

    /// A wake-up of delayed task `t` (ENQUEUE_DELAYED): runnable again where it is
    /// queued; re-placed at lag 0 if its lag has become positive (DELAY_ZERO); then the
    /// wake-up preemption check.
    pub(super) fn requeue_delayed(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let cpu = self.task_cpu[t as usize];
        let rq = self.leaf_rq(t, cpu);
        // 6.18 takes the lag against V as it stands, curr not charged first (7.x charges
        // it; the wake-up preemption check below does).
        P::update_entity_lag(self, rq, t);
        if self.ents[t as usize].vlag > 0 {
            self.delay_counters.bump(C_WOKEN_REPLACED);
            // Out of the queue while placed, so that V and the load are the others'.
            self.place_again(rq, t, |e| e.vlag = 0);
        } else {
            self.delay_counters.bump(C_WOKEN_IN_PLACE);
        }
        self.ents[t as usize].delayed = false;
        self.nr_delayed[cpu as usize] -= 1;
        self.count_runnable(t, cpu);
        self.check_preempt_wakeup(ctx, t, cpu);
    }

    /// `--check-invariants`: every delayed task is queued and asleep, out of its pCPU's
    /// runnable tasks; every runnable task is undelayed.
    pub(super) fn check_delayed(&self, view: &SchedView) -> Result<(), String> {
        let name = |s: &RunState| match s {
            RunState::Running(_) => "running",
            RunState::Runnable => "runnable",
            RunState::Halted => "halted",
        };
        let mut counted = vec![0u64; self.nr_delayed.len()];
        for (t, state) in view.state.iter().enumerate() {
            let e = &self.ents[t];
            if e.delayed {
                counted[self.task_cpu[t] as usize] += 1;
            }
            let listed = self.cpu_tasks[self.task_cpu[t] as usize].contains(&(t as TaskId));
            if e.delayed && (!e.on_rq || !matches!(state, RunState::Halted) || listed) {
                return Err(format!(
                    "delayed dequeue: task {t} is delayed but {} (state {})",
                    if !e.on_rq {
                        "not queued"
                    } else if listed {
                        "counted runnable"
                    } else {
                        "not asleep"
                    },
                    name(state)
                ));
            }
            if !e.delayed && !matches!(state, RunState::Halted) && !e.on_rq {
                return Err(format!("task {t} is {} but not queued", name(state)));
            }
        }
        let list = |v: &[u64]| {
            v.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if counted != self.nr_delayed {
            return Err(format!(
                "delayed dequeue: delayed tasks per pCPU are {} but nr_delayed says {}",
                list(&counted),
                list(&self.nr_delayed)
            ));
        }
        Ok(())
    }
}
