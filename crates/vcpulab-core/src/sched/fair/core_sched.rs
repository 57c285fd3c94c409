//! Linux core scheduling (`CONFIG_SCHED_CORE`, 5.14+) in the fair class: SMT siblings run
//! only tasks of one cookie at a time, or idle ("forced idle"). `[scheduler] core_sched`
//! chooses the cookies as cloud-hypervisor's `core_scheduling` option sets them with
//! `prctl(PR_SCHED_CORE)`: `"vm"` one cookie for all vCPU threads of a VM, `"vcpu"` one
//! per vCPU thread; host threads stay untagged (cookie 0). `"off"` (the default) builds
//! none of this, and the fair class runs exactly as without it.
//!
//! ## What the model does (kernel/sched/core.c `pick_next_task` under `sched_core_enabled`)
//! - **Core-wide pick.** A pCPU that reschedules picks for its whole core: each sibling's
//!   best task (this pCPU: the policy's pick; a busy sibling: the task it runs; an idle
//!   sibling with tasks queued: its leftmost task), the highest priority of them (`max`)
//!   across siblings by `cfs_prio_less` (vruntime less the queue's `min_vruntime_fi`;
//!   ties to this pCPU, then in sibling order from it), and its cookie becomes the core's.
//!   Each sibling then runs its own pick if that has the core's cookie, else its
//!   matching task of least vruntime (`sched_core_find`; none for cookie 0, as untagged
//!   tasks are not in the core tree), else idles: forced idle if it has tasks runnable.
//! - **Siblings follow.** A sibling whose task must change is rescheduled and, when its
//!   turn comes, follows the core's cookie (the kernel's `core_pick` fast path) unless a
//!   task was queued on or left the core meanwhile (`core_task_seq`), when it picks for
//!   the core anew. So a sibling's wake-up or preemption re-runs the core-wide pick.
//! - **`min_vruntime_fi`.** While the core was not in forced idle at the previous pick,
//!   each sibling's snapshot is its current `min_vruntime`; during forced idle it stays
//!   where it was when forced idle began, so the running cookie's vruntime grows against
//!   the waiting one's and the waiting task eventually wins the core (`se_fi_update`).
//! - **`task_tick_core`.** A tick on a pCPU whose core has a forced-idle sibling, with one
//!   entity on its root queue that has run more than half a slice since it was picked
//!   (`__entity_slice_used(se, MIN_NR_TASKS_DURING_FORCEIDLE = 2)`), reschedules it, which
//!   re-runs the core-wide pick.
//! - **Wake-up placement.** The scan for an idle pCPU in the socket skips pCPUs whose
//!   core runs another cookie (`__select_idle_cpu` with `sched_cpu_cookie_match`, commit
//!   97886d9dcd86); the previous pCPU and wholly idle cores are taken as before.
//! - **Forced idle accounting** (commit 4feee7d12603, 5.18): a pCPU is forced idle while it
//!   idles with runnable tasks because of the core's cookie; reported per pCPU, summed per
//!   core in the summary's `host.core_sched`.
//!
//! ## Simplifications (each written here and in docs/models.md)
//! - An idle sibling's candidate in the core-wide comparison is its leftmost task (least
//!   vruntime, root level first), not the policy's pick; a busy sibling's is the task it
//!   runs, not a fresh pick of its queue. The sibling itself, when it follows, uses the
//!   policy's pick.
//! - `task_tick_core`'s slice is one scheduler tick (the test fires at the first tick after
//!   the task has run half a tick), not `sched_slice` / `se->slice`.
//! - Not modelled: the forced-newidle balancer and cookie stealing (`sched_core_balance`,
//!   `try_steal_cookie`), the cookie check in load balancing (`can_migrate_task`), and the
//!   cookie match in the slow (idlest group) wake-up path; RT and other classes (every
//!   task is fair). The cookie and the core's state change only at core-wide picks.
//! - A pCPU halt-polling for a halted vCPU (`[kvm] halt_poll_ns`) does not hold that
//!   vCPU's cookie on its core: the engine has descheduled the vCPU, while in the kernel
//!   the polling vCPU thread still runs, with its cookie.
//! - **No SMT.** `prctl(PR_SCHED_CORE)` fails with ENODEV when the machine has no SMT
//!   (`sched_core_share_pid`), so on a host of one thread per core no task gets a cookie:
//!   `core_sched` is then inert, and the run is exactly that of "off".
//! - `cfs` with `core_sched` is the 4.15 fair class under 5.14's core scheduling, a
//!   combination no kernel shipped: the core-wide rules are the same for both policies.

use super::{Fair, FairPolicy};
use crate::sched::counters::Counters;
use crate::sched::{CpuId, SchedCtx, SchedView, TaskId};
use crate::time::SimTime;

/// `[scheduler] core_sched`: how vCPU threads get cookies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreSchedMode {
    /// One cookie per VM (cloud-hypervisor `core_scheduling=vm`).
    Vm,
    /// One cookie per vCPU thread (`core_scheduling=vcpu`).
    Vcpu,
}

/// The parameter both fair schedulers declare.
pub const PARAM: crate::sched::ParamInfo = crate::sched::ParamInfo {
    name: "core_sched",
    kind: crate::sched::ParamKind::Choice(&["off", "vm", "vcpu"]),
    default: "off",
    help: "Linux 5.14+ core scheduling of vCPU threads: off, one cookie per VM (vm), one per vCPU thread (vcpu); host threads untagged",
};

impl CoreSchedMode {
    /// The mode a validated `core_sched` value names (None: "off").
    pub fn parse(v: &str) -> Option<CoreSchedMode> {
        match v {
            "vm" => Some(CoreSchedMode::Vm),
            "vcpu" => Some(CoreSchedMode::Vcpu),
            _ => None,
        }
    }
}

crate::sched::counters::declare_counters! {
    pub(super)
    C_CORE_PICK => "core_pick_core_wide",
    C_CORE_FOLLOW => "core_pick_follow_sibling",
    C_CORE_OWN => "core_pick_own_matches_cookie",
    C_CORE_FIND => "core_pick_cookie_find",
    C_CORE_FORCED_IDLE => "core_forced_idle",
    C_CORE_RESCHED_SIBLING => "core_resched_sibling",
    C_CORE_TICK => "core_tick_forceidle_resched",
    C_CORE_WAKE_SKIP => "core_wake_skip_cookie_mismatch",
}

/// Core scheduling state of `Fair` (present only when `core_sched` is not "off").
#[derive(Clone, Debug)]
pub struct CoreSched {
    pub(super) mode: CoreSchedMode,
    /// Per task: 0 untagged (host threads), else the VM's or the vCPU's cookie.
    pub(super) cookie: Vec<u32>,
    /// Per pCPU: its core, and the core's pCPUs (siblings, in pCPU order).
    core_of: Vec<u32>,
    siblings: Vec<Vec<u32>>,
    /// Per core: the cookie of the last core-wide pick.
    core_cookie: Vec<u32>,
    /// Per core: bumped when a task is queued on or leaves a sibling (`core_task_seq`).
    task_seq: Vec<u64>,
    /// Per core: the last core-wide pick left a sibling forced idle.
    forceidle: Vec<bool>,
    /// Per pCPU: the `task_seq` at which a sibling's core-wide pick asked it to follow.
    follow: Vec<Option<u64>>,
    /// Per pCPU: its root queue's `min_vruntime_fi`.
    min_vruntime_fi: Vec<i64>,
    /// Per pCPU: since when it is forced idle, and forced-idle time before that (ns).
    fi_since: Vec<Option<SimTime>>,
    fi_ns: Vec<u64>,
    pub(super) counters: Counters<NCOUNTERS>,
}

impl CoreSched {
    pub fn new(mode: CoreSchedMode) -> CoreSched {
        CoreSched {
            mode,
            cookie: vec![],
            core_of: vec![],
            siblings: vec![],
            core_cookie: vec![],
            task_seq: vec![],
            forceidle: vec![],
            follow: vec![],
            min_vruntime_fi: vec![],
            fi_since: vec![],
            fi_ns: vec![],
            counters: Counters::new(COUNTER_NAMES),
        }
    }

    /// Sizes the state for the host and tasks of `view`.
    pub(super) fn init(&mut self, view: &SchedView) {
        let topo = &view.topo;
        let ncpus = topo.ncpus();
        self.cookie = view
            .tasks
            .iter()
            .enumerate()
            .map(|(t, info)| match (info.host_thread, self.mode) {
                (true, _) => 0,
                (false, CoreSchedMode::Vm) => info.vm + 1,
                (false, CoreSchedMode::Vcpu) => t as u32 + 1,
            })
            .collect();
        self.core_of = (0..ncpus).map(|c| topo.cpus[c].core).collect();
        self.siblings = (0..topo.ncores())
            .map(|k| topo.core_cpus(k as u32).map(|c| c as u32).collect())
            .collect();
        self.core_cookie = vec![0; topo.ncores()];
        self.task_seq = vec![0; topo.ncores()];
        self.forceidle = vec![false; topo.ncores()];
        self.follow = vec![None; ncpus];
        self.min_vruntime_fi = vec![0; ncpus];
        self.fi_since = vec![None; ncpus];
        self.fi_ns = vec![0; ncpus];
    }

    /// A task was queued on or left `cpu`.
    #[inline]
    pub(super) fn touched(&mut self, cpu: u32) {
        self.task_seq[self.core_of[cpu as usize] as usize] += 1;
    }

    /// Whether `t` may run on the core of `cpu` as the core's last pick left it.
    pub(super) fn cookie_matches_core(&self, t: TaskId, cpu: u32) -> bool {
        self.core_cookie[self.core_of[cpu as usize] as usize] == self.cookie[t as usize]
    }

    /// Records whether `cpu` is forced idle from `now` on.
    pub(super) fn set_forced_idle(&mut self, cpu: u32, forced: bool, now: SimTime) {
        let since = &mut self.fi_since[cpu as usize];
        match (since.is_some(), forced) {
            (false, true) => *since = Some(now),
            (true, false) => {
                let from = since.take().unwrap();
                self.fi_ns[cpu as usize] += now.since(from).ns();
            }
            _ => {}
        }
    }

    /// Forced-idle time per pCPU up to `now` (ns).
    pub(super) fn forced_idle_ns(&self, now: SimTime) -> Vec<u64> {
        self.fi_ns
            .iter()
            .zip(&self.fi_since)
            .map(|(&ns, since)| ns + since.map_or(0, |s| now.since(s).ns()))
            .collect()
    }

    /// Some sibling of `cpu`'s core is forced idle.
    pub(super) fn core_forced_idle(&self, cpu: u32) -> bool {
        let core = self.core_of[cpu as usize] as usize;
        self.siblings[core]
            .iter()
            .any(|&s| self.fi_since[s as usize].is_some())
    }

    /// The invariant: the tasks running on the siblings of a core have one cookie.
    pub(super) fn check(&self, view: &SchedView) -> Result<(), String> {
        for (core, sibs) in self.siblings.iter().enumerate() {
            let mut seen: Option<(u32, TaskId, u32)> = None;
            for &c in sibs {
                let Some(t) = view.cpu_curr[c as usize] else {
                    continue;
                };
                let k = self.cookie[t as usize];
                match seen {
                    Some((k0, t0, c0)) if k0 != k => {
                        return Err(format!(
                            "core scheduling: core {core} runs task {t0} (cookie {k0}) on pCPU {c0} and task {t} (cookie {k}) on pCPU {c} at once"
                        ));
                    }
                    None => seen = Some((k, t, c)),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

impl<P: FairPolicy> Fair<P> {
    /// The core-scheduling part of `pick_next` on `cpu`, after prev was put back and idle
    /// balancing ran: follow the core's cookie if a sibling just picked for this core,
    /// else pick for the whole core. Returns the task whose entities are now `curr`.
    pub(super) fn core_pick_next(&mut self, ctx: &mut SchedCtx, cpu: u32) -> Option<TaskId> {
        let cs = self.core.as_mut().unwrap();
        let core = cs.core_of[cpu as usize] as usize;
        let seq = cs.task_seq[core];
        if cs.follow[cpu as usize].take() == Some(seq) {
            cs.counters.bump(C_CORE_FOLLOW);
            let cookie = cs.core_cookie[core];
            let own = self.pick_task(ctx, cpu);
            return self.core_follow(ctx, cpu, own, cookie);
        }
        self.core_wide_pick(ctx, cpu)
    }

    /// `pick_next_task`'s core-wide selection from `cpu` (see the module header).
    fn core_wide_pick(&mut self, ctx: &mut SchedCtx, cpu: u32) -> Option<TaskId> {
        let sibs = {
            let cs = self.core.as_mut().unwrap();
            cs.counters.bump(C_CORE_PICK);
            let core = cs.core_of[cpu as usize] as usize;
            let sibs = cs.siblings[core].clone();
            for &s in &sibs {
                cs.follow[s as usize] = None;
            }
            sibs
        };
        let core = self.core.as_ref().unwrap().core_of[cpu as usize] as usize;
        let fi_before = self.core.as_ref().unwrap().forceidle[core];
        // Busy siblings' running entities are charged first (`update_rq_clock` and
        // `update_curr` in their `pick_task`).
        for &s in &sibs {
            if s != cpu {
                if let Some(t) = self.running[s as usize] {
                    let (p, n) = self.path(t, s);
                    for &e in p[..n].iter().rev() {
                        let rq = self.ents[e as usize].rq;
                        self.update_curr(ctx, rq, s);
                    }
                }
            }
        }
        if !fi_before {
            for &s in &sibs {
                let mv = self.rqs[s as usize].min_vruntime;
                self.core.as_mut().unwrap().min_vruntime_fi[s as usize] = mv;
            }
        }
        let own = self.pick_task(ctx, cpu);
        // Candidates in `for_each_cpu_wrap` order from `cpu`: ties go to the earlier.
        let start = sibs.iter().position(|&s| s == cpu).unwrap_or(0);
        let order: Vec<u32> = (0..sibs.len())
            .map(|i| sibs[(start + i) % sibs.len()])
            .collect();
        let mut best: Option<(i64, TaskId)> = None;
        for &s in &order {
            let cand = if s == cpu {
                own
            } else if let Some(t) = self.running[s as usize] {
                Some(t)
            } else {
                self.leftmost_task(s)
            };
            let Some(t) = cand else { continue };
            let key = self.core_prio_key(t, s);
            if best.is_none_or(|(k, _)| key < k) {
                best = Some((key, t));
            }
        }
        let cookie = best.map_or(0, |(_, t)| self.core.as_ref().unwrap().cookie[t as usize]);
        self.core.as_mut().unwrap().core_cookie[core] = cookie;
        // What each other sibling will run under this cookie; reschedule those that must
        // change, and leave the rest as they are.
        let mut fi_now = false;
        for &s in &order[1..] {
            let running = self.running[s as usize];
            let cand = running.or_else(|| self.leftmost_task(s));
            let choice = match cand {
                Some(t) if self.core.as_ref().unwrap().cookie[t as usize] == cookie => Some(t),
                _ if cookie != 0 => self.sched_core_find(s, cookie),
                _ => None,
            };
            let forced = choice.is_none() && self.h_nr[s as usize] > 0;
            fi_now |= forced;
            let cs = self.core.as_mut().unwrap();
            if choice != running && (running.is_some() || choice.is_some()) {
                cs.follow[s as usize] = Some(cs.task_seq[core]);
                cs.counters.bump(C_CORE_RESCHED_SIBLING);
                ctx.resched(s);
            } else if running.is_none() {
                cs.set_forced_idle(s, forced, ctx.now);
            }
        }
        let picked = self.core_follow(ctx, cpu, own, cookie);
        fi_now |= picked.is_none() && self.h_nr[cpu as usize] > 0;
        self.core.as_mut().unwrap().forceidle[core] = fi_now;
        picked
    }

    /// Runs on `cpu` its own pick `own` (already `curr`) if it has `cookie`, else the
    /// task of that cookie with the least vruntime (`sched_core_find`), else nothing.
    fn core_follow(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: u32,
        own: Option<TaskId>,
        cookie: u32,
    ) -> Option<TaskId> {
        if let Some(t) = own {
            let cs = self.core.as_mut().unwrap();
            if cs.cookie[t as usize] == cookie {
                cs.counters.bump(C_CORE_OWN);
                return Some(t);
            }
            self.put_prev_task(ctx, t, cpu);
        }
        let found = if cookie != 0 {
            self.sched_core_find(cpu, cookie)
        } else {
            None
        };
        if let Some(t) = found {
            self.core.as_mut().unwrap().counters.bump(C_CORE_FIND);
            self.set_next_task(t, cpu, ctx.now);
        } else if self.h_nr[cpu as usize] > 0 {
            self.core
                .as_mut()
                .unwrap()
                .counters
                .bump(C_CORE_FORCED_IDLE);
        }
        found
    }

    /// Makes queued task `t` the running entity of its queues on `cpu`, root first.
    fn set_next_task(&mut self, t: TaskId, cpu: u32, now: SimTime) {
        let (p, n) = self.path(t, cpu);
        for &e in p[..n].iter().rev() {
            let rq = self.ents[e as usize].rq;
            self.set_next_entity(rq, e, now);
        }
    }

    /// `cfs_prio_less`'s key: the root-level entity's vruntime less its queue's
    /// `min_vruntime_fi` (lower: higher priority).
    fn core_prio_key(&self, t: TaskId, cpu: u32) -> i64 {
        let (p, n) = self.path(t, cpu);
        let top = p[n - 1];
        self.ents[top as usize].vruntime - self.core.as_ref().unwrap().min_vruntime_fi[cpu as usize]
    }

    /// The leftmost task of an idle pCPU's queues (root level first).
    fn leftmost_task(&self, cpu: u32) -> Option<TaskId> {
        let mut rq = cpu;
        loop {
            let e = self.rqs[rq as usize].tree.first()?.1;
            match self.ents[e as usize].child {
                Some(child) => rq = child,
                None => return Some(e),
            }
        }
    }

    /// `sched_core_find`: the runnable task on `cpu` with `cookie` and the least vruntime.
    fn sched_core_find(&self, cpu: u32, cookie: u32) -> Option<TaskId> {
        let cs = self.core.as_ref().unwrap();
        self.cpu_tasks[cpu as usize]
            .iter()
            .copied()
            .filter(|&t| cs.cookie[t as usize] == cookie)
            .min_by_key(|&t| (self.ents[t as usize].vruntime, t))
    }

    /// `task_tick_core`: with a sibling forced idle, a lone entity that has run over half
    /// a slice (here: half a tick) since it was picked reschedules its pCPU.
    pub(super) fn core_tick(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        let cs = self.core.as_ref().unwrap();
        if !cs.core_forced_idle(cpu) || self.rqs[cpu as usize].nr_running != 1 {
            return;
        }
        let e = &self.ents[t as usize];
        let ran = e.sum_exec.ns().saturating_sub(e.prev_sum_exec.ns());
        if ran.saturating_mul(2) > self.tun.tick.ns() {
            self.core.as_mut().unwrap().counters.bump(C_CORE_TICK);
            ctx.resched(cpu);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Hand-built states on one core of two SMT siblings (pCPUs 0 and 1), driven as the
    //! engine drives a scheduler: a hook, then every pCPU it asked to reschedule picks,
    //! and the view follows the picks.
    use super::*;
    use crate::sched::eevdf::{Eevdf, YieldCounts};
    use crate::sched::fair::Tunables;
    use crate::sched::{RunState, SchedOut, Scheduler, TaskInfo};
    use crate::time::SimDuration;
    use crate::topology::{CpuSet, Topology};

    /// One core, two threads; task i: (vm, host thread, pinned pCPU).
    fn view(tasks: &[(u32, bool, usize)]) -> SchedView {
        SchedView {
            topo: Topology::new(1, 1, 2, 1),
            tasks: tasks
                .iter()
                .enumerate()
                .map(|(i, &(vm, host_thread, cpu))| TaskInfo {
                    vm,
                    index: i as u32,
                    affinity: CpuSet::parse(&cpu.to_string()).unwrap(),
                    weight: 256,
                    cap: 0,
                    class: None,
                    latency_vcpu: false,
                    host_thread,
                    rt: Default::default(),
                })
                .collect(),
            state: vec![RunState::Halted; tasks.len()],
            cpu_curr: vec![None; 2],
            nvms: tasks.iter().map(|t| t.0 + 1).max().unwrap_or(1),
        }
    }

    fn fair(mode: CoreSchedMode) -> Fair<Eevdf> {
        let policy = Eevdf {
            base_slice: SimDuration(750_000),
            pick_buddy: true,
            forfeit_on_yield: false,
            yields: YieldCounts::default(),
            period_floor: SimDuration(6_000_000),
            series: Default::default(),
            delay_dequeue: false,
        };
        let tun = Tunables {
            tick: SimDuration(4_000_000),
            migration_cost: SimDuration(500_000),
            group_per_vm: false,
            tunable_scaling: false,
            // The tests place each task on the pCPU they name; no fork balancing.
            fork_balance: false,
            root_host_threads: true,
            tick_grid: true,
            busy_factor: 32,
            wake_affine: true,
            wakee_pelt: false,
        };
        let mut f = Fair::new(policy, tun);
        f.core = Some(Box::new(CoreSched::new(mode)));
        f
    }

    /// Runs `hook` at `now`, then the reschedules it asked for (and those they ask for),
    /// updating the view as the engine would.
    fn drive(
        f: &mut Fair<Eevdf>,
        v: &mut SchedView,
        now: SimTime,
        hook: impl FnOnce(&mut Fair<Eevdf>, &mut SchedCtx),
    ) {
        let mut out = SchedOut {
            resched_pending: vec![false; 2],
            ..Default::default()
        };
        hook(
            f,
            &mut SchedCtx {
                now,
                view: v,
                out: &mut out,
            },
        );
        let mut queue = std::mem::take(&mut out.resched);
        let mut i = 0;
        while i < queue.len() {
            let cpu = queue[i];
            i += 1;
            let prev = v.cpu_curr[cpu as usize];
            let mut o = SchedOut {
                resched_pending: vec![false; 2],
                ..Default::default()
            };
            let next = f.pick_next(
                &mut SchedCtx {
                    now,
                    view: v,
                    out: &mut o,
                },
                cpu,
                prev,
            );
            if let Some(p) = prev {
                v.state[p as usize] = RunState::Runnable;
            }
            v.cpu_curr[cpu as usize] = next;
            if let Some(n) = next {
                v.state[n as usize] = RunState::Running(cpu);
            }
            queue.extend(o.resched);
        }
    }

    fn start(f: &mut Fair<Eevdf>, v: &mut SchedView) {
        drive(f, v, SimTime(0), Scheduler::init);
    }

    fn wake(f: &mut Fair<Eevdf>, v: &mut SchedView, t: TaskId, now: SimTime) {
        v.state[t as usize] = RunState::Runnable;
        drive(f, v, now, |f, ctx| Scheduler::wake(f, ctx, t));
    }

    fn counter(f: &Fair<Eevdf>, name: &str) -> u64 {
        let cs = f.core.as_ref().unwrap();
        cs.counters
            .list()
            .into_iter()
            .find(|c| c.0 == name)
            .unwrap()
            .1
    }

    /// Two VMs' vCPUs, one pinned to each sibling: the second to wake takes the core (ties
    /// go to the picking pCPU) and the first's sibling is forced idle, counted and timed.
    #[test]
    fn two_cookies_on_one_core_force_a_sibling_idle() {
        let mut v = view(&[(0, false, 0), (1, false, 1)]);
        let mut f = fair(CoreSchedMode::Vm);
        start(&mut f, &mut v);
        wake(&mut f, &mut v, 0, SimTime(0));
        assert_eq!(v.cpu_curr, vec![Some(0), None]);
        wake(&mut f, &mut v, 1, SimTime(1_000));
        assert_eq!(
            v.cpu_curr,
            vec![None, Some(1)],
            "pCPU 0 follows the new cookie"
        );
        assert!(f.check(&v).is_ok());
        assert_eq!(counter(&f, "core_forced_idle"), 1);
        assert_eq!(counter(&f, "core_resched_sibling"), 1);
        assert_eq!(counter(&f, "core_pick_follow_sibling"), 1);
        let fi = Scheduler::forced_idle_ns(&f, SimTime(11_000)).unwrap();
        assert_eq!(fi, vec![10_000, 0], "pCPU 0 forced idle since t = 1 us");
    }

    /// The same two vCPUs in one VM share a cookie under "vm" and run side by side; under
    /// "vcpu" each has its own and they cannot.
    #[test]
    fn one_vm_shares_a_core_under_vm_cookies_but_not_under_vcpu_cookies() {
        for (mode, both) in [(CoreSchedMode::Vm, true), (CoreSchedMode::Vcpu, false)] {
            let mut v = view(&[(0, false, 0), (0, false, 1)]);
            let mut f = fair(mode);
            start(&mut f, &mut v);
            wake(&mut f, &mut v, 0, SimTime(0));
            wake(&mut f, &mut v, 1, SimTime(1_000));
            let running = v.cpu_curr.iter().filter(|c| c.is_some()).count();
            assert_eq!(running, if both { 2 } else { 1 }, "{mode:?}");
            assert!(f.check(&v).is_ok());
            assert_eq!(
                counter(&f, "core_forced_idle"),
                u64::from(!both),
                "{mode:?}"
            );
        }
    }

    /// Host threads are untagged: two of them (of different VMs) co-run; an untagged one
    /// and a vCPU do not.
    #[test]
    fn untagged_host_threads_co_run_with_each_other_not_with_a_vcpu() {
        let mut v = view(&[(0, true, 0), (1, true, 1)]);
        let mut f = fair(CoreSchedMode::Vcpu);
        start(&mut f, &mut v);
        wake(&mut f, &mut v, 0, SimTime(0));
        wake(&mut f, &mut v, 1, SimTime(1_000));
        assert_eq!(v.cpu_curr, vec![Some(0), Some(1)]);
        assert_eq!(f.core.as_ref().unwrap().cookie, vec![0, 0]);

        let mut v = view(&[(0, true, 0), (0, false, 1)]);
        let mut f = fair(CoreSchedMode::Vm);
        start(&mut f, &mut v);
        wake(&mut f, &mut v, 0, SimTime(0));
        wake(&mut f, &mut v, 1, SimTime(1_000));
        assert_eq!(
            v.cpu_curr,
            vec![None, Some(1)],
            "the host thread is forced idle"
        );
        assert!(f.check(&v).is_ok());
    }

    /// During forced idle `min_vruntime_fi` stays where forced idle began, so the running
    /// cookie's vruntime grows against the waiting one's; the tick (task_tick_core)
    /// re-runs the core-wide pick and the waiting vCPU gets the core.
    #[test]
    fn the_tick_hands_the_core_to_the_forced_idle_sibling() {
        let mut v = view(&[(0, false, 0), (1, false, 1)]);
        let mut f = fair(CoreSchedMode::Vm);
        start(&mut f, &mut v);
        wake(&mut f, &mut v, 0, SimTime(0));
        wake(&mut f, &mut v, 1, SimTime(1_000));
        assert_eq!(v.cpu_curr, vec![None, Some(1)]);
        drive(&mut f, &mut v, SimTime(4_001_000), |f, ctx| {
            Scheduler::timer(f, ctx, 1)
        });
        assert_eq!(counter(&f, "core_tick_forceidle_resched"), 1);
        assert_eq!(
            v.cpu_curr,
            vec![Some(0), None],
            "task 0 takes the core back"
        );
        assert!(f.check(&v).is_ok());
        let fi = Scheduler::forced_idle_ns(&f, SimTime(4_001_000)).unwrap();
        assert_eq!(fi, vec![4_000_000, 0]);
    }

    /// The invariant itself: two cookies running on one core at once is reported.
    #[test]
    fn check_reports_two_cookies_on_one_core() {
        let mut v = view(&[(0, false, 0), (1, false, 1), (0, true, 1)]);
        let mut f = fair(CoreSchedMode::Vm);
        start(&mut f, &mut v);
        v.cpu_curr = vec![Some(0), Some(1)];
        let err = f.check(&v).unwrap_err();
        assert!(err.contains("core 0"), "{err}");
        v.cpu_curr = vec![Some(0), Some(2)];
        assert!(f.check(&v).is_err(), "an untagged task beside a tagged one");
        v.cpu_curr = vec![Some(0), None];
        assert!(f.check(&v).is_ok());
    }
}
