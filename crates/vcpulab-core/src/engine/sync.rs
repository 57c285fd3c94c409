//! Guest synchronisation: spinlocks (ticket, test-and-set), sleeping mutexes, paravirtual
//! spinlocks (a waiter halts in pv_wait until the releaser kicks it), and IPIs, which a
//! target acknowledges when its vCPU executes guest code.

use super::queue::EventKind;
use super::{Sim, ThState, ThreadId, NONE};
use crate::sched::{RunState, Scheduler, TaskId};
use crate::topology::Distance;
use crate::vocab::LockKind;
use crate::workload::{IpiTargets, Mode};
use std::collections::VecDeque;

/// One guest lock: its holder (NONE: free), kind and waiters in arrival order.
pub(super) struct Lock {
    pub(super) holder: u32,
    pub(super) kind: LockKind,
    pub(super) waiters: VecDeque<ThreadId>,
    /// The pCPU of the last acquisition: where the lock's cache line is (NONE: nowhere
    /// yet).
    pub(super) last_cpu: u32,
}

impl Lock {
    /// Takes the lock for thread `id` if its kind lets it; `first` (the thread's first
    /// try) registers it as a waiter on failure, and a later success takes it off the
    /// waiters.
    #[inline]
    fn acquire(&mut self, id: ThreadId, first: bool) -> bool {
        let acquired = if self.holder == id {
            true // a ticket lock was handed to us while we waited
        } else if self.holder == NONE {
            match self.kind {
                // A free ticket lock with waiters has already been handed over; a free one
                // without waiters is ours.
                LockKind::Ticket => self.waiters.is_empty(),
                LockKind::TestAndSet | LockKind::Mutex => true,
            }
        } else {
            false
        };
        if acquired {
            self.holder = id;
            if !first {
                if let Some(pos) = self.waiters.iter().position(|w| *w == id) {
                    self.waiters.remove(pos);
                }
            }
        } else if first {
            self.waiters.push_back(id);
        }
        acquired
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// `RtOp::Lock`: take the thread's shard of the lock and hold it for `hold`, or spin
    /// (a mutex: sleep) until it is handed over or free. See `step_other_op`.
    #[inline(always)]
    pub(super) fn step_lock(
        &mut self,
        id: ThreadId,
        w: usize,
        lock: u32,
        hold: f64,
        mode: Mode,
        shards: u32,
    ) -> Option<bool> {
        let vm = self.st.workloads[w].vm;
        // Threads split into `shards` consecutive groups, one lock each.
        let per = self.st.workload_threads[w].div_ceil(shards).max(1);
        let index = self.st.threads[id as usize].index_in_workload;
        let gl = self.st.vm_lock_base[vm as usize] + lock + index / per;
        let pv_left = self.pv_spin_budget(vm, mode);
        self.st.threads[id as usize].state = ThState::SpinLock {
            lock: gl,
            hold,
            mode,
            pv_left,
        };
        if !self.try_lock(id, gl, true) {
            if self.st.locks[gl as usize].kind == LockKind::Mutex {
                // futex_wait: sleep until the holder's release wakes us, then run this
                // operation again.
                self.st.threads[id as usize].state = ThState::Blocked;
                return Some(false);
            }
            return Some(true);
        }
        let hold = hold + self.line_pull(id, gl);
        self.st.threads[id as usize].state = ThState::Compute {
            remaining: hold,
            mode,
            release: gl,
        };
        None
    }

    /// Thread `id` just took `lock`: the base-clock ns its critical section grows by to
    /// pull the lock's cache line from the core that last took it (`[host.costs]
    /// cacheline_transfer`; 0 when that is zero, the line is on this core or an SMT
    /// sibling, which shares L1/L2, or nobody took the lock before). Charged as guest
    /// work inside the critical section, so the lock stays held meanwhile, as it is while
    /// a real acquirer's first access to the protected data waits for the line.
    /// Deviation: the charge is work at the base clock, so on a core faster or slower
    /// than `base_ghz` it shrinks or grows with the clock, which memory latency does not.
    pub(super) fn line_pull(&mut self, id: ThreadId, lock: u32) -> f64 {
        let cost = self.st.costs_line;
        if cost.ns() == 0 {
            return 0.0;
        }
        let t = self.st.threads[id as usize].task;
        let RunState::Running(cpu) = self.view.state[t as usize] else {
            return 0.0;
        };
        let l = &mut self.st.locks[lock as usize];
        let last = std::mem::replace(&mut l.last_cpu, cpu);
        if last == NONE || last == cpu {
            return 0.0;
        }
        if self.view.topo.distance(last as usize, cpu as usize) == Distance::SmtSibling {
            return 0.0;
        }
        self.st.h.line_transfers += 1;
        cost.ns() as f64
    }

    /// An IPI sender whose targets have all acknowledged: its request's cache line went
    /// out to them and their acknowledgement came back (`smp_call_function` with `wait`:
    /// the csd's lock flag), two transfers. The sender then spends that long before its
    /// next operation (its IPI operation completes after it, like a computation);
    /// without the cost it goes on at once. Leaves the thread either computing the round
    /// trip or at its next operation.
    pub(super) fn ipi_round_trip(&mut self, id: ThreadId) {
        let cost = self.st.costs_line;
        let th = &mut self.st.threads[id as usize];
        if cost.ns() == 0 {
            th.state = ThState::Ready;
            th.pc += 1;
            return;
        }
        self.st.h.line_transfers += 2;
        th.state = ThState::Compute {
            remaining: 2.0 * cost.ns() as f64,
            mode: Mode::Kernel,
            release: NONE,
        };
    }

    /// `RtOp::Ipi`: send the IPIs and spin until every target has acknowledged. See
    /// `step_other_op`.
    #[inline(always)]
    pub(super) fn step_ipi(&mut self, id: ThreadId, targets: &IpiTargets) -> Option<bool> {
        let sent_before = self.st.h.ipis_sent;
        let pending = self.send_ipis(id, targets);
        if pending == 0 {
            if self.st.h.ipis_sent > sent_before {
                self.ipi_round_trip(id);
            } else {
                self.st.threads[id as usize].pc += 1;
            }
            None
        } else {
            self.st.threads[id as usize].state = ThState::SpinIpi { pending };
            Some(true)
        }
    }

    /// Acknowledges the IPIs that reached the vCPU while it was not executing guest code
    /// (descheduled, halted or in a PLE exit): it handles them as soon as it is back.
    #[inline(always)]
    pub(super) fn ack_pending_ipis(&mut self, t: TaskId) {
        if self.st.tasks[t as usize].has_pending_acks {
            self.ack_pending_ipis_now(t);
        }
    }

    #[inline(never)]
    fn ack_pending_ipis_now(&mut self, t: TaskId) {
        let task = &mut self.st.tasks[t as usize];
        let acks = std::mem::take(&mut task.pending_acks);
        task.has_pending_acks = false;
        for sender in acks {
            if self.st.kvm.ipi_tracking {
                let s = self.st.threads[sender as usize].task;
                self.ipi_eoi(s, t);
            }
            self.ack_ipi(sender);
        }
    }

    /// IPI-aware directed yield: an `ipi` operation of vCPU `src` that reaches exactly
    /// one other vCPU of its VM is a unicast fixed IPI, tracked before any EOI.
    #[inline(never)]
    fn track_unicast_ipi(&mut self, src: TaskId, base: u32, list: &[u32], shootdown: bool) {
        let mut dests = list
            .iter()
            .map(|&i| base + i)
            .filter(|&tt| tt != src && (!shootdown || self.st.tasks[tt as usize].in_mm));
        if let (Some(r), None) = (dests.next(), dests.next()) {
            self.track_ipi(src, r);
        }
    }

    /// How long (base-clock ns of guest execution) a spinlock waiter of `vm` spins before
    /// pv_wait: only guest-kernel spinlocks take the paravirtual slow path, so infinite in
    /// user mode or without pv spinlocks. A waiter woken from pv_wait (always kernel mode)
    /// gets the full budget again.
    pub(super) fn pv_spin_budget(&self, vm: u32, mode: Mode) -> f64 {
        if mode == Mode::Kernel {
            self.st.vm_pv_spin_ns[vm as usize]
        } else {
            f64::INFINITY
        }
    }

    /// Tries to take a lock for thread `id`. `first` registers it as a waiter on failure.
    pub(super) fn try_lock(&mut self, id: ThreadId, lock: u32, first: bool) -> bool {
        let acquired = self.st.locks[lock as usize].acquire(id, first);
        if acquired {
            self.st.h.lock_acquisitions += 1;
        }
        acquired
    }

    /// `by`: the task (vCPU) of the releasing thread, which wakes a halted waiter.
    pub(super) fn release_lock(&mut self, lock: u32, by: TaskId) {
        let l = &mut self.st.locks[lock as usize];
        l.holder = NONE;
        if l.waiters.is_empty() {
            return;
        }
        match l.kind {
            LockKind::Ticket => {
                // FIFO hand-over to the next waiter, running or not.
                let next = l.waiters.pop_front().unwrap();
                l.holder = next;
                self.kick_if_current(next);
                self.pv_kick(next, by);
            }
            LockKind::Mutex => {
                // futex_wake: the first sleeper becomes ready and tries again when it runs
                // (the lock stays free meanwhile, as glibc's mutex does not hand over).
                let w = l.waiters.pop_front().unwrap();
                let now = self.st.now;
                if let Some(waker) = self.waker(by) {
                    self.st.futex_wakers.push((w, waker));
                }
                self.st.q.push(now, EventKind::ThreadWake { thread: w });
            }
            LockKind::TestAndSet => {
                // The first waiter spinning right now wins; if none runs, the lock stays
                // free for whichever waiter runs first.
                let threads = &self.st.threads;
                let tasks = &self.st.tasks;
                let winner = l.waiters.iter().position(|&w| {
                    let task = &tasks[threads[w as usize].task as usize];
                    task.executing && task.cur == w
                });
                if let Some(pos) = winner {
                    let w = l.waiters.remove(pos).unwrap();
                    l.holder = w;
                    self.kick_if_current(w);
                } else {
                    // No waiter is spinning: kick the first halted one to retry.
                    let threads = &self.st.threads;
                    let halted = l
                        .waiters
                        .iter()
                        .copied()
                        .find(|&w| matches!(threads[w as usize].state, ThState::PvWait { .. }));
                    if let Some(w) = halted {
                        self.pv_kick(w, by);
                    }
                }
            }
        }
    }

    /// `KVM_HC_KICK_CPU`: wake the vCPU of thread `id` if it is halted in pv_wait. The
    /// hypercall runs on the kicking vCPU `by` (`kvm_pv_kick_cpu_op`), the waker.
    fn pv_kick(&mut self, id: ThreadId, by: TaskId) {
        if !matches!(self.st.threads[id as usize].state, ThState::PvWait { .. }) {
            return;
        }
        let t = self.st.threads[id as usize].task;
        self.st.tasks[t as usize].c.pv_kicks += 1;
        if self.view.state[t as usize] == RunState::Halted && !self.vcpu_paused(t) {
            let waker = self.waker(by);
            self.make_runnable_from(t, waker);
        }
    }

    /// If thread `id` is the current thread of an executing vCPU, re-run that vCPU.
    fn kick_if_current(&mut self, id: ThreadId) {
        let t = self.st.threads[id as usize].task;
        let task = &self.st.tasks[t as usize];
        if task.executing && task.cur == id {
            self.st.kicks.push(t);
        }
    }

    /// Sends IPIs from thread `id`; returns how many acknowledgements are outstanding.
    fn send_ipis(&mut self, id: ThreadId, targets: &IpiTargets) -> u32 {
        let src = self.st.threads[id as usize].task;
        let vm = self.st.tasks[src as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        // `all` is a TLB shootdown: it goes to the vCPUs in the process's mm_cpumask;
        // an explicit list is sent as written.
        let shootdown = matches!(targets, IpiTargets::All);
        let list: Vec<u32> = match targets {
            IpiTargets::All => (0..n).collect(),
            IpiTargets::List(l) => l.clone(), // validated: every index < vcpus
        };
        if self.st.kvm.ipi_tracking {
            self.track_unicast_ipi(src, base, &list, shootdown);
        }
        let mut pending = 0;
        for i in list {
            let tt = base + i;
            if tt == src {
                continue;
            }
            if shootdown && !self.st.tasks[tt as usize].in_mm {
                continue;
            }
            self.st.h.ipis_sent += 1;
            if self.st.trace.is_some() {
                let cpu = match self.view.state[src as usize] {
                    RunState::Running(c) => Some(c),
                    _ => None,
                };
                self.trace_instant(src, "ipi", cpu, Some(tt));
            }
            if self.st.tasks[tt as usize].executing {
                // Acknowledged at once; a vCPU spinning in its idle loop is in lazy TLB
                // mode and leaves the mm with it, as a halted one does when woken to ack.
                if shootdown && self.idle_polling(tt) {
                    self.st.tasks[tt as usize].in_mm = false;
                }
                if self.st.kvm.ipi_tracking {
                    self.ipi_eoi(src, tt);
                }
                continue;
            }
            let target = &mut self.st.tasks[tt as usize];
            target.pending_acks.push(id);
            target.has_pending_acks = true;
            pending += 1;
            if self.view.state[tt as usize] == RunState::Halted {
                // The sender's vCPU thread delivers the IPI (`kvm_vcpu_kick`): the waker.
                let waker = self.waker(src);
                self.make_runnable_from(tt, waker);
            }
        }
        pending
    }

    fn ack_ipi(&mut self, sender: ThreadId) {
        if let ThState::SpinIpi { pending } = &mut self.st.threads[sender as usize].state {
            *pending -= 1;
            if *pending == 0 {
                self.kick_if_current(sender);
            }
        }
    }
}
