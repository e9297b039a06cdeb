//! Key caching (the Parameter Server paper's): a worker sends a long key list to a
//! server once, with a signature; later requests with the same list send only the
//! signature. The worker recognises "the same list" by identity (same shared buffer,
//! kept alive by the cache, so its address cannot be reused), the server keeps the
//! lists it validated. Both sides keep a bounded number of lists.

use super::sarray::SArray;
use std::collections::{HashMap, VecDeque};

/// Key lists shorter than this are always sent.
pub const MIN_CACHED_KEYS: usize = 256;

/// The worker's side: signatures of the lists sent to each server.
pub struct SentKeys {
    per_rank: Vec<VecDeque<(SArray<u64>, u64)>>,
    cap: usize,
}

impl SentKeys {
    /// Remembers up to `cap` lists per server of `ranks` servers.
    pub fn new(ranks: usize, cap: usize) -> SentKeys {
        SentKeys {
            per_rank: (0..ranks).map(|_| VecDeque::new()).collect(),
            cap: cap.max(1),
        }
    }

    /// The signature for `keys` sent to `rank`, and whether that server has seen it.
    /// `None` for lists too short to cache.
    pub fn signature(&mut self, rank: usize, keys: &SArray<u64>) -> Option<(u64, bool)> {
        if keys.len() < MIN_CACHED_KEYS {
            return None;
        }
        let q = self.per_rank.get_mut(rank)?;
        let same = |a: &SArray<u64>| a.bytes().as_ptr() == keys.bytes().as_ptr() && a.len() == keys.len();
        if let Some(&(_, sig)) = q.iter().find(|(a, _)| same(a)) {
            return Some((sig, true));
        }
        let sig = rand::random::<u64>() | 1;
        if q.len() == self.cap {
            q.pop_front();
        }
        q.push_back((keys.clone(), sig));
        Some((sig, false))
    }

    /// Renames the list sent to `rank` under `old` (the server lost it) to a fresh
    /// signature, which the next request with that list registers again; returns it.
    /// (A fresh one, so the resent request is not taken for a duplicate of the first.)
    pub fn renew(&mut self, rank: usize, old: u64) -> u64 {
        let new = rand::random::<u64>() | 1;
        if let Some(q) = self.per_rank.get_mut(rank) {
            for e in q.iter_mut().filter(|e| e.1 == old) {
                e.1 = new;
            }
        }
        new
    }
}

/// The server's side: validated key lists by signature.
pub struct KnownKeys {
    lists: HashMap<u64, SArray<u64>>,
    order: VecDeque<u64>,
    cap: usize,
}

impl KnownKeys {
    /// Keeps up to `cap` lists.
    pub fn new(cap: usize) -> KnownKeys {
        KnownKeys {
            lists: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Remembers a validated list.
    pub fn insert(&mut self, sig: u64, keys: SArray<u64>) {
        if self.lists.insert(sig, keys).is_none() {
            if self.order.len() == self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.lists.remove(&old);
                }
            }
            self.order.push_back(sig);
        }
    }

    /// The list cached under `sig`.
    pub fn get(&self, sig: u64) -> Option<SArray<u64>> {
        self.lists.get(&sig).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_buffer_same_signature_and_bounded() {
        let mut s = SentKeys::new(2, 2);
        let a: SArray<u64> = (0..300u64).collect::<Vec<_>>().into();
        let (sig, known) = s.signature(0, &a).unwrap();
        assert!(!known);
        assert_eq!(s.signature(0, &a.clone()), Some((sig, true)));
        assert_eq!(s.signature(1, &a).map(|x| x.1), Some(false), "per server");
        let copy: SArray<u64> = a.to_vec().into();
        assert_eq!(
            s.signature(0, &copy).map(|x| x.1),
            Some(false),
            "equal content, other buffer"
        );
        let short: SArray<u64> = vec![1, 2].into();
        assert_eq!(s.signature(0, &short), None);
        let mut k = KnownKeys::new(2);
        k.insert(1, a.clone());
        k.insert(2, a.clone());
        k.insert(3, a.clone());
        assert!(k.get(1).is_none() && k.get(3).is_some());
    }
}
