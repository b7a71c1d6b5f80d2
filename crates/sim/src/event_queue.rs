//! `EventQueue`: the simulator's clock. A binary min-heap of events keyed by (time in ns,
//! insertion number), so events pop in time order and events at the same time pop in the
//! order they were pushed — which makes every run repeatable. Each entry is one `u128`
//! (time, insertion number, 32-bit event code), so the heap compares single integers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// An event small enough to travel as a 32-bit code.
pub trait EventCode: Copy {
    fn encode(self) -> u32;
    fn decode(code: u32) -> Self;
}

impl EventCode for u32 {
    fn encode(self) -> u32 {
        self
    }
    fn decode(code: u32) -> u32 {
        code
    }
}

impl EventCode for char {
    fn encode(self) -> u32 {
        self as u32
    }
    fn decode(code: u32) -> char {
        char::from_u32(code).expect("encoded from a char")
    }
}

/// Insertion numbers have 32 bits; the queue renumbers its entries before they run out.
const SEQ_LIMIT: u64 = 1 << 32;

/// Pending events ordered by time (ns), ties broken by insertion order.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<u128>>,
    next_seq: u64,
    _events: std::marker::PhantomData<E>,
}

impl<E: EventCode> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue::with_capacity(0)
    }
}

#[inline]
fn key(time: u64, seq: u64, code: u32) -> u128 {
    (time as u128) << 64 | (seq as u128) << 32 | code as u128
}

impl<E: EventCode> EventQueue<E> {
    /// An empty queue with room for `capacity` events before it reallocates.
    pub fn with_capacity(capacity: usize) -> EventQueue<E> {
        EventQueue {
            heap: BinaryHeap::with_capacity(capacity),
            next_seq: 0,
            _events: std::marker::PhantomData,
        }
    }

    /// Schedule `event` at `time` (ns).
    #[inline]
    pub fn push(&mut self, time: u64, event: E) {
        if self.next_seq == SEQ_LIMIT {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(key(time, seq, event.encode())));
    }

    /// The earliest event and its time; among events at one time, the first pushed.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|Reverse(k)| ((k >> 64) as u64, E::decode(k as u32)))
    }

    /// Time of the earliest event, if any.
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(k)| (k >> 64) as u64)
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Give the pending events insertion numbers 0.. in their current order.
    fn renumber(&mut self) {
        let mut pending: Vec<u128> = std::mem::take(&mut self.heap).into_iter().map(|Reverse(k)| k).collect();
        pending.sort_unstable();
        self.next_seq = pending.len() as u64;
        self.heap = pending
            .into_iter()
            .enumerate()
            .map(|(i, k)| Reverse(key((k >> 64) as u64, i as u64, k as u32)))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pop_in_time_order_and_ties_in_insertion_order() {
        let mut q = EventQueue::with_capacity(4);
        q.push(30, 'a');
        q.push(10, 'b');
        q.push(20, 'c');
        q.push(10, 'd');
        q.push(30, 'e');
        q.push(10, 'f');
        q.push(0, 'g');
        assert_eq!(q.peek_time(), Some(0));
        let order: Vec<(u64, char)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, [(0, 'g'), (10, 'b'), (10, 'd'), (10, 'f'), (20, 'c'), (30, 'a'), (30, 'e')]);
        assert!(q.is_empty());
    }

    #[test]
    fn ties_keep_insertion_order_whatever_the_payload_and_across_renumbering() {
        let mut q: EventQueue<u32> = EventQueue::default();
        // Same time, payloads decreasing: insertion order, not payload order, decides.
        for p in (0..100u32).rev() {
            q.push(7, p);
        }
        q.push(3, 1000);
        // Force a renumbering with events pending.
        q.next_seq = SEQ_LIMIT;
        q.push(7, 5000);
        q.push(5, 6000);
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop()).collect();
        let mut want = vec![(3, 1000), (5, 6000)];
        want.extend((0..100u32).rev().map(|p| (7, p)));
        want.push((7, 5000));
        assert_eq!(order, want);
    }
}
