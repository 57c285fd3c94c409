//! Credit2's load tracking and balancing: the runqueues' and units' load averages
//! (`update_runq_load`, `update_svc_load`) and `balance_load` with its migrations, as in
//! credit2.c (the module header of `credit2.rs` states the rules and their sources).

use super::*;

impl Credit2 {
    pub(super) fn update_runq_load(&mut self, r: usize, change: i64, now: SimTime) {
        let now = ns(now) >> LOAD_GRANULARITY_SHIFT;
        let rq = &mut self.rqs[r];
        let load = rq.load;
        if rq.load_last_update + (1i64 << LOAD_WINDOW_SHIFT) < now {
            rq.avgload = load << LOAD_PRECISION_SHIFT;
            rq.b_avgload = load << LOAD_PRECISION_SHIFT;
        } else {
            let delta = (now - rq.load_last_update).max(0);
            rq.avgload = ewma(rq.avgload, delta, load);
            rq.b_avgload = ewma(rq.b_avgload, delta, load);
        }
        rq.load += change;
        rq.load_last_update = now;
    }

    pub(super) fn update_svc_load(
        &mut self,
        view: &SchedView,
        t: TaskId,
        change: i64,
        now: SimTime,
    ) {
        let load = match change {
            -1 => 1,
            1 => 0,
            _ => i64::from(self.runnable(view, t)),
        };
        let now = ns(now) >> LOAD_GRANULARITY_SHIFT;
        let u = &mut self.units[t as usize];
        if u.load_last_update + (1i64 << LOAD_WINDOW_SHIFT) < now {
            u.avgload = load << LOAD_PRECISION_SHIFT;
        } else {
            let delta = (now - u.load_last_update).max(0);
            u.avgload = ewma(u.avgload, delta, load);
        }
        u.load_last_update = now;
    }

    pub(super) fn update_load(&mut self, view: &SchedView, t: TaskId, change: i64, now: SimTime) {
        let r = self.units[t as usize].rq;
        self.update_runq_load(r, change, now);
        self.update_svc_load(view, t, change, now);
    }

    /// `migrate`: moves unit `t` to runqueue `to` now, or when it stops running.
    pub(super) fn migrate(&mut self, ctx: &mut SchedCtx, t: TaskId, to: usize) {
        if self.running(t) {
            self.counters.bump(BALANCE_MIGRATE_RUNNING);
            self.units[t as usize].migrate_to = Some(to);
            let cpu = self.units[t as usize].processor;
            self.tickle_cpu(ctx, cpu);
            return;
        }
        self.counters.bump(BALANCE_MIGRATE);
        let on_runq = self.units[t as usize].on_runq;
        if on_runq {
            self.runq_remove(t);
            self.update_runq_load(self.units[t as usize].rq, -1, ctx.now);
        }
        self.move_to(t, to);
        if on_runq {
            self.update_runq_load(to, 1, ctx.now);
            self.runq_insert(t);
            self.runq_tickle(ctx, t);
        }
    }

    /// Deassigns `t`, places it on a pCPU of runqueue `to` its affinity allows (cycling
    /// from the runqueue's `pick_bias`) and assigns it there.
    pub(super) fn move_to(&mut self, t: TaskId, to: usize) {
        self.runq_deassign(t);
        let mask = self.affinity[t as usize].intersect(&self.rqs[to].cpus);
        let cpu = cycle_after(self.rqs[to].pick_bias, &mask)
            .expect("migrate to a runqueue the affinity allows");
        self.rqs[to].pick_bias = cpu;
        self.units[t as usize].processor = cpu;
        self.runq_assign(t, to);
    }

    pub(super) fn migrateable(&self, t: TaskId, to: usize) -> bool {
        self.units[t as usize].migrate_to.is_none()
            && !self.affinity[t as usize]
                .intersect(&self.rqs[to].cpus)
                .is_empty()
    }

    /// `balance_load` from runqueue `l`.
    pub(super) fn balance_load(&mut self, ctx: &mut SchedCtx, l: usize) {
        if self.rqs.len() < 2 {
            return;
        }
        let now = ctx.now;
        self.counters.bump(BALANCE_CHECK);
        self.update_runq_load(l, 0, now);
        let mut best_delta = 0;
        let mut other = None;
        for o in 0..self.rqs.len() {
            if o == l {
                continue;
            }
            self.update_runq_load(o, 0, now);
            let delta = (self.rqs[l].b_avgload - self.rqs[o].b_avgload).abs();
            if delta > best_delta {
                best_delta = delta;
                other = Some(o);
            }
        }
        let Some(o) = other else {
            return;
        };
        // As upstream, the overload test reads the runqueue the scan ended on (the last
        // of the list, which may be this one), not necessarily the busiest.
        let last = self.rqs.len() - 1;
        let load_max = self.rqs[l].b_avgload.max(self.rqs[last].b_avgload);
        let cpus_max = self.rqs[l].cpus.len().max(self.rqs[last].cpus.len()) as i64;
        let tolerance = if load_max < cpus_max << LOAD_PRECISION_SHIFT {
            BALANCE_UNDER
        } else {
            BALANCE_OVER
        };
        if best_delta < 1i64 << (LOAD_PRECISION_SHIFT as i32 + tolerance) {
            return;
        }
        let consider = |s: &Self, push: Option<TaskId>, pull: Option<TaskId>| -> i64 {
            let mut ll = s.rqs[l].b_avgload;
            let mut ol = s.rqs[o].b_avgload;
            if let Some(p) = push {
                ll -= s.units[p as usize].avgload;
                ol += s.units[p as usize].avgload;
            }
            if let Some(p) = pull {
                ll += s.units[p as usize].avgload;
                ol -= s.units[p as usize].avgload;
            }
            (ll - ol).abs()
        };
        let mut best = (best_delta, None, None);
        let pushes = self.rqs[l].svc.clone();
        let pulls = self.rqs[o].svc.clone();
        for &p in &pulls {
            self.update_svc_load(ctx.view, p, 0, now);
        }
        for &push in &pushes {
            self.update_svc_load(ctx.view, push, 0, now);
            if !self.migrateable(push, o) {
                continue;
            }
            for &pull in &pulls {
                if !self.migrateable(pull, l) {
                    continue;
                }
                let d = consider(self, Some(push), Some(pull));
                if d < best.0 {
                    best = (d, Some(push), Some(pull));
                }
            }
            let d = consider(self, Some(push), None);
            if d < best.0 {
                best = (d, Some(push), None);
            }
        }
        for &pull in &pulls {
            if !self.migrateable(pull, l) {
                continue;
            }
            let d = consider(self, None, Some(pull));
            if d < best.0 {
                best = (d, None, Some(pull));
            }
        }
        if let Some(p) = best.1 {
            self.migrate(ctx, p, o);
        }
        if let Some(p) = best.2 {
            self.migrate(ctx, p, l);
        }
    }

    /// `csched2_res_pick` for a new unit: the runqueue of least `b_avgload` the affinity
    /// allows, a pCPU there cycling from its `pick_bias`.
    pub(super) fn initial_place(&mut self, t: TaskId) {
        let aff = self.affinity[t as usize].clone();
        let r = (0..self.rqs.len())
            .filter(|&r| !aff.intersect(&self.rqs[r].cpus).is_empty())
            .min_by_key(|&r| (self.rqs[r].b_avgload, r))
            .expect("the affinity names a pCPU of the host");
        let cpu = cycle_after(self.rqs[r].pick_bias, &aff.intersect(&self.rqs[r].cpus))
            .expect("nonempty");
        self.rqs[r].pick_bias = cpu;
        self.units[t as usize].processor = cpu;
        self.runq_assign(t, r);
    }
}
