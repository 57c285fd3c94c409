//! KVM's pause-loop exiting (see `crate::kvm`): a vCPU spinning longer than its PLE
//! window exits to KVM, which grows the window and runs `kvm_vcpu_on_spin`, a directed
//! yield to another vCPU of the VM; the exit costs `ple_exit_cost` of the pCPU. Also the
//! per-vCPU KVM state every dispatch touches, and the PLE streak and boost metrics.

use super::Sim;
use crate::kvm::{grow_window, KvmSpec, Vendor};
use crate::metrics::Histogram;
use crate::model::Model;
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

/// The KVM layer's state beyond each vCPU's own.
pub(super) struct KvmState {
    /// KVM with PLE on; None: no pause-loop exits (the per-vCPU state stays cold).
    pub(super) spec: Option<KvmSpec>,
    /// Per VM: index of the last boosted vCPU (`kvm->last_boosted_vcpu`).
    last_boosted: Vec<u32>,
    /// Per task (vCPU): PLE streak lengths -> number of streaks of that length.
    pub(super) streaks: Vec<BTreeMap<u64, u64>>,
    /// Per task (vCPU): time from a successful directed yield to it running.
    pub(super) boost_to_run: Vec<Histogram>,
    /// Spinners that left the PLE handler; their spin-loop flags clear if still running.
    pub(super) spin_loop_exits: Vec<u32>,
}

impl KvmState {
    pub(super) fn new(model: &Model, tasks: usize) -> KvmState {
        KvmState {
            spec: model.kvm.clone().filter(|k| k.ple),
            last_boosted: vec![0; model.vms.len()],
            streaks: vec![BTreeMap::new(); tasks],
            boost_to_run: vec![Histogram::default(); tasks],
            spin_loop_exits: Vec::new(),
        }
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// Back in the guest after KVM handled a PLE exit (not a sched-in: the PLE window
    /// and the spin-loop flags stay): acknowledge IPIs that arrived meanwhile, go on.
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
        task.kv.ple_from = now + k.ple_exit_cost;
        let cpu = match self.view.state[t as usize] {
            RunState::Running(c) => c,
            _ => return,
        };
        self.trace_instant(t, "ple_exit", Some(cpu), None);
        // AMD reports the spinner's CPL; Intel only exits at CPL 0.
        let yield_to_kernel_mode = k.vendor == Vendor::Intel || mode == Mode::Kernel;
        self.kvm_vcpu_on_spin(t, cpu, yield_to_kernel_mode, &k);
        // The exit itself (VM exit, handler, VM entry) takes `ple_exit_cost` of the pCPU
        // without guest progress, unless the handler's yield deschedules the vCPU first.
        let task = &mut self.st.tasks[t as usize];
        if k.ple_exit_cost.ns() > 0
            && task.executing
            && self.view.state[t as usize] == RunState::Running(cpu)
        {
            task.end_spin(now);
            let until = now + k.ple_exit_cost;
            task.executing = false;
            task.exit_until = Some(until);
            task.c.overhead_ns += k.ple_exit_cost.ns();
            self.st.cpus[cpu as usize].guest_at = Some(until);
            self.rearm(cpu);
        }
    }

    /// KVM's PLE handler: directed yield to a candidate vCPU of the spinner's VM.
    fn kvm_vcpu_on_spin(
        &mut self,
        me: TaskId,
        cpu: CpuId,
        yield_to_kernel_mode: bool,
        k: &KvmSpec,
    ) {
        let vm = self.st.tasks[me as usize].vm as usize;
        let base = self.st.vm_task_base[vm];
        let n = self.st.vm_vcpus[vm];
        let last = self.st.kvm.last_boosted[vm];
        self.st.tasks[me as usize].kv.in_spin_loop = true;
        let spinner_thread = self.st.tasks[me as usize].cur;
        let mut tries = 3;
        for i in crate::kvm::ring_order(n, last) {
            let v = base + i;
            let task = &self.st.tasks[v as usize];
            let mut cand = crate::kvm::Candidate {
                is_spinner: v == me,
                preempted: task.kv.preempted,
                ready: task.kv.ready,
                halted: self.view.state[v as usize] == RunState::Halted,
                in_kernel: task.kv.in_kernel,
                pending_interrupt: !task.pending_acks.is_empty(),
                ipi_from_spinner: task.pending_acks.contains(&spinner_thread),
                in_spin_loop: task.kv.in_spin_loop,
                dy_eligible: task.kv.dy_eligible,
            };
            let verdict = crate::kvm::check_candidate(k, &mut cand, yield_to_kernel_mode);
            self.st.tasks[v as usize].kv.dy_eligible = cand.dy_eligible;
            if verdict.is_err() {
                continue;
            }
            self.st.tasks[me as usize].c.yield_attempts += 1;
            let req = YieldRequest {
                from: me,
                from_cpu: cpu,
                target: v,
                ignore_vcpu_fairness: k.features.boost_ignores_vcpu_fairness,
                migrate_to_yielder: k.features.migrate_boosted_to_spinner,
            };
            match self.yield_to(req) {
                YieldResult::Yielded => {
                    self.st.tasks[me as usize].c.yield_successes += 1;
                    self.st.tasks[v as usize].kv.boosted_at = Some(self.st.now);
                    self.st.kvm.last_boosted[vm] = i;
                    self.trace_instant(me, "yield_to", Some(cpu), Some(v));
                    break;
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
        self.st.kvm.spin_loop_exits.push(me);
    }
}
