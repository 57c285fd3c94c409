//! Pools shared by the Credit variants that split the host statically (`io-bound`,
//! `vturbo`): reserving the last pCPUs for the latency vCPUs and binding every vCPU to its
//! side (`split_pools`), the host check of the reserved count, the pool invariant, and the
//! starvation bound of a split host. (`flms` resizes its pools at run time with
//! `Credit::set_pool` instead; it shares the pool invariant's idea, not this code.)

use super::{Credit, CreditPolicy};
use crate::reader::{Res, Table};
use crate::sched::{SchedCtx, SchedView};
use crate::time::SimDuration;
use crate::topology::CpuSet;

/// Checks a reserved-pCPU count parameter `name` (default `default`) on a host of `ncpus`.
pub(in crate::sched) fn check_reserved_count(
    t: &Table,
    name: &str,
    default: u64,
    ncpus: usize,
) -> Res<()> {
    let Some(o) = t.get(name) else {
        if default as usize >= ncpus {
            return t.err(
                name,
                format!(
                    "the default of {default} reserved pCPU(s) would take all {ncpus} pCPUs of the host; the other vCPUs need at least one (use a larger host)"
                ),
            );
        }
        return Ok(());
    };
    let n = o.u64_in(1, 1 << 20)?;
    if n as usize >= ncpus {
        return o.err(format!(
            "{n} reserved pCPU(s) would take all {ncpus} pCPUs of the host; leave at least one for the other vCPUs"
        ));
    }
    Ok(())
}

/// How a static split of the host into reserved pCPUs (for latency vCPUs) and the rest
/// went; counts per decision (each variant reports them as its set-up counters).
#[derive(Clone, Debug, Default)]
pub(in crate::sched) struct Split {
    /// The reserved pCPUs; None when there are no latency vCPUs (nothing reserved).
    pub reserved: Option<CpuSet>,
    pub latency_bound: u64,
    pub others_excluded: u64,
    pub kept_affinity: u64,
}

/// Reserves the last `count` pCPUs for the latency vCPUs and binds every vCPU of `c` to
/// its side (the rules, **Affinity wins** included, are in the header of `io_bound.rs`),
/// unless no vCPU is a latency vCPU.
pub(in crate::sched) fn split_pools<P: CreditPolicy>(
    c: &mut Credit<P>,
    ctx: &SchedCtx,
    count: usize,
) -> Split {
    let view = ctx.view;
    let mut split = Split::default();
    if !view.tasks.iter().any(|t| t.latency_vcpu) {
        return split;
    }
    let n = ctx.ncpus();
    let count = count.clamp(1, n.saturating_sub(1).max(1));
    let mut reserved = CpuSet::empty(n);
    for cpu in n - count..n {
        reserved.insert(cpu);
    }
    let regular = CpuSet::full(n).subtract(&reserved);
    for (t, info) in view.tasks.iter().enumerate() {
        let side = if info.latency_vcpu {
            &reserved
        } else {
            &regular
        };
        let pool = info.affinity.intersect(side);
        if pool.is_empty() {
            split.kept_affinity += 1;
        } else {
            if info.latency_vcpu {
                split.latency_bound += 1;
            } else {
                split.others_excluded += 1;
            }
            c.pool[t] = pool;
        }
    }
    split.reserved = Some(reserved);
    split
}

/// The pool invariant: every running vCPU runs inside its pool, and every queued vCPU
/// waits on a pCPU of its pool.
pub(in crate::sched) fn check_pools<P: CreditPolicy>(
    c: &Credit<P>,
    view: &SchedView,
    name: &str,
) -> Result<(), String> {
    for (cpu, curr) in view.cpu_curr.iter().enumerate() {
        if let Some(t) = curr {
            if !c.pool[*t as usize].contains(cpu) {
                return Err(format!(
                    "{name}: task {t} runs on pCPU {cpu}, outside its pool {}",
                    c.pool[*t as usize]
                ));
            }
        }
        for &t in &c.runq[cpu] {
            if !c.pool[t as usize].contains(cpu) {
                return Err(format!(
                    "{name}: task {t} waits on pCPU {cpu}, outside its pool {}",
                    c.pool[t as usize]
                ));
            }
        }
    }
    Ok(())
}

/// With the host split into static pools, Credit promises no bound: accounting stays
/// host-wide (as with Xen's `vcpu-pin`, unlike cpupools), so the vCPUs of an overloaded
/// pool earn credit for pCPUs they may not use, stay UNDER, and a queued one can be
/// overtaken by boosted wakers for as long as the pool stays overloaded. Unsplit, the
/// scheduler is Credit and so is its bound.
pub(in crate::sched) fn split_starvation_bound(
    split: bool,
    credit: Option<SimDuration>,
) -> Option<SimDuration> {
    if split {
        None
    } else {
        credit
    }
}
