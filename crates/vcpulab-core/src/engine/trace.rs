//! Execution traces in the Chrome JSON trace format, which Perfetto (ui.perfetto.dev) and
//! chrome://tracing open. Process 0 ("pCPUs") has one track per pCPU with a slice for
//! each stretch a vCPU or host thread ran there; process 1 ("vCPUs") has one track per
//! vCPU and per host thread carrying the instant events that happen to it (wake-ups,
//! IPIs, migrations, halts, ...).
//!
//! Tracing is off unless asked for: the engine checks one `Option` per traced point.

use crate::time::SimTime;
use std::fmt::Write;

#[derive(Clone, Copy, Debug)]
pub enum Rec {
    /// `task` ran on `cpu` from `start` to `end`.
    Run {
        cpu: u32,
        task: u32,
        start: SimTime,
        end: SimTime,
    },
    /// Something happened to `task` at `t` (on `cpu` if it ran somewhere); `other` is the
    /// peer vCPU (IPI target, boosted vCPU) or a pCPU (migration source), per `kind`.
    Instant {
        t: SimTime,
        task: u32,
        kind: &'static str,
        cpu: Option<u32>,
        other: Option<u32>,
    },
}

/// What a task is, for its trace track: a vCPU of a VM, or a host thread (of a VM, or of
/// no VM).
pub enum TaskLabel {
    Vcpu { vm: String, index: u32 },
    HostThread { name: String, vm: Option<String> },
}

impl TaskLabel {
    fn name(&self) -> String {
        match self {
            TaskLabel::Vcpu { vm, index } => format!("{vm}/vcpu{index}"),
            TaskLabel::HostThread { name, .. } => name.clone(),
        }
    }

    /// The slice's identifying arguments, as JSON members.
    fn args(&self) -> String {
        match self {
            TaskLabel::Vcpu { vm, index } => format!("\"vm\":{},\"vcpu\":{index}", json_str(vm)),
            TaskLabel::HostThread { name, vm: Some(vm) } => {
                format!("\"host_thread\":{},\"vm\":{}", json_str(name), json_str(vm))
            }
            TaskLabel::HostThread { name, vm: None } => {
                format!("\"host_thread\":{}", json_str(name))
            }
        }
    }
}

pub struct Tracer {
    pub from: SimTime,
    pub to: SimTime,
    pub recs: Vec<Rec>,
    /// Records kept at most; beyond it tracing stops and the trace says so.
    pub limit: usize,
    pub truncated: bool,
}

impl Tracer {
    pub fn new(from: SimTime, to: SimTime) -> Tracer {
        Tracer {
            from,
            to,
            recs: Vec::new(),
            limit: 20_000_000,
            truncated: false,
        }
    }

    #[inline]
    fn push(&mut self, r: Rec) {
        if self.recs.len() >= self.limit {
            self.truncated = true;
        } else {
            self.recs.push(r);
        }
    }

    pub fn run(&mut self, cpu: u32, task: u32, start: SimTime, end: SimTime) {
        let (s, e) = (start.max(self.from), end.min(self.to));
        if s < e {
            self.push(Rec::Run {
                cpu,
                task,
                start: s,
                end: e,
            });
        }
    }

    pub fn instant(
        &mut self,
        t: SimTime,
        task: u32,
        kind: &'static str,
        cpu: Option<u32>,
        other: Option<u32>,
    ) {
        if t >= self.from && t <= self.to {
            self.push(Rec::Instant {
                t,
                task,
                kind,
                cpu,
                other,
            });
        }
    }

    /// Renders the trace. `labels[task]` names the task's track and slices.
    pub fn to_chrome_json(&self, ncpus: usize, labels: &[TaskLabel]) -> String {
        let us = |t: SimTime| t.0 as f64 / 1000.0;
        let mut o = String::with_capacity(self.recs.len() * 120 + 4096);
        o.push_str("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"vcpulab\"");
        if self.truncated {
            let _ = write!(o, ",\"truncated_after_records\":{}", self.limit);
        }
        o.push_str("},\"traceEvents\":[\n");
        let mut first = true;
        let mut sep = |o: &mut String| {
            if !first {
                o.push_str(",\n");
            }
            first = false;
        };
        for (pid, name) in [(0, "pCPUs"), (1, "vCPUs")] {
            sep(&mut o);
            let _ = write!(o, "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"{name}\"}}}}");
        }
        for c in 0..ncpus {
            sep(&mut o);
            let _ = write!(o, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":{c},\"args\":{{\"name\":\"pCPU {c}\"}}}}");
        }
        for (t, label) in labels.iter().enumerate() {
            sep(&mut o);
            let _ = write!(
                o,
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":{t},\"args\":{{\"name\":{}}}}}",
                json_str(&label.name())
            );
        }
        for r in &self.recs {
            sep(&mut o);
            match *r {
                Rec::Run {
                    cpu,
                    task,
                    start,
                    end,
                } => {
                    let label = &labels[task as usize];
                    let _ = write!(
                        o,
                        "{{\"ph\":\"X\",\"name\":{},\"pid\":0,\"tid\":{cpu},\"ts\":{},\"dur\":{},\"args\":{{{},\"task\":{task}}}}}",
                        json_str(&label.name()),
                        us(start),
                        (end.0 - start.0) as f64 / 1000.0,
                        label.args()
                    );
                }
                Rec::Instant {
                    t,
                    task,
                    kind,
                    cpu,
                    other,
                } => {
                    let label = &labels[task as usize];
                    let _ = write!(
                        o,
                        "{{\"ph\":\"i\",\"s\":\"t\",\"name\":\"{kind}\",\"pid\":1,\"tid\":{task},\"ts\":{},\"args\":{{{}",
                        us(t),
                        label.args()
                    );
                    if let Some(c) = cpu {
                        let _ = write!(o, ",\"cpu\":{c}");
                    }
                    if let Some(x) = other {
                        let _ = write!(o, ",\"other\":{x}");
                    }
                    o.push_str("}}");
                }
            }
        }
        o.push_str("\n]}\n");
        o
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}
