//! The host clock model: a pCPU computes at `clock(busy cores in its package) / base_ghz`
//! (turbo), times `smt_throughput / n` when n > 1 SMT siblings of its core are busy. Each
//! pCPU's speed is kept up to date as pCPUs turn busy or idle; a running thread's
//! progress is settled at the old speed before it changes.

use super::{Sim, NONE};
use crate::model::HostModel;
use crate::sched::{CpuId, Scheduler};
use crate::topology::{CpuInfo, Topology};

/// Busy counts per core and package, and what turns them into a speed.
pub(super) struct Clock {
    /// Speeds vary (several clocks, or SMT siblings sharing a core); false: every pCPU
    /// always runs at speed 1 and nothing here is kept.
    pub(super) rate_model: bool,
    pub(super) base_ghz: f64,
    turbo: Vec<f64>,
    smt_throughput: f64,
    busy_cores_in_pkg: Vec<u32>,
    busy_threads_in_core: Vec<u32>,
}

impl Clock {
    pub(super) fn new(host: &HostModel) -> Clock {
        let topo = &host.topo;
        let distinct_clock = host.turbo_ghz.iter().any(|g| *g != host.base_ghz);
        let smt_active =
            topo.threads_per_core > 1 && host.smt_throughput != topo.threads_per_core as f64;
        Clock {
            rate_model: distinct_clock || smt_active,
            base_ghz: host.base_ghz,
            turbo: host.turbo_ghz.clone(),
            smt_throughput: host.smt_throughput,
            busy_cores_in_pkg: vec![0; topo.sockets as usize],
            busy_threads_in_core: vec![0; topo.ncores()],
        }
    }

    /// The speed of every pCPU while all are idle (a pCPU is counted busy from its first
    /// dispatch on).
    pub(super) fn idle_speed(&self) -> f64 {
        if self.turbo.is_empty() {
            1.0
        } else {
            self.turbo[0] / self.base_ghz
        }
    }

    /// Counts pCPU `info` busy or idle; true if its core turned busy or idle with it.
    fn count(&mut self, info: &CpuInfo, busy: bool) -> bool {
        let (pkg, core) = (info.socket as usize, info.core as usize);
        let delta: i32 = if busy { 1 } else { -1 };
        let before_core = self.busy_threads_in_core[core];
        self.busy_threads_in_core[core] = (before_core as i32 + delta) as u32;
        let core_flip = (before_core == 0) != (self.busy_threads_in_core[core] == 0);
        if core_flip {
            self.busy_cores_in_pkg[pkg] = (self.busy_cores_in_pkg[pkg] as i32 + delta) as u32;
        }
        core_flip
    }

    /// The pCPUs whose speed may have changed with `info`'s: its package's when its core
    /// turned busy or idle and the clock depends on busy cores, else its core's.
    fn affected(&self, topo: &Topology, info: &CpuInfo, core_flip: bool) -> std::ops::Range<usize> {
        if core_flip && !self.turbo.is_empty() {
            topo.socket_cpus(info.socket)
        } else {
            topo.core_cpus(info.core)
        }
    }

    /// The speed of pCPU `info` (relative to the base clock) given the busy counts.
    pub(super) fn speed(&self, info: &CpuInfo) -> f64 {
        let busy_cores = self.busy_cores_in_pkg[info.socket as usize].max(1) as usize;
        let clock = if self.turbo.is_empty() {
            self.base_ghz
        } else {
            self.turbo[(busy_cores - 1).min(self.turbo.len() - 1)]
        };
        let n = self.busy_threads_in_core[info.core as usize].max(1);
        let smt = if n > 1 {
            self.smt_throughput / n as f64
        } else {
            1.0
        };
        clock / self.base_ghz * smt
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// Marks `cpu` busy or idle for the clock model. Without one (no SMT sharing, one
    /// clock) nothing depends on it, so that common case returns here, inlined (forced:
    /// left to itself the compiler kept it out of line, a call per dispatch for a test).
    #[inline(always)]
    pub(super) fn set_busy(&mut self, cpu: CpuId, busy: bool) {
        if self.st.clock.rate_model && self.st.cpus[cpu as usize].busy != busy {
            self.change_busy(cpu, busy);
        }
    }

    /// `set_busy` when the state changes: updates the busy counts per core and package
    /// and re-rates the pCPUs whose clock or SMT share moved.
    fn change_busy(&mut self, cpu: CpuId, busy: bool) {
        self.st.cpus[cpu as usize].busy = busy;
        let info = &self.view.topo.cpus[cpu as usize];
        let core_flip = self.st.clock.count(info, busy);
        // Recompute the speed of every pCPU whose clock or SMT share may have changed.
        for c in self.st.clock.affected(&self.view.topo, info, core_flip) {
            let new = self.speed_of(c);
            if new != self.st.cpus[c].speed {
                let t = self.st.cpus[c].curr;
                if t != NONE && self.st.tasks[t as usize].executing {
                    self.settle(t);
                    self.st.cpus[c].speed = new;
                    self.update_guest_deadline(t);
                } else {
                    self.st.cpus[c].speed = new;
                }
            }
        }
    }

    pub(super) fn speed_of(&self, cpu: usize) -> f64 {
        self.st.clock.speed(&self.view.topo.cpus[cpu])
    }
}
