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
use crate::time::{SimDuration, SimTime};
use crate::workload::Dist;

/// `[host.noise]` as the engine uses it.
pub(super) struct Noise {
    rate_hz: f64,
    duration: Dist,
    /// One stream per pCPU.
    rngs: Vec<Rng>,
}

impl Noise {
    pub(super) fn new(seed: u64, ncpus: usize, rate_hz: f64, duration: Dist) -> Noise {
        let rngs = (0..ncpus)
            .map(|c| Rng::derive(seed, &["host", "noise", "cpu", &c.to_string()]))
            .collect();
        Noise {
            rate_hz,
            duration,
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
    /// Schedules every pCPU's first interruption.
    pub(super) fn start_noise(&mut self) {
        let st = &mut self.st;
        let Some(n) = st.noise.as_mut() else {
            return;
        };
        for c in 0..n.rngs.len() {
            st.q.push(SimTime::ZERO + n.gap(c), EventKind::Noise { cpu: c as u32 });
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
        let lost = SimDuration(n.duration.sample(&mut n.rngs[c]).round().max(0.0) as u64);
        let next = now + n.gap(c);
        self.st.q.push(next, EventKind::Noise { cpu });
        let t = self.st.cpus[c].curr;
        if t == NONE || lost.ns() == 0 {
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
