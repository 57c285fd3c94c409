//! Requests from outside and the network path: arrivals (open or closed loop), the
//! request queue of a serving workload, the split-driver backend that forwards every
//! packet in and out (`[host] io_path = "split"`), and guest receive paths (`rx`), which
//! handle a request on their own vCPUs before its workload's threads take it.

use super::queue::EventKind;
use super::{Sim, ThState, ThreadId, NONE, WORK_EPSILON};
use crate::model::RtOp;
use crate::sched::{Scheduler, Waker};
use crate::time::{SimDuration, SimTime};
use crate::workload::{Arrivals, Mode, RxPath};

/// A request from outside (see `Sim::arrival`): queued at its server workload, and on the
/// split-driver path also a packet in the backend's queue, in and out.
#[derive(Clone, Copy, Debug)]
pub(super) struct Packet {
    /// The guest workload the request belongs to.
    pub(super) workload: u32,
    /// When the request reached the host (latency is measured from here).
    pub(super) arrived: SimTime,
    /// A response leaving the guest (true) or a request entering it (false).
    pub(super) outbound: bool,
    /// Its guest receive path (`rx`) has handled it.
    pub(super) received: bool,
    /// A response sent with the backend's queue lock still held (`RtOp::RespondHeld`);
    /// its sender is its workload's `held_by` front when the backend takes it.
    pub(super) held: bool,
}

/// `Sim::held` of a thread that holds the backend's queue lock with no backend waiting.
const HELD_NO_WAITER: ThreadId = ThreadId::MAX - 1;

/// The program of a guest receive path's threads: take the next request, handle it in
/// the kernel, hand it to the workload.
pub(super) fn rx_program(rx: &RxPath) -> Vec<RtOp> {
    vec![
        RtOp::WaitRequest,
        RtOp::PacketWork {
            per_packet: rx.per_packet,
            per_kib: rx.per_kib,
        },
        RtOp::RxDeliver,
    ]
}

impl<S: Scheduler> Sim<'_, S> {
    /// `RtOp::WaitRequest`: take the next request (a backend: packet) queued at the
    /// workload, or block until one arrives. See `step_other_op`.
    #[inline(always)]
    pub(super) fn step_wait_request(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        let wl = &mut self.st.workloads[w];
        match wl.queue.pop_front() {
            Some(p) => {
                th.packet = Some(p);
                th.pc += 1;
                None
            }
            None => {
                wl.waiting.push_back(id);
                th.state = ThState::Blocked;
                Some(false)
            }
        }
    }

    /// `RtOp::Taken`: the thread runs with the request it took; a workload measuring
    /// latency to that point (`arrivals.latency = "taken"`) records it here.
    #[inline(never)]
    pub(super) fn step_taken(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        let now = self.st.now;
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        if let Some(p) = th.packet {
            self.st.workloads[w]
                .latency
                .record(now.since(p.arrived).ns());
        }
        None
    }

    /// `RtOp::Respond`: the response leaves, straight out or through the backend.
    #[inline(always)]
    pub(super) fn step_respond(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        if let Some(p) = th.packet.take() {
            if self.st.io_backend == NONE {
                self.complete_request(w as u32, p.arrived, true);
            } else {
                // Woken as by an interrupt (a Xen event channel), with no waker; a held
                // response (`step_respond_held`) names its sender as the waker.
                self.send_to_backend(Packet {
                    outbound: true,
                    ..p
                });
            }
        }
        None
    }

    /// `RtOp::RespondHeld`: `Respond`, the sender keeping the backend's queue lock until
    /// its `RtOp::ReleaseHeld`; a closed loop's next request is due a think time from now.
    /// The sender wakes the backend itself (a thread's futex wake-up, as the KVM harness's
    /// vCPU thread wakes its waker), so it is the backend's waker for `wake_affine`.
    #[inline(never)]
    pub(super) fn step_respond_held(&mut self, id: ThreadId, w: usize) -> Option<bool> {
        if self.st.io_backend == NONE {
            return self.step_respond(id, w);
        }
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        if let Some(p) = th.packet.take() {
            if self.st.held.len() <= id as usize {
                self.st.held.resize(id as usize + 1, NONE);
            }
            self.st.held[id as usize] = HELD_NO_WAITER;
            self.st.workloads[w].held_by.push_back(id);
            self.schedule_closed_arrival(w as u32);
            let waker = self.waker(self.st.threads[id as usize].task);
            self.send_to_backend_from(
                Packet {
                    outbound: true,
                    held: true,
                    ..p
                },
                waker,
            );
        }
        None
    }

    /// `RtOp::ReleaseHeld`: the sender lets go of the backend's queue lock; a backend
    /// waiting on it wakes, with the sender as its waker.
    #[inline(never)]
    pub(super) fn step_release_held(&mut self, id: ThreadId) -> Option<bool> {
        self.st.threads[id as usize].pc += 1;
        if let Some(h) = self.st.held.get_mut(id as usize) {
            let waiter = std::mem::replace(h, NONE);
            if waiter != NONE && waiter != HELD_NO_WAITER {
                let waker = self.waker(self.st.threads[id as usize].task);
                self.wake_thread_from(waiter, waker);
            }
        }
        None
    }

    /// Backend thread `id` has taken a held response of workload `w`: true if its sender
    /// still holds the queue lock (the backend then waits, blocked, until
    /// `step_release_held` wakes it to take the packet again); false once it may go on.
    #[inline(never)]
    fn wait_for_holder(&mut self, id: ThreadId, w: u32) -> bool {
        let holder = *self.st.workloads[w as usize]
            .held_by
            .front()
            .expect("a held response has its sender queued");
        if self.st.held[holder as usize] != NONE {
            self.st.held[holder as usize] = id;
            self.st.threads[id as usize].state = ThState::Blocked;
            return true;
        }
        self.st.workloads[w as usize].held_by.pop_front();
        false
    }

    /// `RtOp::PacketWork`: the kernel's CPU work for the packet taken (per packet and per
    /// KiB of its request); a response whose sender still holds the queue lock makes the
    /// backend wait for it first.
    #[inline(always)]
    pub(super) fn step_packet_work(
        &mut self,
        id: ThreadId,
        per_packet: f64,
        per_kib: f64,
    ) -> Option<bool> {
        if let Some(p) = self.st.threads[id as usize].packet {
            if p.held && self.wait_for_holder(id, p.workload) {
                return Some(false);
            }
        }
        let th = &mut self.st.threads[id as usize];
        let bytes = th
            .packet
            .map_or(0, |p| self.st.workloads[p.workload as usize].request_bytes);
        let x = per_packet + per_kib * bytes as f64 / 1024.0;
        if x > WORK_EPSILON {
            th.state = ThState::Compute {
                remaining: x,
                mode: Mode::Kernel,
                release: NONE,
            };
            return Some(true);
        }
        th.pc += 1;
        None
    }

    /// `RtOp::Forward`: the backend hands its packet on, into its guest or out.
    #[inline(always)]
    pub(super) fn step_forward(&mut self, id: ThreadId) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        if let Some(p) = th.packet.take() {
            if p.outbound {
                self.complete_request(p.workload, p.arrived, !p.held);
            } else {
                // The backend's thread hands the packet over: it wakes the receiver.
                let waker = self.waker(self.st.threads[id as usize].task);
                self.enqueue_inbound_from(p, waker);
            }
        }
        None
    }

    /// `RtOp::RxDeliver`: the receive path hands its request to the workload's threads.
    #[inline(always)]
    pub(super) fn step_rx_deliver(&mut self, id: ThreadId) -> Option<bool> {
        let th = &mut self.st.threads[id as usize];
        th.pc += 1;
        if let Some(p) = th.packet.take() {
            let waker = self.waker(self.st.threads[id as usize].task);
            self.enqueue(
                p.workload,
                Packet {
                    received: true,
                    ..p
                },
                waker,
            );
        }
        None
    }

    pub(super) fn start_arrivals(&mut self, w: u32) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        match wl.arrivals.clone() {
            None => {}
            Some(Arrivals::Poisson { rate }) => {
                let d = wl.rng.exp(1e9 / rate);
                self.st.q.push(
                    now + SimDuration::round_ns(d),
                    EventKind::Arrival { workload: w },
                );
            }
            Some(Arrivals::Periodic { interval }) => {
                self.st.q.push(
                    now + SimDuration::round_ns(interval),
                    EventKind::Arrival { workload: w },
                );
            }
            Some(Arrivals::Closed { clients, think }) => {
                for _ in 0..clients {
                    let d = think.sample(&mut wl.rng);
                    self.st.q.push(
                        now + SimDuration::round_ns(d),
                        EventKind::Arrival { workload: w },
                    );
                }
            }
        }
    }

    pub(super) fn arrival(&mut self, w: u32) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        match &wl.arrivals {
            Some(Arrivals::Poisson { rate }) => {
                let d = wl.rng.exp(1e9 / rate);
                self.st.q.push(
                    now + SimDuration::round_ns(d),
                    EventKind::Arrival { workload: w },
                );
            }
            Some(Arrivals::Periodic { interval }) => {
                self.st.q.push(
                    now + SimDuration::round_ns(*interval),
                    EventKind::Arrival { workload: w },
                );
            }
            _ => {}
        }
        let p = Packet {
            workload: w,
            arrived: now,
            outbound: false,
            received: false,
            held: false,
        };
        let wl = &self.st.workloads[w as usize];
        if wl.timer_task != NONE {
            let k = self.st.ft.kemari[wl.vm as usize];
            if k != NONE && self.st.ft.helpers[k as usize].spec.raises_guest_timers() {
                self.ft_timer_expired(k as usize, p);
                return;
            }
        }
        if self.st.io_backend == NONE {
            self.enqueue_inbound(p);
        } else {
            self.send_to_backend(p);
        }
    }

    /// A request reaches its guest: through the workload's receive path (`rx`) first if
    /// it has one, else straight to the workload.
    pub(super) fn enqueue_inbound(&mut self, p: Packet) {
        self.enqueue_inbound_from(p, None)
    }

    /// `enqueue_inbound` by a running task (`waker`: the thread that hands the request
    /// over; None: the request arrives from outside, by interrupt).
    fn enqueue_inbound_from(&mut self, mut p: Packet, waker: Option<Waker>) {
        let wl = &self.st.workloads[p.workload as usize];
        if wl.latency_taken && !p.received {
            // Latency to the take starts when the request reaches the guest: after the
            // backend's pass, as the KVM harness stamps its wake-up when its waker runs.
            p.arrived = self.st.now;
        }
        let rx = wl.rx_stage;
        if rx != NONE && !p.received {
            self.enqueue(rx, p, waker);
        } else {
            self.enqueue(p.workload, p, waker);
        }
    }

    /// A request reaches its workload `w` (a server, or the backend): hand it to a waiting
    /// thread, which wakes, or queue it.
    fn enqueue(&mut self, w: u32, p: Packet, waker: Option<Waker>) {
        let wl = &mut self.st.workloads[w as usize];
        match wl.waiting.pop_front() {
            Some(th) => {
                let t = &mut self.st.threads[th as usize];
                t.packet = Some(p);
                t.pc += 1;
                self.wake_thread_from(th, waker);
            }
            None => wl.queue.push_back(p),
        }
    }

    /// A packet enters the split driver's backend.
    fn send_to_backend(&mut self, p: Packet) {
        self.send_to_backend_from(p, None)
    }

    /// `send_to_backend` by a running task (`waker`), as for `enqueue_inbound_from`.
    fn send_to_backend_from(&mut self, p: Packet, waker: Option<Waker>) {
        self.st.h.backend_packets += 1;
        self.enqueue(self.st.io_backend, p, waker);
    }

    /// The response to a request arriving at `arrived` has left the host; with
    /// `next_arrival`, a closed loop's client thinks and sends its next request (false: it
    /// did so when the response was sent, `step_respond_held`).
    fn complete_request(&mut self, w: u32, arrived: SimTime, next_arrival: bool) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        if !wl.latency_taken {
            wl.latency.record(now.since(arrived).ns());
        }
        wl.completed += 1;
        wl.bytes_done += wl.request_bytes;
        if next_arrival {
            self.schedule_closed_arrival(w);
        }
    }

    /// A closed loop's client (of workload `w`) sends its next request a think time from now.
    fn schedule_closed_arrival(&mut self, w: u32) {
        let now = self.st.now;
        let wl = &mut self.st.workloads[w as usize];
        if let Some(Arrivals::Closed { think, .. }) = &wl.arrivals {
            let d = think.sample(&mut wl.rng);
            self.st.q.push(
                now + SimDuration::round_ns(d),
                EventKind::Arrival { workload: w },
            );
        }
    }
}
