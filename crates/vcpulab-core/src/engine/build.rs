//! Construction: `Sim::new` lays the run out from the `Model` (tasks: every VM's vCPUs,
//! then one per host thread; workloads: every VM's, then one per host thread, then the
//! guest receive paths; threads and locks likewise, with their random streams), and
//! `start` makes the first tasks runnable and starts the arrivals.

use super::clock::Clock;
use super::ft::{helper_program, Ft};
use super::io::Cfq;
use super::net::rx_program;
use super::ple::KvmState;
use super::queue::{EventKind, EventQueue};
use super::report::HostCounters;
use super::steal::StealWindows;
use super::sync::Lock;
use super::{trace, Cpu, RunOptions, Sim, State, Task, ThState, Thread, WorkloadRt, NONE};
use crate::model::{HostThreadProgram, Model};
use crate::rng::Rng;
use crate::sched::{RunState, SchedOut, SchedView, Scheduler, TaskInfo};
use crate::time::SimTime;
use crate::vocab::IoDriver;
use std::collections::VecDeque;

impl<'m, S: Scheduler> Sim<'m, S> {
    /// The engine for one run of `model` under `sched` with `seed`: every task, thread,
    /// workload and lock laid out, nothing started yet (`run_full` starts it).
    pub fn new(model: &'m Model, sched: S, seed: u64, opts: RunOptions) -> Sim<'m, S> {
        let host = &model.host;
        let topo = &host.topo;
        let ncpus = topo.ncpus();
        let mut tasks_info = Vec::new();
        let mut tasks = Vec::new();
        let mut threads = Vec::new();
        let mut workloads = Vec::new();
        let mut locks = Vec::new();
        let (mut vm_lock_base, mut vm_task_base, mut vm_vcpus, mut vm_timeslice) =
            (vec![], vec![], vec![], vec![]);
        let mut vm_workload_base = vec![];
        let mut vm_idle_poll = vec![];
        let mut default_affinity: Vec<bool> = Vec::new();
        for (vi, vm) in model.vms.iter().enumerate() {
            vm_workload_base.push(workloads.len() as u32);
            vm_task_base.push(tasks.len() as u32);
            vm_lock_base.push(locks.len() as u32);
            vm_vcpus.push(vm.vcpus);
            vm_timeslice.push(vm.guest_timeslice);
            vm_idle_poll.push(vm.idle_poll);
            locks.extend(vm.lock_kinds.iter().map(|&kind| Lock {
                holder: NONE,
                kind,
                waiters: VecDeque::new(),
                last_cpu: NONE,
            }));
            for i in 0..vm.vcpus {
                default_affinity.push(vm.affinity[i as usize].is_none());
                let affinity = vm.affinity[i as usize]
                    .clone()
                    .unwrap_or_else(|| host.default_affinity.clone());
                tasks_info.push(TaskInfo {
                    vm: vi as u32,
                    index: i,
                    affinity,
                    weight: vm.weight,
                    cap: vm.cap,
                    class: vm.class,
                    latency_vcpu: i < vm.latency_vcpus,
                    host_thread: false,
                    rt: vm.rt,
                });
                tasks.push(Task::new(
                    vi as u32,
                    model.kvm.as_ref().map_or(0, |k| k.ple_window),
                ));
            }
            for (wi, w) in vm.workloads.iter().enumerate() {
                let wid = workloads.len() as u32;
                let wis = wi.to_string();
                workloads.push(WorkloadRt {
                    counts_requests: w.counts_requests,
                    arrivals: w.arrivals.clone(),
                    latency_taken: w.latency_taken,
                    rt: w.rt,
                    dirty_bytes_per_ns: w.dirty_bytes_per_ns,
                    request_bytes: w.request_bytes,
                    units_left: w.total_units,
                    timer_task: if w.timer {
                        vm_task_base[vi] + w.thread_vcpu(0)
                    } else {
                        NONE
                    },
                    ..WorkloadRt::new(
                        vi as u32,
                        w.ops.clone(),
                        Rng::derive(seed, &["vm", &vm.name, "workload", &wis, "arrivals"]),
                    )
                });
                for ti in 0..w.threads {
                    let task = vm_task_base[vi] + w.thread_vcpu(ti);
                    let tid = threads.len() as u32;
                    threads.push(Thread::new(
                        task,
                        wid,
                        ti,
                        ThState::Ready,
                        Rng::derive(
                            seed,
                            &["vm", &vm.name, "workload", &wis, "thread", &ti.to_string()],
                        ),
                    ));
                    tasks[task as usize].local.push_back(tid);
                }
            }
        }
        let n_vcpu_tasks = tasks.len() as u32;
        let n_vm_workloads = workloads.len() as u32;
        let nvms = model.vms.len();
        let mut ft = Ft::new(nvms);
        // Host threads: one task and one thread each. Unowned ones form their own group
        // (VM id nvms) for schedulers that group by VM.
        for (hi, h) in model.host_threads.iter().enumerate() {
            let owner = h.vm.unwrap_or(nvms as u32);
            let task = tasks.len() as u32;
            default_affinity.push(h.affinity.is_none());
            tasks_info.push(TaskInfo {
                vm: owner,
                index: hi as u32,
                affinity: h
                    .affinity
                    .clone()
                    .unwrap_or_else(|| host.default_affinity.clone()),
                weight: h.weight,
                cap: 0,
                class: None,
                latency_vcpu: false,
                host_thread: true,
                rt: Default::default(),
            });
            tasks.push(Task::new(owner, 0));
            let wid = workloads.len() as u32;
            let tid = threads.len() as u32;
            let (ops, helper) = match &h.program {
                HostThreadProgram::Ops(ops) => (ops.clone(), NONE),
                HostThreadProgram::Helper(spec) => {
                    (helper_program(), ft.add_helper(spec, owner, tid, task))
                }
            };
            workloads.push(WorkloadRt {
                helper,
                ..WorkloadRt::new(
                    owner,
                    ops,
                    Rng::derive(seed, &["host_thread", &h.name, "arrivals"]),
                )
            });
            let state = if helper == NONE {
                ThState::Ready
            } else {
                ThState::Blocked
            };
            threads.push(Thread::new(
                task,
                wid,
                0,
                state,
                Rng::derive(seed, &["host_thread", &h.name, "thread"]),
            ));
            if helper == NONE {
                tasks[task as usize].local.push_back(tid);
            }
        }
        // Guest receive paths (`rx`): one more workload per request-serving workload that
        // has one, after every VM workload and host thread (so their indices stay as the
        // scenario lists them), with one interrupt-priority thread per listed vCPU.
        for (vi, vm) in model.vms.iter().enumerate() {
            for (wi, w) in vm.workloads.iter().enumerate() {
                let Some(rx) = &w.rx else { continue };
                let app = vm_workload_base[vi] + wi as u32;
                let wid = workloads.len() as u32;
                workloads[app as usize].rx_stage = wid;
                let wis = wi.to_string();
                let ops = rx_program(rx);
                workloads.push(WorkloadRt {
                    rt: true,
                    rx_for: app,
                    ..WorkloadRt::new(
                        vi as u32,
                        ops,
                        Rng::derive(seed, &["vm", &vm.name, "workload", &wis, "rx"]),
                    )
                });
                for (ti, &vcpu) in rx.vcpus.iter().enumerate() {
                    let task = vm_task_base[vi] + vcpu;
                    let tid = threads.len() as u32;
                    threads.push(Thread::new(
                        task,
                        wid,
                        ti as u32,
                        ThState::Ready,
                        Rng::derive(
                            seed,
                            &["vm", &vm.name, "workload", &wis, "rx", &ti.to_string()],
                        ),
                    ));
                    tasks[task as usize].local.push_back(tid);
                }
            }
        }
        let any_unowned = model.host_threads.iter().any(|h| h.vm.is_none());
        let io_backend = match model.io_driver {
            None => NONE,
            Some(IoDriver::HostThread(i)) => n_vm_workloads + i,
            Some(IoDriver::Vm { vm, workload }) => vm_workload_base[vm as usize] + workload,
        };
        let ntasks = tasks.len();
        let clock = Clock::new(host);
        let view = SchedView {
            cpu_curr: vec![None; ncpus],
            state: vec![RunState::Halted; ntasks],
            tasks: tasks_info,
            nvms: model.vms.len() as u32 + any_unowned as u32,
            topo: topo.clone(),
        };
        let out = SchedOut {
            resched_pending: vec![false; ncpus],
            ..Default::default()
        };
        let opts_trace = opts.trace_window;
        let idle_speed = clock.idle_speed();
        for (task, info) in tasks.iter_mut().zip(&view.tasks) {
            task.runs_anywhere = info.affinity.len() == ncpus;
        }
        let cfq = Cfq::new(model, threads.len());
        let st = State {
            now: SimTime::ZERO,
            end: SimTime::ZERO + model.duration,
            seed,
            opts,
            q: EventQueue::with_capacity(ntasks + ncpus + 16),
            cpus: (0..ncpus)
                .map(|_| Cpu {
                    curr: NONE,
                    last_task: NONE,
                    timer_at: None,
                    guest_at: None,
                    pending_at: None,
                    gen: 0,
                    speed: idle_speed,
                    busy: false,
                    dirty: false,
                })
                .collect(),
            tasks,
            threads,
            workloads,
            locks,
            vm_lock_base,
            vm_task_base,
            vm_vcpus,
            vm_timeslice,
            vm_idle_poll,
            vm_pv_spin_ns: model.vms.iter().map(|v| v.pv_spin_ns).collect(),
            workload_threads: model
                .vms
                .iter()
                .flat_map(|v| v.workloads.iter().map(|w| w.threads))
                .collect(),
            vm_workload_base,
            kicks: Vec::new(),
            dirty: Vec::new(),
            h: HostCounters::default(),
            global_gen: 0,
            error: None,
            clock,
            costs_switch: host.costs.context_switch,
            costs_migration: host.costs.migration,
            costs_ipi: host.costs.ipi,
            futex_wakers: Vec::new(),
            costs_line: host.costs.cacheline_transfer,
            sched_counters_at_warmup: Vec::new(),
            forced_idle_at_warmup: Vec::new(),
            trace: opts_trace.map(|(a, b)| trace::Tracer::new(SimTime(a), SimTime(b))),
            kvm: KvmState::new(model, ntasks, seed),
            starvation_bound: None,
            metrics_since: SimTime::ZERO,
            rtapp_timers: Default::default(),
            steal: StealWindows::new(model.vms.len()),
            noise: host.noise.as_ref().map(|n| {
                super::noise::Noise::new(seed, host.topo.ncpus(), n.rate_hz, n.duration.clone())
            }),
            n_vcpu_tasks,
            n_vm_workloads,
            io_backend,
            held: Vec::new(),
            ft,
            cfq,
            default_affinity,
            isolcpus: host.isolcpus.clone(),
        };
        Sim {
            model,
            sched,
            view,
            out,
            st,
        }
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// Starts the run: the scheduler's `init`; every vCPU with guest threads runnable (at
    /// once, or after its VM's start jitter), the others halted; host threads with work
    /// runnable; arrivals and the warm-up's end scheduled.
    pub(super) fn start(&mut self) {
        let model = self.model;
        self.init_scheduler();
        for (vi, vm) in model.vms.iter().enumerate() {
            let mut rng = Rng::derive(self.st.seed, &["vm", &vm.name, "start"]);
            for i in 0..vm.vcpus {
                let t = self.st.vm_task_base[vi] + i;
                // A vCPU with no thread halts from boot, unless its idle loop spins.
                if self.st.tasks[t as usize].local.is_empty() && !vm.idle_poll {
                    continue;
                }
                if vm.start_jitter.ns() == 0 {
                    self.make_runnable(t);
                } else {
                    let at = SimTime(rng.below(vm.start_jitter.ns()));
                    self.st.q.push(at, EventKind::TaskStart { task: t });
                }
            }
        }
        for t in self.st.n_vcpu_tasks..self.st.tasks.len() as u32 {
            if !self.st.tasks[t as usize].local.is_empty() {
                self.make_runnable(t);
            }
        }
        for w in 0..self.st.workloads.len() {
            self.start_arrivals(w as u32);
        }
        if model.warmup.ns() > 0 {
            self.st
                .q
                .push(SimTime::ZERO + model.warmup, EventKind::Warmup);
        }
        self.schedule_steal_window(SimTime::ZERO + model.warmup);
        self.flush();
    }
}
