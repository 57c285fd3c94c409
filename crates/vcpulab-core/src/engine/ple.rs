//! KVM's pause-loop exiting (see `crate::kvm`): a vCPU spinning longer than its PLE
//! window exits to KVM, which grows the window and runs `kvm_vcpu_on_spin`, a directed
//! yield to another vCPU of the VM; the exit costs `ple_exit_cost` of the pCPU. Also the
//! per-vCPU KVM state every dispatch touches, and the PLE streak and boost metrics.
//! And halt polling (see `crate::kvm`): KVM's host-side poll of a halting vCPU and the
//! guest haltpoll governor's poll in the guest idle loop.
//!
//! ## How host polling is modelled
//! A vCPU that halts leaves its pCPU as before (the host scheduler sees it block); if
//! its window is above 0 and the scheduler then leaves the pCPU idle
//! (`single_task_running`), the pCPU polls for the vCPU: it counts as busy (the clock
//! and SMT model see a running core) and nothing else runs there. The poll ends when
//! the vCPU is woken (a successful poll: its wake-up skips `halt_wakeup_cost`), when
//! the window runs out, or at once when the scheduler puts another task on the pCPU. If
//! the scheduler picks another task at the halt itself, the poll is attempted and fails
//! at its first check, as upstream. Deviations: the poll's pCPU time is not charged to
//! the vCPU by the host scheduler (the kernel charges it to the vCPU thread; windows are
//! at most hundreds of microseconds), and a caught wake-up still goes through the
//! scheduler's wake path, which places the vCPU as it decides (normally on its idle
//! pCPU, at once).
//!
//! A poll's end by its window needs an event only when the clock model is on (the core
//! stops counting as busy then). Without it the poll is settled lazily, at the next wake
//! of its vCPU, dispatch on its pCPU or metrics reset, as having ended at
//! `min(now, until)`: no event is added, so a [kvm] scenario without turbo or SMT runs
//! exactly the trajectory it ran before halt polling was modelled.

use super::queue::EventKind;
use super::Sim;
use crate::kvm::{
    adjust_halt_poll, draw_cost, grow_window, guest_adjust_limit, guest_should_poll, GuestHaltPoll,
    GuestIdle, HaltPoll, IpiContext, KvmSpec, PleHandler, Tier, Vendor,
};
use crate::metrics::Histogram;
use crate::model::Model;
use crate::rng::Rng;
use crate::sched::{CpuId, RunState, Scheduler, TaskId, YieldRequest, YieldResult};
use crate::time::{SimDuration, SimTime};
use crate::workload::Mode;
use std::collections::BTreeMap;

/// Per-vCPU state of the KVM layer (see `crate::kvm`). In declaration order: the flags
/// and `boosted_at`, which every dispatch touches, first.
#[derive(Clone, Default)]
#[repr(C)]
pub(super) struct KvmTask {
    /// Descheduled while runnable (4.15 `preempted`).
    pub(super) preempted: bool,
    /// 5.3+ `ready`: preempted, or woken from a halt and not yet running.
    pub(super) ready: bool,
    /// Guest mode when it was last descheduled (`preempted_in_kernel`).
    pub(super) in_kernel: bool,
    pub(super) in_spin_loop: bool,
    pub(super) dy_eligible: bool,
    /// This run (dispatch) saw a PLE exit.
    pub(super) ple_in_run: bool,
    pub(super) boosted_at: Option<SimTime>,
    /// Current PLE window, cycles.
    pub(super) window: u64,
    /// Switched out in the guest (or inside an exit) and not back in the guest since: its
    /// next dispatch pays the world switch (`world_switch_cost`).
    pub(super) switched_out_in_guest: bool,
    /// Start of the current PLE window (a spin, or the time after the last exit).
    pub(super) ple_from: SimTime,
    pub(super) streak: u64,
}

/// Ends a vCPU's PLE streak, if one is open, counting its length in `lengths`.
pub(super) fn close_streak(streak: &mut u64, lengths: &mut BTreeMap<u64, u64>) {
    if *streak > 0 {
        *lengths.entry(*streak).or_default() += 1;
        *streak = 0;
    }
}

/// One vCPU's halt-polling state and counters (host and guest side).
#[derive(Clone, Default)]
pub(super) struct PollTask {
    /// KVM's `vcpu->halt_poll_ns`.
    pub(super) window: u64,
    /// When the current KVM-visible halt began (None when not halted, or halted by a
    /// Kemari pause).
    pub(super) halt_start: Option<SimTime>,
    /// The window this halt polls with (clamped to the ceiling).
    pub(super) halt_window: u64,
    /// This halt's wake-up came while the host polled (no block, no wake-up cost).
    pub(super) caught: bool,
    /// When it was last woken (for the wake-up latency).
    pub(super) woken_at: Option<SimTime>,
    /// Guest governor: the CPU's `poll_limit_ns` and how its last idle ended.
    pub(super) guest_limit: u64,
    pub(super) guest_last: GuestIdle,
    /// A guest poll is open until then; `guest_since`: its running stretch began then.
    pub(super) guest_until: Option<SimTime>,
    pub(super) guest_since: Option<SimTime>,
    /// The coming halt is the guest idle loop's (the governor reflects on it; a pv_wait
    /// halt is not cpuidle's).
    pub(super) idle_halt: bool,
    pub(super) c: PollCounters,
}

#[derive(Clone, Copy, Default)]
pub(super) struct PollCounters {
    pub(super) polls: u64,
    pub(super) successes: u64,
    pub(super) poll_ns: u64,
    pub(super) guest_polls: u64,
    pub(super) guest_successes: u64,
    pub(super) guest_poll_ns: u64,
}

/// A pCPU polling for a halted vCPU.
#[derive(Clone, Copy, Debug)]
pub(super) struct CpuPoll {
    pub(super) task: TaskId,
    pub(super) since: SimTime,
    pub(super) until: SimTime,
}

/// One VM's decisions of the IPI-aware directed yield (`[kvm] ipi_aware_yield`), one
/// counter per branch: unicast IPIs tracked from its vCPUs, EOIs that cleared a
/// sender's pending IPI, successful boosts by the tier that admitted the target, vCPUs
/// skipped by the tiers, and second (relaxed) walks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct IpiAwareCounts {
    pub(super) ipis_tracked: u64,
    pub(super) eoi_cleared: u64,
    pub(super) boost_ipi_receiver: u64,
    pub(super) boost_pending_interrupt: u64,
    pub(super) boost_preempted: u64,
    pub(super) boost_relaxed: u64,
    pub(super) skip_not_preempted: u64,
    pub(super) skip_user_mode: u64,
    pub(super) relaxed_walks: u64,
}

/// The KVM layer's state beyond each vCPU's own.
pub(super) struct KvmState {
    /// KVM with PLE on; None: no pause-loop exits (the per-vCPU state stays cold).
    pub(super) spec: Option<KvmSpec>,
    /// Per VM: `kvm->last_boosted_vcpu`, the index of the last boosted vCPU (under the 2024
    /// bug, the walk offset at which it was found; see `crate::kvm`).
    last_boosted: Vec<u32>,
    /// Per task (vCPU): PLE streak lengths -> number of streaks of that length.
    pub(super) streaks: Vec<BTreeMap<u64, u64>>,
    /// Per task (vCPU): time from a successful directed yield to it running.
    pub(super) boost_to_run: Vec<Histogram>,
    /// Spinners that left the PLE handler; their spin-loop flags clear if still running.
    pub(super) spin_loop_exits: Vec<u32>,
    /// KVM's halt-polling parameters: Some whenever the scenario has [kvm] (with or
    /// without PLE). Everything below is empty without it.
    pub(super) halt_poll: Option<HaltPoll>,
    /// Per task (vCPUs first, as tasks are).
    pub(super) poll: Vec<PollTask>,
    /// Per pCPU: the poll running there.
    /// Whether halt polling is modelled at all (a `[kvm]` table): the hooks' fast test.
    pub(super) polling: bool,
    pub(super) cpu_poll: Vec<Option<CpuPoll>>,
    /// Per pCPU: a vCPU that halted there and polls if its reschedule leaves it idle.
    pub(super) poll_pending: Vec<Option<TaskId>>,
    /// Per VM: its guest haltpoll governor (which also turns host polling off for it).
    pub(super) guest_poll: Vec<Option<GuestHaltPoll>>,
    /// Per VM: wake-up latency of its vCPUs (ns).
    pub(super) wake_latency: Vec<Histogram>,
    /// The IPI-aware directed yield is on (with PLE): the IPI hooks' fast test.
    pub(super) ipi_tracking: bool,
    /// Per task: its IPI tracking (empty when off).
    pub(super) ipi: Vec<IpiContext>,
    /// Per VM: the IPI-aware handler's decisions (empty when off).
    pub(super) ipi_counts: Vec<IpiAwareCounts>,
    /// Per task: the streams its PLE exit costs and wake-up costs are drawn from
    /// (`["kvm", "ple_exit", task]`, `["kvm", "halt_wakeup", task]`); a constant cost draws
    /// nothing from them.
    exit_rngs: Vec<Rng>,
    wake_rngs: Vec<Rng>,
    /// Per VM, the user-space "nice-boost" or "migrate" handler's state (empty under
    /// other handlers).
    user_boost: Vec<UserBoost>,
    /// Per task, under "migrate": the affinity a pinned vCPU gets back when its boost ends.
    migrate_base: Vec<Option<crate::topology::CpuSet>>,
    /// `world_switch_cost` when a scenario's [kvm] sets it above 0, with a stream per task
    /// (`["kvm", "world_switch", task]`).
    pub(super) world_switch: Option<crate::workload::Dist>,
    world_switch_rngs: Vec<Rng>,
}

/// One VM's boost under `ple_handler = "nice-boost"`, as the harness keeps it
/// (crates/vcpulab-kvm `PleState`): the last boosted vCPU (its index in the VM) and the
/// active boost (the vCPU's task) with its number, which its end event must match.
#[derive(Clone, Copy, Default)]
pub(super) struct UserBoost {
    last: Option<u32>,
    active: Option<TaskId>,
    gen: u32,
}

impl KvmState {
    pub(super) fn new(model: &Model, tasks: usize, seed: u64) -> KvmState {
        let halt_poll = model.kvm.as_ref().map(|k| k.halt_poll.clone());
        let on = halt_poll.is_some();
        let ncpus = model.host.topo.ncpus();
        let world_switch = model
            .kvm
            .as_ref()
            .map(|k| k.world_switch_cost.clone())
            .filter(|d| *d != crate::workload::Dist::Fixed(0.0));
        let ipi_tracking = model
            .kvm
            .as_ref()
            .is_some_and(|k| k.ple && k.ipi_aware.is_some());
        KvmState {
            ipi_tracking,
            ipi: if ipi_tracking {
                vec![IpiContext::default(); tasks]
            } else {
                Vec::new()
            },
            ipi_counts: if ipi_tracking {
                vec![IpiAwareCounts::default(); model.vms.len()]
            } else {
                Vec::new()
            },
            spec: model.kvm.clone().filter(|k| k.ple),
            last_boosted: vec![0; model.vms.len()],
            streaks: vec![BTreeMap::new(); tasks],
            boost_to_run: vec![Histogram::default(); tasks],
            spin_loop_exits: Vec::new(),
            halt_poll,
            polling: on,
            poll: if on {
                vec![PollTask::default(); tasks]
            } else {
                Vec::new()
            },
            cpu_poll: if on { vec![None; ncpus] } else { Vec::new() },
            poll_pending: if on { vec![None; ncpus] } else { Vec::new() },
            guest_poll: model.vms.iter().map(|v| v.haltpoll.clone()).collect(),
            wake_latency: if on {
                vec![Histogram::default(); model.vms.len()]
            } else {
                Vec::new()
            },
            user_boost: match model.kvm.as_ref().map(|k| k.handler) {
                Some(PleHandler::NiceBoost { .. } | PleHandler::Migrate { .. }) => {
                    vec![UserBoost::default(); model.vms.len()]
                }
                _ => Vec::new(),
            },
            migrate_base: match model.kvm.as_ref().map(|k| k.handler) {
                Some(PleHandler::Migrate { .. }) => vec![None; tasks],
                _ => Vec::new(),
            },
            world_switch_rngs: streams(world_switch.is_some(), seed, "world_switch", tasks),
            world_switch,
            exit_rngs: streams(on, seed, "ple_exit", tasks),
            wake_rngs: streams(on, seed, "halt_wakeup", tasks),
        }
    }
}

/// One seeded stream per task for a kind of KVM cost (none without `[kvm]`).
fn streams(on: bool, seed: u64, kind: &str, tasks: usize) -> Vec<Rng> {
    if !on {
        return Vec::new();
    }
    (0..tasks)
        .map(|t| Rng::derive(seed, &["kvm", kind, &t.to_string()]))
        .collect()
}

impl<S: Scheduler> Sim<'_, S> {
    // The engine calls these halt-polling hooks on its hot paths (halt, wake, dispatch,
    // reschedule). Without `[kvm]` each is a no-op; the inlined flag test keeps that
    // case at one load and branch instead of a call (callgrind: rr P=64/V=512 had gone
    // 946.6 -> 1005.7 instructions per event with the calls).
    #[inline(always)]
    pub(super) fn begin_halt(&mut self, t: TaskId, cpu: CpuId) {
        if self.st.kvm.polling {
            self.begin_halt_polling(t, cpu);
        }
    }

    #[inline(always)]
    pub(super) fn settle_poll(&mut self, cpu: CpuId) {
        if self.st.kvm.polling {
            self.settle_poll_polling(cpu);
        }
    }

    #[inline(always)]
    pub(super) fn poll_timeout(&mut self, cpu: CpuId) {
        if self.st.kvm.polling {
            self.poll_timeout_polling(cpu);
        }
    }

    #[inline(always)]
    pub(super) fn poll_yields_cpu(&mut self, cpu: CpuId) {
        if self.st.kvm.polling {
            self.poll_yields_cpu_polling(cpu);
        }
    }

    #[inline(always)]
    pub(super) fn poll_catches_wake(&mut self, t: TaskId) {
        if self.st.kvm.polling {
            self.poll_catches_wake_polling(t);
        }
    }

    #[inline(always)]
    pub(super) fn end_halt(&mut self, t: TaskId) -> SimDuration {
        if self.st.kvm.polling {
            self.end_halt_polling(t)
        } else {
            SimDuration::ZERO
        }
    }

    #[inline(always)]
    pub(super) fn record_wake_latency(&mut self, t: TaskId) {
        if self.st.kvm.polling {
            self.record_wake_latency_polling(t);
        }
    }

    #[inline(always)]
    pub(super) fn guest_idle_polls(&mut self, t: TaskId) -> bool {
        if self.st.kvm.polling {
            self.guest_idle_polls_polling(t)
        } else {
            false
        }
    }

    #[inline(always)]
    pub(super) fn guest_poll_woken(&mut self, t: TaskId) -> bool {
        if self.st.kvm.polling {
            self.guest_poll_woken_polling(t)
        } else {
            false
        }
    }

    #[inline(always)]
    pub(super) fn pause_guest_poll(&mut self, t: TaskId) {
        if self.st.kvm.polling {
            self.pause_guest_poll_polling(t);
        }
    }

    /// Whether `cpu` polls for a halted vCPU (then it counts busy for the clock and SMT
    /// model, as the invariant checker requires).
    #[inline(always)]
    pub(super) fn cpu_polls(&self, cpu: CpuId) -> bool {
        self.st.kvm.polling && matches!(self.st.kvm.cpu_poll.get(cpu as usize), Some(Some(_)))
    }

    /// A vCPU of a KVM VM (not a host thread).
    #[inline]
    fn kvm_vcpu(&self, t: TaskId) -> bool {
        !self.st.kvm.poll.is_empty() && t < self.st.n_vcpu_tasks
    }

    /// `kvm_vcpu_halt` begins: vCPU `t` just left `cpu` halted. Records the halt and, if
    /// its window is above 0, asks for a poll once the pCPU's reschedule is known.
    #[inline(never)]
    fn begin_halt_polling(&mut self, t: TaskId, cpu: CpuId) {
        if !self.kvm_vcpu(t) || self.vcpu_paused(t) {
            return;
        }
        let now = self.st.now;
        let vm = self.st.tasks[t as usize].vm as usize;
        let host_polls = self.st.kvm.guest_poll[vm].is_none();
        let max = self.st.kvm.halt_poll.as_ref().map_or(0, |h| h.max_ns);
        let p = &mut self.st.kvm.poll[t as usize];
        if let Some(since) = p.guest_since.take() {
            p.c.guest_poll_ns += now.since(since).ns();
        }
        p.guest_until = None;
        p.window = p.window.min(max);
        p.halt_window = if host_polls { p.window } else { 0 };
        p.halt_start = Some(now);
        p.caught = false;
        if p.halt_window > 0 {
            self.st.kvm.poll_pending[cpu as usize] = Some(t);
        }
    }

    /// After `cpu`'s reschedule: starts the poll a halt there asked for if nothing else
    /// runs on it, or counts a poll that stopped at its first check.
    #[inline(never)]
    fn settle_poll_polling(&mut self, cpu: CpuId) {
        let Some(slot) = self.st.kvm.poll_pending.get_mut(cpu as usize) else {
            return;
        };
        let Some(t) = slot.take() else {
            return;
        };
        if self.view.state[t as usize] != RunState::Halted || self.st.kvm.poll[t as usize].caught {
            return; // already woken (the wake counted the poll)
        }
        let now = self.st.now;
        if self.st.cpus[cpu as usize].curr != super::NONE {
            self.st.kvm.poll[t as usize].c.polls += 1;
            return;
        }
        let until = now + SimDuration(self.st.kvm.poll[t as usize].halt_window);
        self.st.kvm.cpu_poll[cpu as usize] = Some(CpuPoll {
            task: t,
            since: now,
            until,
        });
        if self.st.clock.rate_model {
            self.set_busy(cpu, true);
            self.st.cpus[cpu as usize].guest_at = Some(until);
            self.rearm(cpu);
        }
    }

    /// Ends the poll on `cpu`: successful if the vCPU was woken within its window.
    /// Returns whether it was.
    pub(super) fn end_cpu_poll(&mut self, cpu: CpuId, woken: bool) -> bool {
        let Some(p) = self.st.kvm.cpu_poll[cpu as usize].take() else {
            return false;
        };
        let now = self.st.now;
        let success = woken && now <= p.until;
        let c = &mut self.st.kvm.poll[p.task as usize].c;
        c.polls += 1;
        c.successes += u64::from(success);
        c.poll_ns += now.min(p.until).since(p.since).ns();
        if self.st.clock.rate_model {
            let cpu_rec = &mut self.st.cpus[cpu as usize];
            if cpu_rec.curr == super::NONE {
                cpu_rec.guest_at = None;
                self.set_busy(cpu, false);
            }
            self.rearm(cpu);
        }
        success
    }

    /// A pCPU deadline with nothing running there: a poll's window ran out.
    #[inline(never)]
    fn poll_timeout_polling(&mut self, cpu: CpuId) {
        if let Some(Some(p)) = self.st.kvm.cpu_poll.get(cpu as usize) {
            if p.until <= self.st.now {
                self.end_cpu_poll(cpu, false);
            }
        }
    }

    /// A task is about to be dispatched on `cpu`: a poll there stops at once.
    #[inline(never)]
    fn poll_yields_cpu_polling(&mut self, cpu: CpuId) {
        if matches!(self.st.kvm.cpu_poll.get(cpu as usize), Some(Some(_))) {
            self.end_cpu_poll(cpu, false);
        }
    }

    /// Halted vCPU `t` is woken: a poll for it (running, or about to start) catches it.
    #[inline(never)]
    fn poll_catches_wake_polling(&mut self, t: TaskId) {
        if !self.kvm_vcpu(t) {
            return;
        }
        let now = self.st.now;
        let cpu = self.st.tasks[t as usize].last_cpu;
        let p = &mut self.st.kvm.poll[t as usize];
        p.woken_at = Some(now);
        if p.halt_start.is_none() || p.caught || cpu == super::NONE {
            return;
        }
        if self.st.kvm.poll_pending[cpu as usize] == Some(t) {
            self.st.kvm.poll_pending[cpu as usize] = None;
            let p = &mut self.st.kvm.poll[t as usize];
            p.caught = true;
            p.c.polls += 1;
            p.c.successes += 1;
        } else if matches!(self.st.kvm.cpu_poll[cpu as usize], Some(cp) if cp.task == t) {
            let caught = self.end_cpu_poll(cpu, true);
            self.st.kvm.poll[t as usize].caught = caught;
        }
    }

    /// vCPU `t` runs again after a halt: KVM adjusts its window, the guest governor its
    /// limit (`reflect`); returns the wake-up cost it pays before guest code.
    #[inline(never)]
    fn end_halt_polling(&mut self, t: TaskId) -> SimDuration {
        if !self.kvm_vcpu(t) {
            return SimDuration::ZERO;
        }
        let now = self.st.now;
        let vm = self.st.tasks[t as usize].vm as usize;
        let Some(start) = self.st.kvm.poll[t as usize].halt_start.take() else {
            return SimDuration::ZERO;
        };
        let halt_ns = now.since(start).ns();
        let hp = self.st.kvm.halt_poll.as_ref().expect("kvm_vcpu");
        let p = &mut self.st.kvm.poll[t as usize];
        match &self.st.kvm.guest_poll[vm] {
            None => p.window = adjust_halt_poll(hp, p.halt_window, halt_ns),
            Some(g) => {
                if std::mem::take(&mut p.idle_halt) {
                    p.guest_limit = guest_adjust_limit(g, p.guest_limit, halt_ns);
                    p.guest_last = GuestIdle::Halted;
                }
            }
        }
        if std::mem::take(&mut p.caught) {
            SimDuration::ZERO
        } else {
            let kvm = &mut self.st.kvm;
            let hp = kvm.halt_poll.as_ref().expect("kvm_vcpu");
            draw_cost(&hp.wakeup_cost, &mut kvm.wake_rngs[t as usize])
        }
    }

    /// Guest code runs on vCPU `t` again: the wake-up latency, if it was woken.
    #[inline(never)]
    fn record_wake_latency_polling(&mut self, t: TaskId) {
        if !self.kvm_vcpu(t) {
            return;
        }
        if let Some(w) = self.st.kvm.poll[t as usize].woken_at.take() {
            let vm = self.st.tasks[t as usize].vm as usize;
            self.st.kvm.wake_latency[vm].record(self.st.now.since(w).ns());
        }
    }

    /// The guest idle loop of executing vCPU `t` (nothing to run): true while the
    /// haltpoll governor keeps it polling, false when it halts.
    #[inline(never)]
    fn guest_idle_polls_polling(&mut self, t: TaskId) -> bool {
        if !self.kvm_vcpu(t) {
            return false;
        }
        let vm = self.st.tasks[t as usize].vm as usize;
        if self.st.kvm.guest_poll[vm].is_none() {
            return false;
        }
        let now = self.st.now;
        let cpu = self.st.tasks[t as usize].last_cpu;
        let p = &mut self.st.kvm.poll[t as usize];
        let until = match p.guest_until {
            Some(until) if now < until => until,
            Some(_) => {
                // poll_time_limit: the poll ran out; select halts.
                if let Some(since) = p.guest_since.take() {
                    p.c.guest_poll_ns += now.since(since).ns();
                }
                p.guest_until = None;
                p.guest_last = GuestIdle::PollTimedOut;
                p.idle_halt = true;
                return false;
            }
            None => {
                if !guest_should_poll(p.guest_limit, p.guest_last) {
                    p.idle_halt = true;
                    return false;
                }
                p.c.guest_polls += 1;
                let until = now + SimDuration(p.guest_limit);
                p.guest_until = Some(until);
                until
            }
        };
        if p.guest_since.is_none() {
            p.guest_since = Some(now);
        }
        self.st.tasks[t as usize].end_spin(now);
        self.st.cpus[cpu as usize].guest_at = Some(until);
        self.rearm(cpu);
        true
    }

    /// A guest thread of vCPU `t` became ready: an open guest poll ends with an event.
    /// Returns true if `t` was polling on its pCPU (the caller runs its guest).
    #[inline(never)]
    fn guest_poll_woken_polling(&mut self, t: TaskId) -> bool {
        if !self.kvm_vcpu(t) || self.st.kvm.poll[t as usize].guest_until.is_none() {
            return false;
        }
        let now = self.st.now;
        let p = &mut self.st.kvm.poll[t as usize];
        p.guest_until = None;
        p.guest_last = GuestIdle::PollWoken;
        p.c.guest_successes += 1;
        match p.guest_since.take() {
            Some(since) => {
                p.c.guest_poll_ns += now.since(since).ns();
                let vm = self.st.tasks[t as usize].vm as usize;
                self.st.kvm.wake_latency[vm].record(0);
                true
            }
            None => {
                p.woken_at = Some(now); // preempted by the host: it waits to run
                false
            }
        }
    }

    /// vCPU `t` leaves its pCPU while it polls in the guest: the poll's CPU time stops.
    #[inline(never)]
    fn pause_guest_poll_polling(&mut self, t: TaskId) {
        if let Some(p) = self.st.kvm.poll.get_mut(t as usize) {
            if let Some(since) = p.guest_since.take() {
                p.c.guest_poll_ns += self.st.now.since(since).ns();
            }
        }
    }

    /// Brings the poll counters up to now (open polls continue from here).
    pub(super) fn account_polls(&mut self) {
        let now = self.st.now;
        for cpu in 0..self.st.kvm.cpu_poll.len() {
            // A poll past its window (settled lazily) ends here, as it ended then.
            self.poll_timeout(cpu as CpuId);
            if let Some(cp) = &mut self.st.kvm.cpu_poll[cpu] {
                let upto = now.min(cp.until);
                self.st.kvm.poll[cp.task as usize].c.poll_ns += upto.since(cp.since).ns();
                cp.since = upto;
            }
        }
        for p in &mut self.st.kvm.poll {
            if let Some(since) = &mut p.guest_since {
                p.c.guest_poll_ns += now.since(*since).ns();
                *since = now;
            }
        }
    }

    /// Back in the guest after a PLE exit or a host interruption (`begin_exit`; not a
    /// sched-in: the PLE window and the spin-loop flags stay): acknowledge IPIs that
    /// arrived meanwhile, go on.
    pub(super) fn end_ple_exit(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        task.exit_until = None;
        task.executing = true;
        task.progress_from = now;
        self.ack_pending_ipis(t);
        self.run_guest(t);
    }

    /// When the spinning vCPU `t` will take a PLE exit, if PLE applies to this spin.
    pub(super) fn ple_deadline(&self, t: TaskId, mode: Mode) -> Option<SimTime> {
        let k = self.st.kvm.spec.as_ref()?;
        if mode == Mode::User && k.vendor == Vendor::Intel {
            return None; // Intel ignores PAUSE loops at CPL > 0
        }
        let kv = &self.st.tasks[t as usize].kv;
        let ns = (kv.window as f64 / self.st.clock.base_ghz).ceil() as u64;
        Some(kv.ple_from + SimDuration(ns))
    }

    /// A PLE exit of the spinning vCPU `t`: account it, grow the window, run the handler.
    pub(super) fn pause_loop_exit(&mut self, t: TaskId, mode: Mode) {
        let now = self.st.now;
        let k = self.st.kvm.spec.clone().expect("PLE without KVM");
        let task = &mut self.st.tasks[t as usize];
        task.c.ple_exits += 1;
        task.kv.ple_in_run = true;
        task.kv.streak += 1;
        task.kv.window = grow_window(&k, task.kv.window);
        let exit_cost = draw_cost(&k.ple_exit_cost, &mut self.st.kvm.exit_rngs[t as usize]);
        let task = &mut self.st.tasks[t as usize];
        task.kv.ple_from = now + exit_cost;
        let cpu = match self.view.state[t as usize] {
            RunState::Running(c) => c,
            _ => return,
        };
        self.trace_instant(t, "ple_exit", Some(cpu), None);
        if k.handler == PleHandler::Kvm {
            // AMD reports the spinner's CPL; Intel only exits at CPL 0.
            let yield_to_kernel_mode = k.vendor == Vendor::Intel || mode == Mode::Kernel;
            self.kvm_vcpu_on_spin(t, cpu, yield_to_kernel_mode, &k);
        } else {
            self.user_ple_handler(t, cpu, k.handler);
        }
        // The exit itself (VM exit, handler, VM entry) takes `ple_exit_cost` of the pCPU
        // without guest progress, unless the handler's yield deschedules the vCPU first.
        if exit_cost.ns() > 0
            && self.st.tasks[t as usize].executing
            && self.view.state[t as usize] == RunState::Running(cpu)
        {
            self.begin_exit(t, cpu, exit_cost);
        }
    }

    /// The executing task `t` leaves guest code on `cpu` for `d` (a PLE exit, or a host
    /// interruption, engine/noise.rs): it stays on the pCPU, makes no guest progress, and
    /// the time is its overhead; at the end `end_ple_exit` takes it back into the guest.
    /// Returns when that is.
    pub(super) fn begin_exit(&mut self, t: TaskId, cpu: CpuId, d: SimDuration) -> SimTime {
        let now = self.st.now;
        let until = now + d;
        let task = &mut self.st.tasks[t as usize];
        task.end_spin(now);
        task.executing = false;
        task.exit_until = Some(until);
        task.c.overhead_ns += d.ns();
        self.st.cpus[cpu as usize].guest_at = Some(until);
        self.rearm(cpu);
        until
    }

    /// A unicast fixed IPI from vCPU `s` to vCPU `r` is delivered (IPI-aware yield).
    pub(super) fn track_ipi(&mut self, s: TaskId, r: TaskId) {
        let now = self.st.now.0;
        crate::kvm::track_ipi(&mut self.st.kvm.ipi, s, r, now);
        let vm = self.st.tasks[s as usize].vm as usize;
        self.st.kvm.ipi_counts[vm].ipis_tracked += 1;
    }

    /// vCPU `r` acknowledges (EOIs) an IPI from vCPU `s` (IPI-aware yield).
    pub(super) fn ipi_eoi(&mut self, s: TaskId, r: TaskId) {
        let now = self.st.now.0;
        let window = self.ipi_window();
        if crate::kvm::ipi_eoi(&mut self.st.kvm.ipi, s, r, now, window) {
            let vm = self.st.tasks[s as usize].vm as usize;
            self.st.kvm.ipi_counts[vm].eoi_cleared += 1;
        }
    }

    fn ipi_window(&self) -> SimDuration {
        self.st
            .kvm
            .spec
            .as_ref()
            .and_then(|k| k.ipi_aware.as_ref())
            .map_or(SimDuration::ZERO, |a| a.window)
    }

    /// What `kvm_vcpu_on_spin` knows of vCPU `v` as a candidate for spinner `me`
    /// (`ipi_receiver` is the IPI-aware handler's to fill in).
    fn spin_candidate(&self, me: TaskId, v: TaskId) -> crate::kvm::Candidate {
        let task = &self.st.tasks[v as usize];
        crate::kvm::Candidate {
            is_spinner: v == me,
            preempted: task.kv.preempted,
            ready: task.kv.ready,
            halted: self.view.state[v as usize] == RunState::Halted,
            in_kernel: task.kv.in_kernel,
            pending_interrupt: !task.pending_acks.is_empty(),
            ipi_from_spinner: task.pending_acks.contains(&self.st.tasks[me as usize].cur),
            in_spin_loop: task.kv.in_spin_loop,
            dy_eligible: task.kv.dy_eligible,
            ipi_receiver: false,
        }
    }

    /// `yield_to` from spinner `me` to candidate `v`, with the handler's bookkeeping: the
    /// attempt, and on success the boost time, the VM's `last_boosted_vcpu` (`stored`) and
    /// the trace event.
    fn boost_candidate(
        &mut self,
        me: TaskId,
        cpu: CpuId,
        v: TaskId,
        k: &KvmSpec,
        stored: u32,
    ) -> YieldResult {
        self.st.tasks[me as usize].c.yield_attempts += 1;
        let req = YieldRequest {
            from: me,
            from_cpu: cpu,
            target: v,
            ignore_vcpu_fairness: k.features.boost_ignores_vcpu_fairness,
            migrate_to_yielder: k.features.migrate_boosted_to_spinner,
        };
        let result = self.yield_to(req);
        if result == YieldResult::Yielded {
            self.st.tasks[me as usize].c.yield_successes += 1;
            self.st.tasks[v as usize].kv.boosted_at = Some(self.st.now);
            let vm = self.st.tasks[me as usize].vm as usize;
            self.st.kvm.last_boosted[vm] = stored;
            self.trace_instant(me, "yield_to", Some(cpu), Some(v));
        }
        result
    }

    /// The series' IPI-aware `kvm_vcpu_on_spin` (see `crate::kvm`): the upstream ring
    /// walk with the tiered candidate test, then, if nothing was yielded to, a relaxed
    /// walk over preempted vCPUs.
    fn kvm_vcpu_on_spin_ipi_aware(
        &mut self,
        me: TaskId,
        cpu: CpuId,
        yield_to_kernel_mode: bool,
        k: &KvmSpec,
    ) {
        let ia = k
            .ipi_aware
            .clone()
            .expect("IPI-aware handler without its spec");
        let vm = self.st.tasks[me as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        let last = self.st.kvm.last_boosted[vm];
        self.st.tasks[me as usize].kv.in_spin_loop = true;
        let now = self.st.now.0;
        // `try` is not reset between the walks; past 0 it never reaches 0 again.
        let mut tries: i32 = 3;
        'walks: for first_walk in [true, false] {
            if !first_walk {
                if !ia.relaxed_boost {
                    break;
                }
                self.st.kvm.ipi_counts[vm].relaxed_walks += 1;
            }
            for (offset, i) in crate::kvm::ring_order(n, last).enumerate() {
                let v = base + i;
                let mut cand = self.spin_candidate(me, v);
                cand.ipi_receiver =
                    crate::kvm::is_ipi_receiver(&self.st.kvm.ipi, me, v, now, ia.window);
                let verdict = crate::kvm::check_candidate_ipi_aware(
                    &mut cand,
                    yield_to_kernel_mode,
                    first_walk,
                );
                self.st.tasks[v as usize].kv.dy_eligible = cand.dy_eligible;
                let tier = match verdict {
                    Ok(t) => t,
                    Err(skip) => {
                        let c = &mut self.st.kvm.ipi_counts[vm];
                        match skip {
                            crate::kvm::Skip::NotPreempted => c.skip_not_preempted += 1,
                            crate::kvm::Skip::UserMode => c.skip_user_mode += 1,
                            _ => {}
                        }
                        continue;
                    }
                };
                match self.boost_candidate(me, cpu, v, k, k.last_boosted.stored(i, offset as u32)) {
                    YieldResult::Yielded => {
                        let c = &mut self.st.kvm.ipi_counts[vm];
                        match tier {
                            Tier::IpiReceiver => c.boost_ipi_receiver += 1,
                            Tier::PendingInterrupt => c.boost_pending_interrupt += 1,
                            Tier::Preempted => c.boost_preempted += 1,
                            Tier::Relaxed => c.boost_relaxed += 1,
                        }
                        break 'walks;
                    }
                    YieldResult::NoSuchTarget => {
                        tries -= 1;
                        if tries == 0 {
                            break;
                        }
                    }
                    YieldResult::Failed => {}
                }
            }
        }
        self.st.kvm.spin_loop_exits.push(me);
    }

    /// KVM's PLE handler: directed yield to a candidate vCPU of the spinner's VM.
    fn kvm_vcpu_on_spin(
        &mut self,
        me: TaskId,
        cpu: CpuId,
        yield_to_kernel_mode: bool,
        k: &KvmSpec,
    ) {
        if k.ipi_aware.is_some() {
            return self.kvm_vcpu_on_spin_ipi_aware(me, cpu, yield_to_kernel_mode, k);
        }
        let vm = self.st.tasks[me as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        let last = self.st.kvm.last_boosted[vm];
        self.st.tasks[me as usize].kv.in_spin_loop = true;
        let mut tries = 3;
        for (offset, i) in crate::kvm::ring_order(n, last).enumerate() {
            let v = base + i;
            let mut cand = self.spin_candidate(me, v);
            let verdict = crate::kvm::check_candidate(k, &mut cand, yield_to_kernel_mode);
            self.st.tasks[v as usize].kv.dy_eligible = cand.dy_eligible;
            if verdict.is_err() {
                continue;
            }
            match self.boost_candidate(me, cpu, v, k, k.last_boosted.stored(i, offset as u32)) {
                YieldResult::Yielded => break,
                YieldResult::NoSuchTarget => {
                    tries -= 1;
                    if tries == 0 {
                        break;
                    }
                }
                YieldResult::Failed => {}
            }
        }
        self.st.kvm.spin_loop_exits.push(me);
    }

    /// A user-space VMM's PLE handler (`ple_handler` other than "kvm"), as the vcpulab
    /// harness's policies do it (crates/vcpulab-kvm `Ple::on_spin`): "none" goes straight
    /// back; "yield" calls `sched_yield`; "nice-boost" ends the VM's active boost, gives
    /// the next vCPU in round robin after the last boosted one (skipping the spinner,
    /// running or not) the boost's nice value until the boost ends or the next exit's
    /// boost begins, then calls `sched_yield`. The calls cost no time here: the exit's
    /// cost (`ple_exit_cost`) is the whole round trip.
    fn user_ple_handler(&mut self, me: TaskId, cpu: CpuId, handler: PleHandler) {
        let boost = match handler {
            PleHandler::NiceBoost { boost, .. } | PleHandler::Migrate { boost } => boost,
            PleHandler::Yield => return self.user_sched_yield(me, cpu),
            PleHandler::None | PleHandler::Kvm => return,
        };
        let vm = self.st.tasks[me as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        let ub = self.st.kvm.user_boost[vm];
        let start = ub.last.map_or(0, |l| l + 1);
        let chosen = (0..n).map(|k| base + (start + k) % n).find(|&v| v != me);
        let ended = ub.active;
        let ub = &mut self.st.kvm.user_boost[vm];
        ub.gen = ub.gen.wrapping_add(1);
        ub.active = chosen;
        if let Some(v) = chosen {
            ub.last = Some(v - base);
        }
        let gen = ub.gen;
        // The previous boost ends where the next begins. A vCPU boosted again is not put
        // back first (the harness's `sync` makes the call for the new state only).
        if let Some(e) = ended.filter(|&e| Some(e) != chosen) {
            self.end_user_boost(e, handler);
        }
        if let Some(v) = chosen {
            match handler {
                PleHandler::NiceBoost { nice, .. } => {
                    if ended != chosen {
                        self.set_nice(v, nice);
                    }
                    self.trace_instant(me, "nice_boost", Some(cpu), Some(v));
                }
                _ => {
                    // Pinned to the spinner's pCPU, even when boosted again (from another).
                    let all = &mut self.st.kvm.migrate_base;
                    if all[v as usize].is_none() {
                        all[v as usize] = Some(self.view.tasks[v as usize].affinity.clone());
                    }
                    let mut here = crate::topology::CpuSet::empty(self.view.topo.ncpus());
                    here.insert(cpu as usize);
                    self.set_affinity(v, here);
                    self.trace_instant(me, "migrate_boost", Some(cpu), Some(v));
                }
            }
            // boost_to_run: from the boost to the candidate running, if it waits to run.
            if self.view.state[v as usize] == RunState::Runnable {
                self.st.tasks[v as usize].kv.boosted_at = Some(self.st.now);
            }
            let until = self.st.now + boost;
            self.st
                .q
                .push(until, EventKind::PleBoostEnd { vm: vm as u32, gen });
        }
        self.user_sched_yield(me, cpu);
    }

    /// vCPU `v`'s boost ends: nice 0 again, or its own affinity back.
    fn end_user_boost(&mut self, v: TaskId, handler: PleHandler) {
        if matches!(handler, PleHandler::NiceBoost { .. }) {
            self.set_nice(v, 0);
        } else if let Some(own) = self.st.kvm.migrate_base[v as usize].take() {
            self.set_affinity(v, own);
        }
    }

    /// `sched_yield` by the spinner `me`, running on `cpu`, from the user-space handler.
    fn user_sched_yield(&mut self, me: TaskId, cpu: CpuId) {
        self.st.tasks[me as usize].c.yield_attempts += 1;
        if self.sched_yield(cpu, me) {
            self.st.tasks[me as usize].c.yield_successes += 1;
            self.trace_instant(me, "sched_yield", Some(cpu), None);
        }
    }

    /// VM `vm`'s boost number `gen` is due: it ends if it is still the active one (the
    /// harness's monitor ends an expired boost).
    /// Returns false for a superseded boost (not an event of the model, like a superseded
    /// deadline).
    pub(super) fn ple_boost_end(&mut self, vm: u32, gen: u32) -> bool {
        let ub = &mut self.st.kvm.user_boost[vm as usize];
        if ub.gen != gen {
            return false;
        }
        if let Some(v) = ub.active.take() {
            let handler = self
                .st
                .kvm
                .spec
                .as_ref()
                .expect("a boost without PLE")
                .handler;
            self.end_user_boost(v, handler);
            self.trace_instant(v, "boost_end", None, None);
        }
        true
    }

    /// vCPU `t` is switched out to runnable: if it was in the guest or inside an exit, its
    /// next dispatch pays the world switch.
    #[inline(always)]
    pub(super) fn note_switch_out(&mut self, t: TaskId) {
        if self.st.kvm.world_switch.is_some() && t < self.st.n_vcpu_tasks {
            let task = &mut self.st.tasks[t as usize];
            // A vCPU switched out during its switch overhead has not re-entered the guest
            // yet: it still owes the world switch.
            task.kv.switched_out_in_guest |= task.executing || task.exit_until.is_some();
        }
    }

    /// The world switch vCPU `t` pays as it is dispatched (0 if it owes none).
    #[inline(always)]
    pub(super) fn world_switch_due(&mut self, t: TaskId) -> SimDuration {
        if self.st.kvm.world_switch.is_none() || t >= self.st.n_vcpu_tasks {
            return SimDuration::ZERO;
        }
        // Cleared when guest code runs again (`begin_exec`), not here: a vCPU switched out
        // during this overhead pays it again when it next runs.
        if !self.st.tasks[t as usize].kv.switched_out_in_guest {
            return SimDuration::ZERO;
        }
        let kvm = &mut self.st.kvm;
        let d = kvm.world_switch.as_ref().expect("tested");
        draw_cost(d, &mut kvm.world_switch_rngs[t as usize])
    }
}
