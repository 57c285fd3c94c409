//! `vslicer` — vSlicer: Xen Credit with differentiated-frequency slicing for the
//! latency-sensitive vCPUs.
//!
//! ## Policy
//! Latency vCPUs (`TaskInfo::latency_vcpu`: every vCPU of an LSVM, the reserved vCPUs of a
//! MixVM) run in *micro slices* of `tslice_ms / slicing_factor` instead of whole
//! `tslice_ms` slices; every other vCPU keeps Credit's slice. Nothing else changes: the
//! same credits per period, so the same CPU share, the same priorities and boost, the
//! same queues, placement and stealing on all pCPUs (`credit.rs`). A latency vCPU thus
//! gives its pCPU back `slicing_factor` times as often and, being queued again behind its
//! equals, is scheduled more often in shorter pieces: the I/O it has pending waits for the
//! next micro slice rather than for the next whole slice, while CPU-bound vCPUs keep
//! their long slices (and their cache warmth).
//!
//! **No latency vCPUs**: the scheduler is exactly Credit.
//!
//! **Counters** (after Credit's): one per set-up decision, counted once at `init`; as all
//! counters are reported as deltas from the end of the warmup, a run with a warmup shows
//! them as 0. What happens at run time is counted by Credit's own counters.
//!
//! ## Parameters
//! - `slicing_factor` (integer, default 6, 1..`tslice_ms` x 10): how many micro slices a
//!   latency vCPU's slice is cut into; micro slice = `tslice_ms` / `slicing_factor` (with
//!   the default 30 ms slice, 5 ms). The micro slice must be at least a credit (0.1 ms)
//!   and at least `ratelimit_us` (else the rate limit would silently stretch it back).
//! - `tslice_ms`, `ratelimit_us`: Credit's (see `credit.rs`).
//!
//! ## Sources
//! Cong Xu, Sahan Gamage, Pawan N. Rao, Ardalan Kangarlou, Ramana Rao Kompella, Dongyan
//! Xu: "vSlicer: Latency-Aware Virtual Machine Scheduling via Differentiated-Frequency CPU
//! Slicing", HPDC 2012, 3-14 (abstract: latency-sensitive VMs are scheduled more
//! frequently with a smaller micro time slice, at the same CPU share as the other VMs,
//! in a Xen Credit prototype). The FLMS paper (seed 002) summarises it in section 1: two
//! kinds of slice, very short for vCPUs running I/O-bound work and normal for CPU-bound
//! vCPUs, without isolating the two (so I/O work still queues behind CPU-bound work on
//! a shared pCPU).
//!
//! ## Deviations
//! - The default factor of 6 (5 ms micro slices of the 30 ms slice) is our choice: the
//!   text available to us (abstracts and the FLMS summary) gives the mechanism but not
//!   the prototype's micro-slice length. 5 ms keeps the micro slice above Credit's 1 ms
//!   rate limit and a whole number of credits.
//! - vSlicer marks whole VMs latency-sensitive; here the unit is the latency vCPU, which
//!   for an LSVM is every vCPU (the same thing) and for a MixVM its reserved vCPUs.
//! - Credit's tick and accounting period are unchanged: the share stays Credit's.

use super::credit::pools::check_pools;
use super::credit::{Credit, CreditPolicy, TIME_PER_CREDIT};
use super::{Counters, ParamInfo, ParamKind, Params, SchedCtx, SchedView, TaskId};
use crate::reader::{Res, Table};

pub const DESCRIPTION: &str = "vSlicer (Xu et al., HPDC 2012): Xen Credit where latency vCPUs run in micro slices (tslice_ms / slicing_factor) at the same CPU share";

pub const PARAMS: &[ParamInfo] = &[
    super::credit::PARAMS[0],
    super::credit::PARAMS[1],
    ParamInfo {
        name: "slicing_factor",
        kind: ParamKind::Int,
        default: "6",
        help: "latency vCPUs run in micro slices of tslice_ms / slicing_factor (1 to tslice_ms x 10; the micro slice at least ratelimit_us)",
    },
];

/// Checks the parameters beyond their types (Credit's first).
pub fn check_params(t: &Table) -> Res<()> {
    super::credit::check_params(t)?;
    let tslice_ms = match t.get("tslice_ms") {
        Some(o) => o.u64_in(1, 1000)?,
        None => 30,
    };
    let ratelimit_us = match t.get("ratelimit_us") {
        Some(o) => o.u64_in(0, 500_000)?,
        None => 1000,
    };
    if let Some(o) = t.get("slicing_factor") {
        let f = o.u64_in(1, tslice_ms * 10).map_err(|e| crate::error::ScenarioError {
            message: format!(
                "{} (the micro slice, tslice_ms / slicing_factor, must be at least 0.1 ms; tslice_ms = {tslice_ms})",
                e.message
            ),
            ..e
        })?;
        let micro_us = tslice_ms * 1000 / f;
        if micro_us < ratelimit_us {
            return o.err(format!(
                "gives micro slices of {micro_us} us (tslice_ms = {tslice_ms} / {f}), shorter than ratelimit_us = {ratelimit_us}; lower the factor or the rate limit"
            ));
        }
    }
    Ok(())
}

super::counters::declare_counters! {
    MICRO_SLICED => "micro_sliced_vcpus",
    NORMAL_SLICE => "normal_slice_vcpus",
}

pub struct VSlicer {
    slicing_factor: u64,
    counters: Counters<NCOUNTERS>,
}

impl VSlicer {
    pub fn new(p: &Params) -> VSlicer {
        VSlicer {
            slicing_factor: p.int("slicing_factor").max(1) as u64,
            counters: Counters::new(COUNTER_NAMES),
        }
    }
}

impl CreditPolicy for VSlicer {
    fn init(c: &mut Credit<Self>, ctx: &mut SchedCtx) {
        // At least one credit's worth, so a micro slice always pays something.
        let micro = (c.tslice() / c.policy().slicing_factor).max(TIME_PER_CREDIT);
        for (t, info) in ctx.view.tasks.iter().enumerate() {
            if info.latency_vcpu {
                c.set_slice(t as TaskId, micro);
                c.policy_mut().counters.bump(MICRO_SLICED);
            } else {
                c.policy_mut().counters.bump(NORMAL_SLICE);
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    fn check(c: &Credit<Self>, view: &SchedView) -> Result<(), String> {
        check_pools(c, view, "vslicer")
    }
}

/// `vslicer`: Credit with micro slices. Its periodic events are Credit's ticks and the
/// micro slices' ends, as short as a tenth of a millisecond.
impl super::Registered for VSlicer {
    type Sched = Credit<VSlicer>;
    const NAME: &'static str = "vslicer";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: true,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Credit<VSlicer> {
        Credit::with_policy(p, VSlicer::new(p))
    }
    fn check_params(t: &Table) -> Res<()> {
        self::check_params(t)
    }
    fn event_period(p: &Params) -> Option<crate::time::SimDuration> {
        let tick = super::credit::tick_ns(p.table);
        let tslice = p.int("tslice_ms").max(1) as u64 * crate::time::NS_PER_MS;
        let micro =
            (tslice / p.int("slicing_factor").max(1) as u64).max(crate::time::NS_PER_MS / 10);
        Some(crate::time::SimDuration(tick.min(micro)))
    }
}
