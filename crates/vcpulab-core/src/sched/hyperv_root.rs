//! `hyperv-root` — the Hyper-V root scheduler: virtual processors as threads of the root
//! OS, scheduled by the Windows NT thread scheduler.
//!
//! ## Policy (what Windows does, as far as we model it)
//! Under the root scheduler each guest virtual processor (VP) is a thread of the VM's
//! worker process in the root partition; the root's ordinary thread scheduler decides
//! when and where it runs. A VP with nothing to do waits (halts) and gets no time. Per-VM
//! weights, caps and reserves have no effect under the root scheduler.
//!
//! - Priorities 0..31, round robin among threads of equal priority. VP threads run at
//!   base priority 8 (normal).
//! - Ready queues are shared by groups of up to 4 logical processors (Windows 8 and later)
//!   in the same socket, so a runnable VP is not tied to one processor: this is why the
//!   load of one busy VP spreads over the host's processors, as the blog (seed 001) saw.
//! - Quantum: 2 clock intervals of 15.625 ms = 31.25 ms (client Windows; servers use 12
//!   intervals, 187.5 ms: set `quantum`). Quantum end is noticed in the clock interrupt:
//!   at each clock tick every processor, in id order, checks whether its thread has used
//!   its quantum; a thread whose quantum ran out between ticks runs on to the next tick.
//!   At quantum end the thread goes to the tail of its priority's queue with a fresh
//!   quantum if a thread of equal or higher priority is ready in the local queue;
//!   otherwise it runs on with a fresh quantum.
//! - A thread preempted by a higher-priority one goes to the head of its queue and keeps
//!   the rest of its quantum.
//! - Wake-up: a thread whose wait completes gets a priority boost of +1 (decaying by 1 at
//!   each quantum end) and a fresh quantum. The processor is chosen among idle ones
//!   allowed by affinity: a processor whose whole core is idle, then the thread's ideal
//!   processor, then the one it last ran on, then any idle one. The chosen processor takes
//!   the thread as its "standby" thread. With no idle processor the thread preempts the
//!   lowest-priority running thread if that one is of lower priority; otherwise it waits in
//!   the ready queue of its ideal processor's group.
//! - A processor that is about to go idle takes the best ready thread from its own group's
//!   queue, and if that is empty scans the other groups (same socket first).
//! - At quantum end the processor looks at every shared ready queue of its socket, not only
//!   its own group's, and switches to the longest-ready thread of equal or higher priority
//!   (`balance_groups`, an assumption, below). Without it, a socket of 6 LPs has groups of 4
//!   and 2: the two threads first placed in the small group keep their LPs for the whole
//!   run while the others share the big group, and a VM whose threads landed there gets
//!   0.86x its round-robin share (issue 27), the opposite of the blog's observation that a
//!   busy VP's load spreads over all LPs.
//! - Ideal processors are assigned round robin: VP i of a VM has the (base + i)-th
//!   processor of its affinity, base being the number of VPs declared before this VM.
//!
//! ## Parameters
//! - `quantum` (duration, default 31.25 ms): 2 x 15.625 ms clock intervals.
//! - `clock_interval` (duration, default 15.625 ms): the clock tick at which quantum end
//!   is checked.
//! - `wake_boost` (integer, default 1): priority boost after a wait completes.
//! - `group_size` (integer, default 4): logical processors per shared ready queue.
//! - `balance_groups` (bool, default true): the quantum-end look at the socket's other
//!   groups. `false` gives the strictly group-local quantum end of earlier versions.
//!
//! ## Sources
//! Microsoft Learn, "Manage Hyper-V hypervisor scheduler types" and "About Hyper-V
//! hypervisor scheduler type selection" (root scheduler: VPs as root-OS threads, no per-VM
//! caps/weights); Windows Internals 7th ed., ch. 4 "Thread scheduling" (quantum of 2 clock
//! intervals on client, 12 on server; 15.625 ms clock; head-of-queue on preemption;
//! shared ready queues; wait-completion boosts; idle processor selection); seed 001.
//!
//! ## Assumed where Microsoft is silent
//! Microsoft documents shared ready queues and idle processors taking work from other
//! queues, but not how a group with more ready threads than processors hands work to a
//! group with none waiting while no processor is idle. Windows does keep runnable threads
//! of equal priority in first-come order and does spread a busy thread's load over all LPs
//! (seed 001, Task Manager). `balance_groups` assumes the simplest rule that gives both: at
//! quantum end the ready threads of the whole socket (NUMA node) compete by priority and
//! then by ready time, as if the socket's groups were one queue for that decision. Idle
//! processors still scan other sockets too; quantum end does not cross a socket.
//!
//! ## Deviations
//! - Quantum is charged in time, not in CPU cycles; interrupt and DPC time is not charged.
//! - Foreground quantum stretching, the anti-starvation boost to 15 after ~4 s of waiting,
//!   and the I/O-class-specific boosts (+1..+8) are not modelled: VP threads get one boost.
//! - The root OS's own threads are not modelled (no background load).
//! - VP dispatch costs two root exits per switch in reality; here it is the host's
//!   `context_switch` cost.

use super::{Counters, CpuId, ParamInfo, ParamKind, Params, SchedCtx, Scheduler, TaskId};
use crate::time::{SimDuration, SimTime};
use std::collections::BTreeSet;

pub const DESCRIPTION: &str =
    "Hyper-V root scheduler: VPs as Windows threads, priority round robin, 31.25 ms quantum, shared ready queues";

pub const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "quantum",
        kind: ParamKind::Duration,
        default: "31250us",
        help: "thread quantum (client: 2 x 15.625 ms clock intervals)",
    },
    ParamInfo {
        name: "clock_interval",
        kind: ParamKind::Duration,
        default: "15625us",
        help: "clock tick; quantum end is checked at each tick",
    },
    ParamInfo {
        name: "wake_boost",
        kind: ParamKind::Int,
        default: "1",
        help: "priority boost when a VP's wait completes (decays 1 per quantum)",
    },
    ParamInfo {
        name: "group_size",
        kind: ParamKind::Int,
        default: "4",
        help: "logical processors sharing one ready queue",
    },
    ParamInfo {
        name: "balance_groups",
        kind: ParamKind::Bool,
        default: "true",
        help: "at quantum end, take the longest-ready thread of equal or higher priority from any ready queue of the socket (assumed)",
    },
];

/// Base priority of VP threads (normal).
const BASE_PRIORITY: u8 = 8;
/// Boosts never raise a thread above this (Windows: dynamic range tops at 15).
const MAX_DYNAMIC_PRIORITY: u8 = 15;

super::counters::declare_counters! {
    WAKE_IDLE_CORE => "wake_idle_core",
    WAKE_IDEAL => "wake_ideal_cpu",
    WAKE_LAST => "wake_last_cpu",
    WAKE_OTHER_IDLE => "wake_other_idle_cpu",
    WAKE_PREEMPT => "wake_preempt",
    WAKE_QUEUED => "wake_queued",
    QUANTUM_SWITCH => "quantum_end_switch",
    QUANTUM_SWITCH_OTHER_GROUP => "quantum_end_switch_other_group",
    QUANTUM_RENEW => "quantum_end_renew",
    PICK_STANDBY => "pick_standby",
    PICK_LOCAL => "pick_local_queue",
    PICK_STOLEN => "pick_stolen_from_other_group",
    PICK_IDLE => "pick_went_idle",
}

/// Ready-queue key: higher priority first, then FIFO (head insertions use negative seq).
type Key = (u8, i64, TaskId);

pub struct HyperVRoot {
    // global
    quantum: SimDuration,
    clock_interval: SimDuration,
    wake_boost: u8,
    group_size: usize,
    balance_groups: bool,
    tail_seq: i64,
    head_seq: i64,
    counters: Counters<NCOUNTERS>,
    // per ready-queue group
    groups: Vec<BTreeSet<Key>>,
    // per logical processor
    cpu_group: Vec<usize>,
    /// Groups in the order an idle processor scans them: own, same socket, others.
    scan_order: Vec<Vec<usize>>,
    /// How many of `scan_order`'s first groups are in the processor's own socket.
    socket_groups: usize,
    standby: Vec<Option<TaskId>>,
    quantum_expired: Vec<bool>,
    // per VP thread
    prio: Vec<u8>,
    ideal: Vec<CpuId>,
    last: Vec<Option<CpuId>>,
    quantum_left: Vec<SimDuration>,
    run_start: Vec<SimTime>,
    queued: Vec<Option<(usize, Key)>>,
}

impl HyperVRoot {
    pub fn new(p: &Params) -> HyperVRoot {
        HyperVRoot {
            quantum: p.duration("quantum"),
            clock_interval: p.duration("clock_interval"),
            wake_boost: p.int("wake_boost").min(MAX_DYNAMIC_PRIORITY as i64) as u8,
            group_size: p.int("group_size").max(1) as usize,
            balance_groups: p.bool("balance_groups"),
            tail_seq: 0,
            head_seq: 0,
            counters: Counters::new(COUNTER_NAMES),
            groups: vec![],
            cpu_group: vec![],
            scan_order: vec![],
            socket_groups: 1,
            standby: vec![],
            quantum_expired: vec![],
            prio: vec![],
            ideal: vec![],
            last: vec![],
            quantum_left: vec![],
            run_start: vec![],
            queued: vec![],
        }
    }

    fn free(&self, ctx: &SchedCtx, cpu: CpuId) -> bool {
        ctx.is_idle(cpu) && self.standby[cpu as usize].is_none()
    }

    fn enqueue(&mut self, t: TaskId, group: usize, at_head: bool) {
        let seq = if at_head {
            self.head_seq -= 1;
            self.head_seq
        } else {
            self.tail_seq += 1;
            self.tail_seq
        };
        let key = (MAX_DYNAMIC_PRIORITY + 16 - self.prio[t as usize], seq, t);
        self.groups[group].insert(key);
        self.queued[t as usize] = Some((group, key));
    }

    fn dequeue(&mut self, t: TaskId) {
        if let Some((g, key)) = self.queued[t as usize].take() {
            self.groups[g].remove(&key);
        }
    }

    /// The best ready thread of `group` allowed on `cpu` with priority >= `min_prio`.
    fn best_in(&self, ctx: &SchedCtx, group: usize, cpu: CpuId, min_prio: u8) -> Option<TaskId> {
        self.best_key_in(ctx, group, cpu, min_prio).map(|k| k.2)
    }

    fn best_key_in(&self, ctx: &SchedCtx, group: usize, cpu: CpuId, min_prio: u8) -> Option<Key> {
        self.groups[group]
            .iter()
            .take_while(|k| MAX_DYNAMIC_PRIORITY + 16 - k.0 >= min_prio)
            .find(|k| ctx.allowed(k.2, cpu))
            .copied()
    }

    /// The thread that takes over `cpu` at quantum end, if any: the best of its own group,
    /// or with `balance_groups` the best of its socket (priority, then ready time).
    /// Returns the thread and whether it comes from another group.
    fn quantum_end_successor(
        &self,
        ctx: &SchedCtx,
        cpu: CpuId,
        min_prio: u8,
    ) -> Option<(TaskId, bool)> {
        let order = &self.scan_order[cpu as usize];
        let groups = if self.balance_groups {
            &order[..self.socket_groups]
        } else {
            &order[..1]
        };
        groups
            .iter()
            .enumerate()
            .filter_map(|(i, &g)| self.best_key_in(ctx, g, cpu, min_prio).map(|k| (k, i > 0)))
            .min_by_key(|(k, _)| *k)
            .map(|(k, other)| (k.2, other))
    }

    fn start(&mut self, ctx: &mut SchedCtx, t: TaskId, cpu: CpuId) {
        self.run_start[t as usize] = ctx.now;
        self.last[t as usize] = Some(cpu);
    }

    /// Quantum end of the thread running on `cpu`, noticed at a clock tick.
    fn quantum_end(&mut self, ctx: &mut SchedCtx, cpu: CpuId, t: TaskId) {
        let ti = t as usize;
        if self.prio[ti] > BASE_PRIORITY {
            self.prio[ti] -= 1; // boosts decay by one level per quantum
        }
        if self
            .quantum_end_successor(ctx, cpu, self.prio[ti])
            .is_some()
        {
            self.quantum_expired[cpu as usize] = true;
            ctx.resched(cpu);
        } else {
            self.counters.bump(QUANTUM_RENEW);
            self.quantum_left[ti] = self.quantum;
            self.run_start[ti] = ctx.now;
        }
    }

    fn home_group(&self, ctx: &SchedCtx, t: TaskId) -> usize {
        let ideal = self.ideal[t as usize];
        let cpu = if ctx.allowed(t, ideal) {
            ideal
        } else {
            ctx.view.tasks[t as usize].affinity.first().unwrap() as CpuId
        };
        self.cpu_group[cpu as usize]
    }
}

impl Scheduler for HyperVRoot {
    fn init(&mut self, ctx: &mut SchedCtx) {
        let topo = &ctx.view.topo;
        let n = topo.ncpus();
        let per_socket = (topo.cores_per_socket * topo.threads_per_core) as usize;
        let groups_per_socket = per_socket.div_ceil(self.group_size);
        self.cpu_group = (0..n)
            .map(|c| (c / per_socket) * groups_per_socket + (c % per_socket) / self.group_size)
            .collect();
        let ngroups = topo.sockets as usize * groups_per_socket;
        self.socket_groups = groups_per_socket;
        self.groups = vec![BTreeSet::new(); ngroups];
        self.scan_order = (0..n)
            .map(|c| {
                let own = self.cpu_group[c];
                let socket = c / per_socket;
                let mut order: Vec<usize> = (0..ngroups).collect();
                order.sort_by_key(|g| (*g != own, *g / groups_per_socket != socket, *g));
                order
            })
            .collect();
        self.standby = vec![None; n];
        self.quantum_expired = vec![false; n];
        let nt = ctx.view.tasks.len();
        self.prio = vec![BASE_PRIORITY; nt];
        self.last = vec![None; nt];
        self.quantum_left = vec![self.quantum; nt];
        self.run_start = vec![SimTime::ZERO; nt];
        self.queued = vec![None; nt];
        let mut vm_base = vec![0usize; ctx.view.nvms as usize + 1];
        for t in &ctx.view.tasks {
            vm_base[t.vm as usize + 1] += 1;
        }
        for v in 1..vm_base.len() {
            vm_base[v] += vm_base[v - 1];
        }
        self.ideal = ctx
            .view
            .tasks
            .iter()
            .map(|t| {
                t.affinity
                    .nth_wrapping(vm_base[t.vm as usize] + t.index as usize)
                    .unwrap() as CpuId
            })
            .collect();
        ctx.set_global_timer(ctx.now + self.clock_interval);
    }

    fn wake(&mut self, ctx: &mut SchedCtx, t: TaskId) {
        let ti = t as usize;
        self.prio[ti] = (BASE_PRIORITY + self.wake_boost).min(MAX_DYNAMIC_PRIORITY);
        self.quantum_left[ti] = self.quantum;
        let topo = &ctx.view.topo;
        let affinity = &ctx.view.tasks[ti].affinity;
        // 1. An idle processor whose whole core is idle (only meaningful with SMT).
        let mut choice: Option<(CpuId, usize)> = None;
        if topo.threads_per_core > 1 {
            let ideal = self.ideal[ti] as usize;
            let n = topo.ncpus();
            for off in 0..n {
                let c = (ideal + off) % n;
                if affinity.contains(c)
                    && self.free(ctx, c as CpuId)
                    && topo
                        .core_cpus(topo.cpus[c].core)
                        .all(|s| self.free(ctx, s as CpuId))
                {
                    choice = Some((c as CpuId, WAKE_IDLE_CORE));
                    break;
                }
            }
        }
        // 2. Ideal processor, 3. last processor, 4. any idle processor (from the ideal on).
        if choice.is_none() {
            let ideal = self.ideal[ti];
            if ctx.allowed(t, ideal) && self.free(ctx, ideal) {
                choice = Some((ideal, WAKE_IDEAL));
            } else if let Some(l) =
                self.last[ti].filter(|&l| ctx.allowed(t, l) && self.free(ctx, l))
            {
                choice = Some((l, WAKE_LAST));
            } else {
                let n = ctx.ncpus();
                choice = (0..n)
                    .map(|off| ((ideal as usize + off) % n) as CpuId)
                    .find(|&c| ctx.allowed(t, c) && self.free(ctx, c))
                    .map(|c| (c, WAKE_OTHER_IDLE));
            }
        }
        if let Some((cpu, counter)) = choice {
            self.counters.bump(counter);
            self.standby[cpu as usize] = Some(t);
            ctx.resched(cpu);
            return;
        }
        // No idle processor: preempt the lowest-priority running thread if it is lower.
        let mut victim: Option<(u8, CpuId)> = None;
        for c in ctx.view.tasks[ti].affinity.iter() {
            let c = c as CpuId;
            if self.standby[c as usize].is_some() {
                continue;
            }
            if let Some(r) = ctx.curr(c) {
                let p = self.prio[r as usize];
                if p < self.prio[ti] && victim.is_none_or(|(vp, _)| p < vp) {
                    victim = Some((p, c));
                }
            }
        }
        if let Some((_, cpu)) = victim {
            self.counters.bump(WAKE_PREEMPT);
            self.standby[cpu as usize] = Some(t);
            ctx.resched(cpu);
            return;
        }
        self.counters.bump(WAKE_QUEUED);
        let g = self.home_group(ctx, t);
        self.enqueue(t, g, false);
    }

    fn block(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId, _t: TaskId) {}

    fn pick_next(
        &mut self,
        ctx: &mut SchedCtx,
        cpu: CpuId,
        prev: Option<TaskId>,
    ) -> Option<TaskId> {
        let c = cpu as usize;
        let expired = std::mem::take(&mut self.quantum_expired[c]);
        if let Some(s) = self.standby[c].take() {
            if let Some(p) = prev {
                // Preempted by a higher-priority wake-up: head of its queue, keeps the rest
                // of its quantum.
                let used = ctx.now.since(self.run_start[p as usize]);
                let left = self.quantum_left[p as usize] - used;
                self.quantum_left[p as usize] = if left.ns() == 0 { self.quantum } else { left };
                let g = self.cpu_group[c];
                self.enqueue(p, g, true);
            }
            self.counters.bump(PICK_STANDBY);
            self.start(ctx, s, cpu);
            return Some(s);
        }
        if let Some(p) = prev.filter(|_| !expired) {
            // Asked to reschedule without a reason of ours: keep running.
            return Some(p);
        }
        if let Some(p) = prev {
            // Quantum end (set in `timer`): the thread yields to an equal-or-higher ready one.
            let g = self.cpu_group[c];
            if let Some((n, other_group)) =
                self.quantum_end_successor(ctx, cpu, self.prio[p as usize])
            {
                self.counters.bump(if other_group {
                    QUANTUM_SWITCH_OTHER_GROUP
                } else {
                    QUANTUM_SWITCH
                });
                self.dequeue(n);
                self.quantum_left[p as usize] = self.quantum;
                self.enqueue(p, g, false);
                self.start(ctx, n, cpu);
                return Some(n);
            }
            self.counters.bump(QUANTUM_RENEW);
            self.quantum_left[p as usize] = self.quantum;
            self.start(ctx, p, cpu);
            return Some(p);
        }
        // Idle or the previous thread blocked: own group, then the others.
        for (i, &g) in self.scan_order[c].iter().enumerate() {
            if let Some(n) = self.best_in(ctx, g, cpu, 0) {
                self.counters
                    .bump(if i == 0 { PICK_LOCAL } else { PICK_STOLEN });
                self.dequeue(n);
                self.start(ctx, n, cpu);
                return Some(n);
            }
        }
        self.counters.bump(PICK_IDLE);
        None
    }

    fn timer(&mut self, _ctx: &mut SchedCtx, _cpu: CpuId) {}

    /// The clock interrupt: every processor, in id order, checks its thread's quantum.
    fn global_timer(&mut self, ctx: &mut SchedCtx) {
        for cpu in 0..ctx.ncpus() as CpuId {
            let Some(t) = ctx.curr(cpu) else { continue };
            if self.standby[cpu as usize].is_some() || self.quantum_expired[cpu as usize] {
                continue; // already being rescheduled
            }
            let used = ctx.now.since(self.run_start[t as usize]);
            if used >= self.quantum_left[t as usize] {
                self.quantum_end(ctx, cpu, t);
            }
        }
        ctx.set_global_timer(ctx.now + self.clock_interval);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.list()
    }
    /// All VP threads share base priority 8 and boosts decay at quantum end, so a ready
    /// thread waits at most one quantum (noticed at the next clock tick) per other thread.
    /// Weights are ignored by the root scheduler.
    fn starvation_bound(&self, view: &super::SchedView) -> Option<SimDuration> {
        let turns = view.tasks.len() as u64 * (self.wake_boost as u64 + 1);
        Some(super::turns_bound(
            self.quantum + self.clock_interval,
            turns,
        ))
    }
}

/// `hyperv-root`: quantum ends, noticed at clock ticks.
impl super::Registered for HyperVRoot {
    type Sched = HyperVRoot;
    const NAME: &'static str = "hyperv-root";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const PARAMS: &'static [ParamInfo] = PARAMS;
    const PROPERTIES: super::Properties = super::Properties {
        time_sharing: true,
        credit_accounting: false,
        pools: super::Pools::None,
    };
    fn build(p: &Params) -> HyperVRoot {
        HyperVRoot::new(p)
    }
    fn event_period(p: &Params) -> Option<SimDuration> {
        Some(p.duration("quantum").min(p.duration("clock_interval")))
    }
}
