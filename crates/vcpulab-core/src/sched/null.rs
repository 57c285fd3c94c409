//! `null` — Xen's null scheduler: every pCPU runs one vCPU for good, or nothing.
//!
//! ## Policy
//! The null scheduler does not share pCPUs in time; it divides them. A vCPU joining the
//! scheduler (here: every vCPU and host thread at the start of the run, VMs in scenario
//! order, vCPUs in index order, host threads last) is assigned a pCPU of its affinity
//! that no other vCPU holds, the lowest-numbered one, and keeps it for the whole run. A
//! pCPU runs its vCPU whenever that vCPU is runnable and idles whenever it is halted, even
//! if other vCPUs are waiting: a vCPU that halts leaves its pCPU idle but stays assigned
//! to it, and when it wakes, its pCPU (idle, since nothing else runs there) reschedules
//! and runs it at once. There are no time slices, no timers, no preemption and no
//! migrations: the per-pCPU scheduling decision is "the assigned vCPU if it can run, else
//! idle".
//!
//! A vCPU that finds every pCPU of its affinity taken joins the tail of one host-wide FIFO
//! waitqueue. In Xen it leaves the waitqueue when a pCPU of its affinity becomes free (a
//! vCPU goes offline or its domain is destroyed, or a pCPU joins the cpupool): the freed
//! pCPU takes the first waiting vCPU allowed on it. Nothing in a vcpulab run frees a pCPU,
//! so a waiting vCPU waits to the end: runnable, never running. That follows from what
//! the scheduler is for, not from the model: null.c is written for static set-ups with no
//! more vCPUs than pCPUs (embedded, HPC, or a cpupool of its own), where it keeps the
//! scheduling overhead as low as it can be; with more vCPUs than pCPUs the surplus does
//! not run. No starvation bound is promised to the invariant checker.
//!
//! **Counters**, one per decision branch: a vCPU placed at start (`insert_assigned`) or
//! left waiting (`insert_waitqueue`); a wake-up that reschedules the vCPU's pCPU
//! (`wake_assigned`) or finds it waiting (`wake_waitqueue`); a halt (`block`, the pCPU
//! idles); and what a pCPU picks: its vCPU (`pick_assigned`), its vCPU again when asked
//! while that vCPU still runs (`pick_kept_running`), or nothing (`pick_idle`). As all
//! counters are reported as deltas from the end of the warmup, a run with a warmup shows
//! the two `insert_*` counters as 0.
//!
//! ## Parameters
//! None.
//!
//! ## Source
//! Xen's `xen/common/sched/null.c` (Dario Faggioli, 2017; in Xen since 4.9, named
//! `sched_null.c` before 4.14), read at commit c447b7308b13 (4.23 development, August
//! 2026): placement on insert (`null_unit_insert` and `pick_res`: the unit's own pCPU if
//! free and allowed, else the first free pCPU of its affinity, else the waitqueue, whose
//! units are added at the tail), `null_unit_wake` (a unit in the waitqueue stays there;
//! an assigned one gets its pCPU rescheduled), `null_unit_sleep` (the running unit's
//! pCPU reschedules), `null_schedule` (the assigned unit if runnable, else idle; no time
//! limit), and `unit_deassign` (a freed pCPU goes to the first waiting unit whose
//! affinity allows it).
//!
//! ## Deviations
//! - Xen first offers a unit the pCPU it is already on (`sched_unit_master`). A vcpulab
//!   vCPU is on no pCPU before it is placed, so placement starts at Xen's next step: the
//!   lowest free pCPU of its affinity.
//! - Soft affinity (Xen's first balancing step) is not modelled; affinity is hard.
//! - Not modelled, since nothing in a run triggers them: vCPU offlining and domain
//!   destruction (`null_unit_remove` and the offline paths of sleep and wake), pCPUs
//!   joining or leaving the pool, and affinity changes or migrations (`null_unit_migrate`,
//!   which frees the old pCPU and moves the unit to the new one or to the waitqueue). So
//!   the waitqueue is never served, and its hand-over is not implemented.
//! - Tasklet work (Xen runs the idle unit on the pCPU for it) is not modelled.
//! - Host threads are units like vCPUs (in Xen, the work of dom0 and its back-ends runs
//!   on dom0's vCPUs, which the null scheduler places like any other).

use super::{Counters, CpuId, ParamInfo, Params, RunState, SchedCtx, SchedView, Scheduler, TaskId};
use crate::topology::CpuSet;
use std::collections::VecDeque;

pub const DESCRIPTION: &str = "Xen null scheduler: each vCPU gets a pCPU of its affinity for good, no time slicing; vCPUs beyond one per pCPU wait (and never run)";

pub const PARAMS: &[ParamInfo] = &[];

const INSERT_ASSIGNED: usize = 0;
const INSERT_WAITQUEUE: usize = 1;
const WAKE_ASSIGNED: usize = 2;
const WAKE_WAITQUEUE: usize = 3;
const BLOCK: usize = 4;
const PICK_ASSIGNED: usize = 5;
const PICK_KEPT_RUNNING: usize = 6;
const PICK_IDLE: usize = 7;
const NCOUNTERS: usize = 8;

const COUNTER_NAMES: [&str; NCOUNTERS] = [
    "insert_assigned",
    "insert_waitqueue",
    "wake_assigned",
    "wake_waitqueue",
    "block",
    "pick_assigned",
    "pick_kept_running",
    "pick_idle",
];

pub struct Null {
    counters: Counters<NCOUNTERS>,
    // global
    /// pCPUs no vCPU is assigned to (null.c's `cpus_free`).
    free: CpuSet,
    /// vCPUs without a pCPU, in the order they found none.
    waitqueue: VecDeque<TaskId>,
    // per pCPU
    assigned: Vec<Option<TaskId>>,
    // per vCPU
    pcpu_of: Vec<Option<CpuId>>,
}

impl Null {
    pub fn new(_p: &Params) -> Null {
        Null {
            counters: Counters::new(COUNTER_NAMES),
            free: CpuSet::empty(0),
            waitqueue: VecDeque::new(),
            assigned: Vec::new(),
            pcpu_of: Vec::new(),
        }
    }

    /// Places vCPU `t`: the lowest free pCPU of its affinity, or the waitqueue's tail.
    fn insert(&mut self, t: TaskId, affinity: &CpuSet) {
        match affinity.intersect(&self.free).first() {
            Some(cpu) => {
                self.counters.bump(INSERT_ASSIGNED);
                self.free.remove(cpu);
                self.assigned[cpu] = Some(t);
                self.pcpu_of[t as usize] = Some(cpu as CpuId);
            }
            None => {
                self.counters.bump(INSERT_WAITQUEUE);
                self.waitqueue.push_back(t);
            }
        }
    }
}

impl Scheduler for Null {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let ncpus = ctx.ncpus();
        let ntasks = ctx.view.tasks.len();
        self.free = CpuSet::full(ncpus);
        self.assigned = vec![None; ncpus];
        self.pcpu_of = vec![None; ntasks];
        for (t, info) in ctx.view.tasks.iter().enumerate() {
            self.insert(t as TaskId, &info.affinity);
        }
    }

    fn wake(&mut self, ctx: &mut SchedCtx, task: TaskId) {
        match self.pcpu_of[task as usize] {
            Some(cpu) => {
                // Only this vCPU runs there, and it was halted: the pCPU is idle.
                self.counters.bump(WAKE_ASSIGNED);
                ctx.resched(cpu);
            }
            None => self.counters.bump(WAKE_WAITQUEUE),
        }
    }

    fn block(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId, _task: TaskId) {
        // The engine reschedules the pCPU, which finds its vCPU halted and idles.
        self.counters.bump(BLOCK);
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        if let Some(p) = prev {
            // Only the assigned vCPU ever runs here, and nothing takes its pCPU away.
            self.counters.bump(PICK_KEPT_RUNNING);
            return Some(p);
        }
        match self.assigned[cpu as usize] {
            Some(t) if ctx.view.state[t as usize] == RunState::Runnable => {
                self.counters.bump(PICK_ASSIGNED);
                Some(t)
            }
            _ => {
                self.counters.bump(PICK_IDLE);
                None
            }
        }
    }

    /// Never armed: the null scheduler has no time slices.
    fn timer(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId) {}

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }

    /// None: a vCPU in the waitqueue may wait for the whole run.
    fn starvation_bound(&self, _view: &SchedView) -> Option<crate::time::SimDuration> {
        None
    }

    /// Each pCPU has at most one vCPU and each vCPU at most one pCPU (the two maps agree),
    /// a vCPU runs only on its own pCPU, every vCPU is either assigned or waiting (once),
    /// and no waiting vCPU has a free pCPU in its affinity (it would have been placed).
    fn check(&self, view: &SchedView) -> Result<(), String> {
        for (cpu, a) in self.assigned.iter().enumerate() {
            if let Some(t) = *a {
                if self.pcpu_of[t as usize] != Some(cpu as CpuId) {
                    return Err(format!(
                        "null: pCPU {cpu} is assigned task {t}, which is assigned {:?}",
                        self.pcpu_of[t as usize]
                    ));
                }
            }
            if self.free.contains(cpu) != a.is_none() {
                return Err(format!(
                    "null: pCPU {cpu} is assigned {a:?} but {}in the free set",
                    if self.free.contains(cpu) { "" } else { "not " }
                ));
            }
            if let Some(t) = view.cpu_curr[cpu] {
                if *a != Some(t) {
                    return Err(format!(
                        "null: task {t} runs on pCPU {cpu}, which is assigned {a:?}"
                    ));
                }
            }
        }
        let mut waiting = vec![false; self.pcpu_of.len()];
        for &t in &self.waitqueue {
            if std::mem::replace(&mut waiting[t as usize], true) {
                return Err(format!("null: task {t} is in the waitqueue twice"));
            }
            if let Some(cpu) = view.tasks[t as usize]
                .affinity
                .intersect(&self.free)
                .first()
            {
                return Err(format!(
                    "null: task {t} waits although pCPU {cpu} of its affinity is free"
                ));
            }
        }
        for (t, cpu) in self.pcpu_of.iter().enumerate() {
            match (cpu, waiting[t]) {
                (Some(c), false) if self.assigned[*c as usize] == Some(t as TaskId) => {}
                (Some(c), false) => {
                    return Err(format!(
                        "null: task {t} is assigned pCPU {c}, which is assigned {:?}",
                        self.assigned[*c as usize]
                    ))
                }
                (None, true) => {}
                (Some(c), true) => {
                    return Err(format!(
                        "null: task {t} is assigned pCPU {c} and in the waitqueue"
                    ))
                }
                (None, false) => {
                    return Err(format!(
                        "null: task {t} is neither assigned nor in the waitqueue"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// `null`: no parameters, no periodic events, and no time sharing.
impl super::Registered for Null {
    type Sched = Null;
    const NAME: &'static str = "null";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: false,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> Null {
        Null::new(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{call_hook, TaskInfo};
    use crate::time::SimTime;
    use crate::topology::Topology;

    /// A host of `ncpus` flat pCPUs running tasks of the given affinities, all halted.
    fn view(ncpus: u32, affinities: &[&str]) -> SchedView {
        SchedView {
            topo: Topology::new(1, ncpus, 1, 1),
            tasks: affinities
                .iter()
                .enumerate()
                .map(|(i, aff)| TaskInfo {
                    vm: 0,
                    index: i as u32,
                    affinity: CpuSet::parse(aff).unwrap(),
                    weight: 256,
                    cap: 0,
                    class: None,
                    latency_vcpu: false,
                    host_thread: false,
                    rt: Default::default(),
                })
                .collect(),
            state: vec![RunState::Halted; affinities.len()],
            cpu_curr: vec![None; ncpus as usize],
            nvms: 1,
        }
    }

    /// Runs `hook` on `sched` with a context over `view`; returns the pCPUs it asked to
    /// reschedule.
    fn hook<R>(
        sched: &mut Null,
        view: &SchedView,
        hook: impl FnOnce(&mut Null, &mut SchedCtx) -> R,
    ) -> (R, Vec<CpuId>) {
        let (r, out) = call_hook(sched, view, SimTime(0), hook);
        (r, out.resched)
    }

    fn started(view: &SchedView) -> Null {
        let mut sched = Null::new(&Params {
            table: &toml::Table::new(),
            infos: PARAMS,
        });
        hook(&mut sched, view, |s, ctx| s.init(ctx));
        sched
    }

    fn count(sched: &Null, name: &str) -> u64 {
        let i = COUNTER_NAMES.iter().position(|n| *n == name).unwrap();
        sched.counters.values[i]
    }

    /// Each vCPU takes the lowest free pCPU of its affinity, in task order; one whose
    /// affinity is all taken waits, and the waitqueue keeps arrival order.
    #[test]
    fn each_vcpu_takes_the_lowest_free_pcpu_of_its_affinity_and_the_rest_wait_in_order() {
        let v = view(3, &["0-2", "0-1", "0", "1-2", "0-2", "1"]);
        let s = started(&v);
        assert_eq!(s.assigned, [Some(0), Some(1), Some(3)]);
        assert_eq!(s.pcpu_of, [Some(0), Some(1), None, Some(2), None, None]);
        assert_eq!(Vec::from(s.waitqueue.clone()), [2, 4, 5]);
        assert_eq!(count(&s, "insert_assigned"), 3);
        assert_eq!(count(&s, "insert_waitqueue"), 3);
        assert!(s.free.is_empty());
        assert_eq!(s.check(&v), Ok(()));
        // With pCPUs to spare, nobody waits and the spare pCPUs stay free.
        let v = view(4, &["0-3", "2"]);
        let s = started(&v);
        assert_eq!(s.assigned, [Some(0), None, Some(1), None]);
        assert!(s.waitqueue.is_empty());
        assert_eq!(s.free.to_string(), "1,3");
    }

    /// A woken vCPU's pCPU reschedules and runs it; when it halts the pCPU idles and the
    /// assignment stays; a waiting vCPU's wake-up asks nothing of any pCPU.
    #[test]
    fn a_pcpu_runs_its_vcpu_when_runnable_and_idles_otherwise() {
        let mut v = view(2, &["0-1", "0-1", "0-1"]);
        let mut s = started(&v);
        v.state[1] = RunState::Runnable;
        let (_, resched) = hook(&mut s, &v, |s, ctx| s.wake(ctx, 1));
        assert_eq!(resched, [1]);
        let (next, _) = hook(&mut s, &v, |s, ctx| s.pick_next(ctx, 1, None));
        assert_eq!(next, Some(1));
        v.state[1] = RunState::Running(1);
        v.cpu_curr[1] = Some(1);
        assert_eq!(s.check(&v), Ok(()));
        // Asked again while it runs, the pCPU keeps it.
        let (next, _) = hook(&mut s, &v, |s, ctx| s.pick_next(ctx, 1, Some(1)));
        assert_eq!(next, Some(1));
        // It halts: the pCPU idles, and keeps it.
        v.state[1] = RunState::Halted;
        v.cpu_curr[1] = None;
        hook(&mut s, &v, |s, ctx| s.block(ctx, 1, 1));
        let (next, _) = hook(&mut s, &v, |s, ctx| s.pick_next(ctx, 1, None));
        assert_eq!(next, None);
        assert_eq!(s.assigned[1], Some(1));
        // The surplus vCPU wakes: it waits, even though pCPU 1 is idle.
        v.state[2] = RunState::Runnable;
        let (_, resched) = hook(&mut s, &v, |s, ctx| s.wake(ctx, 2));
        assert!(resched.is_empty());
        let (next, _) = hook(&mut s, &v, |s, ctx| s.pick_next(ctx, 1, None));
        assert_eq!(next, None);
        assert_eq!(s.check(&v), Ok(()));
        let counts: Vec<u64> = COUNTER_NAMES.iter().map(|n| count(&s, n)).collect();
        // insert_assigned, insert_waitqueue, wake_assigned, wake_waitqueue, block,
        // pick_assigned, pick_kept_running, pick_idle
        assert_eq!(counts, [2, 1, 1, 1, 1, 1, 1, 2]);
    }

    /// The invariant check fails for a vCPU on another's pCPU, for maps that disagree,
    /// and for a vCPU waiting while a pCPU of its affinity is free.
    #[test]
    fn the_check_can_fail() {
        let mut v = view(2, &["0-1", "0-1", "0-1"]);
        let s = started(&v);
        v.cpu_curr[0] = Some(1);
        v.state[1] = RunState::Running(0);
        let e = s.check(&v).unwrap_err();
        assert!(e.contains("task 1 runs on pCPU 0"), "{e}");
        let v = view(2, &["0-1", "0-1", "0-1"]);
        let mut bad = started(&v);
        bad.assigned[1] = Some(0);
        let e = bad.check(&v).unwrap_err();
        assert!(e.contains("pCPU 1 is assigned task 0"), "{e}");
        let mut bad = started(&v);
        bad.assigned[1] = None;
        bad.pcpu_of[1] = None;
        bad.free.insert(1);
        bad.waitqueue.push_back(1);
        let e = bad.check(&v).unwrap_err();
        assert!(
            e.contains("waits although pCPU 1 of its affinity is free"),
            "{e}"
        );
        let mut bad = started(&v);
        bad.waitqueue.push_back(2);
        let e = bad.check(&v).unwrap_err();
        assert!(e.contains("task 2 is in the waitqueue twice"), "{e}");
    }
}
