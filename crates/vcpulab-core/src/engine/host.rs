//! The host side of the engine: dispatch and deschedule of tasks on pCPUs (switch and
//! migration costs, run-time accounting), reschedules, halts, wake-ups, and each pCPU's
//! next deadline (its scheduler timer or its guest's next step). The only caller of the
//! scheduler's hooks: every decision the scheduler makes enters the engine here (the
//! other files only ask it read-only questions: counters, checks, hints).

use super::ple::close_streak;
use super::queue::EventKind;
use super::{Sim, ThState, NONE};
use crate::sched::{
    CpuId, RunState, SchedCtx, Scheduler, TaskId, Waker, YieldRequest, YieldResult,
};
use crate::time::SimTime;
use crate::workload::Mode;

impl<S: Scheduler> Sim<'_, S> {
    #[inline]
    pub(super) fn trace_instant(
        &mut self,
        task: TaskId,
        kind: &'static str,
        cpu: Option<u32>,
        other: Option<u32>,
    ) {
        if let Some(tr) = &mut self.st.trace {
            tr.instant(self.st.now, task, kind, cpu, other);
        }
    }

    #[inline]
    pub(super) fn trace_run(&mut self, cpu: CpuId, task: TaskId, start: SimTime) {
        if let Some(tr) = &mut self.st.trace {
            tr.run(cpu, task, start, self.st.now);
        }
    }

    /// Applies timer requests made by the last hook. Most hooks make none, so the check
    /// is inlined at every call and the work is not.
    #[inline(always)]
    fn apply_out(&mut self) {
        if !self.out.timers.is_empty() || self.out.global_timer.is_some() {
            self.apply_timer_requests();
        }
    }

    #[inline(never)]
    fn apply_timer_requests(&mut self) {
        // In request order, so the last request for a pCPU wins.
        for i in 0..self.out.timers.len() {
            let (cpu, at) = self.out.timers[i];
            self.st.cpus[cpu as usize].timer_at = at;
            self.rearm(cpu);
        }
        self.out.timers.clear();
        if let Some(g) = self.out.global_timer.take() {
            self.st.global_gen += 1;
            if let Some(at) = g {
                let gen = self.st.global_gen;
                self.st
                    .q
                    .push(at.max(self.st.now), EventKind::Global { gen });
            }
        }
    }

    /// Runs kicked vCPUs and pending reschedules until nothing is left to do.
    pub(super) fn flush(&mut self) {
        self.run_kicked();
        // Reschedule in request order; requests made meanwhile are appended and come
        // after, so one pass with a cursor handles them all (no batch buffer to swap).
        let mut i = 0;
        while let Some(&cpu) = self.out.resched.get(i) {
            i += 1;
            self.out.resched_pending[cpu as usize] = false;
            self.resched(cpu);
            self.run_kicked();
        }
        self.out.resched.clear();
        while let Some(t) = self.st.kvm.spin_loop_exits.pop() {
            let task = &mut self.st.tasks[t as usize];
            if task.executing {
                task.kv.in_spin_loop = false;
                task.kv.dy_eligible = false;
            }
        }
        self.commit_rearms();
    }

    /// Runs the guests of kicked vCPUs that are still executing.
    #[inline(always)]
    fn run_kicked(&mut self) {
        while let Some(t) = self.st.kicks.pop() {
            if self.st.tasks[t as usize].executing {
                self.settle(t);
                self.run_guest(t);
            }
        }
    }

    fn resched(&mut self, cpu: CpuId) {
        self.resched_pick(cpu);
        // A vCPU that halted here polls now if nothing else was picked.
        self.settle_poll(cpu);
    }

    fn resched_pick(&mut self, cpu: CpuId) {
        let prev = self.st.cpus[cpu as usize].curr;
        let prev_opt = (prev != NONE).then_some(prev);
        if let Some(p) = prev_opt {
            self.settle(p);
        }
        let next = self.sched.pick_next(ctx!(self), cpu, prev_opt);
        self.apply_out();
        if next == prev_opt {
            if next.is_none() {
                // The task that ran here already left (a halt descheduled it): the pCPU
                // stays idle, and the clock and SMT model must count it so, unless it
                // polls for a halted vCPU, which burns its core like a running task.
                let polls = self.cpu_polls(cpu);
                self.set_busy(cpu, polls);
            }
            return;
        }
        if let Some(n) = next {
            let ok = match self.view.state[n as usize] {
                RunState::Runnable => true,
                RunState::Running(c) => c == cpu,
                RunState::Halted => false,
            };
            let allowed = self.st.tasks[n as usize].runs_anywhere
                || self.view.tasks[n as usize].affinity.contains(cpu as usize);
            if !ok || !allowed {
                self.fail(format!(
                    "scheduler bug: pick_next on pCPU {cpu} returned vCPU task {n} in state {:?} with affinity {}",
                    self.view.state[n as usize], self.view.tasks[n as usize].affinity
                ));
                return;
            }
        }
        if let Some(p) = prev_opt {
            self.deschedule(p, cpu, RunState::Runnable);
        }
        match next {
            Some(n) => self.dispatch(n, cpu),
            None => self.set_busy(cpu, false),
        }
    }

    /// A wake-up no running task caused (a timer, an interrupt, the run's start).
    pub(super) fn make_runnable(&mut self, t: TaskId) {
        self.make_runnable_from(t, None)
    }

    /// The waker of a wake-up task `by` causes: `by` and its pCPU while it runs there
    /// (None otherwise). For `make_runnable_from`.
    pub(super) fn waker(&self, by: TaskId) -> Option<Waker> {
        match self.view.state[by as usize] {
            RunState::Running(cpu) => Some(Waker { task: by, cpu }),
            _ => None,
        }
    }

    /// `make_runnable` of a wake-up caused by `waker` (the scheduler may place the task
    /// by it: the fair class's `wake_affine`).
    pub(super) fn make_runnable_from(&mut self, t: TaskId, waker: Option<Waker>) {
        let now = self.st.now;
        self.trace_instant(t, "wake", None, None);
        self.poll_catches_wake(t);
        let task = &mut self.st.tasks[t as usize];
        task.c.halted_ns += now.since(task.state_since).ns();
        task.state_since = now;
        if self.st.kvm.spec.is_some() {
            // Read only by KVM's directed yield; without it this line stays cold.
            task.kv.ready = true; // kvm_vcpu_wake_up
        }
        task.runnable_since = now;
        self.view.state[t as usize] = RunState::Runnable;
        self.sched.wake_from(ctx!(self), t, waker);
        self.apply_out();
    }

    /// Takes a task off its pCPU, accounting its run time, and counts a preemption (to
    /// Runnable) or a halt (to Halted).
    fn deschedule(&mut self, t: TaskId, cpu: CpuId, to: RunState) {
        let now = self.st.now;
        if self.st.trace.is_some() {
            let start = self.st.tasks[t as usize].run_since;
            self.trace_run(cpu, t, start);
            let kind = if to == RunState::Halted {
                "halt"
            } else {
                "preempted"
            };
            self.trace_instant(t, kind, Some(cpu), None);
        }
        self.pause_guest_poll(t);
        if to == RunState::Runnable {
            self.note_switch_out(t);
        }
        let task = &mut self.st.tasks[t as usize];
        task.c.run_ns += now.since(task.state_since).ns();
        match to {
            RunState::Runnable => task.c.preemptions += 1,
            RunState::Halted => task.c.halts += 1,
            RunState::Running(_) => {}
        }
        if let Some(until) = task.exit_until.take() {
            // Descheduled from inside a PLE exit (a directed yield): the rest is not paid.
            task.c.overhead_ns -= until.since(now).ns();
        } else if !task.executing {
            // Preempted during the switch overhead: only part of it was paid.
            let started = task.state_since;
            let full = task.overhead_end.since(started).ns();
            task.c.overhead_ns += now.since(started).ns().min(full);
        }
        task.end_spin(now);
        task.state_since = now;
        task.executing = false;
        task.runnable_since = now;
        if self.st.kvm.spec.is_some() {
            let involuntary = to == RunState::Runnable;
            task.kv.preempted = involuntary;
            task.kv.ready = involuntary;
            task.kv.in_kernel = match task.cur {
                NONE => false,
                cur => match self.st.threads[cur as usize].state {
                    ThState::Compute { mode, .. } | ThState::SpinLock { mode, .. } => {
                        mode == Mode::Kernel
                    }
                    ThState::SpinIpi { .. } => true,
                    _ => false,
                },
            };
            if !task.kv.ple_in_run {
                close_streak(&mut task.kv.streak, &mut self.st.kvm.streaks[t as usize]);
            }
            task.kv.ple_in_run = false;
        }
        self.view.state[t as usize] = to;
        self.view.cpu_curr[cpu as usize] = None;
        let c = &mut self.st.cpus[cpu as usize];
        c.curr = NONE;
        c.guest_at = None;
        if to != RunState::Runnable {
            self.rearm(cpu);
        }
    }

    fn dispatch(&mut self, t: TaskId, cpu: CpuId) {
        let now = self.st.now;
        // Polling stops at once for any task the scheduler puts here.
        self.poll_yields_cpu(cpu);
        let mut cost = self.end_halt(t) + self.world_switch_due(t);
        {
            let c = &mut self.st.cpus[cpu as usize];
            if c.last_task != t {
                self.st.h.context_switches += 1;
                cost += self.st.costs_switch;
            }
            c.last_task = t;
            c.curr = t;
        }
        let task = &mut self.st.tasks[t as usize];
        task.c.wait_ns += now.since(task.state_since).ns();
        task.state_since = now;
        task.run_since = now;
        task.c.dispatches += 1;
        let from = task.last_cpu;
        let migrated = from != NONE && from != cpu;
        if migrated {
            let d = self.view.topo.distance(from as usize, cpu as usize);
            let i = d as usize - 1;
            task.c.migrations[i] += 1;
            self.st.h.migrations[i] += 1;
            cost += self.st.costs_migration[i];
        }
        task.last_cpu = cpu;
        if self.st.kvm.spec.is_some() {
            // Set and read only with KVM's PLE handling; without it this line stays cold.
            task.kv.preempted = false;
            task.kv.ready = false;
            if let Some(b) = task.kv.boosted_at.take() {
                self.st.kvm.boost_to_run[t as usize].record(now.since(b).ns());
            }
        }
        // Traced once the task's record is done with (no other trace entry comes between).
        if migrated && self.st.trace.is_some() {
            self.trace_instant(t, "migrate", Some(cpu), Some(from));
        }
        self.view.state[t as usize] = RunState::Running(cpu);
        self.view.cpu_curr[cpu as usize] = Some(t);
        self.set_busy(cpu, true);
        self.arm_noise(cpu);
        if cost.ns() == 0 {
            self.begin_exec(t);
        } else {
            let task = &mut self.st.tasks[t as usize];
            task.executing = false;
            task.overhead_end = now + cost;
            self.st.cpus[cpu as usize].guest_at = Some(now + cost);
            self.rearm(cpu);
        }
    }

    /// The vCPU starts executing guest code: acknowledge pending IPIs, run its threads.
    /// Inlined (forced) into dispatch, which calls it on nearly every switch without cost.
    #[inline(always)]
    fn begin_exec(&mut self, t: TaskId) {
        let now = self.st.now;
        let task = &mut self.st.tasks[t as usize];
        if task.overhead_end > task.state_since {
            task.c.overhead_ns += task.overhead_end.since(task.state_since).ns();
        }
        task.executing = true;
        task.progress_from = now;
        if self.st.kvm.world_switch.is_some() {
            task.kv.switched_out_in_guest = false; // back in the guest: the switch is paid
        }
        self.record_wake_latency(t);
        let task = &mut self.st.tasks[t as usize];
        if let Some(k) = &self.st.kvm.spec {
            task.kv.in_spin_loop = false;
            task.kv.dy_eligible = false;
            task.kv.window = k.ple_window; // shrink 0: reset to the base window at sched-in
        }
        if task.cur == NONE && task.local.is_empty() {
            task.in_mm = false; // woken only to acknowledge: leave_mm
        }
        self.ack_pending_ipis(t);
        self.run_guest(t);
    }

    pub(super) fn cpu_event(&mut self, cpu: CpuId) {
        let now = self.st.now;
        let c = &mut self.st.cpus[cpu as usize];
        c.pending_at = None;
        let guest_due = c.guest_at.is_some_and(|g| g <= now);
        let timer_due = c.timer_at.is_some_and(|g| g <= now);
        if guest_due {
            c.guest_at = None;
            let t = c.curr;
            if t != NONE {
                if self.st.tasks[t as usize].executing {
                    self.settle(t);
                    self.guest_progress(t);
                } else if self.st.tasks[t as usize].exit_until.is_some() {
                    self.end_ple_exit(t);
                } else {
                    self.begin_exec(t);
                }
            } else {
                self.poll_timeout(cpu);
            }
        }
        if timer_due {
            self.st.cpus[cpu as usize].timer_at = None;
            self.st.h.timer_fires += 1;
            self.sched.timer(ctx!(self), cpu);
            self.apply_out();
        }
        self.rearm(cpu);
    }

    /// Marks the pCPU's deadline for re-arming at the end of the current event.
    #[inline]
    pub(super) fn rearm(&mut self, cpu: CpuId) {
        let c = &mut self.st.cpus[cpu as usize];
        if !c.dirty {
            c.dirty = true;
            self.st.dirty.push(cpu);
        }
    }

    /// Pushes each dirty pCPU's next deadline if it changed.
    fn commit_rearms(&mut self) {
        // In marking order, so simultaneous deadlines keep the order they were set in.
        for i in 0..self.st.dirty.len() {
            let cpu = self.st.dirty[i];
            let c = &mut self.st.cpus[cpu as usize];
            c.dirty = false;
            let want = match (c.timer_at, c.guest_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if want != c.pending_at {
                c.gen = c.gen.wrapping_add(1);
                c.pending_at = want;
                if let Some(at) = want {
                    let gen = c.gen;
                    self.st
                        .q
                        .push(at.max(self.st.now), EventKind::Cpu { cpu, gen });
                }
            }
        }
        self.st.dirty.clear();
    }

    /// The vCPU has nothing to run: it halts and leaves its pCPU.
    pub(super) fn halt(&mut self, t: TaskId) {
        let RunState::Running(cpu) = self.view.state[t as usize] else {
            return;
        };
        self.deschedule(t, cpu, RunState::Halted);
        self.begin_halt(t, cpu);
        self.sched.block(ctx!(self), cpu, t);
        self.apply_out();
        ctx!(self).resched(cpu);
    }

    /// The scheduler's `init`, before the first task starts, and its promise for the
    /// invariant checks.
    pub(super) fn init_scheduler(&mut self) {
        self.sched.init(ctx!(self));
        self.apply_out();
        self.st.starvation_bound = self.sched.starvation_bound(&self.view);
    }

    /// The scheduler's global timer fired.
    #[inline]
    pub(super) fn global_timer(&mut self) {
        self.sched.global_timer(ctx!(self));
        self.apply_out();
    }

    /// A directed yield (KVM's PLE handler): the scheduler decides.
    #[inline]
    pub(super) fn yield_to(&mut self, req: YieldRequest) -> YieldResult {
        let r = self.sched.yield_to(ctx!(self), req);
        self.apply_out();
        r
    }

    /// `sched_yield` by the running task `t` of `cpu` (a user-space PLE handler): the
    /// scheduler decides; false if it has no yield.
    pub(super) fn sched_yield(&mut self, cpu: CpuId, t: TaskId) -> bool {
        let r = self.sched.sched_yield(ctx!(self), cpu, t);
        self.apply_out();
        r
    }

    /// Task `t`'s affinity becomes `cpus` (a user-space PLE handler's migrate): the
    /// scheduler moves it if it must; false if it does not follow affinity changes.
    pub(super) fn set_affinity(&mut self, t: TaskId, cpus: crate::topology::CpuSet) -> bool {
        self.st.tasks[t as usize].runs_anywhere = cpus.len() == self.view.topo.ncpus();
        self.view.tasks[t as usize].affinity = cpus;
        let r = self.sched.set_affinity(ctx!(self), t);
        self.apply_out();
        r
    }

    /// Task `t`'s nice value becomes `nice` (a user-space PLE handler's boost): the
    /// scheduler re-weighs it; false if it has no nice values.
    pub(super) fn set_nice(&mut self, t: TaskId, nice: i8) -> bool {
        let r = self.sched.set_nice(ctx!(self), t, nice);
        self.apply_out();
        r
    }
}
