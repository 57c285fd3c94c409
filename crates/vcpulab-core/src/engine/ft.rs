//! Software fault tolerance (see `crate::ft` for the model): a VM's Kemari thread
//! stops the VM at each guest disk write, ships the dirtied memory to the secondary and
//! releases the write once acknowledged; its DRBD thread replicates each write. Both are
//! host threads running a fixed program (`helper_program`) whose steps are here, with
//! Kemari's guest timers and QEMU's global mutex (`global_mutex`).

use super::net::Packet;
use super::queue::{EventKind, HELPER_FLUSH_DONE, HELPER_IRQ_ARRIVES};
use super::{Sim, State, ThState, ThreadId, NONE, WORK_EPSILON};
use crate::ft::HelperSpec;
use crate::metrics::Histogram;
use crate::model::RtOp;
use crate::sched::{RunState, Scheduler, TaskId};
use crate::time::{SimDuration, SimTime};
use crate::topology::Distance;
use crate::workload::Mode;
use std::collections::VecDeque;

/// An interrupt the Kemari thread has for a vCPU that must take QEMU's global mutex to
/// inject it (`global_mutex`): a guest timer, or the completion of a write it held.
#[derive(Clone, Copy)]
pub(super) enum MutexIrq {
    Timer(Packet),
    WriteDone(ThreadId),
}

/// One unit of helper work: a Kemari sync or a DRBD replication.
#[derive(Clone, Copy, Debug)]
pub(super) struct Job {
    /// The guest thread whose I/O caused it.
    guest_thread: ThreadId,
    enqueued: SimTime,
    /// Kemari: memory dirtied since the last sync; DRBD: the write's size.
    bytes: f64,
    /// Local disk latency of the held I/O (ns), started when Kemari releases it.
    io_ns: u64,
    write_bytes: u64,
    /// DRBD: when the local disk write completes.
    local_done: SimTime,
    /// DRBD: the Kemari helper waiting for this write (`sync_release`), NONE if none.
    release_by: u32,
}

pub(super) struct HelperRt {
    pub(super) spec: crate::ft::HelperSpec,
    pub(super) vm: u32,
    pub(super) thread: ThreadId,
    pub(super) task: TaskId,
    pub(super) jobs: VecDeque<Job>,
    pub(super) cur: Option<Job>,
    /// Blocked in HelperWait (a submitted job must wake it).
    pub(super) waiting: bool,
    /// Submission to completion, per job.
    pub(super) job_latency: Histogram,
    pub(super) jobs_done: u64,
    /// Kemari with `guest_timers`: timer expiries not yet raised, the one being raised,
    /// and raised interrupts in flight to a vCPU on another pCPU (an IPI away).
    pub(super) timers: VecDeque<Packet>,
    pub(super) cur_timer: Option<Packet>,
    pub(super) irqs_in_flight: VecDeque<Packet>,
    /// Kemari with `global_mutex`: raised interrupts whose vCPU thread has not yet got
    /// QEMU's global mutex from this thread.
    pub(super) irqs_awaiting_mutex: VecDeque<MutexIrq>,
    /// Kemari with `sync_release`: a released write has not completed yet; the thread
    /// is blocked in HelperFlush waiting for it.
    pub(super) flushing: bool,
    pub(super) flush_blocked: bool,
    pub(super) flush_since: SimTime,
    pub(super) c: HelperCounters,
}

/// What a helper did, one counter per branch (reset at warm-up).
#[derive(Clone, Copy, Default)]
pub(super) struct HelperCounters {
    /// Timer interrupts raised; of them, those that found the thread busy with a sync
    /// or a flush (queued behind it) and those sent to a vCPU on another pCPU.
    pub(super) timer_irqs: u64,
    pub(super) timer_irqs_queued: u64,
    pub(super) timer_irqs_cross_cpu: u64,
    /// `global_mutex`: releases of the mutex with a raised interrupt waiting for it, by
    /// outcome: the thread blocked (nothing left to do) and the vCPU thread took it; the
    /// vCPU thread shares the pCPU and took it; the vCPU thread is on another pCPU and
    /// lost it to this thread going straight on to more work.
    pub(super) mutex_handoffs_idle: u64,
    pub(super) mutex_handoffs_same_cpu: u64,
    pub(super) mutex_handoffs_lost: u64,
    /// Released writes waited for, and the time spent waiting.
    pub(super) flushes: u64,
    pub(super) flush_ns: u64,
}

/// The helpers and the VMs they protect.
pub(super) struct Ft {
    pub(super) helpers: Vec<HelperRt>,
    /// Per VM: its Kemari and DRBD helper ids (NONE if none).
    pub(super) kemari: Vec<u32>,
    pub(super) drbd: Vec<u32>,
    /// Per VM: stopped by a Kemari sync, since when, and totals.
    pub(super) paused: Vec<bool>,
    /// How many VMs are stopped now: `vcpu_paused`, asked several times per event, looks
    /// no further while none is (always, without Kemari).
    pub(super) vms_paused: u32,
    paused_since: Vec<SimTime>,
    paused_ns: Vec<u64>,
    pub(super) syncs: Vec<u64>,
    /// Per VM: guest memory dirtied since the last sync (bytes).
    pub(super) dirty: Vec<f64>,
}

impl Ft {
    pub(super) fn new(nvms: usize) -> Ft {
        Ft {
            helpers: Vec::new(),
            kemari: vec![NONE; nvms],
            drbd: vec![NONE; nvms],
            paused: vec![false; nvms],
            vms_paused: 0,
            paused_since: vec![SimTime::ZERO; nvms],
            paused_ns: vec![0; nvms],
            syncs: vec![0; nvms],
            dirty: vec![0.0; nvms],
        }
    }

    /// A helper thread `thread` (task `task`) serving VM `vm`; returns its id. It starts
    /// blocked, waiting for work.
    pub(super) fn add_helper(
        &mut self,
        spec: &HelperSpec,
        vm: u32,
        thread: ThreadId,
        task: TaskId,
    ) -> u32 {
        let id = self.helpers.len() as u32;
        match spec {
            HelperSpec::Kemari { .. } => self.kemari[vm as usize] = id,
            HelperSpec::Drbd { .. } => self.drbd[vm as usize] = id,
        }
        self.helpers.push(HelperRt {
            spec: spec.clone(),
            vm,
            thread,
            task,
            jobs: VecDeque::new(),
            cur: None,
            waiting: true,
            job_latency: Histogram::default(),
            jobs_done: 0,
            timers: VecDeque::new(),
            cur_timer: None,
            irqs_in_flight: VecDeque::new(),
            irqs_awaiting_mutex: VecDeque::new(),
            flushing: false,
            flush_blocked: false,
            flush_since: SimTime::ZERO,
            c: HelperCounters::default(),
        });
        id
    }

    /// Stops VM `vm` now; false if it is stopped already.
    fn stop(&mut self, vm: usize, now: SimTime) -> bool {
        if self.paused[vm] {
            return false;
        }
        self.paused[vm] = true;
        self.vms_paused += 1;
        self.paused_since[vm] = now;
        true
    }

    /// Resumes VM `vm` if stopped, counting the stop from `metrics_since` at the earliest.
    fn resume(&mut self, vm: usize, now: SimTime, metrics_since: SimTime) {
        if self.paused[vm] {
            self.paused[vm] = false;
            self.vms_paused -= 1;
            self.paused_ns[vm] += now.since(self.paused_since[vm].max(metrics_since)).ns();
        }
    }

    /// VM `vm`'s stopped time counted from `metrics_since`, up to `end`.
    pub(super) fn paused_ns_until(&self, vm: usize, end: SimTime, metrics_since: SimTime) -> u64 {
        self.paused_ns[vm]
            + if self.paused[vm] {
                end.since(self.paused_since[vm].max(metrics_since)).ns()
            } else {
                0
            }
    }

    /// The warm-up reset of the helpers' and VMs' counters.
    pub(super) fn reset_metrics(&mut self) {
        for h in &mut self.helpers {
            h.jobs_done = 0;
            h.job_latency.clear();
            h.c = HelperCounters::default();
        }
        for vm in 0..self.syncs.len() {
            self.syncs[vm] = 0;
            self.paused_ns[vm] = 0;
        }
    }
}

/// The program every helper thread loops over.
pub(super) fn helper_program() -> Vec<RtOp> {
    vec![
        RtOp::HelperWait,
        RtOp::HelperWork,
        RtOp::HelperNet,
        RtOp::HelperDone,
        RtOp::HelperFlush,
    ]
}

impl<S: Scheduler> Sim<'_, S> {
    /// `RtOp::HelperWait`: take the next timer or job, or block until one comes. See
    /// `step_other_op`.
    #[inline(always)]
    pub(super) fn step_helper_wait(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        let h = self.st.workloads[w].helper as usize;
        self.ft_release_mutex(h);
        let th = &mut self.st.threads[id as usize];
        let helper = &mut self.st.ft.helpers[h];
        // QEMU's main loop runs expired timers before bottom halves (the event-tap's
        // sync), so a pending timer goes first.
        if let Some(p) = helper.timers.pop_front() {
            helper.cur_timer = Some(p);
            th.pc += 1;
            return None;
        }
        match helper.jobs.pop_front() {
            Some(job) => {
                helper.cur = Some(job);
                th.pc += 1;
                self.ft_begin_job(h);
                None
            }
            None => {
                helper.waiting = true;
                th.state = ThState::Blocked;
                Some(false)
            }
        }
    }

    /// `RtOp::HelperWork`: burn the CPU work of the job (or timer) in hand.
    #[inline(always)]
    pub(super) fn step_helper_work(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        let h = self.st.workloads[w].helper as usize;
        let work = self.ft_job_cpu(h);
        // As for Compute: the pc advances when the work completes.
        if work <= WORK_EPSILON {
            self.st.threads[id as usize].pc += 1;
            None
        } else {
            self.st.threads[id as usize].state = ThState::Compute {
                remaining: work,
                mode: Mode::Kernel,
                release: NONE,
            };
            Some(true)
        }
    }

    /// `RtOp::HelperNet`: wait for the transfer and the secondary's acknowledgement.
    #[inline(always)]
    pub(super) fn step_helper_net(&mut self, id: ThreadId, w: usize, now: SimTime) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        let h = &self.st.ft.helpers[self.st.workloads[w].helper as usize];
        if h.cur_timer.is_some() {
            return None;
        }
        th.state = ThState::Blocked;
        let job = h.cur.expect("helper job");
        let d = h.spec.until_ack(job.bytes, job.io_ns);
        self.st
            .q
            .push(now + d, EventKind::ThreadWake { thread: id });
        Some(false)
    }

    /// `RtOp::HelperDone`: raise the timer in hand, or complete the job.
    #[inline(always)]
    pub(super) fn step_helper_done(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        self.st.threads[id as usize].pc += 1;
        let h = self.st.workloads[w].helper as usize;
        if let Some(p) = self.st.ft.helpers[h].cur_timer.take() {
            self.ft_interrupt_raised(h, p);
        } else {
            // kemari-next waits for the secondary's ack in QEMU's main loop, which runs
            // the timers that expired meanwhile: their interrupts are pending as the VM
            // resumes.
            while let Some(p) = self.st.ft.helpers[h].timers.pop_front() {
                self.ft_interrupt_raised(h, p);
            }
            self.ft_job_done(h);
        }
        None
    }

    /// `RtOp::HelperFlush`: with `sync_release`, wait until the released write completed.
    #[inline(always)]
    pub(super) fn step_helper_flush(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        let h = self.st.workloads[w].helper as usize;
        let helper = &mut self.st.ft.helpers[h];
        if helper.flushing {
            helper.flush_blocked = true;
            th.state = ThState::Blocked;
            return Some(false);
        }
        None
    }

    /// An `EventKind::Helper` event of helper `h`: a released write completed, or a timer
    /// interrupt reached its vCPU.
    pub(super) fn helper_event(&mut self, h: u32, what: u32) {
        if what == HELPER_FLUSH_DONE {
            self.ft_flush_done(h as usize);
        } else {
            let p = self.st.ft.helpers[h as usize]
                .irqs_in_flight
                .pop_front()
                .expect("an interrupt in flight");
            self.enqueue_inbound(p);
        }
    }

    /// Task `t` is a vCPU of a VM stopped for a Kemari sync: it must not execute guest
    /// code (it halts, and a wake-up leaves it halted until the VM resumes).
    pub(super) fn vcpu_paused(&self, t: TaskId) -> bool {
        self.st.ft.vms_paused != 0
            && t < self.st.n_vcpu_tasks
            && self.st.ft.paused[self.st.tasks[t as usize].vm as usize]
    }

    /// A guest I/O event in a VM protected by Kemari: stop the VM, queue a sync.
    pub(super) fn ft_start_sync(
        &mut self,
        vm: usize,
        thread: ThreadId,
        io_ns: u64,
        write_bytes: u64,
    ) {
        let now = self.st.now;
        // A write buffer counts as dirtied when it is written, unless its workload states
        // a dirtying rate for its computation, which then covers filling the buffer.
        let wl = self.st.threads[thread as usize].workload as usize;
        if self.st.workloads[wl].dirty_bytes_per_ns == 0.0 {
            self.st.ft.dirty[vm] += write_bytes as f64;
        }
        self.st.ft.syncs[vm] += 1;
        // The issuing vCPU left the guest for the write (it halts in run_guest). If the
        // Kemari thread waits for work, the VM stops now: the write's transaction is next
        // (once the thread is woken, after an IPI if it is elsewhere, and scheduled). If
        // it is busy (a transaction or the flush of an earlier write), the write waits in
        // the event-tap queue and the VM runs on until its transaction starts
        // (`ft_begin_job`).
        let from = self.st.threads[thread as usize].task;
        let h = self.st.ft.kemari[vm] as usize;
        if self.st.ft.helpers[h].waiting {
            self.ft_stop_vm(vm, from);
        }
        let job = Job {
            guest_thread: thread,
            enqueued: now,
            bytes: 0.0, // the memory dirtied up to the transaction's start (ft_begin_job)
            io_ns,
            write_bytes,
            local_done: now,
            release_by: NONE,
        };
        let from_cpu = self.st.tasks[from as usize].last_cpu;
        self.ft_submit(h, job, from_cpu);
    }

    /// Stops VM `vm` for a Kemari transaction: its executing vCPUs other than `except`
    /// halt now; one in its switch overhead halts when it would enter the guest.
    fn ft_stop_vm(&mut self, vm: usize, except: TaskId) {
        if !self.st.ft.stop(vm, self.st.now) {
            return;
        }
        let base = self.st.vm_task_base[vm];
        for v in base..base + self.st.vm_vcpus[vm] {
            if v != except
                && matches!(self.view.state[v as usize], RunState::Running(_))
                && self.st.tasks[v as usize].executing
            {
                self.settle(v);
                self.halt(v);
            }
        }
    }

    /// A helper takes its next job. For Kemari that starts a transaction: each one stops
    /// the VM (kemari-next's `vm_stop` per transaction; a queued write's transaction
    /// starts after the previous one resumed the VM and flushed), and carries the memory
    /// dirtied up to now.
    fn ft_begin_job(&mut self, h: usize) {
        if !matches!(self.st.ft.helpers[h].spec, HelperSpec::Kemari { .. }) {
            return;
        }
        let vm = self.st.ft.helpers[h].vm as usize;
        self.ft_stop_vm(vm, NONE);
        let bytes = std::mem::take(&mut self.st.ft.dirty[vm]);
        if let Some(job) = self.st.ft.helpers[h].cur.as_mut() {
            job.bytes = bytes;
        }
    }

    /// A guest disk write goes to the VM's DRBD helper; it completes at the later of the
    /// local write (`local_done`) and the replication. `io_ns` is the write's disk latency
    /// (the secondary's disk takes it too); `release_by` is the Kemari helper that waits
    /// for the write (NONE if none).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ft_replicate(
        &mut self,
        vm: usize,
        thread: ThreadId,
        local_done: SimTime,
        io_ns: u64,
        bytes: u64,
        from_cpu: u32,
        release_by: u32,
    ) {
        let job = Job {
            guest_thread: thread,
            enqueued: self.st.now,
            bytes: bytes as f64,
            io_ns,
            write_bytes: bytes,
            local_done,
            release_by,
        };
        let h = self.st.ft.drbd[vm] as usize;
        self.ft_submit(h, job, from_cpu);
    }

    /// Queues a job; wakes the helper if it waits (after an IPI if it last ran elsewhere).
    fn ft_submit(&mut self, h: usize, job: Job, from_cpu: u32) {
        self.st.ft.helpers[h].jobs.push_back(job);
        self.ft_wake_if_waiting(h, from_cpu);
    }

    /// Wakes helper `h` if it is blocked waiting for work, after an IPI if `from_cpu` is
    /// another pCPU than the one it last ran on (NONE: a local wake). False if it is busy:
    /// it takes the new work when it next looks.
    fn ft_wake_if_waiting(&mut self, h: usize, from_cpu: u32) -> bool {
        let helper = &mut self.st.ft.helpers[h];
        if !helper.waiting {
            return false;
        }
        helper.waiting = false;
        let (tid, task) = (helper.thread, helper.task);
        let last = self.st.tasks[task as usize].last_cpu;
        if last != NONE && from_cpu != NONE && last != from_cpu && self.st.costs_ipi.ns() > 0 {
            self.st.q.push(
                self.st.now + self.st.costs_ipi,
                EventKind::ThreadWake { thread: tid },
            );
        } else {
            self.wake_thread(tid);
        }
        true
    }

    /// CPU work (base-clock ns) of the helper's current job, on the pCPU it runs on.
    fn ft_job_cpu(&self, h: usize) -> f64 {
        let helper = &self.st.ft.helpers[h];
        if helper.cur_timer.is_some() {
            if let HelperSpec::Kemari { timer_cpu, .. } = helper.spec {
                return timer_cpu.ns() as f64;
            }
        }
        let job = helper.cur.expect("a helper works only on a taken job");
        let mib = job.bytes / crate::ft::MIB;
        match helper.spec {
            HelperSpec::Kemari {
                sync_cpu,
                copy_cpu_per_mib,
                ..
            } => {
                // The dirty pages were last written by the vCPU: refill them from its cache.
                let here = match self.view.state[helper.task as usize] {
                    RunState::Running(c) => c,
                    _ => NONE,
                };
                let vcpu = self.st.threads[job.guest_thread as usize].task;
                let there = self.st.tasks[vcpu as usize].last_cpu;
                let refill = if here == NONE || there == NONE {
                    0
                } else {
                    match self.view.topo.distance(here as usize, there as usize) {
                        Distance::SameCpu => 0,
                        d => self.st.costs_migration[d as usize - 1].ns(),
                    }
                };
                sync_cpu.ns() as f64 + mib * (copy_cpu_per_mib.ns() + refill) as f64
            }
            HelperSpec::Drbd {
                cpu_per_write,
                cpu_per_mib,
                ..
            } => cpu_per_write.ns() as f64 + mib * cpu_per_mib.ns() as f64,
        }
    }

    /// The helper finished its current job.
    fn ft_job_done(&mut self, h: usize) {
        let now = self.st.now;
        let helper = &mut self.st.ft.helpers[h];
        let job = helper
            .cur
            .take()
            .expect("a helper completes only a taken job");
        helper.jobs_done += 1;
        helper.job_latency.record(now.since(job.enqueued).ns());
        let here = self.st.tasks[helper.task as usize].last_cpu;
        let vm = helper.vm as usize;
        let is_kemari = matches!(helper.spec, HelperSpec::Kemari { .. });
        let sync_release = helper.spec.waits_for_release();
        let ipi = self.st.costs_ipi;
        let vcpu_of =
            |st: &State, th: ThreadId| st.tasks[st.threads[th as usize].task as usize].last_cpu;
        if is_kemari {
            self.st.ft.resume(vm, now, self.st.metrics_since);
            let base = self.st.vm_task_base[vm];
            for v in base..base + self.st.vm_vcpus[vm] {
                let task = &self.st.tasks[v as usize];
                // A vCPU whose idle loop spins goes back to spinning even without work.
                let has_work =
                    task.cur != NONE || !task.local.is_empty() || self.idle_loop_spins(v);
                if self.view.state[v as usize] != RunState::Halted || !has_work {
                    continue;
                }
                if task.last_cpu != here && ipi.ns() > 0 {
                    self.st.q.push(now + ipi, EventKind::TaskStart { task: v });
                } else {
                    self.make_runnable(v);
                }
            }
            // Release the held I/O. With sync_release the thread then waits for it
            // (kemari-next's event-tap flushes each released write: qemu_aio_flush and
            // bdrv_flush, in the I/O thread).
            let local_done = now + SimDuration(job.io_ns);
            if sync_release {
                let helper = &mut self.st.ft.helpers[h];
                helper.flushing = true;
                helper.flush_since = now;
                helper.c.flushes += 1;
            }
            if job.write_bytes > 0 && self.st.ft.drbd[vm] != NONE {
                let waiter = if sync_release { h as u32 } else { NONE };
                self.ft_replicate(
                    vm,
                    job.guest_thread,
                    local_done,
                    job.io_ns,
                    job.write_bytes,
                    here,
                    waiter,
                );
            } else {
                self.st.q.push(
                    local_done,
                    EventKind::ThreadWake {
                        thread: job.guest_thread,
                    },
                );
                if sync_release {
                    self.st.q.push(
                        local_done,
                        EventKind::Helper {
                            helper: h as u32,
                            what: HELPER_FLUSH_DONE,
                        },
                    );
                }
            }
        } else {
            let cross = vcpu_of(&self.st, job.guest_thread) != here;
            let at = job.local_done.max(now) + if cross { ipi } else { SimDuration::ZERO };
            self.st.q.push(
                at,
                EventKind::ThreadWake {
                    thread: job.guest_thread,
                },
            );
            if job.release_by != NONE {
                // The write completes for Kemari's flush when the replication is acked.
                let kemari_cpu = self.st.tasks
                    [self.st.ft.helpers[job.release_by as usize].task as usize]
                    .last_cpu;
                let cross = kemari_cpu != here;
                self.st.q.push(
                    job.local_done.max(now) + if cross { ipi } else { SimDuration::ZERO },
                    EventKind::Helper {
                        helper: job.release_by,
                        what: HELPER_FLUSH_DONE,
                    },
                );
            }
        }
    }

    /// A released write has completed: a Kemari thread blocked in HelperFlush goes on.
    fn ft_flush_done(&mut self, h: usize) {
        let now = self.st.now;
        let helper = &mut self.st.ft.helpers[h];
        if !helper.flushing {
            return;
        }
        helper.flushing = false;
        helper.c.flush_ns += now
            .since(helper.flush_since.max(self.st.metrics_since))
            .ns();
        if std::mem::take(&mut helper.flush_blocked) {
            let tid = helper.thread;
            self.wake_thread(tid);
        }
    }

    /// A guest timer expired in a VM whose Kemari thread raises its timer interrupts
    /// (QEMU 1.0's userspace APIC: the I/O thread's main loop runs the timer). The
    /// thread handles it when it is free: at once if it waits, else after its current
    /// sync or flush.
    pub(super) fn ft_timer_expired(&mut self, h: usize, p: Packet) {
        self.st.ft.helpers[h].timers.push_back(p);
        if !self.ft_wake_if_waiting(h, NONE) {
            self.st.ft.helpers[h].c.timer_irqs_queued += 1;
        }
    }

    /// The Kemari thread has raised a timer interrupt. With `global_mutex` the vCPU
    /// thread must take QEMU's global mutex to inject it, which it can only when this
    /// thread releases the mutex (`ft_release_mutex`); without, it goes to the vCPU now.
    fn ft_interrupt_raised(&mut self, h: usize, p: Packet) {
        if self.st.ft.helpers[h].spec.holds_global_mutex() {
            self.st.ft.helpers[h]
                .irqs_awaiting_mutex
                .push_back(MutexIrq::Timer(p));
        } else {
            self.ft_raise_timer(h, p);
        }
    }

    /// A wake-up of guest thread `th`: if it completes a write held by a Kemari
    /// event-tap and, with `global_mutex`, the Kemari thread holds the mutex (a
    /// transaction or timer in hand, or a flush under way), the completion interrupt
    /// waits for a release like a timer interrupt. True if it waits.
    #[inline]
    pub(super) fn ft_write_done_awaits_mutex(&mut self, th: ThreadId) -> bool {
        let thread = &self.st.threads[th as usize];
        if !thread.kemari_io || thread.task >= self.st.n_vcpu_tasks {
            return false;
        }
        let vm = self.st.tasks[thread.task as usize].vm as usize;
        let h = self.st.ft.kemari[vm] as usize;
        let helper = &mut self.st.ft.helpers[h];
        // It holds the mutex while it has a transaction or a timer in hand, or waits for a
        // released write; woken but not yet back in its main loop, it does not.
        let busy = helper.cur.is_some() || helper.cur_timer.is_some() || helper.flushing;
        if !helper.spec.holds_global_mutex() || !busy {
            return false;
        }
        helper
            .irqs_awaiting_mutex
            .push_back(MutexIrq::WriteDone(th));
        true
    }

    /// The Kemari thread is back in QEMU's main loop, which releases the global mutex
    /// only around select() and takes it again when select() returns. A vCPU thread
    /// waiting for the mutex on the thread's own pCPU gets it: the futex wake-up makes it
    /// runnable there and it preempts the releaser (a woken sleeper), so it runs before
    /// the relock. A vCPU thread on another pCPU gets it only if the thread now blocks
    /// in select() (no timer and no sync left to do); with work left, select() returns
    /// at once and the thread retakes the mutex within a microsecond, before the
    /// waiter's wake-up on its pCPU lands, and the interrupt waits for the next release.
    fn ft_release_mutex(&mut self, h: usize) {
        let helper = &self.st.ft.helpers[h];
        let Some(&first) = helper.irqs_awaiting_mutex.front() else {
            return;
        };
        let idle = helper.timers.is_empty() && helper.jobs.is_empty();
        let here = self.st.tasks[helper.task as usize].last_cpu;
        // The VM has one vCPU thread that waits (seed 003's guest; with more, the first
        // interrupt's vCPU decides).
        let target = match first {
            MutexIrq::Timer(p) => self.st.workloads[p.workload as usize].timer_task,
            MutexIrq::WriteDone(th) => self.st.threads[th as usize].task,
        };
        let same_cpu = self.st.tasks[target as usize].last_cpu == here;
        if idle || same_cpu {
            let c = &mut self.st.ft.helpers[h].c;
            if idle {
                c.mutex_handoffs_idle += 1;
            } else {
                c.mutex_handoffs_same_cpu += 1;
            }
            while let Some(irq) = self.st.ft.helpers[h].irqs_awaiting_mutex.pop_front() {
                match irq {
                    MutexIrq::Timer(p) => self.ft_raise_timer(h, p),
                    MutexIrq::WriteDone(th) => self.wake_thread(th),
                }
            }
        } else {
            self.st.ft.helpers[h].c.mutex_handoffs_lost += 1;
        }
    }

    /// The interrupt goes to the vCPU, after an IPI (the vCPU thread's kick) if the vCPU
    /// last ran on another pCPU.
    fn ft_raise_timer(&mut self, h: usize, p: Packet) {
        let helper = &mut self.st.ft.helpers[h];
        helper.c.timer_irqs += 1;
        let here = self.st.tasks[helper.task as usize].last_cpu;
        let target = self.st.workloads[p.workload as usize].timer_task;
        let there = self.st.tasks[target as usize].last_cpu;
        let ipi = self.st.costs_ipi;
        if there != NONE && there != here && ipi.ns() > 0 {
            let helper = &mut self.st.ft.helpers[h];
            helper.c.timer_irqs_cross_cpu += 1;
            helper.irqs_in_flight.push_back(p);
            self.st.q.push(
                self.st.now + ipi,
                EventKind::Helper {
                    helper: h as u32,
                    what: HELPER_IRQ_ARRIVES,
                },
            );
        } else {
            self.enqueue_inbound(p);
        }
    }
}
