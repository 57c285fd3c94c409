//! The wakee's load in `wake_affine_weight` as a load average (`wakee_load = "pelt"`),
//! instead of its full weight.
//!
//! ## Policy (kernel/sched/pelt.c, fair.c of 4.15 .. 6.19)
//! - Each task carries a load average (`se->avg.load_avg`): its weight times the decayed
//!   fraction of time it spent queued (running or waiting, `se->on_rq`), with a decay of
//!   y per 1024 us period, y^32 = 1/2 (a half-life of 32 periods, 32.8 ms).
//! - It is brought up to date when the task is queued and dequeued (`update_load_avg` in
//!   `enqueue_entity` / `dequeue_entity`); `select_task_rq_fair` does not decay it over the
//!   sleep before `wake_affine_weight` reads it (`task_h_load`; `sync_entity_load_avg`
//!   runs there only for asymmetric capacities), so the wakee weighs what it weighed when
//!   it went to sleep.
//! - A new task starts at its full weight (`init_entity_runnable_average`).
//! - So a thread that runs 20 us every 2 ms weighs about 1 % of its weight, and a
//!   `wake_affine_weight` comparison moves it to its waker's pCPU where a full weight
//!   would keep it on a pCPU with one busy task fewer. The KVM harness's waker thread is
//!   such a thread (docs/validation.md, "The waker's pCPU").
//!
//! ## Parameters
//! `wakee_load` (`cfs` and `eevdf`): "weight" (default; vcpulab before 2026-11-28: the
//! wakee weighs its full weight, or its share of its VM's group) or "pelt" (this file).
//! `vcpulab kvm compare` and its gate use "pelt". The default stays "weight" because
//! every reproduction and claim was run with it; turning it on is a re-run of those.
//!
//! ## Deviations
//! - Continuous decay, 2^(-t / 32.768 ms), rather than whole 1024 us periods with a
//!   partial-period sum; the two differ by under one period's weight.
//! - Only the wakee's load is an average. The pCPU loads it is compared with stay the
//!   balancer's runnable weights (`Fair::cpu_load`), with no blocked load of sleeping tasks
//!   (the kernel's `cpu_load` has it, decaying).
//! - A grouped task (`group_per_vm`) weighs its share of its VM's group times its
//!   average, for `task_h_load`'s walk of the hierarchy's load averages.
//! - A delayed task (`fair/delay.rs`) counts as queued until its real dequeue, as the
//!   kernel's `load_sum` does (it follows `on_rq`, not `h_nr_runnable`).

use super::{Fair, FairPolicy};
use crate::sched::TaskId;
use crate::time::SimTime;

/// The decay's half-life: 32 periods of 1024 us (`LOAD_AVG_PERIOD`, y^32 = 1/2).
const PELT_HALF_LIFE_NS: f64 = 32.0 * 1_024_000.0;

/// One task's load average as a fraction of its weight (0..1), and when it was last
/// brought up to date (None: never queued yet).
#[derive(Clone, Copy, Debug)]
pub(super) struct LoadAvg {
    frac: f64,
    at: Option<SimTime>,
}

impl LoadAvg {
    /// A new task's (`init_entity_runnable_average`: its full weight, from its first
    /// enqueue on; the time before that is not decayed, as the kernel attaches a new
    /// task's average when it is first queued).
    pub(super) const NEW: LoadAvg = LoadAvg {
        frac: 1.0,
        at: None,
    };

    /// Brings the average to `now`, the task having been queued (`queued`) or not since
    /// the last update.
    fn update(&mut self, now: SimTime, queued: bool) {
        if let Some(at) = self.at {
            let d = now.since(at).ns() as f64;
            let y = (-d / PELT_HALF_LIFE_NS).exp2();
            self.frac = self.frac * y + if queued { 1.0 - y } else { 0.0 };
        }
        self.at = Some(now);
    }
}

impl<P: FairPolicy> Fair<P> {
    /// Task `t` is queued after a sleep (or a migration: no time has passed then).
    #[inline]
    pub(super) fn pelt_enqueue(&mut self, t: TaskId, now: SimTime) {
        if self.tun.wakee_pelt {
            self.load_avg[t as usize].update(now, false);
        }
    }

    /// Task `t` leaves its queue (its real dequeue, after a delay if any).
    #[inline]
    pub(super) fn pelt_dequeue(&mut self, t: TaskId, now: SimTime) {
        if self.tun.wakee_pelt {
            self.load_avg[t as usize].update(now, true);
        }
    }

    /// `wakee_load`: the wakee's load from `full`, its weight or group share: that,
    /// or with "pelt" that times its load average as of its last update.
    pub(super) fn wakee_load(&self, t: TaskId, full: u64) -> u64 {
        if self.tun.wakee_pelt {
            (full as f64 * self.load_avg[t as usize].frac).round() as u64
        } else {
            full
        }
    }
}

#[cfg(test)]
impl<P: FairPolicy> Fair<P> {
    /// Sets task `t`'s load average (a fraction of its weight), for tests.
    pub(super) fn set_load_frac(&mut self, t: TaskId, frac: f64) {
        self.load_avg[t as usize].frac = frac;
    }
}

/// The shared `wakee_load` parameter.
pub const WAKEE_LOAD_PARAM: crate::sched::ParamInfo = crate::sched::ParamInfo {
    name: "wakee_load",
    kind: crate::sched::ParamKind::Choice(&["weight", "pelt"]),
    default: "weight",
    help: "the wakee's load in wake_affine_weight: weight (its full weight or group share, vcpulab before 2026-11-28) or pelt (its load average as of its last dequeue, as upstream: a thread that mostly sleeps weighs little; fair/pelt.rs)",
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SimDuration;

    #[test]
    fn the_average_halves_in_32_periods_queued_or_asleep() {
        let half = SimTime::ZERO + SimDuration::from_ns(PELT_HALF_LIFE_NS as u64);
        let two = SimTime::ZERO + SimDuration::from_ns(2 * PELT_HALF_LIFE_NS as u64);
        // A new task's first update (its first enqueue) starts its clock undecayed; asleep
        // for one half-life after that it weighs half its weight, for two a quarter.
        let mut late = LoadAvg::NEW;
        late.update(two, false);
        assert_eq!(late.frac, 1.0);
        let mut a = LoadAvg::NEW;
        a.update(SimTime::ZERO, false);
        a.update(half, false);
        assert!((a.frac - 0.5).abs() < 1e-9, "{}", a.frac);
        a.update(two, false);
        assert!((a.frac - 0.25).abs() < 1e-9, "{}", a.frac);
        // From zero, queued for one half-life: half its weight; the update is additive over
        // split intervals (the same answer as one update over the whole).
        let mut b = LoadAvg {
            frac: 0.0,
            at: Some(SimTime::ZERO),
        };
        b.update(
            SimTime::ZERO + SimDuration::from_ns(PELT_HALF_LIFE_NS as u64 / 2),
            true,
        );
        b.update(half, true);
        assert!((b.frac - 0.5).abs() < 1e-9, "{}", b.frac);
    }
}
