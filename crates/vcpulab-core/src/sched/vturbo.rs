//! `vturbo` — vTurbo: Xen Credit with designated turbo-sliced cores for each VM's I/O vCPU.
//!
//! ## Policy
//! The last `turbo_pcpus` pCPUs of the host (by id; the SMT threads of a core have adjacent
//! ids, so a multiple of the threads per core designates whole cores) are *turbo cores*.
//! Each VM's I/O vCPU — in a scenario, its latency vCPU(s) (`TaskInfo::latency_vcpu`: every
//! vCPU of an LSVM, the reserved vCPUs of a MixVM), on which the scenario places the VM's
//! interrupt work (a workload's receive path with `rx = { vcpus = [0] }`, or a workload
//! answered entirely in the kernel, like ping, with `vcpus = [0]`) — may run only on the turbo
//! cores, with a time slice of `turbo_slice_us` (0.1 ms) and no rate limit. Every other
//! vCPU runs only on the regular cores, with Credit's `tslice_ms` and `ratelimit_us`.
//! Within each group everything is Credit (`credit.rs`): credits, priorities, the wake-up
//! boost, stealing and placement, restricted to the group.
//!
//! The short slice is what makes a turbo core: the I/O vCPUs of many VMs share it in
//! 0.1 ms turns, so an interrupt for any VM waits at most a few turns (not a 30 ms slice of
//! a CPU-bound vCPU) before its I/O vCPU runs.
//!
//! **Rate limit on turbo cores: off.** Credit's rate limit (1 ms by default) keeps a
//! still-runnable vCPU on its pCPU at least that long, which would stretch every 0.1 ms
//! turn to 1 ms. vTurbo was built on Xen before the rate limit existed (it came with Xen
//! 4.2), and its point is the 0.1 ms turn, so I/O vCPUs get no rate limit (Credit's
//! per-vCPU `ratelimit_of` = 0); the regular cores keep `ratelimit_us`.
//!
//! **No latency vCPUs.** If no vCPU is a latency vCPU, no core is designated and the
//! scheduler is exactly Credit (counter `no_latency_vcpus_plain_credit`): with no I/O
//! vCPU to run, a turbo core would only idle.
//!
//! **Affinity wins.** A vCPU whose affinity has no pCPU in its group keeps its whole
//! affinity and its normal slice (counter `pool_kept_affinity`).
//!
//! **Counters** (after Credit's): one per set-up decision, counted once at `init`; as all
//! counters are reported as deltas from the end of the warmup, a run with a warmup shows
//! them as 0. What happens at run time is counted by Credit's own counters.
//!
//! ## Parameters
//! - `turbo_pcpus` (integer, pCPUs, default 1, at least 1 and fewer than the host's
//!   pCPUs): how many pCPUs are turbo cores. vTurbo's design and prototype designate one
//!   turbo core for all the VMs of a host (one is enough: I/O processing needs little CPU).
//! - `turbo_slice_us` (integer, us, default 100, 1..`tslice_ms` x 1000): the time slice of
//!   the I/O vCPUs on turbo cores; vTurbo's 0.1 ms.
//! - `tslice_ms`, `ratelimit_us`: Credit's (see `credit.rs`), for the regular cores.
//!
//! ## Sources
//! Cong Xu, Sahan Gamage, Hui Lu, Ramana Kompella, Dongyan Xu: "vTurbo: Accelerating
//! Virtual Machine I/O Processing Using Designated Turbo-Sliced Core", USENIX ATC 2013,
//! 243-254 (abstract: a designated core with a much smaller time slice, e.g. 0.1 ms,
//! takes the VMs' I/O IRQs). The FLMS paper (seed 002) summarises it in its related work
//! (section 1: one or more physical cores reserved as short-slice I/O cores, an extra I/O
//! vCPU per VM bound to them taking the VM's I/O interrupts, the other vCPUs off them with
//! a normal slice; static, and needing a modified guest) and compares against it in
//! section 4.1.2 (Table 1: ping 7.762 ms against Credit's 16.853 ms).
//!
//! ## Deviations
//! - With the host split, no starvation bound is promised to the invariant checker:
//!   accounting stays host-wide (Xen's `vcpu-pin`, not cpupools), so an overloaded pool's
//!   vCPUs earn credit for pCPUs they may not use, stay UNDER, and a queued one can be
//!   overtaken by boosted wakers for long (see `split_starvation_bound`). Xen does the same.
//! - The guest side (vTurbo's extra I/O vCPU and the IRQ steering to it in a modified
//!   guest kernel) is the scenario's job: the VM's latency vCPU is the I/O vCPU and its
//!   I/O workloads are placed on it. The model is the host scheduler only.
//! - Which pCPUs are turbo cores (the last ones) is our choice.
//! - Credit's tick and accounting period stay those of `tslice_ms` on every pCPU (the
//!   turbo slice changes when a turn ends, not how credit is paid).

use super::credit::pools::{
    check_pools, check_reserved_count, split_pools, split_starvation_bound,
};
use super::credit::{Credit, CreditPolicy};
use super::{Counters, ParamInfo, ParamKind, Params, SchedCtx, SchedView, TaskId};
use crate::reader::{Res, Table};
use crate::time::SimDuration;

pub const DESCRIPTION: &str = "vTurbo (Xu et al., ATC 2013): Xen Credit with turbo_pcpus turbo cores running only the VMs' I/O (latency) vCPUs in 0.1 ms slices, every other vCPU on the regular cores";

pub const PARAMS: &[ParamInfo] = &[
    super::credit::PARAMS[0],
    super::credit::PARAMS[1],
    ParamInfo {
        name: "turbo_pcpus",
        kind: ParamKind::Int,
        default: "1",
        help: "pCPUs designated as turbo cores (the last ones by id), at least 1 and fewer than the host's",
    },
    ParamInfo {
        name: "turbo_slice_us",
        kind: ParamKind::Int,
        default: "100",
        help: "time slice of the I/O vCPUs on turbo cores, in us (1 to tslice_ms x 1000); no rate limit there",
    },
];

/// Checks the parameters beyond their types (Credit's first).
pub fn check_params(t: &Table) -> Res<()> {
    super::credit::check_params(t)?;
    let tslice_ms = match t.get("tslice_ms") {
        Some(o) => o.u64_in(1, 1000)?,
        None => 30,
    };
    if let Some(o) = t.get("turbo_slice_us") {
        o.u64_in(1, tslice_ms * 1000)
            .map_err(|e| crate::error::ScenarioError {
                message: format!(
                    "{} (the turbo slice must be at least 1 us and at most the regular slice, tslice_ms = {tslice_ms})",
                    e.message
                ),
                ..e
            })?;
    }
    Ok(())
}

/// Checks `turbo_pcpus` against the host: at least one turbo core and one regular core.
pub fn check_host(t: &Table, ncpus: usize) -> Res<()> {
    check_reserved_count(t, "turbo_pcpus", 1, ncpus)
}

// The set-up counters (see the header).
super::counters::declare_counters! {
    IO_ON_TURBO => "io_vcpu_on_turbo_cores",
    OTHER_ON_REGULAR => "other_vcpu_on_regular_cores",
    KEPT_AFFINITY => "pool_kept_affinity",
    NOT_SPLIT => "no_latency_vcpus_plain_credit",
}

pub struct VTurbo {
    turbo_pcpus: usize,
    turbo_slice: SimDuration,
    counters: Counters<NCOUNTERS>,
    /// Whether `init` split the host (there were latency vCPUs).
    split: bool,
}

impl VTurbo {
    pub fn new(p: &Params) -> VTurbo {
        VTurbo {
            turbo_pcpus: p.int("turbo_pcpus").max(1) as usize,
            turbo_slice: SimDuration::from_us(p.int("turbo_slice_us").max(1) as u64),
            counters: Counters::new(COUNTER_NAMES),
            split: false,
        }
    }
}

impl CreditPolicy for VTurbo {
    fn init(c: &mut Credit<Self>, ctx: &mut SchedCtx) {
        let turbo_pcpus = c.policy().turbo_pcpus;
        let split = split_pools(c, ctx, turbo_pcpus);
        if let Some(turbo) = &split.reserved {
            let turbo_slice = c.policy().turbo_slice;
            for (t, info) in ctx.view.tasks.iter().enumerate() {
                let t = t as TaskId;
                // Only an I/O vCPU actually confined to turbo cores gets the turbo slice
                // (one that kept its affinity is an ordinary vCPU).
                if info.latency_vcpu && c.pool(t).subtract(turbo).is_empty() {
                    c.set_slice(t, turbo_slice);
                    c.set_ratelimit(t, SimDuration::ZERO);
                }
            }
        }
        let v = c.policy_mut();
        let counts = &mut v.counters.values;
        counts[IO_ON_TURBO] = split.latency_bound;
        counts[OTHER_ON_REGULAR] = split.others_excluded;
        counts[KEPT_AFFINITY] = split.kept_affinity;
        counts[NOT_SPLIT] = u64::from(split.reserved.is_none());
        v.split = split.reserved.is_some();
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    fn check(c: &Credit<Self>, view: &SchedView) -> Result<(), String> {
        check_pools(c, view, "vturbo")
    }

    /// See `split_starvation_bound`.
    fn starvation_bound(
        c: &Credit<Self>,
        _view: &SchedView,
        credit: Option<SimDuration>,
    ) -> Option<SimDuration> {
        split_starvation_bound(c.policy().split, credit)
    }
}

/// `vturbo`: Credit with turbo cores. Its periodic events are counted as Credit's ticks:
/// the 0.1 ms turbo slices end only on the `turbo_pcpus` turbo cores.
impl super::Registered for VTurbo {
    type Sched = Credit<VTurbo>;
    const NAME: &'static str = "vturbo";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: true,
        pools: super::Pools::Reserved,
    };
    fn build(p: &Params) -> Credit<VTurbo> {
        Credit::with_policy(p, VTurbo::new(p))
    }
    fn check_params(t: &Table) -> Res<()> {
        self::check_params(t)
    }
    fn check_host(t: &Table, ncpus: usize) -> Res<()> {
        self::check_host(t, ncpus)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(SimDuration(super::credit::tick_ns(p.table)))
    }
}
