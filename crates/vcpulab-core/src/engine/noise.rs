//! Host noise (`[host.noise]`, issue 27 part 1): the time a running vCPU or host thread
//! loses to its host without being descheduled — the tick, device and timer interrupts,
//! softirq work, and on a nested host the world switch each of them costs.
//!
//! Model: every pCPU is interrupted at the times of its own Poisson process of rate
//! `interrupt_rate`; each interruption lasts a draw of `interrupt_duration`. An
//! interruption that finds a task executing guest code stops its progress for that long
//! (the task stays on the pCPU; the time is counted as its overhead, and its scheduler
//! charges it as run time, as a kernel without IRQ time accounting does). A spinning vCPU's
//! pause-loop window restarts after it (the exit and re-entry reset the CPU's PLE
//! counting). An interruption that finds the pCPU idle, switching, or already in an exit is
//! absorbed: it costs nothing in the model.
//!
//! Only busy pCPUs are interrupted: an idle CPU stops its tick (NO_HZ_IDLE, the default
//! of every distribution kernel), and a device interrupt that finds it idle would be
//! absorbed anyway. So a pCPU's process runs while the pCPU is busy: it is armed when a
//! task is dispatched there, and the first interruption that finds the pCPU idle disarms
//! it (nothing is scheduled until the next dispatch). A Poisson process is memoryless,
//! so the interruptions of busy time are those of the process on all the time, and a
//! run's noise costs events in proportion to its busy time, not to its length times its
//! pCPUs (an idle host simulated for a year stays cheap).
//!
//! Each pCPU draws from its own stream (`["host", "noise", "cpu", i]`), so a run stays
//! byte-identical per seed, and adding a VM does not move another VM's noise.
//!
//! Deviations, written down: the tick is not periodic here but part of the Poisson
//! process (ticks of different pCPUs are not aligned, which real ticks are unless
//! `skew_tick=1`); interrupts are not steered (no IRQ affinity); an interruption never
//! wakes or preempts anything.

use super::queue::EventKind;
use super::{Sim, NONE};
use crate::rng::Rng;
use crate::sched::{RunState, Scheduler};
use crate::time::SimDuration;
use crate::workload::Dist;

/// `[host.noise]` as the engine uses it.
pub(super) struct Noise {
    rate_hz: f64,
    duration: Dist,
    /// One stream per pCPU.
    rngs: Vec<Rng>,
    /// Whether the pCPU's next interruption is in the event queue.
    armed: Vec<bool>,
}

impl Noise {
    pub(super) fn new(seed: u64, ncpus: usize, rate_hz: f64, duration: Dist) -> Noise {
        let rngs: Vec<Rng> = (0..ncpus)
            .map(|c| Rng::derive(seed, &["host", "noise", "cpu", &c.to_string()]))
            .collect();
        Noise {
            rate_hz,
            duration,
            armed: vec![false; rngs.len()],
            rngs,
        }
    }

    /// The time to the pCPU's next interruption (exponential, rate `rate_hz`).
    fn gap(&mut self, cpu: usize) -> SimDuration {
        let u = self.rngs[cpu].uniform_open0();
        SimDuration((-u.ln() / self.rate_hz * 1e9).ceil().max(1.0) as u64)
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// A task was dispatched on `cpu`: its interruptions start, unless one is pending.
    #[inline]
    pub(super) fn arm_noise(&mut self, cpu: u32) {
        let st = &mut self.st;
        let Some(n) = st.noise.as_mut() else {
            return;
        };
        let c = cpu as usize;
        if !n.armed[c] {
            n.armed[c] = true;
            st.q.push(st.now + n.gap(c), EventKind::Noise { cpu });
        }
    }

    /// pCPU `cpu` is interrupted now: the next interruption is scheduled, and a task
    /// executing there loses this one's duration.
    pub(super) fn noise_event(&mut self, cpu: u32) {
        let now = self.st.now;
        let n = self
            .st
            .noise
            .as_mut()
            .expect("noise events only with [host.noise]");
        let c = cpu as usize;
        let t = self.st.cpus[c].curr;
        if t == NONE {
            // Idle: the tick stops; the next dispatch here arms the process again.
            n.armed[c] = false;
            return;
        }
        let lost = SimDuration(n.duration.sample(&mut n.rngs[c]).round().max(0.0) as u64);
        let next = now + n.gap(c);
        self.st.q.push(next, EventKind::Noise { cpu });
        if lost.ns() == 0 {
            return;
        }
        if !self.st.tasks[t as usize].executing
            || self.view.state[t as usize] != RunState::Running(cpu)
        {
            return;
        }
        self.settle(t);
        let until = self.begin_exit(t, cpu, lost);
        if self.st.kvm.spec.is_some() {
            let kv = &mut self.st.tasks[t as usize].kv;
            kv.ple_from = kv.ple_from.max(until);
        }
        self.st.h.noise_interruptions += 1;
        self.st.h.noise_ns += lost.ns();
    }
}
