//! Software fault tolerance: the host-side helper threads of seed 003 (Kemari + DRBD).
//!
//! ## The model
//! A `[[host_thread]]` with `helper = "kemari"` or `helper = "drbd"` serves one VM (its
//! `vm`). Both are ordinary host threads: the host scheduler runs them beside the vCPUs,
//! so they compete with vCPUs for pCPUs, honour `affinity` and `isolcpus`, and pay switch
//! and migration costs like anything else.
//!
//! - **Kemari** (QEMU event-tap, kemari-next for QEMU 1.0). The Kemari thread is QEMU's
//!   I/O thread: the event-tap's bottom half runs the transaction in its main loop
//!   (`migrate_ft_trans_put_ready` / `migrate_ft_trans_commit` in kemari-next's
//!   migration.c). Every disk write of the VM (an `io` operation with `write_kib` in a
//!   guest thread; the event-tap wraps `bdrv_aio_writev` and `bdrv_aio_flush`, so reads
//!   pass untouched) is held, and the VM is stopped: each of its vCPUs leaves guest mode and sleeps (a
//!   running vCPU halts at once; a queued one halts when it is next dispatched). The
//!   thread then synchronises the primary's memory to the secondary:
//!   - CPU work: `sync_cpu` per sync (stopping the VM, reading KVM's dirty log, the
//!     event-tap bookkeeping) plus `copy_cpu_per_mib` per MiB of memory dirtied since the
//!     last sync, plus the cache refill of that memory: the pages were last written by the
//!     vCPU on another pCPU, so each MiB costs the host's migration cost for the distance
//!     between the vCPU's last pCPU and the Kemari thread's pCPU (`[host.costs.migration]`
//!     is stated as the refill of ~1 MiB). A Kemari on the vCPU's own core copies from its
//!     own cache.
//!   - Transfer: the dirty bytes at `link_gbps`, then `ack_rtt` for the secondary's
//!     acknowledgement; the thread sleeps meanwhile (no CPU).
//!
//!   Then the VM resumes (its vCPUs wake) and the held I/O is released. Writes queue as
//!   one transaction each (kemari-next's `migrate_ft_trans_put_ready` loops over
//!   `event_tap_flush_one` until the event list is empty): the next starts when the
//!   thread is done with the previous one, stops the VM again and carries the memory
//!   dirtied up to its start. A write issued while the thread is busy waits in the queue
//!   and the VM runs on until its transaction starts.
//!   - `sync_release` (default on): the thread waits until the released write has
//!     completed before it does anything else. kemari-next's `event_tap_blk_flush`
//!     submits the held write and then calls `qemu_aio_flush()` and `bdrv_flush()` in the
//!     I/O thread, "to avoid request inversion"; the guest runs meanwhile.
//!   - `guest_timers` (default on): the thread raises the VM's timer interrupts. We take
//!     kemari-next as built on qemu.git (its patches went to qemu-devel), whose KVM
//!     support lacked qemu-kvm's in-kernel irqchip (the KVM maintainers' 2010 list of
//!     "features in qemu-kvm.git not present in qemu.git" names it) until commit
//!     84b058d7 "kvm: Introduce core services for in-kernel irqchip support" (2012, after
//!     QEMU 1.0). So QEMU 1.0 emulates the guest's APIC, PIC and PIT in user space, their
//!     timers in the I/O thread's main loop. An expired guest timer is queued for the thread; it runs it when
//!     free (at once if it waits; after its current sync or flush otherwise; timers go
//!     before queued syncs, as QEMU's main loop runs timers before bottom halves), which
//!     costs `timer_cpu`, and the interrupt then reaches the vCPU, an IPI later if the
//!     vCPU last ran on another pCPU (QEMU kicks the vCPU thread with a signal).
//!   - `global_mutex` (default on): QEMU 1.0's vCPU thread takes the global mutex
//!     (`qemu_mutex_lock_iothread`) after every return from `KVM_RUN`, so it injects an
//!     interrupt raised by the I/O thread only once it has the mutex. The I/O thread
//!     holds it while it works (the transaction, the synchronous flush) and releases it
//!     only around `select()` in `main_loop_wait`, taking it again as soon as
//!     `select()` returns, at once when a bottom half (the next transaction) is pending.
//!     glibc's mutex does not hand over on unlock, so a waiter on another pCPU, whose
//!     futex wake-up needs an IPI and a switch there, finds it retaken: it gets the mutex
//!     only when the I/O thread blocks (no timer, no held write left). A waiter on the
//!     I/O thread's own pCPU is woken there and preempts the releaser (CFS: a woken
//!     sleeper), so it wins every release. The rule covers the raised timers and the
//!     completions of held writes: each waits in the thread's queue for the next release
//!     it can win (counted as `mutex_handoffs_idle`, `_same_cpu`, `_lost`). Later QEMU
//!     bounded this starvation (main-loop.c's 1000-iteration spin counter, after 1.0).
//! - **DRBD** (protocol C): each disk write (`io` with `write_kib`) is also sent to the
//!   secondary: `cpu_per_write` + `cpu_per_mib` of CPU in the DRBD thread, then the bytes
//!   at `link_gbps`, the secondary's disk write (the same latency as the local one: the
//!   secondary has the same disk) and `ack_rtt`. Protocol C completes a write when both
//!   disks have it. It runs in parallel with the guest; the write completes (the guest
//!   thread's interrupt, and Kemari's flush) when both the local disk (the `io` latency)
//!   and the replication are done.
//! - **Interrupts across CPUs**: a helper that wakes a vCPU (resume, I/O completion, a
//!   timer interrupt) from another pCPU than the vCPU last ran on pays `[host.costs] ipi`
//!   before the wake takes effect; so does a vCPU waking a helper that last ran elsewhere.
//! - Dirty memory: each guest workload dirties `dirty_mib_per_s` per second of its CPU
//!   time (accrued when a compute operation starts). A write dirties its buffer when it is
//!   issued, unless its workload states a dirtying rate, which then covers filling the
//!   buffer (IOzone's page-cache copies).
//!
//! ## Defaults and their reasoning (seed 003's testbed: 2 x Xeon X5650, NetXen 10 GbE)
//! - `sync_cpu` 200 us: stopping a 1-vCPU VM (signal + exit), KVM_GET_DIRTY_LOG over a
//!   512 MiB guest (128 Ki pages, a 16 KiB bitmap) and the event-tap queue handling.
//! - `copy_cpu_per_mib` 600 us: dirty pages go through a TCP socket: a memcpy into the
//!   socket buffer (~5 GB/s) and the send path (~2 GB/s per core with offloads on 2010-era
//!   hardware) give ~0.6 ms/MiB.
//! - `link_gbps` 10 (the NX3031 is a 10 GbE NIC); `ack_rtt` 100 us (a 10 GbE round trip
//!   through two kernels and the secondary's receive path).
//! - `timer_cpu` 10 us: the main loop wakes on the host alarm signal, takes QEMU's global
//!   mutex, runs the APIC timer and signals the vCPU thread: a few system calls of 1-2 us
//!   each on a 2.66 GHz Westmere, plus the emulation.
//! - DRBD `cpu_per_write` 20 us (bio cloning, request bookkeeping, socket send setup),
//!   `cpu_per_mib` 500 us (send path as above, no checksums by default).
//!
//! ## Deviations and omissions
//! - Kemari's secondary, failover and the output-commit of network packets are not
//!   modelled (the seed's guest has no NIC).
//! - kemari-next lets the VM run while the first pages of a transaction are sent (its
//!   `FT_TRANSACTION_ITER` phase, up to QEMU's 30 ms `max_downtime`) and returns to the
//!   main loop while it waits for the secondary's ack; we stop the VM for the whole sync.
//!   Timers that expired during a sync are raised when the ack arrives (their
//!   `timer_cpu` is not charged), so their interrupts are pending as the VM resumes.
//! - The QEMU global mutex (the paper's "exclusive control") gates interrupt delivery
//!   only (`global_mutex`): the vCPU thread's own exits to user space (device accesses)
//!   do not wait for it, and the guest keeps computing while an interrupt waits.
//! - One Kemari and one DRBD thread per VM at most; a helper serves one VM. DRBD's thread
//!   handles one write at a time (real DRBD pipelines; under Kemari's synchronous release
//!   only one write is in flight anyway).

use crate::reader::{Owned, Res, Table};
use crate::time::SimDuration;

/// Keys a `[[host_thread]]` may carry for its helper (validated per helper kind).
pub const HELPER_KEYS: &[&str] = &[
    "sync_cpu",
    "copy_cpu_per_mib",
    "cpu_per_write",
    "cpu_per_mib",
    "link_gbps",
    "ack_rtt",
    "timer_cpu",
    "guest_timers",
    "sync_release",
    "global_mutex",
];

#[derive(Clone, Debug, PartialEq)]
pub enum HelperSpec {
    Kemari {
        sync_cpu: SimDuration,
        copy_cpu_per_mib: SimDuration,
        link_bytes_per_ns: f64,
        ack_rtt: SimDuration,
        /// The thread also raises the VM's timer interrupts (QEMU 1.0's userspace APIC).
        guest_timers: bool,
        /// CPU per timer interrupt raised (main-loop wake, APIC timer, vCPU kick).
        timer_cpu: SimDuration,
        /// The thread waits for each released write to complete before it goes on.
        sync_release: bool,
        /// A raised interrupt reaches the vCPU only when the vCPU thread gets QEMU's
        /// global mutex from the thread (see the module notes).
        global_mutex: bool,
    },
    Drbd {
        cpu_per_write: SimDuration,
        cpu_per_mib: SimDuration,
        link_bytes_per_ns: f64,
        ack_rtt: SimDuration,
    },
}

impl HelperSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            HelperSpec::Kemari { .. } => "kemari",
            HelperSpec::Drbd { .. } => "drbd",
        }
    }
    /// From sending `bytes` to the secondary's acknowledgement: serialisation at the link
    /// rate and the ack round trip; for DRBD (protocol C) also the secondary's disk write,
    /// which takes the write's own latency `io_ns` (the secondary has the same disk).
    pub fn until_ack(&self, bytes: f64, io_ns: u64) -> SimDuration {
        let (rate, rtt, remote) = match self {
            HelperSpec::Kemari {
                link_bytes_per_ns,
                ack_rtt,
                ..
            } => (*link_bytes_per_ns, *ack_rtt, SimDuration::ZERO),
            HelperSpec::Drbd {
                link_bytes_per_ns,
                ack_rtt,
                ..
            } => (*link_bytes_per_ns, *ack_rtt, SimDuration(io_ns)),
        };
        SimDuration((bytes / rate).round() as u64) + remote + rtt
    }
    /// Kemari raising its VM's timer interrupts (`guest_timers`).
    pub fn raises_guest_timers(&self) -> bool {
        matches!(
            self,
            HelperSpec::Kemari {
                guest_timers: true,
                ..
            }
        )
    }
    /// Kemari waiting for each released write (`sync_release`).
    pub fn waits_for_release(&self) -> bool {
        matches!(
            self,
            HelperSpec::Kemari {
                sync_release: true,
                ..
            }
        )
    }
    /// Kemari holding QEMU's global mutex while it works (`global_mutex`).
    pub fn holds_global_mutex(&self) -> bool {
        matches!(
            self,
            HelperSpec::Kemari {
                global_mutex: true,
                ..
            }
        )
    }
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// Parses the helper of a `[[host_thread]]` table `t` (`h` is its `helper` value).
pub fn parse_helper(t: &Table, h: &Owned) -> Res<HelperSpec> {
    let kind = h.str()?;
    let dur = |key: &str, default_us: u64| -> Res<SimDuration> {
        Ok(t.opt_duration(key)?
            .unwrap_or(SimDuration::from_us(default_us)))
    };
    let link = t.opt_f64("link_gbps", 0.001, 10_000.0)?.unwrap_or(10.0) / 8.0; // bytes per ns
    let foreign: &[&str] = match kind {
        "kemari" => &["cpu_per_write", "cpu_per_mib"],
        "drbd" => &[
            "sync_cpu",
            "copy_cpu_per_mib",
            "timer_cpu",
            "guest_timers",
            "sync_release",
            "global_mutex",
        ],
        other => {
            return h.err(format!(
                "unknown helper {other:?}; allowed: \"kemari\", \"drbd\""
            ))
        }
    };
    if let Some(k) = foreign.iter().find(|k| t.has(k)) {
        return t.err(k, format!("is not a parameter of the {kind} helper"));
    }
    Ok(match kind {
        "kemari" => HelperSpec::Kemari {
            sync_cpu: dur("sync_cpu", 200)?,
            copy_cpu_per_mib: dur("copy_cpu_per_mib", 600)?,
            link_bytes_per_ns: link,
            ack_rtt: dur("ack_rtt", 100)?,
            guest_timers: t.opt_bool("guest_timers")?.unwrap_or(true),
            timer_cpu: dur("timer_cpu", 10)?,
            sync_release: t.opt_bool("sync_release")?.unwrap_or(true),
            global_mutex: t.opt_bool("global_mutex")?.unwrap_or(true),
        },
        _ => HelperSpec::Drbd {
            cpu_per_write: dur("cpu_per_write", 20)?,
            cpu_per_mib: dur("cpu_per_mib", 500)?,
            link_bytes_per_ns: link,
            ack_rtt: dur("ack_rtt", 100)?,
        },
    })
}
