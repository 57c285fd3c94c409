//! The event queue: a binary heap with a total order (time, then insertion sequence), so
//! two events at the same nanosecond always fire in the order they were scheduled.

use crate::time::SimTime;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The pCPU's next deadline (scheduler timer or guest progress); `gen` invalidates
    /// superseded deadlines.
    Cpu { cpu: u32, gen: u32 },
    /// A guest thread's I/O or sleep ends.
    ThreadWake { thread: u32 },
    /// A request arrives for workload `workload`.
    Arrival { workload: u32 },
    /// The scheduler's global timer.
    Global { gen: u32 },
    /// End of warm-up: metrics are reset.
    Warmup,
    /// A boundary of the steal-time windows (`steal`): each VM's steal so far is read.
    StealWindow,
    /// A vCPU with guest threads starts (after its VM's start jitter).
    TaskStart { task: u32 },
    /// pCPU `cpu` is interrupted by its host (`[host.noise]`, engine/noise.rs).
    Noise { cpu: u32 },
    /// VM `vm`'s user-space PLE boost number `gen` is due to end (`[kvm] ple_handler =
    /// "nice-boost"`; a later boost of the VM supersedes it).
    PleBoostEnd { vm: u32, gen: u32 },
    /// Software-FT helper `helper`: `what` is HELPER_FLUSH_DONE (a released write has
    /// completed) or HELPER_IRQ_ARRIVES (a timer interrupt reaches its vCPU).
    Helper { helper: u32, what: u32 },
}

pub const HELPER_FLUSH_DONE: u32 = 0;
pub const HELPER_IRQ_ARRIVES: u32 = 1;

/// An event as stored in the heap: 24 bytes. The kind and its fields are packed into
/// `payload` (kind: bits 56..64, id: bits 32..56, generation: bits 0..32) so the heap moves
/// less memory; only (time, seq) take part in the order.
#[derive(Clone, Copy, Debug)]
struct Slot {
    time: u64,
    seq: u64,
    payload: u64,
}

impl Slot {
    /// (time, seq) as one number: time in the high half, so it orders first.
    #[inline(always)]
    fn key(&self) -> u128 {
        ((self.time as u128) << 64) | self.seq as u128
    }
}

impl PartialEq for Slot {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl Eq for Slot {}
impl PartialOrd for Slot {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Slot {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        // One 128-bit comparison instead of a branch per field.
        o.key().cmp(&self.key())
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub time: SimTime,
    pub kind: EventKind,
}

const ID_MAX: u32 = (1 << 24) - 1;

impl EventKind {
    #[inline]
    fn pack(self) -> u64 {
        let (k, id, gen): (u64, u32, u32) = match self {
            EventKind::Cpu { cpu, gen } => (0, cpu, gen),
            EventKind::ThreadWake { thread } => (1, thread, 0),
            EventKind::Arrival { workload } => (2, workload, 0),
            EventKind::Global { gen } => (3, 0, gen),
            EventKind::Warmup => (4, 0, 0),
            EventKind::StealWindow => (7, 0, 0),
            EventKind::TaskStart { task } => (5, task, 0),
            EventKind::Helper { helper, what } => (6, helper, what),
            EventKind::Noise { cpu } => (8, cpu, 0),
            EventKind::PleBoostEnd { vm, gen } => (9, vm, gen),
        };
        debug_assert!(id <= ID_MAX);
        (k << 56) | ((id as u64) << 32) | gen as u64
    }
    #[inline]
    fn unpack(p: u64) -> EventKind {
        let id = ((p >> 32) as u32) & ID_MAX;
        let gen = p as u32;
        match p >> 56 {
            0 => EventKind::Cpu { cpu: id, gen },
            1 => EventKind::ThreadWake { thread: id },
            2 => EventKind::Arrival { workload: id },
            3 => EventKind::Global { gen },
            4 => EventKind::Warmup,
            5 => EventKind::TaskStart { task: id },
            7 => EventKind::StealWindow,
            8 => EventKind::Noise { cpu: id },
            9 => EventKind::PleBoostEnd { vm: id, gen },
            _ => EventKind::Helper {
                helper: id,
                what: gen,
            },
        }
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Slot>,
    seq: u64,
}

impl EventQueue {
    pub fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(n),
            seq: 0,
        }
    }
    #[inline]
    pub fn push(&mut self, time: SimTime, kind: EventKind) {
        self.seq += 1;
        self.heap.push(Slot {
            time: time.0,
            seq: self.seq,
            payload: kind.pack(),
        });
    }
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop().map(|s| Event {
            time: SimTime(s.time),
            kind: EventKind::unpack(s.payload),
        })
    }
    /// What the earliest event is, without taking it (to prefetch the state it will use).
    #[inline]
    pub fn peek_kind(&self) -> Option<EventKind> {
        self.heap.peek().map(|s| EventKind::unpack(s.payload))
    }
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| SimTime(e.time))
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(SimTime(5), EventKind::Warmup);
        q.push(SimTime(3), EventKind::Arrival { workload: 1 });
        q.push(SimTime(5), EventKind::Arrival { workload: 2 });
        q.push(SimTime(5), EventKind::Arrival { workload: 3 });
        let order: Vec<_> = std::iter::from_fn(|| q.pop())
            .map(|e| (e.time.0, e.kind))
            .collect();
        assert_eq!(
            order,
            vec![
                (3, EventKind::Arrival { workload: 1 }),
                (5, EventKind::Warmup),
                (5, EventKind::Arrival { workload: 2 }),
                (5, EventKind::Arrival { workload: 3 }),
            ]
        );
    }

    /// Interleaved pushes and pops against a reference that keeps events sorted by
    /// (time, insertion): many equal times, queues from empty to a few thousand.
    #[test]
    fn matches_a_sorted_reference_under_interleaved_pushes_and_pops() {
        let mut q = EventQueue::default();
        let mut reference: Vec<(u64, u64, u32)> = Vec::new(); // (time, seq, id)
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut seq, mut now) = (0u64, 0u64);
        for round in 0..20_000u32 {
            let r = next();
            // Grow for a while, then drain, so the heap passes through many shapes.
            let push = if (round / 2_000) % 2 == 0 {
                r % 4 != 0
            } else {
                r % 4 == 0
            };
            if push || reference.is_empty() {
                let t = now + next() % 50; // few distinct times: many ties
                seq += 1;
                q.push(SimTime(t), EventKind::ThreadWake { thread: round });
                reference.push((t, seq, round));
            } else {
                let (i, _) = reference
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, &(t, s, _))| (t, s))
                    .unwrap();
                let (t, _, id) = reference.remove(i);
                let ev = q.pop().unwrap();
                assert_eq!(
                    (ev.time.0, ev.kind),
                    (t, EventKind::ThreadWake { thread: id })
                );
                now = t;
            }
            assert_eq!(q.len(), reference.len());
        }
    }
}
