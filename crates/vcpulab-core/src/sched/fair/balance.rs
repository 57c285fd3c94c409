//! Moving tasks between pCPUs in the fair class: the balancer's pulls (`idle_balance` of
//! a pCPU about to idle, periodic balancing per scheduling domain from a busy pCPU's
//! tick) and the migration they and directed yield (fix (c)) use. The rules are in the
//! header of `fair.rs` (**Load balancing**).

use super::{Fair, FairPolicy, C_BALANCE_FAILED, C_BALANCE_PULL, C_NEWIDLE_PULL};
use crate::sched::{SchedCtx, TaskId};
use crate::time::{SimDuration, SimTime};

/// The counters of `affinity_changed`, in `Fair::affinity_moves`' order.
pub(super) const AFFINITY_COUNTER_NAMES: [&str; 4] = [
    "affinity_kept",
    "affinity_moved_running",
    "affinity_moved_queued",
    "affinity_asleep",
];

impl<P: FairPolicy> Fair<P> {
    /// Moves a queued (not running) task to another pCPU, keeping its relative position
    /// (vruntime renormalised to the destination's min_vruntime; lag kept under EEVDF).
    pub(super) fn migrate_task(&mut self, ctx: &mut SchedCtx, t: TaskId, to: u32) {
        let from = self.task_cpu[t as usize];
        let rel =
            self.ents[t as usize].vruntime - self.rqs[self.leaf_rq(t, from) as usize].min_vruntime;
        self.dequeue_task(ctx, t, from);
        let leaf = self.leaf_rq(t, to);
        self.ents[t as usize].vruntime = self.rqs[leaf as usize].min_vruntime + rel;
        self.enqueue_task(ctx, t, to, P::PLACE_MIGRATED, false);
    }

    /// `sched_setaffinity` (`__set_cpus_allowed_ptr` -> `affine_move_task`): `t`'s affinity
    /// has changed. On a pCPU it may still use, nothing moves. Otherwise, to the least
    /// loaded pCPU it may use: a running task by the stopper when its pCPU reschedules (the
    /// active push of `pick_next`), a queued one at once (`move_queued_task`, then the
    /// wake-up preemption test there); a delayed one leaves its queue (it is asleep); a
    /// sleeping one is placed by its next wake-up, which keeps to the affinity.
    pub(super) fn affinity_changed(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let cpu = self.task_cpu[t as usize];
        if ctx.allowed(t, cpu) {
            self.affinity_moves[0] += 1;
            return;
        }
        let aff = &ctx.view.tasks[t as usize].affinity;
        let dst = aff
            .iter()
            .min_by_key(|&c| (self.h_nr[c], c))
            .expect("an affinity is never empty") as u32;
        if self.running[cpu as usize] == Some(t) {
            self.affinity_moves[1] += 1;
            self.active_move[cpu as usize] = Some((t, dst));
            ctx.resched(cpu);
        } else if self.ents[t as usize].on_rq && !self.ents[t as usize].delayed {
            self.affinity_moves[2] += 1;
            self.pull_task(ctx, t, dst);
        } else {
            if self.ents[t as usize].delayed {
                self.finish_delayed_dequeue(ctx, t);
            }
            self.affinity_moves[3] += 1;
        }
    }

    /// `attach_task`: a pulled task may preempt the destination's current task at once
    /// (`check_preempt_curr`), as a wake-up would.
    pub(super) fn pull_task(&mut self, ctx: &mut SchedCtx, t: TaskId, to: u32) {
        self.pulled_at[t as usize] = ctx.now.max(SimTime(1));
        self.migrate_task(ctx, t, to);
        self.check_preempt_wakeup(ctx, t, to);
    }

    /// Tasks queued (not running) on a pCPU, in a stable order.
    pub(super) fn queued_tasks(&self, cpu: u32) -> impl Iterator<Item = TaskId> + '_ {
        let running = self.running[cpu as usize];
        self.cpu_tasks[cpu as usize]
            .iter()
            .copied()
            .filter(move |&t| Some(t) != running)
    }

    /// A pCPU's load as the balancer sees it: the root queue's weight (group entities in
    /// group mode, tasks otherwise).
    pub(super) fn cpu_load(&self, cpu: u32) -> u64 {
        self.rqs[cpu as usize].load
    }

    /// A task's hierarchical load (`task_h_load`): its share of its group entity's weight.
    pub(super) fn task_h_load(&self, t: TaskId) -> u64 {
        let e = &self.ents[t as usize];
        if !self.grouped(t) {
            return e.weight;
        }
        let cpu = self.task_cpu[t as usize];
        let ge = &self.ents[self.group_ent(self.task_vm[t as usize], cpu) as usize];
        let group_load = self.rqs[self.leaf_rq(t, cpu) as usize].load.max(1);
        ge.weight * e.weight / group_load
    }

    /// Queued tasks in the order `detach_tasks` tries them: least recently run first
    /// (the tail of `cfs_tasks`).
    pub(super) fn pull_order(&self, cpu: u32) -> Vec<TaskId> {
        let mut v: Vec<TaskId> = self.queued_tasks(cpu).collect();
        v.sort_by_key(|&t| (self.ents[t as usize].exec_start, t));
        v
    }

    pub(super) fn cache_hot(&self, t: TaskId, now: SimTime) -> bool {
        now.since(self.ents[t as usize].exec_start) < self.tun.migration_cost
            && self.ents[t as usize].sum_exec > SimDuration::ZERO
    }

    /// Pulls one queued task to an idle `cpu` from the busiest pCPU, innermost domain first.
    pub(super) fn newidle_balance(&mut self, ctx: &mut SchedCtx, cpu: u32, ignore_hot: bool) {
        let now = ctx.now;
        for level in 0..3 {
            let busiest = self.domains[cpu as usize][level]
                .iter()
                .copied()
                .filter(|&c| c != cpu && self.h_nr[c as usize] >= 2)
                .max_by_key(|&c| (self.h_nr[c as usize], std::cmp::Reverse(c)));
            let Some(src) = busiest else { continue };
            let pick = self
                .pull_order(src)
                .into_iter()
                .find(|&t| ctx.allowed(t, cpu) && (ignore_hot || !self.cache_hot(t, now)));
            if let Some(t) = pick {
                self.counters.bump(C_NEWIDLE_PULL);
                self.pull_task(ctx, t, cpu);
                return;
            }
        }
    }

    /// Periodic balancing from a busy pCPU's tick, per domain at its interval.
    pub(super) fn periodic_balance(&mut self, ctx: &mut SchedCtx, cpu: u32) {
        let now = ctx.now;
        for level in 0..3 {
            let span = self.domains[cpu as usize][level].len() as u64;
            if span <= 1 {
                continue;
            }
            // A domain spanning the same pCPUs as its child is removed at build time
            // (`sd_parent_degenerate`): a one-socket machine balances at the socket level
            // only, with its imbalance_pct and cache_nice_tries. Spans nest, so equal
            // sizes mean equal spans.
            if level > 0 && self.domains[cpu as usize][level - 1].len() as u64 == span {
                continue;
            }
            // Interval: the domain's weight in ms, times busy_factor on a busy pCPU.
            let interval = SimDuration::from_ms(span) * self.tun.busy_factor;
            if now < self.last_balance[cpu as usize][level].plus(interval) {
                continue;
            }
            self.last_balance[cpu as usize][level] = now;
            let this = self.cpu_load(cpu);
            let busiest = self.domains[cpu as usize][level]
                .iter()
                .copied()
                .filter(|&c| c != cpu && self.h_nr[c as usize] >= 2)
                .max_by_key(|&c| (self.cpu_load(c), std::cmp::Reverse(c)));
            let Some(src) = busiest else { continue };
            let pct = [110, 117, 125][level];
            if self.cpu_load(src) * 100 <= this * pct {
                self.nr_balance_failed[cpu as usize][level] = 0;
                continue;
            }
            // cache_nice_tries: SMT 0, MC 1, DIE 1. Beyond them hot tasks may move; beyond
            // cache_nice_tries + 2 failures the running task is pushed (active balance).
            let nice_tries = [0, 1, 1][level];
            let failed = self.nr_balance_failed[cpu as usize][level];
            let allow_hot = failed > nice_tries;
            let mut imbalance = (self.cpu_load(src) - this) / 2;
            let mut moved = false;
            let cands: Vec<TaskId> = self
                .pull_order(src)
                .into_iter()
                .filter(|&t| ctx.allowed(t, cpu) && (allow_hot || !self.cache_hot(t, now)))
                .filter(|&t| {
                    self.pulled_at[t as usize] == SimTime::ZERO
                        || now >= self.pulled_at[t as usize].plus(interval)
                })
                .collect();
            for t in cands {
                let w = self.task_h_load(t);
                // How much of the task's load may exceed the imbalance: 4.15 skips a task
                // whose half load does; 6.x its load shifted right by the failures so far
                // (`shr_bound(load, nr_balance_failed)`, "sched/fair: Relax constraint on
                // task's load during load balance", v5.10), so a first attempt is stricter
                // and later ones looser.
                let considered = if P::RELAXED_DETACH {
                    w >> failed.min(63)
                } else {
                    w / 2
                };
                if considered > imbalance {
                    continue;
                }
                self.counters.bump(C_BALANCE_PULL);
                self.pull_task(ctx, t, cpu);
                moved = true;
                imbalance = imbalance.saturating_sub(w);
                if imbalance == 0 {
                    break;
                }
            }
            if moved {
                self.nr_balance_failed[cpu as usize][level] = 0;
            } else {
                self.counters.bump(C_BALANCE_FAILED);
                self.nr_balance_failed[cpu as usize][level] = failed + 1;
                if failed + 1 > nice_tries + 2 {
                    if let Some(r) = self.running[src as usize].filter(|&r| ctx.allowed(r, cpu)) {
                        self.active_move[src as usize] = Some((r, cpu));
                        ctx.resched(src);
                        self.nr_balance_failed[cpu as usize][level] = nice_tries + 1;
                    }
                }
            }
        }
    }
}
