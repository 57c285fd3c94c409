//! The scenario compiled for the engine: what a run needs, resolved once from a validated
//! `Scenario`. Work is in base-clock nanoseconds, every lock has its kind, every guest
//! thread its vCPU, every vCPU its latency role, and the host its default affinity, so the
//! engine is built from a `Model` (`Sim::new`) and never reads the scenario schema.
//!
//! The model keeps the scenario's shape (VMs, their workloads, host threads) and its
//! names, which the summary and traces print; the engine lays the tasks, threads and
//! workloads out from it (`engine::build`) and adds the programs of its own threads
//! (software-FT helpers, guest receive paths).

use crate::ft::HelperSpec;
use crate::kvm::KvmSpec;
use crate::scenario::{Costs, HostThreadBody, Scenario, VmSpec};
use crate::time::SimDuration;
use crate::topology::{CpuSet, Topology};
use crate::vocab::{IoDriver, LockKind, VmClass};
use crate::workload::{Arrivals, Dist, IpiTargets, Mode, Op, RxPath, Work, WorkloadSpec};

/// A validated scenario, compiled for the engine (see the module notes).
#[derive(Clone, Debug)]
pub struct Model {
    /// The scenario's name (errors and the summary name it) and its scheduler's.
    pub(crate) name: String,
    pub(crate) scheduler: String,
    pub(crate) duration: SimDuration,
    pub(crate) warmup: SimDuration,
    pub(crate) host: HostModel,
    /// KVM's layer as the scenario gives it: its `ple_window` is every vCPU's first window
    /// even with PLE off (the engine applies PLE only when `ple` is on).
    pub(crate) kvm: Option<KvmSpec>,
    pub(crate) vms: Vec<VmModel>,
    /// In scenario order: host thread i is the engine's host task and workload i.
    pub(crate) host_threads: Vec<HostThreadModel>,
    /// The split-driver backend every packet passes through; None: direct.
    pub(crate) io_driver: Option<IoDriver>,
}

#[derive(Clone, Debug)]
pub(crate) struct HostModel {
    pub topo: Topology,
    pub base_ghz: f64,
    /// Clock by busy cores in a package (entry k-1 for k); empty: always `base_ghz`.
    pub turbo_ghz: Vec<f64>,
    pub smt_throughput: f64,
    pub costs: Costs,
    pub noise: Option<crate::scenario::NoiseSpec>,
    pub isolcpus: Option<CpuSet>,
    /// The affinity of a vCPU or host thread that names none: every pCPU not isolated.
    pub default_affinity: CpuSet,
}

#[derive(Clone, Debug)]
pub(crate) struct VmModel {
    pub name: String,
    pub vcpus: u32,
    pub weight: u32,
    pub cap: u32,
    pub rt: crate::vocab::RtReservation,
    pub class: Option<VmClass>,
    /// vCPUs 0..latency_vcpus are latency (I/O) vCPUs: all of an LSVM's, a MixVM's
    /// reserved ones, none of any other VM's.
    pub latency_vcpus: u32,
    /// Per vCPU: its own affinity; None: the host's default affinity.
    pub affinity: Vec<Option<CpuSet>>,
    /// The kind of each of the VM's locks (by lock id): the VM's `spinlock`, unless the
    /// lock operations that use the lock name another kind.
    pub lock_kinds: Vec<LockKind>,
    /// Base-clock ns a kernel spinlock waiter spins before pv_wait (paravirtual
    /// spinlocks); infinite without them.
    pub pv_spin_ns: f64,
    pub guest_timeslice: SimDuration,
    pub start_jitter: SimDuration,
    /// The guest runs CFQ (`elevator = "cfq"`).
    pub cfq: bool,
    /// The guest's haltpoll cpuidle governor; None: it halts at once when idle.
    pub haltpoll: Option<crate::kvm::GuestHaltPoll>,
    /// The idle loop spins (`idle = "poll"`): the vCPU never halts.
    pub idle_poll: bool,
    pub workloads: Vec<WorkloadModel>,
}

#[derive(Clone, Debug)]
pub(crate) struct WorkloadModel {
    /// The preset name and the unit of throughput, as the summary prints them.
    pub kind: String,
    pub unit: String,
    pub threads: u32,
    pub bytes_per_unit: u64,
    pub ops: Vec<RtOp>,
    pub counts_requests: bool,
    pub arrivals: Option<Arrivals>,
    pub rt: bool,
    pub dirty_bytes_per_ns: f64,
    pub request_bytes: u64,
    pub total_units: Option<u64>,
    /// A guest timer workload (`timer-rt`): its timer interrupts go to the vCPU of its
    /// first thread.
    pub timer: bool,
    pub rx: Option<RxPath>,
    /// `arrivals.latency = "taken"` (see `RtOp::Taken`).
    pub latency_taken: bool,
    placement: Placement,
}

/// Where a workload's threads live.
#[derive(Clone, Debug)]
enum Placement {
    /// Thread k of the VM (threads numbered across its workloads in order) on vCPU
    /// k mod vcpus; the workload's first thread is thread `first` of the VM.
    RoundRobin { first: u32, vcpus: u32 },
    /// Thread j on `vcpus[j mod len]` (the workload's `vcpus`).
    Listed(Vec<u32>),
}

impl WorkloadModel {
    /// The vCPU (index within the VM) of thread `thread` of this workload.
    pub fn thread_vcpu(&self, thread: u32) -> u32 {
        match &self.placement {
            Placement::RoundRobin { first, vcpus } => (first + thread) % vcpus,
            Placement::Listed(list) => list[thread as usize % list.len()],
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct HostThreadModel {
    pub name: String,
    /// The owning VM; None: a host-wide kernel thread.
    pub vm: Option<u32>,
    pub affinity: Option<CpuSet>,
    pub weight: u32,
    pub program: HostThreadProgram,
}

#[derive(Clone, Debug)]
pub(crate) enum HostThreadProgram {
    /// Loops over these operations like a guest thread.
    Ops(Vec<RtOp>),
    /// A software-FT helper (the engine runs its fixed program, see `engine::ft`).
    Helper(HelperSpec),
}

/// An operation as the engine executes it: work already converted to base-clock
/// nanoseconds. The workload operations compile to these (`compile_op`); the helper steps
/// and `RxDeliver` exist only for the engine's own threads (helpers, receive paths).
#[derive(Clone, Debug)]
pub(crate) enum RtOp {
    Compute {
        work: Dist,
        mode: Mode,
    },
    Lock {
        lock: u32,
        hold: Dist,
        mode: Mode,
        shards: u32,
    },
    Ipi {
        targets: IpiTargets,
    },
    Io {
        latency: Dist,
        write_bytes: u64,
        window: u32,
        writeback: bool,
    },
    Sleep {
        duration: Dist,
    },
    /// See `workload::Op::Timer`.
    Timer {
        period: SimDuration,
        relative: bool,
        slot: u32,
    },
    WaitRequest,
    /// Follows every `WaitRequest` of a workload with `arrivals.latency = "taken"`: the
    /// thread runs again with the request it took (after its vCPU's wake-up, if it
    /// halted), so the request's latency ends here.
    Taken,
    Respond,
    /// `workload::Op::RespondHeld`: the response goes to the backend with its queue lock
    /// held by this thread, until its `ReleaseHeld` (after the hold's compute).
    RespondHeld,
    ReleaseHeld,
    /// Helper threads (see `crate::ft`): take the next job or block.
    HelperWait,
    /// Burn the CPU work of the current job.
    HelperWork,
    /// Wait for the network transfer and the secondary's acknowledgement.
    HelperNet,
    /// Complete the job (resume the VM, release or complete the guest's I/O).
    HelperDone,
    /// Kemari with `sync_release`: wait until the write just released has completed.
    HelperFlush,
    /// Burn the backend's CPU for the packet taken.
    PacketWork {
        per_packet: f64,
        per_kib: f64,
    },
    /// Hand the packet on: into its guest, or out to the network (completing the request).
    Forward,
    /// A guest receive path (`rx`): hand the request to its workload's threads.
    RxDeliver,
    /// lookbusy's busy phase with its controller (see `Sim::lookbusy_busy_ns`).
    LookbusySpin {
        util: f64,
        first_busy_ns: f64,
        spinners: u32,
    },
}

impl Model {
    /// Compiles a validated scenario (`Scenario::from_*` validated it; nothing here fails).
    pub fn compile(sc: &Scenario) -> Model {
        let base_ghz = sc.host.base_ghz;
        Model {
            name: sc.name.clone(),
            scheduler: sc.scheduler.name.clone(),
            duration: sc.duration,
            warmup: sc.warmup,
            host: HostModel {
                topo: sc.host.topology(),
                base_ghz,
                turbo_ghz: sc.host.turbo_ghz.clone(),
                smt_throughput: sc.host.smt_throughput,
                costs: sc.host.costs.clone(),
                noise: sc.host.noise.clone(),
                isolcpus: sc.host.isolcpus.clone(),
                default_affinity: sc.host.default_affinity(),
            },
            kvm: sc.kvm.clone(),
            vms: sc.vms.iter().map(|vm| compile_vm(vm, base_ghz)).collect(),
            host_threads: sc
                .host_threads
                .iter()
                .map(|h| HostThreadModel {
                    name: h.name.clone(),
                    vm: h.vm,
                    affinity: h.affinity.clone(),
                    weight: h.weight,
                    program: match &h.body {
                        // The parser admits compute, sleep, io and netback operations only.
                        HostThreadBody::Workload(w) => {
                            HostThreadProgram::Ops(compile_ops(&w.ops, base_ghz, false))
                        }
                        HostThreadBody::Helper(spec) => HostThreadProgram::Helper(spec.clone()),
                    },
                })
                .collect(),
            io_driver: sc.io_driver,
        }
    }
}

fn compile_vm(vm: &VmSpec, base_ghz: f64) -> VmModel {
    let mut lock_kinds = vec![vm.spinlock; vm.locks.len()];
    for op in vm.workloads.iter().flat_map(|w| &w.ops) {
        if let Op::Lock {
            lock, kind, shards, ..
        } = op
        {
            for k in 0..*shards as usize {
                lock_kinds[*lock as usize + k] = *kind;
            }
        }
    }
    let mut first_thread = 0;
    let workloads = vm
        .workloads
        .iter()
        .map(|w| {
            let placement = match &w.vcpus {
                Some(list) => Placement::Listed(list.clone()),
                None => Placement::RoundRobin {
                    first: first_thread,
                    vcpus: vm.vcpus,
                },
            };
            first_thread += w.threads;
            compile_workload(w, placement, base_ghz)
        })
        .collect();
    VmModel {
        name: vm.name.clone(),
        vcpus: vm.vcpus,
        weight: vm.weight,
        cap: vm.cap,
        rt: vm.rt,
        class: vm.class,
        latency_vcpus: (0..vm.vcpus).take_while(|&i| vm.is_latency_vcpu(i)).count() as u32,
        affinity: vm.affinity.clone(),
        lock_kinds,
        pv_spin_ns: vm
            .pv_spin_threshold_cycles
            .map_or(f64::INFINITY, |c| c / base_ghz),
        guest_timeslice: vm.guest_timeslice,
        start_jitter: vm.start_jitter,
        cfq: vm.elevator_cfq,
        haltpoll: vm.haltpoll.clone(),
        idle_poll: vm.idle_poll,
        workloads,
    }
}

fn compile_workload(w: &WorkloadSpec, placement: Placement, base_ghz: f64) -> WorkloadModel {
    WorkloadModel {
        kind: w.kind.clone(),
        unit: w.unit.clone(),
        threads: w.threads,
        bytes_per_unit: w.bytes_per_unit,
        ops: compile_ops(&w.ops, base_ghz, w.latency_taken),
        counts_requests: w.counts_requests,
        arrivals: w.arrivals.clone(),
        rt: w.rt,
        dirty_bytes_per_ns: w.dirty_bytes_per_ns,
        request_bytes: w.request_bytes,
        total_units: w.total_units,
        timer: w.kind == "timer-rt",
        rx: w.rx.clone(),
        latency_taken: w.latency_taken,
        placement,
    }
}

/// The engine operations of a workload's list. With `latency = "taken"` a request's
/// latency ends when a thread takes it, so each `WaitRequest` is followed by `Taken`.
fn compile_ops(ops: &[Op], base_ghz: f64, latency_taken: bool) -> Vec<RtOp> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        for rt in compile_op(op, base_ghz) {
            let taken = latency_taken && matches!(rt, RtOp::WaitRequest);
            out.push(rt);
            if taken {
                out.push(RtOp::Taken);
            }
        }
    }
    out
}

/// The engine operations of one workload operation (work in base-clock ns).
fn compile_op(op: &Op, base_ghz: f64) -> Vec<RtOp> {
    vec![match op {
        Op::Compute { work, mode } => RtOp::Compute {
            work: work.base_ns(base_ghz),
            mode: *mode,
        },
        Op::Lock {
            lock,
            hold,
            mode,
            shards,
            ..
        } => RtOp::Lock {
            lock: *lock,
            hold: hold.clone(),
            mode: *mode,
            shards: *shards,
        },
        Op::Ipi { targets } => RtOp::Ipi {
            targets: targets.clone(),
        },
        Op::Io {
            latency,
            write_bytes,
            window,
            writeback,
        } => RtOp::Io {
            latency: latency.clone(),
            write_bytes: *write_bytes,
            window: *window,
            writeback: *writeback,
        },
        Op::Sleep { duration } => RtOp::Sleep {
            duration: duration.clone(),
        },
        Op::Timer {
            period,
            relative,
            slot,
        } => RtOp::Timer {
            period: SimDuration::round_ns(*period),
            relative: *relative,
            slot: *slot,
        },
        Op::WaitRequest => RtOp::WaitRequest,
        Op::Respond => RtOp::Respond,
        Op::RespondHeld { hold } => {
            return vec![
                RtOp::RespondHeld,
                RtOp::Compute {
                    work: Work::Time(hold.clone()).base_ns(base_ghz),
                    mode: Mode::Kernel,
                },
                RtOp::ReleaseHeld,
            ]
        }
        // A backend waits on its packet queue as a server waits on its request queue.
        Op::WaitPacket => RtOp::WaitRequest,
        Op::LookbusySpin {
            util,
            first_busy,
            spinners,
        } => RtOp::LookbusySpin {
            util: *util,
            first_busy_ns: first_busy.base_ns(base_ghz).mean(),
            spinners: *spinners,
        },
        Op::ForwardPacket {
            per_packet,
            per_kib,
        } => {
            return vec![
                RtOp::PacketWork {
                    per_packet: *per_packet,
                    per_kib: *per_kib,
                },
                RtOp::Forward,
            ]
        }
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str) -> Model {
        Model::compile(&Scenario::from_toml_str(text, "test").unwrap())
    }

    const HOST: &str = "duration = \"1s\"\n[host]\ncores_per_socket = 4\nbase_ghz = 2.0\n\
                        [scheduler]\nname = \"rr\"\n";

    /// Threads are numbered across a VM's workloads: a workload without `vcpus` goes on
    /// where the one before ended, whether or not that one listed its vCPUs.
    #[test]
    fn threads_are_placed_round_robin_across_workloads_unless_listed() {
        let m = model(&format!(
            "{HOST}[[vm]]\nname = \"a\"\nvcpus = 3\n\
             [[vm.workload]]\nkind = \"stress-ng\"\nthreads = 2\nvcpus = [2]\n\
             [[vm.workload]]\nkind = \"stress-ng\"\nthreads = 4\n"
        ));
        let w = &m.vms[0].workloads;
        assert_eq!((w[0].thread_vcpu(0), w[0].thread_vcpu(1)), (2, 2));
        let second: Vec<u32> = (0..4).map(|t| w[1].thread_vcpu(t)).collect();
        assert_eq!(second, vec![2, 0, 1, 2]);
    }

    /// A lock takes the kind its lock operations give (every shard of it), else the VM's
    /// `spinlock`.
    #[test]
    fn each_lock_gets_the_kind_its_operations_name() {
        let m = model(&format!(
            "{HOST}[[vm]]\nname = \"a\"\nvcpus = 2\nspinlock = \"tas\"\n\
             [[vm.workload]]\nkind = \"program\"\nops = [\
             {{ op = \"lock\", lock = \"m\", kind = \"mutex\", hold = \"1us\", shards = 2 }},\
             {{ op = \"lock\", lock = \"s\", hold = \"1us\" }}]\n"
        ));
        assert_eq!(
            m.vms[0].lock_kinds,
            vec![LockKind::Mutex, LockKind::Mutex, LockKind::TestAndSet]
        );
    }

    /// Cycles become base-clock ns; pv spinlock thresholds too; an LSVM's vCPUs are all
    /// latency vCPUs, a MixVM's reserved ones only.
    #[test]
    fn cycles_become_base_clock_nanoseconds_and_latency_vcpus_are_counted() {
        let m = model(&format!(
            "{HOST}[[vm]]\nname = \"a\"\nvcpus = 3\nclass = \"mixvm\"\nreserved_vcpus = 2\n\
             pv_spinlock = true\npv_spin_threshold = 1000\n\
             [[vm.workload]]\nkind = \"program\"\n\
             ops = [{{ op = \"compute\", cycles = 4000 }}]\n\
             [[vm]]\nname = \"b\"\nvcpus = 2\nclass = \"lsvm\"\n"
        ));
        match &m.vms[0].workloads[0].ops[..] {
            [RtOp::Compute { work, .. }] => assert_eq!(*work, Dist::Fixed(2000.0)),
            other => panic!("{other:?}"),
        }
        assert_eq!(m.vms[0].pv_spin_ns, 500.0);
        assert_eq!(m.vms[1].pv_spin_ns, f64::INFINITY);
        assert_eq!((m.vms[0].latency_vcpus, m.vms[1].latency_vcpus), (2, 2));
    }
}
