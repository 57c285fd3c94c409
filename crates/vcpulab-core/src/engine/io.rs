//! Disk I/O: a thread's requests go to its disk one after another, up to the operation's
//! window in flight; a completion wakes the thread once fewer are outstanding. A guest
//! with `elevator = "cfq"` holds writeback back after a delayed synchronous request
//! (`Cfq`, see `workload::CFQ_SLICE_SYNC_NS`). Writes of a VM under Kemari or DRBD go to
//! its helper first (`ft`).

use super::queue::EventKind;
use super::{Sim, ThState, ThreadId, NONE};
use crate::model::{Model, RtOp};
use crate::sched::Scheduler;
use crate::time::{SimDuration, SimTime, NS_PER_S};
use crate::workload::{Dist, CFQ_FIFO_EXPIRE_SYNC_NS, CFQ_SLICE_SYNC_NS};

/// The guests' CFQ state: what `cfq_may_dispatch` with `low_latency` looks at.
pub(super) struct Cfq {
    /// Per VM: its guest runs CFQ (`elevator = "cfq"`), and when its last delayed
    /// synchronous request completed (ns; may be negative: at boot, a second ago).
    on: Vec<bool>,
    last_delayed_sync_ns: Vec<i64>,
    /// Per VM with CFQ: synchronous requests in flight, and writeback threads held back
    /// by them with nothing in flight of their own.
    sync_in_flight: Vec<u32>,
    async_waiters: Vec<Vec<ThreadId>>,
    /// Per thread, when a guest with CFQ is configured (empty otherwise, so the thread
    /// record stays two cache lines): when its outstanding synchronous request was
    /// queued (`SimTime::MAX`: none), as its completion may count as a delayed sync.
    sync_since: Vec<SimTime>,
}

impl Cfq {
    pub(super) fn new(model: &Model, threads: usize) -> Cfq {
        let nvms = model.vms.len();
        Cfq {
            on: model.vms.iter().map(|v| v.cfq).collect(),
            last_delayed_sync_ns: vec![-(NS_PER_S as i64); nvms],
            sync_in_flight: vec![0; nvms],
            async_waiters: vec![Vec::new(); nvms],
            sync_since: if model.vms.iter().any(|v| v.cfq) {
                vec![SimTime::MAX; threads]
            } else {
                Vec::new()
            },
        }
    }

    /// How many writeback requests a thread of `vm` may have in flight now: one more per
    /// `cfq_slice_sync` since the last delayed synchronous request, and one when none is.
    fn writeback_depth(&self, vm: usize, now: SimTime) -> u32 {
        let since = now.0 as i64 - self.last_delayed_sync_ns[vm];
        (since / CFQ_SLICE_SYNC_NS as i64).clamp(1, u32::MAX as i64) as u32
    }

    /// No writeback goes out while a synchronous request of the VM is in flight.
    fn sync_busy(&self, vm: usize) -> bool {
        self.sync_in_flight[vm] > 0
    }

    fn sync_queued(&mut self, vm: usize, thread: ThreadId, now: SimTime) {
        self.sync_since[thread as usize] = now;
        self.sync_in_flight[vm] += 1;
    }

    /// When the thread's outstanding synchronous request was queued, clearing it; None if
    /// it has none.
    fn take_sync(&mut self, thread: ThreadId) -> Option<SimTime> {
        if self.sync_since.is_empty() {
            return None;
        }
        let queued = std::mem::replace(&mut self.sync_since[thread as usize], SimTime::MAX);
        (queued != SimTime::MAX).then_some(queued)
    }

    /// `cfq_completed_request`: a synchronous request queued at `queued` completed now;
    /// one that took `cfq_fifo_expire[1]` or more marks a delayed sync. True if it was the
    /// VM's last synchronous request in flight.
    fn sync_completed(&mut self, vm: usize, queued: SimTime, now: SimTime) -> bool {
        if now.since(queued).ns() >= CFQ_FIFO_EXPIRE_SYNC_NS {
            self.last_delayed_sync_ns[vm] = now.0 as i64;
        }
        self.sync_in_flight[vm] -= 1;
        self.sync_in_flight[vm] == 0
    }
}

impl<S: Scheduler> Sim<'_, S> {
    /// `RtOp::Io`: submit a disk request (its latency drawn now); go on while fewer than
    /// `window` of the thread's requests are in flight, else block. See `step_other_op`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn step_io(
        &mut self,
        id: ThreadId,
        w: usize,
        now: SimTime,
        latency: Dist,
        write_bytes: u64,
        mut window: u32,
        writeback: bool,
    ) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        let vm = self.st.workloads[w].vm as usize;
        if th.task < self.st.n_vcpu_tasks && self.st.cfq.on[vm] {
            if writeback {
                let depth = self.st.cfq.writeback_depth(vm, now);
                if self.st.cfq.sync_busy(vm) || th.io_pending >= depth {
                    // Held back: try again at the thread's next completion, or, with none
                    // in flight, when the synchronous ones are done.
                    th.state = ThState::Blocked;
                    if th.io_pending > 0 {
                        th.io_wake_below = depth.min(th.io_pending);
                    } else {
                        self.st.cfq.async_waiters[vm].push(id);
                    }
                    return Some(false);
                }
                window = window.min(depth);
            } else {
                self.st.cfq.sync_queued(vm, id, now);
            }
        }
        let x = SimDuration::round_ns(latency.sample(&mut th.rng)).0;
        th.pc += 1;
        th.io_pending += 1;
        // The disk takes the thread's requests in turn.
        let done = now.max(th.io_tail) + SimDuration(x);
        th.io_tail = done;
        let wait = th.io_pending >= window;
        if wait {
            th.state = ThState::Blocked;
            th.io_wake_below = window;
        }
        debug_assert!(
            wait || matches!(
                self.st.workloads[w].ops.get(th.pc as usize),
                Some(RtOp::Io { .. })
            ),
            "an Io op that leaves requests in flight is followed by another Io"
        );
        let guest = th.task < self.st.n_vcpu_tasks;
        // kemari-next's event-tap holds writes (and flushes), not reads.
        if guest && write_bytes > 0 && self.st.ft.kemari[vm] != NONE {
            th.kemari_io = true;
            self.ft_start_sync(vm, id, x, write_bytes);
        } else if guest && write_bytes > 0 && self.st.ft.drbd[vm] != NONE {
            let from_cpu = self.st.tasks[self.st.threads[id as usize].task as usize].last_cpu;
            self.ft_replicate(vm, id, done, x, write_bytes, from_cpu, NONE);
        } else {
            self.st.q.push(done, EventKind::ThreadWake { thread: id });
        }
        if !wait {
            return None; // the window has room: the next request goes out now
        }
        Some(false)
    }

    /// A disk request of thread `id` completed: one fewer outstanding; the thread wakes
    /// only once they are fewer than the window it blocked at. Inlined (forced) into
    /// `wake_thread`, whose body it was.
    #[inline(always)]
    pub(super) fn io_completed(&mut self, id: ThreadId) {
        // A VM whose last synchronous request this completes (CFQ): its held-back
        // writeback may go out once this thread is handled.
        let mut sync_done_in = None;
        let th = &mut self.st.threads[id as usize];
        th.io_pending -= 1;
        if th.io_pending == 0 {
            th.kemari_io = false;
            if let Some(queued) = self.st.cfq.take_sync(id) {
                let vm = self.st.workloads[th.workload as usize].vm as usize;
                if self.st.cfq.sync_completed(vm, queued, self.st.now) {
                    sync_done_in = Some(vm);
                }
            }
        }
        // A completion below the window wakes the writer once; later ones (the global
        // mutex can hand several over together) find it already woken.
        if th.io_pending < th.io_wake_below && th.state == ThState::Blocked {
            th.state = ThState::Ready;
            self.make_thread_ready(id);
        }
        if let Some(vm) = sync_done_in {
            self.wake_async_writers(vm);
        }
    }

    /// The VM's last synchronous request completed: writeback held back with nothing in
    /// flight (CFQ) may go out again.
    #[inline(never)]
    fn wake_async_writers(&mut self, vm: usize) {
        for id in std::mem::take(&mut self.st.cfq.async_waiters[vm]) {
            let th = &self.st.threads[id as usize];
            if th.state == ThState::Blocked && th.io_pending == 0 {
                self.wake_thread(id);
            }
        }
    }
}
