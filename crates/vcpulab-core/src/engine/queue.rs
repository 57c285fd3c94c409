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
}

#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub time: SimTime,
    pub seq: u64,
    pub kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        o.time.cmp(&self.time).then_with(|| o.seq.cmp(&self.seq))
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Event>,
    seq: u64,
}

impl EventQueue {
    pub fn with_capacity(n: usize) -> Self {
        EventQueue { heap: BinaryHeap::with_capacity(n), seq: 0 }
    }
    #[inline]
    pub fn push(&mut self, time: SimTime, kind: EventKind) {
        self.seq += 1;
        self.heap.push(Event { time, seq: self.seq, kind });
    }
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|e| e.time)
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
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|e| (e.time.0, e.kind)).collect();
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
}
