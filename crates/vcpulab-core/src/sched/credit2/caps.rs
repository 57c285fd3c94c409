//! Credit2's caps: budgets, parking and replenishment (`park_unit`, `vcpu_grab_budget`,
//! `vcpu_return_budget`, `unpark_parked_vcpus`, `replenish_domain_budget` in credit2.c;
//! the module header of `credit2.rs` states the rules and their sources).

use super::*;

impl Credit2 {
    pub(super) fn park(&mut self, view: &SchedView, t: TaskId, now: SimTime) {
        self.counters.bump(PARK);
        self.units[t as usize].parked = true;
        if self.units[t as usize].on_runq {
            self.runq_remove(t);
            self.update_load(view, t, -1, now);
        }
        let d = self.units[t as usize].dom;
        self.doms[d].parked.insert(0, t);
    }

    /// `unit_grab_budget`; parks the unit if the domain has none. Whether it has some.
    pub(super) fn grab_budget(&mut self, view: &SchedView, t: TaskId, now: SimTime) -> bool {
        let Some(b) = self.units[t as usize].budget else {
            return true;
        };
        if b > 0 {
            return true;
        }
        let d = self.units[t as usize].dom;
        self.doms[d].budget += b;
        if self.doms[d].budget > 0 {
            let take = self.units[t as usize].budget_quota.min(self.doms[d].budget);
            self.units[t as usize].budget = Some(take);
            self.doms[d].budget -= take;
            true
        } else {
            self.units[t as usize].budget = Some(0);
            self.park(view, t, now);
            false
        }
    }

    /// `unit_return_budget`: the parked units to unpark, if budget came back.
    pub(super) fn return_budget(&mut self, t: TaskId) -> Vec<TaskId> {
        let Some(b) = self.units[t as usize].budget else {
            return vec![];
        };
        if b <= 0 {
            return vec![];
        }
        let d = self.units[t as usize].dom;
        self.doms[d].budget += b;
        self.units[t as usize].budget = Some(0);
        if self.doms[d].budget > 0 {
            std::mem::take(&mut self.doms[d].parked)
        } else {
            vec![]
        }
    }

    pub(super) fn unpark(&mut self, ctx: &mut SchedCtx, units: Vec<TaskId>) {
        for t in units {
            self.counters.bump(UNPARK);
            self.units[t as usize].parked = false;
            if ctx.view.state[t as usize] == RunState::Runnable
                && !self.units[t as usize].on_runq
                && !self.running(t)
            {
                self.update_load(ctx.view, t, 1, ctx.now);
                self.runq_insert(t);
                self.runq_tickle(ctx, t);
            }
        }
    }

    pub(super) fn replenish(&mut self, ctx: &mut SchedCtx) {
        let now = ctx.now;
        for d in 0..self.doms.len() {
            if self.doms[d].cap == 0 || self.doms[d].next_repl > now {
                continue;
            }
            self.counters.bump(REPLENISH);
            let dom = &mut self.doms[d];
            while dom.next_repl <= now {
                dom.next_repl = dom.next_repl.plus(SimDuration(self.cap_period as u64));
                dom.budget += dom.tot_budget;
            }
            if dom.budget <= 0 {
                continue;
            }
            let before = dom.budget;
            dom.budget = dom.budget.min(dom.tot_budget);
            // What the clip leaves is what the domain was granted anew.
            dom.granted += dom.tot_budget - (before - dom.budget);
            let parked = std::mem::take(&mut dom.parked);
            self.unpark(ctx, parked);
        }
        self.arm_replenish(ctx);
    }

    pub(super) fn arm_replenish(&self, ctx: &mut SchedCtx) {
        if let Some(at) = self
            .doms
            .iter()
            .filter(|d| d.cap != 0)
            .map(|d| d.next_repl)
            .min()
        {
            ctx.set_global_timer(at);
        }
    }
}
