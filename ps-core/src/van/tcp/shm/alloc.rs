//! The sender's allocator over a region's data area: which spans are free, which are
//! lent to the receiver under which slot (release flag), and taking spans back once
//! the receiver cleared their flags. Pure: the flags are read through a callback.
//!
//! First fit from the lowest offset, so a lightly used region keeps touching the same
//! few pages (a memfd's pages are only allocated when first written). Free spans are
//! coalesced on release: after everything is released the area is one span again.

use super::wire::PAGE;
use std::collections::BTreeMap;

/// A span lent out: its slot and where it is in the data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The release flag that frees it.
    pub slot: u32,
    /// Offset in the data area (a multiple of [`PAGE`]).
    pub offset: u64,
    /// Bytes reserved (the request rounded up to whole pages).
    pub len: u64,
}

/// Free and lent spans of a data area of `capacity` bytes with `slots` release flags.
#[derive(Debug)]
pub struct SpanAllocator {
    capacity: u64,
    /// Free spans, offset → length, never adjacent (coalesced).
    free: BTreeMap<u64, u64>,
    /// Per slot: the span it holds, if lent.
    lent: Vec<Option<(u64, u64)>>,
    /// Slots not lent, lowest on top.
    idle: Vec<u32>,
    /// Slots lent, in no order.
    live: Vec<u32>,
}

impl SpanAllocator {
    /// An allocator with everything free: `capacity` is rounded down to whole pages.
    pub fn new(capacity: u64, slots: u32) -> SpanAllocator {
        let capacity = capacity / PAGE * PAGE;
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        SpanAllocator {
            capacity,
            free,
            lent: vec![None; slots as usize],
            idle: (0..slots).rev().collect(),
            live: Vec::new(),
        }
    }

    /// Lends the lowest free span of at least `len` bytes (rounded up to pages) under a
    /// free slot; `None` if `len` is 0, no span is large enough, or every slot is lent.
    pub fn alloc(&mut self, len: u64) -> Option<Grant> {
        if len == 0 || len > self.capacity {
            return None;
        }
        let need = len.div_ceil(PAGE) * PAGE;
        let (&offset, &have) = self.free.iter().find(|(_, &l)| l >= need)?;
        let slot = self.idle.pop()?;
        self.free.remove(&offset);
        if have > need {
            self.free.insert(offset + need, have - need);
        }
        self.lent[slot as usize] = Some((offset, need));
        self.live.push(slot);
        Some(Grant {
            slot,
            offset,
            len: need,
        })
    }

    /// Takes back the span lent under `slot`; false (and nothing changes) if it was not
    /// lent.
    pub fn release(&mut self, slot: u32) -> bool {
        let Some((mut offset, mut len)) = self.lent.get_mut(slot as usize).and_then(Option::take) else {
            return false;
        };
        if let Some(i) = self.live.iter().position(|&s| s == slot) {
            self.live.swap_remove(i);
        }
        self.idle.push(slot);
        if let Some((&p, &pl)) = self.free.range(..offset).next_back() {
            if p + pl == offset {
                self.free.remove(&p);
                offset = p;
                len += pl;
            }
        }
        if let Some(nl) = self.free.remove(&(offset + len)) {
            len += nl;
        }
        self.free.insert(offset, len);
        true
    }

    /// Takes back every lent span whose slot `released` says the receiver let go of;
    /// returns how many.
    pub fn reclaim(&mut self, mut released: impl FnMut(u32) -> bool) -> usize {
        let done: Vec<u32> = self.live.iter().copied().filter(|&s| released(s)).collect();
        for &s in &done {
            self.release(s);
        }
        done.len()
    }

    /// The slots lent out now.
    pub fn live(&self) -> &[u32] {
        &self.live
    }

    /// Bytes not lent.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    /// The data area's size (whole pages).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_fit_lowest_then_full_then_reuse() {
        let mut a = SpanAllocator::new(10 * PAGE, 8);
        let g1 = a.alloc(1).unwrap();
        assert_eq!((g1.slot, g1.offset, g1.len), (0, 0, PAGE));
        let g2 = a.alloc(3 * PAGE).unwrap();
        assert_eq!((g2.slot, g2.offset), (1, PAGE));
        let g3 = a.alloc(6 * PAGE).unwrap();
        assert_eq!(g3.offset, 4 * PAGE);
        assert_eq!(a.free_bytes(), 0);
        assert_eq!(a.alloc(1), None, "full");
        assert!(a.release(g2.slot));
        assert!(!a.release(g2.slot), "twice");
        assert_eq!(a.alloc(4 * PAGE), None, "the hole is 3 pages");
        let g4 = a.alloc(2 * PAGE).unwrap();
        assert_eq!((g4.slot, g4.offset), (1, PAGE), "lowest hole, lowest slot");
    }

    #[test]
    fn out_of_order_releases_coalesce_back_to_one_span() {
        let mut a = SpanAllocator::new(8 * PAGE, 8);
        let gs: Vec<Grant> = (0..8).map(|_| a.alloc(PAGE).unwrap()).collect();
        for i in [3, 0, 7, 5, 1, 6, 2, 4] {
            assert!(a.release(gs[i].slot));
        }
        assert_eq!(a.free_bytes(), 8 * PAGE);
        assert_eq!(a.alloc(8 * PAGE).unwrap().offset, 0, "one span again");
    }

    #[test]
    fn slots_run_out_before_space() {
        let mut a = SpanAllocator::new(100 * PAGE, 2);
        assert!(a.alloc(1).is_some() && a.alloc(1).is_some());
        assert_eq!(a.alloc(1), None);
        assert_eq!(a.live().len(), 2);
    }

    #[test]
    fn zero_and_oversized_requests_are_refused() {
        let mut a = SpanAllocator::new(4 * PAGE + 17, 4);
        assert_eq!(a.capacity(), 4 * PAGE);
        assert_eq!(a.alloc(0), None);
        assert_eq!(a.alloc(4 * PAGE + 1), None);
        assert_eq!(a.alloc(u64::MAX), None);
        assert!(!a.release(99), "no such slot");
        assert_eq!(SpanAllocator::new(0, 4).alloc(1), None);
    }

    #[test]
    fn reclaim_takes_back_only_released_flags() {
        let mut a = SpanAllocator::new(4 * PAGE, 4);
        let gs: Vec<Grant> = (0..4).map(|_| a.alloc(PAGE).unwrap()).collect();
        let mut flags = [true; 4]; // true = still in use by the receiver
        flags[gs[1].slot as usize] = false;
        flags[gs[3].slot as usize] = false;
        assert_eq!(a.reclaim(|s| !flags[s as usize]), 2);
        assert_eq!(a.free_bytes(), 2 * PAGE);
        assert_eq!(a.reclaim(|s| !flags[s as usize]), 0, "already taken back");
        let mut live = a.live().to_vec();
        live.sort();
        assert_eq!(live, vec![gs[0].slot, gs[2].slot]);
    }

    proptest! {
        /// Any sequence of allocations and releases: lent spans never overlap, stay in
        /// the area, and lent + free = capacity.
        #[test]
        fn spans_never_overlap(ops in proptest::collection::vec((any::<bool>(), 1u64..(6 * PAGE), 0usize..16), 1..200)) {
            let cap = 32 * PAGE;
            let mut a = SpanAllocator::new(cap, 16);
            let mut held: Vec<Grant> = Vec::new();
            for (take, len, pick) in ops {
                if take {
                    if let Some(g) = a.alloc(len) {
                        prop_assert!(g.len >= len && g.offset % PAGE == 0 && g.offset + g.len <= cap);
                        held.push(g);
                    }
                } else if !held.is_empty() {
                    let g = held.swap_remove(pick % held.len());
                    prop_assert!(a.release(g.slot));
                }
                let mut spans: Vec<(u64, u64)> = held.iter().map(|g| (g.offset, g.len)).collect();
                spans.sort();
                for w in spans.windows(2) {
                    prop_assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?}", w);
                }
                let lent: u64 = held.iter().map(|g| g.len).sum();
                prop_assert_eq!(lent + a.free_bytes(), cap);
            }
        }
    }
}
