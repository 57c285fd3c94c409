//! Words the scenario schema, the workloads, the model, the engine and the schedulers all
//! speak: a leaf module (it imports nothing of the crate), so that `scenario` can depend on
//! `workload` and `sched` (to parse and validate) without either depending back on it.

/// How a lock hands over (a VM's `spinlock`, a lock op's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// FIFO hand-off: the lock passes to the next waiter even if it is preempted.
    Ticket,
    /// Test-and-set: whichever running waiter tries first takes a free lock.
    TestAndSet,
    /// A sleeping lock (a pthread mutex over a futex, as glibc's default mutex): a thread
    /// that finds it held blocks, and its vCPU halts if nothing else is runnable; the
    /// release wakes the first waiter, which tries again when it runs (whoever runs
    /// first takes a free mutex). Not a spinlock, so it never pause-loop exits.
    Mutex,
}

/// FLMS's classification of a VM (paper section 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VmClass {
    /// Latency-sensitive: every vCPU serves I/O.
    Lsvm,
    /// Not latency-sensitive: CPU-bound.
    Nlsvm,
    /// Both: `reserved_vcpus` latency vCPUs, the rest CPU-bound.
    Mixvm,
}

/// The backend of the split-driver I/O path: the `netback` workload of a driver domain
/// (Xen dom0) or of a host thread (KVM's vhost).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IoDriver {
    /// A VM (by index) and its netback workload (index within the VM).
    Vm { vm: u32, workload: u32 },
    /// A host thread (by index) whose workload is netback.
    HostThread(u32),
}

/// A VM's real-time reservation for Xen's RTDS scheduler (`[[vm]] rt_period`, `rt_budget`,
/// `rt_extratime`): each key left out takes the scheduler's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtReservation {
    /// Nanoseconds.
    pub period_ns: Option<u64>,
    /// Nanoseconds.
    pub budget_ns: Option<u64>,
    pub extratime: Option<bool>,
}
