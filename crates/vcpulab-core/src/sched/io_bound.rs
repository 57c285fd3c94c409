//! `io-bound` — "I/O bounding": Xen Credit with the latency vCPUs statically bound to
//! reserved pCPUs.
//!
//! ## Policy
//! The last `io_pcpus` pCPUs of the host (by id; the SMT threads of a core have adjacent
//! ids, so a multiple of the threads per core reserves whole cores) are set aside for the
//! latency (I/O) vCPUs: every vCPU of an LSVM and the reserved vCPUs of a MixVM
//! (`TaskInfo::latency_vcpu`). Each latency vCPU may run only on the reserved pCPUs, every
//! other vCPU (and host thread) only on the rest. Within those pools everything is Credit
//! as in `credit.rs`: the same credits, priorities, wake-up boost, stealing and placement
//! (each restricted to the pool), the same `tslice_ms` slice and `ratelimit_us` rate limit.
//! The binding is static: the pools never change during a run.
//!
//! A latency vCPU thus never queues behind CPU-bound vCPUs; it competes only with the
//! other latency vCPUs on the reserved pCPUs.
//!
//! **No latency vCPUs.** If no vCPU of the scenario is a latency vCPU, nothing is reserved
//! and the scheduler is exactly Credit (counter `no_latency_vcpus_plain_credit`): an
//! administrator binds I/O vCPUs to cores only when there are some, and reserving idle
//! pCPUs would only take capacity from the rest.
//!
//! **Affinity wins.** A vCPU's pool is its affinity narrowed to its side of the split; if
//! its affinity has no pCPU on that side (a latency vCPU pinned off the reserved pCPUs, or
//! another vCPU pinned onto them only), it keeps its whole affinity (counter
//! `pool_kept_affinity`), so explicit pinning in a scenario is never overridden into an
//! impossible placement.
//!
//! **Counters** (after Credit's): one per set-up decision, counted once at `init`; as all
//! counters are reported as deltas from the end of the warmup, a run with a warmup shows
//! them as 0. What happens at run time is counted by Credit's own counters.
//!
//! ## Parameters
//! - `io_pcpus` (integer, pCPUs, default 1, at least 1 and fewer than the host's pCPUs):
//!   how many pCPUs are reserved for the latency vCPUs. One, as vTurbo's single turbo
//!   core, which the FLMS paper compares it with on the same host.
//! - `tslice_ms`, `ratelimit_us`: Credit's (see `credit.rs`), on every pCPU.
//!
//! ## Sources
//! The FLMS paper (Journal of Software, 2017; seed 002) evaluates "I/O bounding" as a
//! comparator in section 4.1.2 (Table 1: ping 4.794 ms against Credit's 16.853 ms) without
//! describing it beyond the name; its related work (section 1) describes the idea it and
//! vTurbo share: isolate I/O work on pCPUs of its own so that it does not queue behind
//! CPU-bound work. The model is the plain reading: static binding with Xen's vCPU affinity
//! (`xl vcpu-pin`), Credit unchanged otherwise.
//!
//! ## Deviations
//! - With the host split, no starvation bound is promised to the invariant checker:
//!   accounting stays host-wide (Xen's `vcpu-pin`, not cpupools), so an overloaded pool's
//!   vCPUs earn credit for pCPUs they may not use, stay UNDER, and a queued one can be
//!   overtaken by boosted wakers for long (see `split_starvation_bound`). Xen does the same.
//! - Which pCPUs are reserved (the last ones) is our choice; the paper does not say.
//! - Host threads that are not vCPUs are never latency vCPUs, so they stay off the
//!   reserved pCPUs.

use super::credit::pools::{
    check_pools, check_reserved_count, split_pools, split_starvation_bound,
};
use super::credit::{Credit, CreditPolicy};
use super::{Counters, ParamInfo, ParamKind, Params, SchedCtx, SchedView};
use crate::reader::{Res, Table};
use crate::time::SimDuration;

pub const DESCRIPTION: &str = "I/O bounding (FLMS paper's comparator): Xen Credit with latency vCPUs statically bound to io_pcpus reserved pCPUs and every other vCPU kept off them";

pub const PARAMS: &[ParamInfo] = &[
    super::credit::PARAMS[0],
    super::credit::PARAMS[1],
    ParamInfo {
        name: "io_pcpus",
        kind: ParamKind::Int,
        default: "1",
        help: "pCPUs reserved for latency vCPUs (the last ones by id), at least 1 and fewer than the host's",
    },
];

/// Checks `io_pcpus` against the host: at least one reserved pCPU and one left.
pub fn check_host(t: &Table, ncpus: usize) -> Res<()> {
    check_reserved_count(t, "io_pcpus", 1, ncpus)
}

// The set-up counters (see the header).
super::counters::declare_counters! {
    LATENCY_BOUND => "latency_vcpu_bound_to_reserved",
    OTHER_KEPT_OFF => "other_vcpu_kept_off_reserved",
    KEPT_AFFINITY => "pool_kept_affinity",
    NOT_SPLIT => "no_latency_vcpus_plain_credit",
}

/// The policy: the split, made once at `init`.
pub struct IoBound {
    io_pcpus: usize,
    counters: Counters<NCOUNTERS>,
    /// Whether `init` split the host (there were latency vCPUs).
    split: bool,
}

impl IoBound {
    pub fn new(p: &Params) -> IoBound {
        IoBound {
            io_pcpus: p.int("io_pcpus").max(1) as usize,
            counters: Counters::new(COUNTER_NAMES),
            split: false,
        }
    }
}

impl CreditPolicy for IoBound {
    fn init(c: &mut Credit<Self>, ctx: &mut SchedCtx) {
        let io_pcpus = c.policy().io_pcpus;
        let split = split_pools(c, ctx, io_pcpus);
        let b = c.policy_mut();
        let counts = &mut b.counters.values;
        counts[LATENCY_BOUND] = split.latency_bound;
        counts[OTHER_KEPT_OFF] = split.others_excluded;
        counts[KEPT_AFFINITY] = split.kept_affinity;
        counts[NOT_SPLIT] = u64::from(split.reserved.is_none());
        b.split = split.reserved.is_some();
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    fn check(c: &Credit<Self>, view: &SchedView) -> Result<(), String> {
        check_pools(c, view, "io-bound")
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

/// `io-bound`: Credit with reserved pCPUs. Its periodic events are Credit's ticks.
impl super::Registered for IoBound {
    type Sched = Credit<IoBound>;
    const NAME: &'static str = "io-bound";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: true,
        pools: super::Pools::Reserved,
    };
    fn build(p: &Params) -> Credit<IoBound> {
        Credit::with_policy(p, IoBound::new(p))
    }
    fn check_params(t: &Table) -> Res<()> {
        super::credit::check_params(t)
    }
    fn check_host(t: &Table, ncpus: usize) -> Res<()> {
        self::check_host(t, ncpus)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(SimDuration(super::credit::tick_ns(p.table)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{RunState, Scheduler, TaskInfo};
    use crate::topology::{CpuSet, Topology};

    /// `io-bound` on 4 flat pCPUs with tasks (latency vCPU?, affinity), after `init`.
    fn setup(tasks: &[(bool, &str)]) -> (SchedView, Credit<IoBound>) {
        let view = SchedView {
            topo: Topology::new(1, 4, 1, 1),
            tasks: tasks
                .iter()
                .enumerate()
                .map(|(i, &(latency, aff))| TaskInfo {
                    vm: i as u32,
                    index: 0,
                    affinity: CpuSet::parse(aff).unwrap(),
                    weight: 256,
                    cap: 0,
                    class: None,
                    latency_vcpu: latency,
                    host_thread: false,
                    rt: Default::default(),
                })
                .collect(),
            state: vec![RunState::Halted; tasks.len()],
            cpu_curr: vec![None; 4],
            nvms: tasks.len() as u32,
        };
        let mut table = toml::Table::new();
        table.insert("io_pcpus".into(), toml::Value::Integer(2));
        let sched = crate::sched::credit::started(&view, &table, PARAMS, IoBound::new);
        (view, sched)
    }

    /// Latency vCPUs get the last two pCPUs, the others the rest, each within its
    /// affinity; a vCPU pinned wholly to the other side keeps its affinity.
    #[test]
    fn the_split_narrows_affinities_and_keeps_impossible_pinnings() {
        let (_, sched) = setup(&[(true, "0-3"), (false, "0-3"), (true, "1-2"), (false, "3")]);
        let pools: Vec<String> = (0..4).map(|t| sched.pool(t).to_string()).collect();
        assert_eq!(pools, ["2-3", "0-1", "2", "3"]);
        assert_eq!(sched.policy().counters.values, [2, 1, 1, 0]);
        let (_, sched) = setup(&[(false, "0-3"), (false, "0-3")]);
        assert_eq!(sched.pool(0).to_string(), "0-3");
        assert_eq!(sched.policy().counters.values[3], 1); // no_latency_vcpus_plain_credit
    }

    /// The pool check fails for a vCPU running or queued outside its pool.
    #[test]
    fn the_pool_check_can_fail() {
        let (mut view, mut sched) = setup(&[(true, "0-3"), (false, "0-3")]);
        assert!(sched.check(&view).is_ok());
        view.state[0] = RunState::Running(0);
        view.cpu_curr[0] = Some(0);
        sched.test_set_running(0, Some(0));
        let e = sched.check(&view).unwrap_err();
        assert!(e.contains("outside its pool 2-3"), "{e}");
        view.state[0] = RunState::Halted;
        view.cpu_curr[0] = None;
        sched.test_set_running(0, None);
        view.state[1] = RunState::Runnable;
        sched.test_set_processor(1, 3);
        sched.test_enqueue(1, 3);
        let e = sched.check(&view).unwrap_err();
        assert!(e.contains("task 1 waits on pCPU 3"), "{e}");
    }
}
