//! The guest model: the interpreter that steps each guest thread (and host thread)
//! through its operations (`step_thread`), the guest's time slices, compute progress at
//! the pCPU's speed (`settle`), the vCPU's next guest deadline, and wake-ups of blocked
//! threads. Compute and sleep are stepped here; every other operation is handed to the
//! file of its concern (`step_other_op`). lookbusy's controller lives here too: it reads
//! the guest's own CPU time.

use super::queue::EventKind;
use super::{Sim, ThState, ThreadId, MAX_ZERO_TIME_LOOPS, NONE, WORK_EPSILON};
use crate::model::RtOp;
use crate::sched::{RunState, Scheduler, TaskId, Waker};
use crate::time::{u64_as_f64, SimDuration, SimTime};
use crate::workload::Mode;

/// One lookbusy spinner's controller (lookbusy 1.4 `cpu_spin`): the CPU work of its next
/// busy phase, and the wall clock and guest-wide busy time when the last cycle began.
#[derive(Clone, Copy, Debug)]
pub(super) struct LookbusyState {
    busy_ns: f64,
    cycle_start: SimTime,
    guest_busy_at_start: u64,
}

/// lookbusy's floor for a busy phase (its `minimum_cycles`, 10,000 loop iterations: ~10 us).
const LOOKBUSY_MIN_BUSY_NS: f64 = 10_000.0;

impl LookbusyState {
    /// A cycle starts now, the guest having been busy `guest_busy` ns so far: moves the
    /// busy phase by (target `util` - measured) x phase / `spinners` (see
    /// `lookbusy_busy_ns`) and returns it.
    fn next_cycle(&mut self, now: SimTime, guest_busy: u64, util: f64, spinners: u32) -> f64 {
        let wall = now.since(self.cycle_start).ns();
        if wall > 0 {
            let spinners = spinners.max(1) as f64;
            let busy = guest_busy.saturating_sub(self.guest_busy_at_start);
            let measured = busy as f64 / wall as f64 / spinners;
            let adjust = (util - measured) * self.busy_ns / spinners;
            self.busy_ns = (self.busy_ns + adjust).max(LOOKBUSY_MIN_BUSY_NS);
        }
        self.cycle_start = now;
        self.guest_busy_at_start = guest_busy;
        self.busy_ns
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// Brings the executing task's compute progress and spin time up to now. Inlined
    /// (forced: the compiler kept it out of line, and the call cost a third of its work).
    #[inline(always)]
    pub(super) fn settle(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        if !task.executing {
            return;
        }
        task.account_spin(now);
        let elapsed = now.since(task.progress_from).ns();
        task.progress_from = now;
        if elapsed == 0 || task.cur == NONE {
            return;
        }
        let th = &mut self.st.threads[task.cur as usize];
        // An executing task runs where it was last dispatched (`executing` is set only
        // after a dispatch and cleared by the deschedule): the task's own line says where,
        // without a read of `view.state` (another line, a miss at thousands of vCPUs).
        let cpu = task.last_cpu as usize;
        debug_assert_eq!(self.view.state[t as usize], RunState::Running(cpu as u32));
        match &mut th.state {
            ThState::Compute { remaining, .. } => {
                *remaining -= u64_as_f64(elapsed) * self.st.cpus[cpu].speed;
            }
            ThState::SpinLock { pv_left, .. } if pv_left.is_finite() => {
                *pv_left -= u64_as_f64(elapsed) * self.st.cpus[cpu].speed;
            }
            _ => {}
        }
    }

    /// The running task's deadline fired: finish a compute or rotate guest threads.
    pub(super) fn guest_progress(&mut self, t: TaskId) {
        let cur = self.st.tasks[t as usize].cur;
        if cur == NONE {
            self.run_guest(t);
            return;
        }
        let spin_mode = match self.st.threads[cur as usize].state {
            ThState::SpinLock { mode, .. } => Some(mode),
            ThState::SpinIpi { .. } => Some(Mode::Kernel),
            _ => None,
        };
        if let Some(mode) = spin_mode {
            if self.ple_deadline(t, mode).is_some_and(|d| d <= self.st.now) {
                self.pause_loop_exit(t, mode);
            }
            if let ThState::SpinLock {
                lock,
                hold,
                mode,
                pv_left,
            } = self.st.threads[cur as usize].state
            {
                if pv_left <= WORK_EPSILON && self.st.tasks[t as usize].executing {
                    // pv_wait: halt in the guest kernel (preemption off, so no other
                    // guest thread runs here) until kicked or interrupted.
                    self.st.threads[cur as usize].state = ThState::PvWait { lock, hold, mode };
                    self.st.tasks[t as usize].c.pv_waits += 1;
                    self.update_guest_deadline(t); // ends the spin accounting
                    self.halt(t);
                    return;
                }
            }
            if self.st.tasks[t as usize].executing {
                self.update_guest_deadline(t);
            }
            return;
        }
        if let ThState::Compute {
            remaining, release, ..
        } = self.st.threads[cur as usize].state
        {
            if remaining <= WORK_EPSILON {
                self.st.h.op_completions += 1;
                if release != NONE {
                    self.release_lock(release, t);
                }
                let th = &mut self.st.threads[cur as usize];
                th.state = ThState::Ready;
                th.pc += 1;
            } else {
                // Guest time slice over: rotate to the next runnable thread.
                let task = &mut self.st.tasks[t as usize];
                let slice = self.st.vm_timeslice[task.vm as usize];
                if !task.local.is_empty() && self.st.now >= task.slice_start + slice {
                    task.local.push_back(cur);
                    task.cur = NONE;
                }
            }
        }
        self.run_guest(t);
    }

    /// Runs the executing task's guest threads until one needs time, spins, or all block.
    pub(super) fn run_guest(&mut self, t: TaskId) {
        loop {
            if self.vcpu_paused(t) {
                // Stopped by a Kemari sync: the vCPU thread sleeps until the VM resumes.
                self.halt(t);
                return;
            }
            let task = &mut self.st.tasks[t as usize];
            if task.cur == NONE {
                match task.local.pop_front() {
                    Some(th) => {
                        task.cur = th;
                        task.slice_start = self.st.now;
                        task.in_mm = true;
                    }
                    None => {
                        if self.idle_loop_spins(t) {
                            self.idle_poll(t);
                        } else if !self.guest_idle_polls(t) {
                            self.halt(t);
                        }
                        return;
                    }
                }
            }
            let cur = task.cur;
            if self.step_thread(cur) {
                break;
            }
            self.st.tasks[t as usize].cur = NONE;
            if self.st.error.is_some() {
                return;
            }
        }
        self.update_guest_deadline(t);
    }

    /// `idle = "poll"`: the executing vCPU `t` has nothing to run and its idle loop spins
    /// without halting, so it stays on its pCPU with no guest deadline: a thread made
    /// ready runs at once (`make_thread_ready`), and only the host takes the pCPU away.
    fn idle_poll(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        task.end_spin(now);
        let cpu = task.last_cpu;
        self.st.cpus[cpu as usize].guest_at = None;
        self.rearm(cpu);
    }

    /// Whether `t` is a vCPU of a VM whose idle loop spins (`idle = "poll"`); host
    /// threads, which name a VM too, always block.
    pub(super) fn idle_loop_spins(&self, t: TaskId) -> bool {
        t < self.st.n_vcpu_tasks && self.st.vm_idle_poll[self.st.tasks[t as usize].vm as usize]
    }

    /// Whether `t` is executing its idle loop (`idle = "poll"`), so a thread made ready
    /// runs at once.
    pub(super) fn idle_polling(&self, t: TaskId) -> bool {
        let task = &self.st.tasks[t as usize];
        task.cur == NONE && task.executing && self.idle_loop_spins(t)
    }

    /// Sets the pCPU's guest deadline for the task's current thread.
    pub(super) fn update_guest_deadline(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        // Executing: running where last dispatched (see `settle`), found on the task's
        // line; otherwise only a running task (in its switch overhead) has a deadline.
        let cpu = if task.executing {
            debug_assert_eq!(
                self.view.state[t as usize],
                RunState::Running(task.last_cpu)
            );
            task.last_cpu
        } else {
            match self.view.state[t as usize] {
                RunState::Running(c) => c,
                _ => return,
            }
        };
        if task.cur == NONE {
            return; // polling in the guest idle loop: its deadline is the poll's end
        }
        let th = &self.st.threads[task.cur as usize];
        let spinning = matches!(th.state, ThState::SpinLock { .. } | ThState::SpinIpi { .. });
        match (spinning, task.spin_since) {
            (true, None) => {
                task.spin_since = Some(now);
                task.kv.ple_from = task.kv.ple_from.max(now);
            }
            (false, Some(_)) => task.end_spin(now),
            _ => {}
        }
        let deadline = match th.state {
            ThState::Compute {
                remaining, mode, ..
            } => {
                let speed = self.st.cpus[cpu as usize].speed;
                let mut d = now + SimDuration::ceil_ns(remaining / speed);
                if mode == Mode::User && !task.local.is_empty() {
                    let slice_end = task.slice_start + self.st.vm_timeslice[task.vm as usize];
                    d = d.min(slice_end.max(now));
                }
                Some(d)
            }
            ThState::SpinLock { mode, pv_left, .. } => {
                let ple = self.ple_deadline(t, mode);
                if pv_left.is_finite() {
                    let speed = self.st.cpus[cpu as usize].speed;
                    let pv = now + SimDuration::ceil_ns(pv_left / speed);
                    Some(ple.map_or(pv, |p| p.min(pv)))
                } else {
                    ple
                }
            }
            ThState::SpinIpi { .. } => self.ple_deadline(t, Mode::Kernel),
            _ => None,
        };
        self.st.cpus[cpu as usize].guest_at = deadline;
        self.rearm(cpu);
    }

    /// Advances a thread through operations that take no time. Returns true if the
    /// thread keeps its vCPU (computing or spinning), false if it blocked.
    fn step_thread(&mut self, id: ThreadId) -> bool {
        let now = self.st.now;
        loop {
            let th = &mut self.st.threads[id as usize];
            match th.state {
                ThState::Compute { .. } => return true,
                ThState::Blocked => return false,
                ThState::SpinIpi { pending } => {
                    if pending > 0 {
                        return true;
                    }
                    self.ipi_round_trip(id);
                    continue;
                }
                ThState::SpinLock {
                    lock, hold, mode, ..
                }
                | ThState::PvWait { lock, hold, mode } => {
                    let was_waiting = matches!(th.state, ThState::PvWait { .. });
                    if self.try_lock(id, lock, false) {
                        let hold = hold + self.line_pull(id, lock);
                        self.st.threads[id as usize].state = ThState::Compute {
                            remaining: hold,
                            mode,
                            release: lock,
                        };
                        continue;
                    }
                    if was_waiting {
                        // Woken without the lock (an interrupt): the slow path spins again.
                        let vm = self.st.tasks[self.st.threads[id as usize].task as usize].vm;
                        let pv_left = self.pv_spin_budget(vm, mode);
                        self.st.threads[id as usize].state = ThState::SpinLock {
                            lock,
                            hold,
                            mode,
                            pv_left,
                        };
                    }
                    return true;
                }
                ThState::Ready => {}
            }
            let w = th.workload as usize;
            let ops_len = self.st.workloads[w].ops.len() as u32;
            if th.pc >= ops_len {
                th.pc = 0;
                if th.last_loop_at == now {
                    th.zero_time_loops += 1;
                    if th.zero_time_loops > MAX_ZERO_TIME_LOOPS {
                        th.state = ThState::Blocked;
                        let vm = self.st.workloads[w].vm as usize;
                        let rx_for = self.st.workloads[w].rx_for;
                        let msg = if rx_for != NONE {
                            let local = rx_for as usize - self.st.vm_workload_base[vm] as usize;
                            let name = self.model.vms[vm].name.clone();
                            format!("the rx path of vm[{vm}] ({name:?}), workload[{local}], completed {MAX_ZERO_TIME_LOOPS} loops without time passing: give it a per_packet or per_kib cost")
                        } else if w >= self.st.n_vm_workloads as usize {
                            let hi = w - self.st.n_vm_workloads as usize;
                            format!("host_thread[{hi}] completed {MAX_ZERO_TIME_LOOPS} loops without time passing: its operations take no time")
                        } else {
                            let local = w - self.st.vm_workload_base[vm] as usize;
                            let name = self.model.vms[vm].name.clone();
                            format!("a thread of vm[{vm}] ({name:?}), workload[{local}], completed {MAX_ZERO_TIME_LOOPS} loops without time passing: its operations take no time")
                        };
                        self.fail(msg);
                        return false;
                    }
                } else {
                    th.zero_time_loops = 0;
                    th.last_loop_at = now;
                }
                let wl = &mut self.st.workloads[w];
                if !wl.counts_requests {
                    wl.completed += 1;
                }
                if wl.units_left.is_some() {
                    wl.units_running -= 1;
                    self.st.threads[id as usize].holds_unit = false;
                    if wl.units_left == Some(0) && wl.units_running == 0 {
                        wl.finished_at = Some(now);
                    }
                }
            }
            let th = &mut self.st.threads[id as usize];
            if th.pc == 0 && !th.holds_unit {
                // A finite workload hands out its units one loop at a time (sysbench's
                // event counter); with none left the thread exits. A thread back at its
                // first operation after blocking there (a mutex it found held) is still
                // in the loop it took a unit for.
                let wl = &mut self.st.workloads[w];
                match wl.units_left {
                    Some(0) => {
                        th.state = ThState::Blocked;
                        return false;
                    }
                    Some(left) => {
                        wl.units_left = Some(left - 1);
                        wl.units_running += 1;
                        th.holds_unit = true;
                    }
                    None => {}
                }
            }
            let op = &self.st.workloads[w].ops[th.pc as usize];
            match op {
                RtOp::Compute { work, mode } => {
                    let x = work.sample(&mut th.rng);
                    let wl = &self.st.workloads[w];
                    if wl.dirty_bytes_per_ns > 0.0 {
                        // Dirtied as the compute starts (Kemari snapshots at sync time).
                        self.st.ft.dirty[wl.vm as usize] += x * wl.dirty_bytes_per_ns;
                    }
                    if x > WORK_EPSILON {
                        th.state = ThState::Compute {
                            remaining: x,
                            mode: *mode,
                            release: NONE,
                        };
                        return true;
                    }
                    th.pc += 1;
                }
                RtOp::Sleep { duration: d } => {
                    let x = d.sample(&mut th.rng);
                    th.state = ThState::Blocked;
                    th.pc += 1;
                    self.st.q.push(
                        now + SimDuration::round_ns(x),
                        EventKind::ThreadWake { thread: id },
                    );
                    return false;
                }
                _ => match self.step_other_op(id, w, now) {
                    None => continue,
                    Some(keeps_vcpu) => return keeps_vcpu,
                },
            }
        }
    }

    /// `step_thread` for every operation but Compute and Sleep (all that the hot loops of
    /// most models use), out of line: inlined, their state and address arithmetic was
    /// hoisted into the frame set-up of every guest run. None: go on to the thread's next
    /// operation; Some(keeps_vcpu): what `step_thread` returns. Each arm reads the
    /// operation's fields and hands them to the file of its concern, whose step function
    /// is inlined here (forced: it was this arm before the engine was split by concern).
    #[inline(never)]
    fn step_other_op(&mut self, id: ThreadId, w: usize, now: SimTime) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        match &self.st.workloads[w].ops[th.pc as usize] {
            RtOp::Compute { .. } | RtOp::Sleep { .. } => unreachable!("step_thread's own"),
            RtOp::Lock {
                lock,
                hold,
                mode,
                shards,
            } => {
                let hold = hold.sample(&mut th.rng);
                let (lock, mode, shards) = (*lock, *mode, *shards);
                self.step_lock(id, w, lock, hold, mode, shards)
            }
            RtOp::Ipi { targets } => {
                let targets = targets.clone();
                self.step_ipi(id, &targets)
            }
            RtOp::Io {
                latency,
                write_bytes,
                window,
                writeback,
            } => {
                let (latency, write_bytes) = (latency.clone(), *write_bytes);
                let (window, writeback) = (*window, *writeback);
                self.step_io(id, w, now, latency, write_bytes, window, writeback)
            }
            &RtOp::Timer {
                period,
                relative,
                slot,
            } => self.step_timer(id, now, period, relative, slot),
            RtOp::HelperWait => self.step_helper_wait(id, w),
            RtOp::HelperWork => self.step_helper_work(id, w),
            RtOp::HelperNet => self.step_helper_net(id, w, now),
            RtOp::HelperDone => self.step_helper_done(id, w),
            RtOp::HelperFlush => self.step_helper_flush(id, w),
            RtOp::WaitRequest => self.step_wait_request(id, w),
            RtOp::Taken => self.step_taken(id, w),
            RtOp::RespondHeld => self.step_respond_held(id, w),
            RtOp::ReleaseHeld => self.step_release_held(id),
            RtOp::Respond => self.step_respond(id, w),
            &RtOp::PacketWork {
                per_packet,
                per_kib,
            } => self.step_packet_work(id, per_packet, per_kib),
            RtOp::Forward => self.step_forward(id),
            RtOp::RxDeliver => self.step_rx_deliver(id),
            &RtOp::LookbusySpin {
                util,
                first_busy_ns,
                spinners,
            } => self.step_lookbusy(id, w, util, first_busy_ns, spinners),
        }
    }

    /// rt-app's timer event (rt-app.c, `case rtapp_timer`): the expiry moves on by a
    /// period from the run's start (rt-app's `t_first`, the use case's start); the thread
    /// sleeps until it, or, late, goes on at once (and a relative timer counts the next
    /// period from now).
    fn step_timer(
        &mut self,
        id: ThreadId,
        now: SimTime,
        period: SimDuration,
        relative: bool,
        slot: u32,
    ) -> Option<bool> {
        let next = self
            .st
            .rtapp_timers
            .entry((id, slot))
            .or_insert(SimTime::ZERO);
        *next += period;
        let at = *next;
        self.st.threads[id as usize].pc += 1;
        if now < at {
            self.st.threads[id as usize].state = ThState::Blocked;
            self.st.q.push(at, EventKind::ThreadWake { thread: id });
            return Some(false);
        }
        if relative {
            self.st.rtapp_timers.insert((id, slot), now);
        }
        None
    }

    /// lookbusy's busy phase: as long as its controller says (see `lookbusy_busy_ns`).
    #[inline(always)]
    fn step_lookbusy(
        &mut self,
        id: ThreadId,
        w: usize,
        util: f64,
        first: f64,
        spinners: u32,
    ) -> Option<bool> {
        let busy = self.lookbusy_busy_ns(id, util, first, spinners);
        let wl = &self.st.workloads[w];
        if wl.dirty_bytes_per_ns > 0.0 {
            // As for Compute: dirtied as the busy phase starts.
            self.st.ft.dirty[wl.vm as usize] += busy * wl.dirty_bytes_per_ns;
        }
        let th = &mut self.st.threads[id as usize];
        // As for Compute: the pc advances when the work completes.
        th.state = ThState::Compute {
            remaining: busy,
            mode: Mode::User,
            release: NONE,
        };
        Some(true)
    }

    /// A blocked thread (guest or host) goes on: it is Ready and queued on its task. A
    /// thread with disk requests outstanding was woken by a completion, which counts them
    /// down (`io_completed`).
    pub(super) fn wake_thread(&mut self, id: ThreadId) {
        self.wake_thread_from(id, None)
    }

    /// `wake_thread` by a running task (`waker`, the task handing the thread work). A
    /// disk completion is an interrupt and keeps none.
    pub(super) fn wake_thread_from(&mut self, id: ThreadId, waker: Option<Waker>) {
        let th = &mut self.st.threads[id as usize];
        if th.io_pending > 0 {
            self.io_completed(id);
            return;
        }
        th.state = ThState::Ready;
        self.make_thread_ready_from(id, waker);
    }

    /// A guest thread became runnable (I/O done, timer, request): queue it on its vCPU and
    /// interrupt the vCPU if it is halted.
    pub(super) fn make_thread_ready(&mut self, id: ThreadId) {
        self.make_thread_ready_from(id, None)
    }

    /// `make_thread_ready`, a halted vCPU woken on behalf of `waker` (see
    /// `make_runnable_from`).
    fn make_thread_ready_from(&mut self, id: ThreadId, waker: Option<Waker>) {
        let t = self.st.threads[id as usize].task;
        if self.st.workloads[self.st.threads[id as usize].workload as usize].rt {
            self.make_rt_thread_ready(id, t, waker);
            return;
        }
        self.st.tasks[t as usize].local.push_back(id);
        if self.guest_poll_woken(t) || self.idle_polling(t) {
            // The poll's time is not the thread's progress.
            self.settle(t);
            self.run_guest(t);
            return;
        }
        match self.view.state[t as usize] {
            RunState::Halted if self.vcpu_paused(t) => {}
            RunState::Halted => self.make_runnable_from(t, waker),
            RunState::Running(_) if self.st.tasks[t as usize].executing => {
                // A second runnable thread may start the guest time slice.
                self.settle(t);
                self.update_guest_deadline(t);
            }
            _ => {}
        }
    }

    /// An RT-priority guest thread preempts the vCPU's normal threads at once.
    fn make_rt_thread_ready(&mut self, id: ThreadId, t: TaskId, waker: Option<Waker>) {
        if self.guest_poll_woken(t) || self.idle_polling(t) {
            self.st.tasks[t as usize].local.push_front(id);
            self.settle(t);
            self.run_guest(t);
            return;
        }
        let cur = self.st.tasks[t as usize].cur;
        let preempt =
            cur != NONE && !self.st.workloads[self.st.threads[cur as usize].workload as usize].rt;
        let executing = matches!(self.view.state[t as usize], RunState::Running(_))
            && self.st.tasks[t as usize].executing;
        if preempt {
            if executing {
                self.settle(t);
            }
            let task = &mut self.st.tasks[t as usize];
            task.local.push_front(cur);
            task.cur = NONE;
        }
        self.st.tasks[t as usize].local.push_front(id);
        match self.view.state[t as usize] {
            RunState::Halted if self.vcpu_paused(t) => {}
            RunState::Halted => self.make_runnable_from(t, waker),
            RunState::Running(_) if executing => {
                if preempt {
                    self.run_guest(t);
                } else {
                    self.settle(t);
                    self.update_guest_deadline(t);
                }
            }
            _ => {}
        }
    }

    /// The guest-visible busy time of VM `vm` so far (ns): its vCPUs' time on pCPUs,
    /// including the current stretch of those running. Stolen time (a vCPU runnable but
    /// not running, or stopped) is not busy, as in a guest kernel that accounts steal time
    /// (Xen and KVM guests since Linux 3.x). Deviation: lookbusy reads user + nice +
    /// system only, so a guest's interrupt and softirq time (an `rx` path) and the host's
    /// switch costs, which count here, would not count there; both are small.
    fn guest_busy_ns(&self, vm: u32) -> u64 {
        let now = self.st.now;
        let base = self.st.vm_task_base[vm as usize];
        (base..base + self.st.vm_vcpus[vm as usize])
            .map(|t| {
                let task = &self.st.tasks[t as usize];
                let running = matches!(self.view.state[t as usize], RunState::Running(_));
                task.run_ns_before_warmup
                    + task.c.run_ns
                    + if running {
                        now.since(task.state_since).ns()
                    } else {
                        0
                    }
            })
            .sum()
    }

    /// lookbusy 1.4's `cpu_spin` controller: each cycle is a busy phase then a fixed
    /// sleep. At the start of a cycle it reads the guest's busy time over the last cycle
    /// (all CPUs, /proc/stat's user + nice + system, divided by its spinner count) and
    /// moves the busy phase by (target - measured) x busy phase / spinners. A guest that
    /// cannot get its target share therefore grows its busy phases cycle after cycle.
    fn lookbusy_busy_ns(&mut self, id: ThreadId, util: f64, first: f64, spinners: u32) -> f64 {
        let now = self.st.now;
        let vm = self.st.workloads[self.st.threads[id as usize].workload as usize].vm;
        let busy_now = self.guest_busy_ns(vm);
        let th = &mut self.st.threads[id as usize];
        th.lookbusy
            .get_or_insert(LookbusyState {
                busy_ns: first,
                cycle_start: now,
                guest_busy_at_start: busy_now,
            })
            .next_cycle(now, busy_now, util, spinners)
    }
}
