//! The simulated clock's agenda: events ordered by time, then by the order they were
//! scheduled (so two events at one millisecond always run in the same order).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // reversed: the heap pops the earliest first
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// Events of type `E` waiting for their time.
pub struct Agenda<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> Default for Agenda<E> {
    fn default() -> Self {
        Agenda {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> Agenda<E> {
    /// Schedules `ev` at `at` ms.
    pub fn at(&mut self, at: u64, ev: E) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, ev });
    }

    /// The next event and its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|e| (e.at, e.ev))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_in_scheduling_order() {
        let mut a = Agenda::default();
        a.at(5, "c");
        a.at(1, "a");
        a.at(5, "d");
        a.at(1, "b");
        let order: Vec<_> = std::iter::from_fn(|| a.pop()).collect();
        assert_eq!(order, vec![(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
    }
}
