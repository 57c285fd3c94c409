//! Metrics: accounting of every task's time up to now, the warm-up reset, and the run's
//! end: the counters (task, host, helper, scheduler) turned into the `Summary`, and the
//! trace's labels.

use super::ple::{close_streak, PollCounters};
use super::{trace, RunOutput, Sim, TaskCounters, NONE};
use crate::metrics::{jain, Histogram};
use crate::sched::{RunState, Scheduler, TaskId};
use crate::summary::*;
use crate::topology::Distance;
use std::collections::BTreeMap;

/// Host-wide counts (reset at warm-up).
#[derive(Clone, Default)]
pub(super) struct HostCounters {
    pub(super) context_switches: u64,
    pub(super) migrations: [u64; 4],
    pub(super) events: u64,
    pub(super) ev_cpu: u64,
    pub(super) ev_thread_wake: u64,
    pub(super) ev_arrival: u64,
    pub(super) ev_helper: u64,
    pub(super) ev_global: u64,
    pub(super) op_completions: u64,
    pub(super) timer_fires: u64,
    pub(super) ipis_sent: u64,
    pub(super) lock_acquisitions: u64,
    pub(super) line_transfers: u64,
    pub(super) noise_interruptions: u64,
    pub(super) noise_ns: u64,
    pub(super) backend_packets: u64,
}

impl<S: Scheduler> Sim<'_, S> {
    /// The run reached its end: account every task's time, close what is open (PLE
    /// streaks, traced runs), and report.
    pub(super) fn finish(mut self) -> RunOutput {
        self.st.now = self.st.end;
        self.account_all();
        self.close_steal_window();
        for (task, lengths) in self.st.tasks.iter_mut().zip(&mut self.st.kvm.streaks) {
            close_streak(&mut task.kv.streak, lengths);
        }
        if self.st.trace.is_some() {
            for c in 0..self.st.cpus.len() {
                let t = self.st.cpus[c].curr;
                if t != NONE {
                    let start = self.st.tasks[t as usize].run_since;
                    self.trace_run(c as u32, t, start);
                }
            }
        }
        let summary = self.summary();
        let trace_json = self
            .st
            .trace
            .take()
            .map(|tr| tr.to_chrome_json(self.st.cpus.len(), &self.trace_labels()));
        RunOutput {
            summary,
            trace_json,
        }
    }

    /// What the trace calls each task: a VM's vCPU, or a host thread (and its VM).
    fn trace_labels(&self) -> Vec<trace::TaskLabel> {
        let model = self.model;
        let vm_name = |vm: u32| model.vms.get(vm as usize).map(|v| v.name.clone());
        self.view
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if (i as u32) < self.st.n_vcpu_tasks {
                    trace::TaskLabel::Vcpu {
                        vm: model.vms[t.vm as usize].name.clone(),
                        index: t.index,
                    }
                } else {
                    trace::TaskLabel::HostThread {
                        name: model.host_threads[t.index as usize].name.clone(),
                        vm: vm_name(t.vm),
                    }
                }
            })
            .collect()
    }

    /// Accounts every task's time in its current state up to now.
    fn account_all(&mut self) {
        let now = self.st.now;
        for t in 0..self.st.tasks.len() {
            self.settle(t as TaskId);
            let task = &mut self.st.tasks[t];
            let d = now.since(task.state_since).ns();
            match self.view.state[t] {
                RunState::Running(_) => {
                    task.c.run_ns += d;
                    if !task.executing {
                        task.c.overhead_ns += d.min(task.overhead_end.since(task.state_since).ns());
                        task.overhead_end = now.max(task.overhead_end);
                    }
                }
                RunState::Runnable => task.c.wait_ns += d,
                RunState::Halted => task.c.halted_ns += d,
            }
            task.state_since = now;
            task.account_spin(now);
        }
        self.account_polls();
    }

    /// The end of the warm-up: every metric starts again from zero (run time seen by the
    /// guest is kept, for lookbusy's controller).
    pub(super) fn reset_metrics(&mut self) {
        self.account_all();
        self.st.metrics_since = self.st.now;
        self.st.steal.reset(self.st.now);
        for t in &mut self.st.tasks {
            t.run_ns_before_warmup += t.c.run_ns;
            t.c = TaskCounters::default();
        }
        for w in &mut self.st.workloads {
            w.completed = 0;
            w.bytes_done = 0;
            w.latency.clear();
        }
        self.st.h = HostCounters::default();
        for s in &mut self.st.kvm.streaks {
            s.clear();
        }
        for h in &mut self.st.kvm.boost_to_run {
            h.clear();
        }
        for p in &mut self.st.kvm.poll {
            p.c = Default::default();
        }
        for h in &mut self.st.kvm.wake_latency {
            h.clear();
        }
        for c in &mut self.st.kvm.ipi_counts {
            *c = Default::default();
        }
        self.st.sched_counters_at_warmup = self.sched.counters();
        self.st.forced_idle_at_warmup = self.sched.forced_idle_ns(self.st.now).unwrap_or_default();
        self.st.ft.reset_metrics();
    }

    /// Forced idle under core scheduling, in percent of pCPU time over the measured
    /// part of the run: the host's, and each core's (its siblings' over theirs).
    fn core_sched_summary(&self, measured: crate::time::SimDuration) -> Option<CoreSchedSummary> {
        let now_ns = self.sched.forced_idle_ns(self.st.now)?;
        let warm = &self.st.forced_idle_at_warmup;
        let fi: Vec<u64> = now_ns
            .iter()
            .enumerate()
            .map(|(c, &ns)| ns - warm.get(c).copied().unwrap_or(0))
            .collect();
        let topo = &self.view.topo;
        let span = measured.ns().max(1) as f64;
        let pct = |ns: u64, cpus: usize| 100.0 * ns as f64 / (span * cpus.max(1) as f64);
        let per_core = (0..topo.ncores())
            .map(|k| {
                let cpus: Vec<usize> = topo.core_cpus(k as u32).collect();
                pct(cpus.iter().map(|&c| fi[c]).sum(), cpus.len())
            })
            .collect();
        Some(CoreSchedSummary {
            forced_idle_pct: pct(fi.iter().sum(), fi.len()),
            forced_idle_pct_per_core: per_core,
        })
    }

    fn summary(&self) -> Summary {
        let model = self.model;
        let measured = model.duration - model.warmup;
        let secs = measured.as_secs_f64();
        let s = |ns: u64| ns as f64 / 1e9;
        let mut vms = Vec::new();
        let mut wl_index = 0usize;
        let mut shares = Vec::new();
        for (vi, vm) in model.vms.iter().enumerate() {
            let base = self.st.vm_task_base[vi] as usize;
            let mut vcpus = Vec::new();
            let mut tot = TaskCounters::default();
            let mut vm_streaks: BTreeMap<u64, u64> = BTreeMap::new();
            let mut vm_boost = Histogram::default();
            let mut vm_poll = PollCounters::default();
            for i in 0..vm.vcpus as usize {
                let c = &self.st.tasks[base + i].c;
                let streaks = &self.st.kvm.streaks[base + i];
                for (&l, &n) in streaks {
                    *vm_streaks.entry(l).or_default() += n;
                }
                let boost = &self.st.kvm.boost_to_run[base + i];
                vm_boost.merge(boost);
                let st = streak_summary(streaks);
                let boost = latency_summary(boost);
                let poll = self.st.kvm.poll.get(base + i).map(|p| p.c);
                if let Some(p) = poll {
                    vm_poll.polls += p.polls;
                    vm_poll.successes += p.successes;
                    vm_poll.poll_ns += p.poll_ns;
                    vm_poll.guest_polls += p.guest_polls;
                    vm_poll.guest_successes += p.guest_successes;
                    vm_poll.guest_poll_ns += p.guest_poll_ns;
                }
                tot.run_ns += c.run_ns;
                tot.wait_ns += c.wait_ns;
                tot.halted_ns += c.halted_ns;
                tot.spin_ns += c.spin_ns;
                tot.ple_exits += c.ple_exits;
                tot.yield_attempts += c.yield_attempts;
                tot.yield_successes += c.yield_successes;
                vcpus.push(VcpuSummary {
                    index: i as u32,
                    cpu_time_s: s(c.run_ns),
                    wait_time_s: s(c.wait_ns),
                    halted_time_s: s(c.halted_ns),
                    spin_time_s: s(c.spin_ns),
                    overhead_time_s: s(c.overhead_ns),
                    dispatches: c.dispatches,
                    preemptions: c.preemptions,
                    halts: c.halts,
                    migrations: MigrationSummary::from(c.migrations),
                    ple_exits: c.ple_exits,
                    yield_attempts: c.yield_attempts,
                    yield_successes: c.yield_successes,
                    pv_waits: c.pv_waits,
                    pv_kicks: c.pv_kicks,
                    ple_streaks: st.count,
                    ple_streak_median: st.median,
                    ple_streak_max: st.max,
                    boost_to_run_mean_ms: boost.as_ref().map(|b| b.mean),
                    boost_to_run_max_ms: boost.as_ref().map(|b| b.max),
                    halt_poll: poll.map(|p| halt_poll_summary(&p, None)),
                });
            }
            let mut workloads = Vec::new();
            for w in &vm.workloads {
                let rt = &self.st.workloads[wl_index];
                wl_index += 1;
                let latency = if rt.arrivals.is_some() {
                    latency_summary(&rt.latency)
                } else {
                    None
                };
                workloads.push(WorkloadSummary {
                    kind: w.kind.clone(),
                    threads: w.threads,
                    completed: rt.completed,
                    throughput: rt.completed as f64 / secs,
                    throughput_unit: w.unit.clone(),
                    latency_ms: latency,
                    bandwidth_mbps: (rt.request_bytes > 0)
                        .then(|| rt.bytes_done as f64 * 8.0 / secs / 1e6),
                    completion_s: rt.finished_at.map(|t| t.as_secs_f64()),
                    throughput_kbps: (w.bytes_per_unit > 0)
                        .then(|| rt.completed as f64 * w.bytes_per_unit as f64 / 1024.0 / secs),
                });
            }
            let first = workloads.first();
            shares.push(tot.run_ns as f64 / vm.weight as f64);
            vms.push(VmSummary {
                name: vm.name.clone(),
                vcpu_count: vm.vcpus,
                weight: vm.weight,
                cpu_time_s: s(tot.run_ns),
                cpu_share: tot.run_ns as f64 / (measured.ns() as f64 * self.st.cpus.len() as f64),
                wait_time_s: s(tot.wait_ns),
                halted_time_s: s(tot.halted_ns),
                spin_time_s: s(tot.spin_ns),
                throughput: first.map(|w| w.throughput),
                throughput_unit: first.map(|w| w.throughput_unit.clone()),
                latency_ms: first.and_then(|w| w.latency_ms.clone()),
                ple: self.st.kvm.spec.as_ref().map(|_| PleSummary {
                    exits: tot.ple_exits,
                    yield_attempts: tot.yield_attempts,
                    yield_successes: tot.yield_successes,
                    streaks: streak_summary(&vm_streaks),
                    boost_to_run_ms: latency_summary(&vm_boost),
                    ipi_aware_yield: self.st.kvm.ipi_counts.get(vi).map(|c| {
                        crate::summary::IpiAwareSummary {
                            ipis_tracked: c.ipis_tracked,
                            eoi_cleared: c.eoi_cleared,
                            boost_ipi_receiver: c.boost_ipi_receiver,
                            boost_pending_interrupt: c.boost_pending_interrupt,
                            boost_preempted: c.boost_preempted,
                            boost_relaxed: c.boost_relaxed,
                            skip_not_preempted: c.skip_not_preempted,
                            skip_user_mode: c.skip_user_mode,
                            relaxed_walks: c.relaxed_walks,
                        }
                    }),
                }),
                workloads,
                vcpus,
                halt_poll: self
                    .st
                    .kvm
                    .wake_latency
                    .get(vi)
                    .map(|h| halt_poll_summary(&vm_poll, latency_summary(h))),
                steal_pct: self.steal_summary(vi),
                ft: (self.st.ft.kemari[vi] != NONE).then(|| {
                    let k = &self.st.ft.helpers[self.st.ft.kemari[vi] as usize];
                    FtSummary {
                        timer_irqs: k.c.timer_irqs,
                        timer_irqs_queued: k.c.timer_irqs_queued,
                        timer_irqs_cross_cpu: k.c.timer_irqs_cross_cpu,
                        mutex_handoffs_idle: k.c.mutex_handoffs_idle,
                        mutex_handoffs_same_cpu: k.c.mutex_handoffs_same_cpu,
                        mutex_handoffs_lost: k.c.mutex_handoffs_lost,
                        flushes: k.c.flushes,
                        flush_wait_s: s(k.c.flush_ns),
                        syncs: self.st.ft.syncs[vi],
                        paused_time_s: s(self.st.ft.paused_ns_until(
                            vi,
                            self.st.end,
                            self.st.metrics_since,
                        )),
                    }
                }),
            });
        }
        let mut host_threads = Vec::new();
        for (hi, h) in model.host_threads.iter().enumerate() {
            let t = self.st.n_vcpu_tasks as usize + hi;
            let c = &self.st.tasks[t].c;
            let w = &self.st.workloads[self.st.n_vm_workloads as usize + hi]; // one per host thread, in order
            let helper = (w.helper != NONE).then(|| &self.st.ft.helpers[w.helper as usize]);
            host_threads.push(HostThreadSummary {
                name: h.name.clone(),
                vm: h.vm.map(|v| model.vms[v as usize].name.clone()),
                helper: helper.map(|x| x.spec.kind().to_string()),
                cpu_time_s: s(c.run_ns),
                wait_time_s: s(c.wait_ns),
                migrations: MigrationSummary::from(c.migrations),
                jobs: helper.map(|x| x.jobs_done),
                job_latency_ms: helper.and_then(|x| latency_summary(&x.job_latency)),
            });
        }
        let busy: u64 = self.st.tasks.iter().map(|t| t.c.run_ns).sum();
        let overhead: u64 = self.st.tasks.iter().map(|t| t.c.overhead_ns).sum();
        let demanding: Vec<f64> = shares.iter().copied().filter(|x| *x > 0.0).collect();
        let warm = &self.st.sched_counters_at_warmup;
        let counters = self
            .sched
            .counters()
            .into_iter()
            .map(|(k, v)| {
                let before = warm.iter().find(|(n, _)| *n == k).map_or(0, |x| x.1);
                (k.to_string(), v - before)
            })
            .collect();
        let h = &self.st.h;
        Summary {
            scenario: model.name.clone(),
            scheduler: model.scheduler.clone(),
            seed: self.st.seed,
            duration_s: model.duration.as_secs_f64(),
            warmup_s: model.warmup.as_secs_f64(),
            events: h.events,
            vms,
            host: HostSummary {
                pcpus: self.st.cpus.len() as u32,
                busy_time_s: s(busy),
                idle_time_s: (measured.ns() as f64 * self.st.cpus.len() as f64 - busy as f64) / 1e9,
                overhead_time_s: s(overhead),
                utilization: busy as f64 / (measured.ns() as f64 * self.st.cpus.len() as f64),
                context_switches: h.context_switches,
                migrations: MigrationSummary::from(h.migrations),
                core_sched: self.core_sched_summary(measured),
                noise: self.st.noise.as_ref().map(|_| NoiseSummary {
                    interruptions: h.noise_interruptions,
                    lost_time_s: h.noise_ns as f64 / 1e9,
                    lost_pct: 100.0 * h.noise_ns as f64
                        / (measured.ns() as f64 * self.st.cpus.len() as f64),
                }),
            },
            fairness: FairnessSummary {
                jain_vm: jain(&demanding),
            },
            scheduler_counters: counters,
            event_counts: EventCounts {
                cpu_deadlines: h.ev_cpu,
                thread_wakeups: h.ev_thread_wake,
                arrivals: h.ev_arrival,
                global_timers: h.ev_global,
                op_completions: h.op_completions,
                scheduler_timers: h.timer_fires,
                ipis_sent: h.ipis_sent,
                lock_acquisitions: h.lock_acquisitions,
                cacheline_transfers: h.line_transfers,
                backend_packets: h.backend_packets,
                helper_events: h.ev_helper,
            },
            host_threads,
        }
    }
}

fn latency_summary(h: &Histogram) -> Option<LatencySummary> {
    (h.count > 0).then(|| LatencySummary {
        count: h.count,
        mean: h.mean() / 1e6,
        p50: h.quantile(0.50) as f64 / 1e6,
        p90: h.quantile(0.90) as f64 / 1e6,
        p99: h.quantile(0.99) as f64 / 1e6,
        max: h.max as f64 / 1e6,
    })
}

/// Streak statistics from (length -> number of streaks).
fn streak_summary(lengths: &BTreeMap<u64, u64>) -> StreakSummary {
    let total_ple: u64 = lengths.iter().map(|(l, n)| l * n).sum();
    let mut cdf = Vec::with_capacity(lengths.len());
    let (mut acc, mut median) = (0u64, 0u64);
    for (&l, &n) in lengths {
        acc += l * n;
        if median == 0 && acc * 2 >= total_ple {
            median = l;
        }
        cdf.push((l, acc as f64 / total_ple as f64));
    }
    let ge53: u64 = lengths.range(53..).map(|(l, n)| l * n).sum();
    StreakSummary {
        count: lengths.values().sum(),
        median,
        max: lengths.keys().next_back().copied().unwrap_or(0),
        ge53_frac: if total_ple == 0 {
            0.0
        } else {
            ge53 as f64 / total_ple as f64
        },
        cdf,
    }
}

impl From<[u64; 4]> for MigrationSummary {
    fn from(m: [u64; 4]) -> Self {
        let total: u64 = m.iter().sum();
        let other_socket = m[Distance::OtherSocket as usize - 1];
        let other_numa = m[Distance::OtherNuma as usize - 1];
        MigrationSummary {
            total,
            smt_sibling: m[Distance::SmtSibling as usize - 1],
            same_socket: m[Distance::SameSocket as usize - 1],
            other_socket,
            other_numa,
            cross_socket_share: (total > 0)
                .then(|| (other_socket + other_numa) as f64 / total as f64),
        }
    }
}

/// A vCPU's or VM's halt-polling counters as the summary prints them.
fn halt_poll_summary(p: &PollCounters, wake: Option<LatencySummary>) -> HaltPollSummary {
    let s = |ns: u64| ns as f64 / 1e9;
    HaltPollSummary {
        polls: p.polls,
        successful_polls: p.successes,
        poll_time_s: s(p.poll_ns),
        guest_polls: p.guest_polls,
        guest_successful_polls: p.guest_successes,
        guest_poll_time_s: s(p.guest_poll_ns),
        wakeup_latency_ms: wake,
    }
}
