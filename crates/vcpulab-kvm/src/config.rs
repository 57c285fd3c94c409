//! The harness's input (one run), as JSON from the Python front end (or any caller).
//! Durations are integer nanoseconds here; the TOML scenario format lives in Python.

use crate::guest::Program;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Measured time: the host sets the stop flag this long after every vCPU passed the
    /// in-guest start barrier.
    pub duration_ns: u64,
    /// The first part of `duration_ns` that the results leave out: at its end the host
    /// reads every vCPU's op count (`VcpuResult::warm_ops`) and the clock (`RunResult::
    /// warm_wall_s` runs from there to the stop flag). 0: no warm-up, the whole run counts.
    #[serde(default)]
    pub warmup_ns: u64,
    /// Hard limit for the whole run (start barrier, run, wind-down); a run that exceeds it
    /// is stopped (vCPUs kicked out of KVM_RUN) and reported as an error.
    #[serde(default = "default_timeout")]
    pub timeout_ns: u64,
    /// How often the monitor thread wakes during the measured interval: to end expired PLE
    /// boosts, take the warm-up mark, and notice a finished vCPU or Ctrl-C. Each wake-up
    /// preempts a vCPU thread when every CPU is busy. `vcpulab kvm calibrate` measures the
    /// host's noise with a slow monitor (`MONITOR_POLL_QUIET_NS` there), so that the
    /// harness's own wake-ups stay out of it; everything else takes the default, 500 us.
    /// Under a PLE policy that boosts, the monitor wakes at least every `ple.boost_ns`.
    #[serde(default = "default_monitor_poll")]
    pub monitor_poll_ns: u64,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub vcpus: Vec<VcpuConfig>,
    #[serde(default)]
    pub ple: PleConfig,
    #[serde(default)]
    pub cgroups: Vec<CgroupConfig>,
    /// Policy of the harness's waker thread (the "device" that wakes halted vCPUs).
    #[serde(default)]
    pub waker: ThreadPolicy,
}

fn default_timeout() -> u64 {
    60_000_000_000
}
fn default_monitor_poll() -> u64 {
    500_000
}
fn default_seed() -> u64 {
    1
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// KVM if /dev/kvm can be opened, else host threads (with a notice).
    #[default]
    Auto,
    Kvm,
    Threads,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VcpuConfig {
    pub program: Program,
    /// Workload index: vCPUs of one group share a lock / barrier.
    #[serde(default)]
    pub group: usize,
    /// Non-critical compute per op (the `compute` op before a lock/ipi/io/sleep).
    #[serde(default)]
    pub ncs_ns: u64,
    /// Critical section (lock `hold`).
    #[serde(default)]
    pub cs_ns: u64,
    /// `io` latency: the time the harness waits before waking the halted vCPU.
    #[serde(default)]
    pub io: Option<Dist>,
    /// `sleep` duration of the timer program.
    #[serde(default)]
    pub sleep_ns: u64,
    #[serde(default)]
    pub policy: ThreadPolicy,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum Dist {
    Fixed { value_ns: u64 },
    Uniform { min_ns: u64, max_ns: u64 },
    Exp { mean_ns: u64 },
}

impl Dist {
    /// A draw, given a uniform u in [0, 1).
    pub fn draw(&self, u: f64) -> u64 {
        match *self {
            Dist::Fixed { value_ns } => value_ns,
            Dist::Uniform { min_ns, max_ns } => {
                min_ns + ((max_ns.saturating_sub(min_ns)) as f64 * u) as u64
            }
            Dist::Exp { mean_ns } => (-(1.0 - u).ln() * mean_ns as f64) as u64,
        }
    }
}

/// Host scheduling policy of one thread. Every field is optional: unset = unchanged.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ThreadPolicy {
    /// Host CPUs the thread may run on.
    #[serde(default)]
    pub affinity: Option<Vec<usize>>,
    #[serde(default)]
    pub nice: Option<i32>,
    #[serde(default)]
    pub sched: Option<SchedClass>,
    /// Real-time priority (fifo/rr), 1..99.
    #[serde(default)]
    pub priority: Option<u32>,
    /// Custom EEVDF slice (`sched_setattr` sched_runtime with SCHED_OTHER/BATCH).
    #[serde(default)]
    pub slice_ns: Option<u64>,
    /// SCHED_DEADLINE parameters.
    #[serde(default)]
    pub dl_runtime_ns: Option<u64>,
    #[serde(default)]
    pub dl_deadline_ns: Option<u64>,
    #[serde(default)]
    pub dl_period_ns: Option<u64>,
    /// Name of a cgroup from `cgroups`.
    #[serde(default)]
    pub cgroup: Option<String>,
}

impl ThreadPolicy {
    pub fn is_empty(&self) -> bool {
        *self == ThreadPolicy::default()
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SchedClass {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PleConfig {
    /// Spins of one wait after which the guest exits to the harness (None = no PLE).
    #[serde(default)]
    pub window: Option<u64>,
    #[serde(default)]
    pub policy: PlePolicy,
    /// How long a boost lasts at most (it also ends at the next PLE exit's boost).
    #[serde(default = "default_boost")]
    pub boost_ns: u64,
}

fn default_boost() -> u64 {
    1_000_000
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PlePolicy {
    /// Re-enter the guest at once.
    #[default]
    None,
    /// `sched_yield()` on the spinner's thread.
    Yield,
    /// Candidate (round robin after the last boosted, skipping the spinner) to nice -20
    /// for `boost_ns`, then the spinner yields.
    Boost,
    /// Same with SCHED_FIFO priority 1 for the candidate.
    BoostFifo,
    /// Move the candidate onto the spinner's CPU (affinity) for `boost_ns`, spinner yields.
    Migrate,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupConfig {
    pub name: String,
    /// v1 cpu.shares (v2: converted to cpu.weight).
    #[serde(default)]
    pub shares: Option<u64>,
    #[serde(default)]
    pub quota_ns: Option<u64>,
    #[serde(default)]
    pub period_ns: Option<u64>,
    /// cpuset.cpus, a cpu-list string.
    #[serde(default)]
    pub cpus: Option<String>,
}
