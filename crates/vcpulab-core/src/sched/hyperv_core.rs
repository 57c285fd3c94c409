//! `hyperv-core` — the Hyper-V hypervisor's core scheduler: a physical core runs virtual
//! processors of one VM at a time; its SMT siblings run a gang of that VM's VPs or idle.
//!
//! ## Policy (what Hyper-V does, as far as we model it)
//! Introduced in Windows Server 2016 (and the default from Windows Server 2019) to close
//! SMT side channels between VMs, the core scheduler makes the physical core, not the
//! logical processor (LP), the unit the hypervisor hands out: a core never runs VPs of two
//! different VMs at the same time. The documentation says it otherwise keeps the classic
//! scheduler's fair share; so this model reuses `hyperv-classic`'s bookkeeping (per-VP
//! virtual time at the VM's weight, ready VPs ordered by it) at core granularity:
//!
//! - Every core has an owner VM or none. An LP runs only VPs of its core's owner; when the
//!   owner has no ready VP for it, the LP idles even if VPs of other VMs wait (the sibling
//!   cost of core scheduling).
//! - Core slice: a core is owned for at most one `timeslice` while any VP allowed on it
//!   waits. At its end, the core goes to the VM of the VP with the lowest virtual time among
//!   the ready VPs allowed on the core and the VPs running on it (running ones win ties).
//!   Every sibling then reschedules: the old VPs rejoin the ready lists and each sibling
//!   takes the lowest-virtual-time ready VP of the new owner, or idles. With nothing
//!   waiting the slice renews. A waking VP with no idle place ends the slice of the core
//!   running the VP furthest ahead in virtual time, under classic's wake-up preemption
//!   rule (`wakeup_granularity`); the core then changes hands by the same rule.
//! - A waking VP (or one a core switch left ready) goes to an idle core with no owner,
//!   which its VM then owns (fully idle cores first, "most processing power", as in
//!   classic); failing that to an idle sibling on a core its VM owns; otherwise it waits.
//! - When the last busy sibling of a core halts and its owner has nothing ready for it, the
//!   core is released and handed to the VM of the lowest-virtual-time ready VP allowed
//!   there, or goes idle without an owner.
//! - No SMT (`threads_per_core = 1`): the hypervisor uses classic behaviour whatever type
//!   was configured, and its boot event ID 2 reports 1 ("classic, SMT off"). This
//!   scheduler then runs the `hyperv-classic` code unchanged (same decisions, same
//!   results) and reports `hypervisor_scheduler_type = 1`, `fell_back_to_classic = 1`.
//!   With SMT it reports 3 (core) and `fell_back_to_classic = 0`.
//!
//! Counters: the boot-event type and fallback flag, then the classic scheduler's counters
//! (non-zero only after a fallback), then the core-mode branches (`core_*`).
//! `core_pick_sibling_idle_gang` counts LPs left idle although a VP of another VM was ready
//! for them: the throughput core scheduling gives up for isolation.
//!
//! SMT throughput is the engine's: with n > 1 siblings of a core busy each runs at
//! `[host] smt_throughput / n` of a lone thread (default 1.25 when `threads_per_core > 1`;
//! a scenario may set it). A VP alone on its core runs at full speed.
//!
//! ## Parameters
//! - `timeslice` (duration, default 10 ms): the longest a core stays with one VM while a
//!   VP allowed on it waits.
//! - `wakeup_granularity` (duration, default 1 ms): as in `hyperv-classic`.
//!
//! Both are `hyperv-classic`'s parameters, which a fallback uses unchanged.
//!
//! ## Sources
//! Microsoft Learn, "Manage Hyper-V hypervisor scheduler types" (core scheduler: a core
//! never runs VPs of different VMs at once, sibling LPs may idle; behaves as classic when
//! SMT is off or absent; boot event ID 2: 1 = classic SMT off, 2 = classic, 3 = core,
//! 4 = root) and "About Hyper-V hypervisor scheduler type selection" (VPs of a VM confined
//! to the siblings of a core for side-channel isolation; default from Windows Server 2019);
//! seed 001 (a host without SMT configured for Core reports 0x1).
//!
//! ## Assumptions where the documentation is silent
//! - Any VPs of the owner VM may share a core. Real Hyper-V pairs the guest's virtual SMT
//!   siblings (a VM with `HwThreadCountPerCore = 2` sees VP pairs); scenarios declare no
//!   guest SMT topology, so we use the most permissive grouping: the throughput cost we
//!   show is a lower bound of the isolation's.
//! - Slice length (10 ms), per-VP weight, and the shared ready lists are as in classic.
//! - Core slices are per core and not aligned across cores.
//!
//! ## Deviations
//! - The root partition's own VPs (which the core scheduler also confines) are not modelled.
//! - CPU reserve and cap are not modelled.

use super::hyperv_classic::{self, HyperVClassic, Vps, TYPE_CLASSIC_SMT_OFF, TYPE_CORE};
use super::{Counters, CpuId, ParamInfo, Params, SchedCtx, SchedView, Scheduler, TaskId};
use crate::time::SimDuration;

pub const DESCRIPTION: &str =
    "Hyper-V core scheduler: a core runs VPs of one VM at a time (siblings may idle); classic behaviour without SMT";

/// The same parameters as `hyperv-classic` (a fallback runs the classic scheduler).
pub const PARAMS: &[ParamInfo] = hyperv_classic::PARAMS;

super::counters::declare_counters! {
    WAKE_IDLE_CORE => "core_wake_idle_core",
    WAKE_OWNED_SIBLING => "core_wake_owned_sibling",
    WAKE_PREEMPT => "core_wake_preempt",
    WAKE_QUEUED => "core_wake_queued",
    SLICE_RENEW => "core_slice_renew",
    ROTATE_SAME_VM => "core_rotate_same_vm",
    ROTATE_OTHER_VM => "core_rotate_other_vm",
    PICK_OWNER_VP => "core_pick_owner_vp",
    PICK_NEW_OWNER => "core_pick_new_owner",
    PICK_SIBLING_IDLE_GANG => "core_pick_sibling_idle_gang",
    PICK_WENT_IDLE => "core_pick_went_idle",
    BLOCK => "core_block",
}

/// Checks the core scheduler's promise on a view of the host: no physical core runs VPs of
/// two different VMs at the same time. Usable on any scheduler's placement.
pub fn check_gangs(view: &SchedView) -> Result<(), String> {
    let topo = &view.topo;
    for core in 0..topo.ncores() as u32 {
        let mut seen: Option<(usize, TaskId)> = None;
        for cpu in topo.core_cpus(core) {
            let Some(t) = view.cpu_curr[cpu] else {
                continue;
            };
            match seen {
                Some((c0, t0)) if view.tasks[t0 as usize].vm != view.tasks[t as usize].vm => {
                    return Err(format!(
                        "core {core} runs VMs {} and {} at once (task {t0} on pCPU {c0}, task {t} on pCPU {cpu})",
                        view.tasks[t0 as usize].vm, view.tasks[t as usize].vm
                    ));
                }
                Some(_) => {}
                None => seen = Some((cpu, t)),
            }
        }
    }
    Ok(())
}

pub struct HyperVCore {
    classic: HyperVClassic,
    /// False after init on a host without SMT: everything goes to `classic`.
    core_mode: bool,
    timeslice: SimDuration,
    counters: Counters<NCOUNTERS>,
    vps: Option<Vps>,
    // per core
    owner: Vec<Option<u32>>,
    // per LP
    core_of: Vec<u32>,
    claimed: Vec<bool>,
    rotate: Vec<bool>,
}

impl HyperVCore {
    pub fn new(p: &Params) -> HyperVCore {
        let classic = HyperVClassic::new(p);
        HyperVCore {
            timeslice: classic.timeslice(),
            classic,
            core_mode: false,
            counters: Counters::new(COUNTER_NAMES),
            vps: None,
            owner: vec![],
            core_of: vec![],
            claimed: vec![],
            rotate: vec![],
        }
    }

    fn vps(&mut self) -> &mut Vps {
        self.vps.as_mut().expect("init ran")
    }

    fn siblings(ctx: &SchedCtx, core: u32) -> std::ops::Range<usize> {
        ctx.view.topo.core_cpus(core)
    }

    /// The core's timer lives on its first LP.
    fn leader(ctx: &SchedCtx, core: u32) -> CpuId {
        Self::siblings(ctx, core).start as CpuId
    }

    fn free(&self, ctx: &SchedCtx, cpu: CpuId) -> bool {
        ctx.is_idle(cpu) && !self.claimed[cpu as usize]
    }

    fn dispatch(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: CpuId) {
        let now = ctx.now;
        self.vps().start(t, cpu, now);
    }

    /// Finds an idle LP for the ready VP `t` and asks it to reschedule: an idle core with
    /// no owner (which `t`'s VM then owns), else an idle sibling on a core its VM owns.
    fn place(&mut self, ctx: &mut SchedCtx, t: TaskId) -> Option<usize> {
        let vps = self.vps.as_ref().expect("init ran");
        let ti = t as usize;
        let vm = vps.vm[ti];
        let from = vps.last[ti].unwrap_or(vps.ideal[ti]) as usize;
        let n = ctx.ncpus();
        let order = (0..n).map(|off| ((from + off) % n) as CpuId);
        let mut choice = None;
        for c in order.clone() {
            let core = self.core_of[c as usize];
            if self.owner[core as usize].is_none()
                && ctx.allowed(t, c)
                && Self::siblings(ctx, core).all(|s| self.free(ctx, s as CpuId))
            {
                choice = Some((c, WAKE_IDLE_CORE));
                break;
            }
        }
        if choice.is_none() {
            choice = order
                .clone()
                .find(|&c| {
                    self.owner[self.core_of[c as usize] as usize] == Some(vm)
                        && ctx.allowed(t, c)
                        && self.free(ctx, c)
                })
                .map(|c| (c, WAKE_OWNED_SIBLING));
        }
        let (cpu, counter) = choice?;
        let core = self.core_of[cpu as usize];
        if counter == WAKE_IDLE_CORE {
            self.owner[core as usize] = Some(vm);
            let now = ctx.now;
            ctx.set_timer(Self::leader(ctx, core), now + self.timeslice);
        }
        self.claimed[cpu as usize] = true;
        ctx.resched(cpu);
        Some(counter)
    }

    /// Ends the core's slice: charges its running VPs and gives the core to the VM of the
    /// lowest virtual time among the ready VPs allowed on it and the VPs running on it
    /// (running VPs win ties: no switch for nothing). Every sibling then reschedules.
    /// Returns false (and renews the slice) when no VP allowed on the core is waiting.
    fn rotate_core(&mut self, ctx: &mut SchedCtx, core: u32) -> bool {
        let now = ctx.now;
        let leader = Self::leader(ctx, core);
        let sibs = Self::siblings(ctx, core);
        let running: Vec<TaskId> = sibs.clone().filter_map(|s| ctx.curr(s as CpuId)).collect();
        for &r in &running {
            self.vps().charge(r, now);
        }
        ctx.set_timer(leader, now + self.timeslice);
        let vps = self.vps.as_ref().expect("init ran");
        let allowed_here = |t: TaskId| sibs.clone().any(|s| ctx.allowed(t, s as CpuId));
        let Some((qvt, _, qt)) = vps.best(allowed_here) else {
            return false;
        };
        let mut winner = (qvt, 1u8, qt);
        for &r in &running {
            winner = winner.min((vps.vt[r as usize], 0, r));
        }
        let new_owner = vps.vm[winner.2 as usize];
        self.counters
            .bump(if Some(new_owner) == self.owner[core as usize] {
                ROTATE_SAME_VM
            } else {
                ROTATE_OTHER_VM
            });
        self.owner[core as usize] = Some(new_owner);
        for s in sibs {
            self.rotate[s] = true;
            if ctx.is_idle(s as CpuId) {
                self.claimed[s] = true;
            }
            ctx.resched(s as CpuId);
        }
        true
    }

    /// Chooses what `cpu` runs now that its previous VP (if any) is back in the ready lists.
    fn select(&mut self, ctx: &mut SchedCtx, cpu: CpuId) -> Option<TaskId> {
        let core = self.core_of[cpu as usize];
        if let Some(v) = self.owner[core as usize] {
            let vps = self.vps.as_ref().expect("init ran");
            if let Some((_, _, n)) = vps.best_of_vm(v, |t| ctx.allowed(t, cpu)) {
                self.counters.bump(PICK_OWNER_VP);
                self.dispatch(ctx, n, cpu);
                return Some(n);
            }
            let others_free = Self::siblings(ctx, core)
                .filter(|&s| s != cpu as usize)
                .all(|s| self.free(ctx, s as CpuId));
            if !others_free {
                // A sibling runs (or is about to run) the owner's VPs: this LP idles.
                let other_ready = vps.best(|t| ctx.allowed(t, cpu)).is_some();
                self.counters.bump(if other_ready {
                    PICK_SIBLING_IDLE_GANG
                } else {
                    PICK_WENT_IDLE
                });
                return None;
            }
            // Nothing else runs on the core: release it.
            self.owner[core as usize] = None;
        }
        let leader = Self::leader(ctx, core);
        let best = self.vps().best(|t| ctx.allowed(t, cpu));
        match best {
            Some((_, _, n)) => {
                let vm = self.vps().vm[n as usize];
                self.owner[core as usize] = Some(vm);
                self.counters.bump(PICK_NEW_OWNER);
                let now = ctx.now;
                ctx.set_timer(leader, now + self.timeslice);
                self.dispatch(ctx, n, cpu);
                // Let the idle siblings fill up with the new owner's VPs.
                for s in Self::siblings(ctx, core) {
                    if s != cpu as usize && self.free(ctx, s as CpuId) {
                        self.claimed[s] = true;
                        ctx.resched(s as CpuId);
                    }
                }
                Some(n)
            }
            None => {
                self.counters.bump(PICK_WENT_IDLE);
                ctx.cancel_timer(leader);
                None
            }
        }
    }
}

impl Scheduler for HyperVCore {
    fn init(&mut self, ctx: &mut SchedCtx) {
        self.core_mode = ctx.view.topo.threads_per_core > 1;
        if !self.core_mode {
            // No SMT: classic behaviour, reported as boot event type 1.
            self.classic.init(ctx);
            debug_assert_eq!(self.classic.scheduler_type(), TYPE_CLASSIC_SMT_OFF);
            return;
        }
        let topo = &ctx.view.topo;
        let n = topo.ncpus();
        self.core_of = topo.cpus.iter().map(|c| c.core).collect();
        self.owner = vec![None; topo.ncores()];
        self.claimed = vec![false; n];
        self.rotate = vec![false; n];
        self.vps = Some(Vps::new(ctx.view, self.timeslice));
    }

    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        if !self.core_mode {
            return self.classic.wake(ctx, t);
        }
        let now = ctx.now;
        let vps = self.vps.as_mut().expect("init ran");
        vps.wake_vt(ctx.view, t, now);
        vps.enqueue(t);
        if let Some(counter) = self.place(ctx, t) {
            self.counters.bump(counter);
            return;
        }
        // No idle place: preempt the core whose running VP is furthest ahead in virtual
        // time, if more than the wake-up granularity ahead of this one. The core then goes
        // to the lowest virtual time, as at a slice end.
        let vps = self.vps.as_ref().expect("init ran");
        let mine = vps.vt[t as usize] + vps.scaled(t, self.classic.wakeup_granularity().ns());
        let victim = (0..ctx.ncpus() as CpuId)
            .filter(|&c| ctx.allowed(t, c) && !self.rotate[c as usize])
            .filter_map(|c| ctx.curr(c).map(|r| (vps.running_vt(r, now), c)))
            .filter(|&(v, _)| v > mine)
            .max_by_key(|&(v, c)| (v, std::cmp::Reverse(c)));
        match victim {
            Some((_, c)) => {
                self.counters.bump(WAKE_PREEMPT);
                let core = self.core_of[c as usize];
                self.rotate_core(ctx, core);
            }
            None => self.counters.bump(WAKE_QUEUED),
        }
    }

    fn block(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        if !self.core_mode {
            return self.classic.block(ctx, cpu, t);
        }
        self.counters.bump(BLOCK);
        let now = ctx.now;
        self.vps().charge(t, now);
    }

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        if !self.core_mode {
            return self.classic.pick_next(ctx, cpu, prev);
        }
        let c = cpu as usize;
        self.claimed[c] = false;
        let rotating = std::mem::take(&mut self.rotate[c]);
        let now = ctx.now;
        if let Some(p) = prev {
            if !rotating {
                return Some(p); // not our request: keep running
            }
            let vps = self.vps();
            vps.charge(p, now);
            vps.enqueue(p);
        }
        let next = self.select(ctx, cpu);
        if let Some(p) = prev.filter(|&p| next != Some(p)) {
            // The core switched away from `p`: it may find an idle place elsewhere.
            self.place(ctx, p);
        }
        next
    }

    fn timer(&mut self, ctx: &mut SchedCtx, cpu: CpuId) {
        if !self.core_mode {
            return self.classic.timer(ctx, cpu);
        }
        let core = self.core_of[cpu as usize];
        if self.owner[core as usize].is_none() {
            return; // the core was released; its timer is stale
        }
        if !self.rotate_core(ctx, core) {
            self.counters.bump(SLICE_RENEW);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let classic = self.classic.counters();
        let ty = if self.core_mode {
            TYPE_CORE
        } else {
            TYPE_CLASSIC_SMT_OFF
        };
        let mut out = vec![
            ("hypervisor_scheduler_type", ty),
            ("fell_back_to_classic", (!self.core_mode) as u64),
        ];
        out.extend(classic.into_iter().skip(1)); // classic's own type counter
        out.extend(self.counters.list());
        out
    }

    /// As classic, with two slices per turn: a VP may first wait for a core slice to end,
    /// then for its VM to win the core.
    fn starvation_bound(&self, view: &SchedView) -> Option<SimDuration> {
        Some(super::proportional_share_bound(
            view,
            SimDuration(self.timeslice.ns() * 2),
        ))
    }

    /// No core runs VPs of two VMs, and every busy core runs its owner's VPs.
    fn check(&self, view: &SchedView) -> Result<(), String> {
        check_gangs(view)?;
        if !self.core_mode {
            return Ok(());
        }
        for (cpu, cur) in view.cpu_curr.iter().enumerate() {
            if let Some(t) = cur {
                let core = self.core_of[cpu] as usize;
                let vm = view.tasks[*t as usize].vm;
                if self.owner[core] != Some(vm) {
                    return Err(format!(
                        "pCPU {cpu} runs a VP of VM {vm} but its core {core} is owned by {:?}",
                        self.owner[core]
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `hyperv-core`: slice ends (`timeslice`).
impl super::Registered for HyperVCore {
    type Sched = HyperVCore;
    const NAME: &'static str = "hyperv-core";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> HyperVCore {
        HyperVCore::new(p)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(p.duration("timeslice"))
    }
}
