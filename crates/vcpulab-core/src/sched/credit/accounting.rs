//! Credit's accounting: what a vCPU pays for running (`burn_credits`), the credit split of
//! an accounting pass over the active domains (`acct_shares`, a pure function, tested on
//! its own), and the pass itself (`csched_acct`): priorities, parking for caps,
//! deactivation, and the reordering of the active-domain list. See the rules in the header
//! of `credit.rs` (**Credits**, **Active vCPUs**, **Accounting**).

use super::{
    Credit, CreditPolicy, ACCT_BOOST_END, ACCT_CLIP, ACCT_DEACTIVATE, ACCT_NO_WORK, ACCT_REORDER,
    ACCT_RUN, PRI_BOOST, PRI_OVER, PRI_UNDER, TIME_PER_CREDIT,
};
use crate::sched::{SchedCtx, TaskId};
use crate::time::SimTime;

/// One domain's part in an accounting pass.
#[derive(Clone, Copy, Debug)]
pub(super) struct DomIn {
    pub weight: u64,
    /// Percent of one pCPU; 0: none.
    pub cap: u64,
    /// Active vCPUs (at least 1).
    pub active: u64,
}

/// What a domain gets from an accounting pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DomShare {
    /// Credit added to each of its active vCPUs.
    pub per_vcpu: i64,
    /// Below minus this, a vCPU of a capped domain is parked (0 for uncapped domains).
    pub cap_per_vcpu: i64,
}

/// The credit split of one accounting pass (`csched_acct`), for domains in list order:
/// `credit` is the period's credit (slice credits x pCPUs), `balance` last period's
/// credit balance. Returns each domain's share and the indices of the domains moved to the
/// head of the list, in the order they were moved.
pub(super) fn acct_shares(
    credit: u64,
    credits_per_tslice: u64,
    balance: i64,
    doms: &[DomIn],
) -> (Vec<DomShare>, Vec<usize>) {
    let weight_total: u64 = doms.iter().map(|d| d.weight * d.active).sum();
    let mut credit_total = credit;
    if balance < 0 {
        credit_total += balance.unsigned_abs();
    }
    let mut weight_left = weight_total;
    let mut xtra = false;
    let mut shares = Vec::with_capacity(doms.len());
    let mut moved = Vec::new();
    for (i, d) in doms.iter().enumerate() {
        let w = d.weight * d.active;
        weight_left -= w;
        let mut peak = d.active * credits_per_tslice;
        if balance < 0 {
            peak += (balance.unsigned_abs() * w).div_ceil(weight_total);
        }
        let mut cap_per_vcpu = 0;
        if d.cap != 0 {
            let cap_credits = (d.cap * credits_per_tslice).div_ceil(100);
            peak = peak.min(cap_credits);
            cap_per_vcpu = cap_credits.div_ceil(d.active);
        }
        let mut fair = (credit_total * w).div_ceil(weight_total);
        if fair < peak {
            xtra = true;
        } else {
            if weight_left != 0 {
                // What this domain cannot take goes to the domains after it.
                credit_total += ((fair - peak) * weight_total).div_ceil(weight_left);
            }
            if xtra {
                moved.push(i);
            }
            fair = peak;
        }
        shares.push(DomShare {
            per_vcpu: fair.div_ceil(d.active) as i64,
            cap_per_vcpu: cap_per_vcpu as i64,
        });
    }
    (shares, moved)
}

impl<P: CreditPolicy> Credit<P> {
    pub(super) fn tick_credits(&self) -> i64 {
        (self.tick / self.time_per_credit) as i64
    }

    /// `burn_credits`: the running vCPU pays for the time since it last paid.
    pub(super) fn burn(&mut self, t: TaskId, now: SimTime) {
        let ti = t as usize;
        let ran = now.since(self.paid_to[ti]).plus(self.residual[ti]);
        // Xen's constant divisor on the common path (PvCC's 1 us credit is the other).
        let (credits, residual) = if self.time_per_credit == TIME_PER_CREDIT {
            (ran / TIME_PER_CREDIT, ran % TIME_PER_CREDIT)
        } else {
            (ran / self.time_per_credit, ran % self.time_per_credit)
        };
        let credits = credits as i64;
        self.credit_of[ti] -= credits;
        self.residual[ti] = residual;
        self.paid_to[ti] = now;
        P::charged(self, t, credits);
    }

    pub(super) fn acct_start(&mut self, t: TaskId) {
        let ti = t as usize;
        self.active[ti] = true;
        let d = self.dom[ti];
        self.dom_active[d as usize].push_front(t);
        if !self.active_doms.contains(&d) {
            self.active_doms.insert(0, d);
        }
    }

    /// `csched_acct`: one accounting pass.
    pub(super) fn acct(&mut self, ctx: &mut SchedCtx) {
        let doms = self.active_doms.clone();
        let ins: Vec<DomIn> = doms
            .iter()
            .map(|&d| DomIn {
                weight: self.dom_weight[d as usize] as u64,
                cap: self.dom_cap[d as usize] as u64,
                active: self.dom_active[d as usize].len() as u64,
            })
            .collect();
        if ins.iter().all(|d| d.active == 0) {
            self.credit_balance = 0;
            self.counters.bump(ACCT_NO_WORK);
            return;
        }
        self.counters.bump(ACCT_RUN);
        let cpt = self.credits_per_tslice;
        let (shares, moved) =
            acct_shares(self.credit as u64, cpt as u64, self.credit_balance, &ins);
        let tick_credits = self.tick_credits();
        let mut balance = 0i64;
        for (k, &d) in doms.iter().enumerate() {
            let share = shares[k];
            let capped = self.dom_cap[d as usize] != 0;
            let vcpus: Vec<TaskId> = self.dom_active[d as usize].iter().copied().collect();
            for t in vcpus {
                let ti = t as usize;
                if let Some((after, parked)) = self.cap_mark[ti] {
                    // Paid since the last pass: at most what was not yet paid for then (a
                    // tick's run at most) plus, unless parked, one period's run.
                    let paid = after - self.credit_of[ti];
                    let most = if parked { 0 } else { cpt } + tick_credits + 1;
                    if paid > most && self.violation.is_none() {
                        self.violation = Some(format!(
                            "credit: vCPU task {t} of a capped VM{} paid {paid} credits between two accounting passes; at most {most} are possible",
                            if parked { ", parked by the first," } else { "" },
                        ));
                    }
                }
                self.credit_of[ti] += share.per_vcpu;
                let c = self.credit_of[ti];
                if self.pri[ti] == PRI_BOOST {
                    self.counters.bump(ACCT_BOOST_END);
                }
                if c < 0 {
                    self.pri[ti] = PRI_OVER;
                    if capped && c < -share.cap_per_vcpu && !self.parked[ti] {
                        self.park(ctx, t);
                    }
                    if c < -cpt {
                        self.credit_of[ti] = -cpt;
                        self.counters.bump(ACCT_CLIP);
                    }
                } else {
                    self.pri[ti] = PRI_UNDER;
                    if self.parked[ti] {
                        self.unpark(ctx, t);
                    }
                    if c > cpt {
                        // Full: stops earning until a tick finds it running again.
                        self.active[ti] = false;
                        let q = &mut self.dom_active[d as usize];
                        q.retain(|&o| o != t);
                        self.credit_of[ti] = c / 2;
                        self.counters.bump(ACCT_DEACTIVATE);
                    }
                }
                self.cap_mark[ti] =
                    (capped && self.active[ti]).then_some((self.credit_of[ti], self.parked[ti]));
                balance += self.credit_of[ti];
            }
        }
        // Domains moved to the head, the last moved first, then the others in order.
        let mut order: Vec<u32> = moved.iter().rev().map(|&i| doms[i]).collect();
        for _ in &moved {
            self.counters.bump(ACCT_REORDER);
        }
        order.extend(
            doms.iter()
                .enumerate()
                .filter(|(i, _)| !moved.contains(i))
                .map(|(_, &d)| d),
        );
        // Domains that became active during the pass (none here) stay at the head.
        let mut list: Vec<u32> = self
            .active_doms
            .iter()
            .copied()
            .filter(|d| !doms.contains(d))
            .collect();
        list.extend(order);
        list.retain(|&d| !self.dom_active[d as usize].is_empty());
        self.active_doms = list;
        self.credit_balance = balance;
        self.runq_sort += 1;
    }
}
