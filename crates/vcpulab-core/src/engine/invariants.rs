//! `--check-invariants`: after every event, the engine's records must agree with each
//! other and with the scheduler's promises (one pCPU per running task, affinity and
//! isolation respected, the clock model's counts, time conservation, the starvation
//! bound, halt polling, and the scheduler's own `check`). A violation fails the run.

use super::{Sim, NONE};
use crate::sched::{RunState, Scheduler, TaskId};

impl<S: Scheduler> Sim<'_, S> {
    pub(super) fn check_invariants(&mut self) {
        // `vms_paused` is kept beside `vm_paused` so that `vcpu_paused` can return at once.
        let paused = self.st.ft.paused.iter().filter(|&&p| p).count();
        if paused != self.st.ft.vms_paused as usize {
            self.st.error = Some(format!(
                "invariant: {paused} VMs are stopped but vms_paused counts {}",
                self.st.ft.vms_paused
            ));
            return;
        }
        let mut seen = vec![false; self.st.tasks.len()];
        for (c, cpu) in self.st.cpus.iter().enumerate() {
            // A pCPU polling for a halted vCPU burns its core like a running task.
            let polls = matches!(self.st.kvm.cpu_poll.get(c), Some(Some(_)));
            if self.st.clock.rate_model {
                if cpu.busy != (cpu.curr != NONE || polls) {
                    self.st.error = Some(format!(
                        "invariant: pCPU {c} counted {} for the clock and SMT model but {}",
                        if cpu.busy { "busy" } else { "idle" },
                        if cpu.curr == NONE {
                            "runs nothing"
                        } else {
                            "runs a task"
                        }
                    ));
                }
                let expected = self.speed_of(c);
                if cpu.speed != expected {
                    self.st.error = Some(format!(
                        "invariant: pCPU {c} runs at speed {} but its core and package give {expected}",
                        cpu.speed
                    ));
                }
            }
            if cpu.curr == NONE {
                if self.view.cpu_curr[c].is_some() {
                    self.st.error = Some(format!(
                        "invariant: pCPU {c} idle but the view says it runs a vCPU"
                    ));
                }
                continue;
            }
            let t = cpu.curr as usize;
            if seen[t] {
                self.st.error = Some(format!(
                    "invariant: vCPU task {t} runs on two pCPUs at once"
                ));
                return;
            }
            seen[t] = true;
            if self.view.state[t] != RunState::Running(c as u32) {
                self.st.error = Some(format!(
                    "invariant: pCPU {c} runs task {t} whose state is {:?}",
                    self.view.state[t]
                ));
            }
            if self.st.default_affinity[t]
                && self.st.isolcpus.as_ref().is_some_and(|iso| iso.contains(c))
            {
                self.st.error = Some(format!("invariant: task {t} runs on isolated pCPU {c} without naming it in its affinity"));
            }
            if self.vcpu_paused(t as TaskId) && self.st.tasks[t].executing {
                self.st.error = Some(format!("invariant: vCPU task {t} executes guest code while its VM is stopped for a Kemari sync"));
            }
            if !self.view.tasks[t].affinity.contains(c) {
                self.st.error = Some(format!(
                    "invariant: task {t} runs on pCPU {c} outside its affinity"
                ));
            }
        }
        let now = self.st.now;
        let elapsed = now.since(self.st.metrics_since).ns();
        for (t, s) in self.view.state.iter().enumerate() {
            if matches!(s, RunState::Running(_)) && !seen[t] {
                self.st.error = Some(format!("invariant: task {t} is Running but on no pCPU"));
            }
            let task = &self.st.tasks[t];
            if *s == RunState::Runnable {
                if let Some(bound) = self.st.starvation_bound {
                    let waited = now.since(task.runnable_since);
                    if waited > bound {
                        self.st.error = Some(format!(
                            "invariant: task {t} (VM {:?}, vCPU {}) has been runnable for {waited} without running; the scheduler promises at most {bound}",
                            self.model.vms[task.vm as usize].name, self.view.tasks[t].index
                        ));
                        return;
                    }
                }
            }
            // CPU time conservation per task: accounted run + wait + halted time never
            // exceeds the time since metrics started.
            let accounted = task.c.run_ns + task.c.wait_ns + task.c.halted_ns;
            if accounted > elapsed {
                self.st.error = Some(format!(
                    "invariant: task {t} has {accounted} ns of run+wait+halted time accounted in {elapsed} ns"
                ));
                return;
            }
        }
        self.check_halt_polling();
        if let Err(msg) = self.sched.check(&self.view) {
            self.st.error = Some(format!("invariant: {msg}"));
        }
    }

    /// Polling never delays another runnable task on its pCPU by more than one check: a
    /// polling pCPU runs nothing else, so the scheduler sees it idle and the first task it
    /// puts there ends the poll at that instant (in the kernel, at the next check of
    /// `single_task_running`). And a poll is for a halted vCPU, within its window, and
    /// every halt's poll request is settled by the end of the event.
    fn check_halt_polling(&mut self) {
        let now = self.st.now;
        let max = self.st.kvm.halt_poll.as_ref().map_or(0, |h| h.max_ns);
        for (c, p) in self.st.kvm.cpu_poll.iter().enumerate() {
            let Some(p) = p else { continue };
            let err = if self.st.cpus[c].curr != NONE || self.view.cpu_curr[c].is_some() {
                Some(format!(
                    "pCPU {c} polls for vCPU task {} while it runs task {}",
                    p.task, self.st.cpus[c].curr
                ))
            } else if self.view.state[p.task as usize] != RunState::Halted {
                Some(format!(
                    "pCPU {c} polls for vCPU task {} which is {:?}, not halted",
                    p.task, self.view.state[p.task as usize]
                ))
            } else if (self.st.clock.rate_model && p.until < now)
                || p.until.0.saturating_sub(now.0) > max
            {
                Some(format!(
                    "pCPU {c} polls until {} at {}, outside the {max} ns ceiling",
                    p.until.0, now.0
                ))
            } else {
                None
            };
            if let Some(e) = err {
                self.st.error = Some(format!("invariant: halt polling: {e}"));
                return;
            }
        }
        if let Some(c) = self.st.kvm.poll_pending.iter().position(|p| p.is_some()) {
            self.st.error = Some(format!(
                "invariant: halt polling: pCPU {c} has a poll request its reschedule never settled"
            ));
        }
    }
}
