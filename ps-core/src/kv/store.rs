//! A server-side key/value store kept as sorted arrays: a request's sorted keys are
//! found by a forward (galloping) search, so a push or pull of n keys costs O(n) in
//! the common case of keys seen before, without hashing.

use bytemuck::Pod;

/// Sorted keys with per-key value slices.
#[derive(Clone, Debug, Default)]
pub struct SortedStore<V: Pod> {
    keys: Vec<u64>,
    offs: Vec<usize>,
    vals: Vec<V>,
}

/// Position of `key` in `keys[from..]` (or where it would go), by galloping.
fn seek(keys: &[u64], from: usize, key: u64) -> usize {
    let mut step = 1;
    let mut hi = from;
    while hi < keys.len() && keys[hi] < key {
        hi = from + step;
        step *= 2;
    }
    let lo = from.max(hi.saturating_sub(step / 2).max(from));
    let hi = hi.min(keys.len());
    lo + keys[lo..hi].partition_point(|&k| k < key)
}

impl<V: Pod> SortedStore<V> {
    /// An empty store.
    pub fn new() -> SortedStore<V> {
        SortedStore {
            keys: Vec::new(),
            offs: vec![0],
            vals: Vec::new(),
        }
    }

    /// The stored keys inside `range`, their value counts and their values.
    pub fn export(&self, range: crate::kv::range::KeyRange) -> (Vec<u64>, Vec<i32>, Vec<V>) {
        let a = self.keys.partition_point(|&k| k < range.begin);
        let b = a + self.keys[a..].iter().take_while(|&&k| range.contains(k)).count();
        let lens = (a..b).map(|i| (self.offs[i + 1] - self.offs[i]) as i32).collect();
        (
            self.keys[a..b].to_vec(),
            lens,
            self.vals[self.offs[a]..self.offs[b]].to_vec(),
        )
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True if no key is stored.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Where `key` is (or would go), searching forward from `at`: the next few slots
    /// are scanned first (requests usually repeat stored key sets, or interleave with
    /// a few other workers' keys), then the search gallops.
    fn find(&self, at: usize, key: u64) -> usize {
        let near = (at + 8).min(self.keys.len());
        match self.keys.get(at..near).and_then(|w| w.iter().position(|&k| k >= key)) {
            Some(i) => at + i,
            None => seek(&self.keys, near.max(at), key),
        }
    }

    /// If `keys` are a contiguous run of stored keys whose values (`total` of them, the
    /// same count per key as stored) are contiguous, the value range `a..b`.
    fn uniform_run(&self, keys: &[u64], total: usize) -> Option<(usize, usize)> {
        let p = self.find(0, *keys.first()?);
        let q = p + keys.len();
        if q > self.keys.len() || self.keys[p..q] != *keys {
            return None;
        }
        let (a, b) = (self.offs[p], self.offs[q]);
        let per = total / keys.len();
        (b - a == total && (self.offs[p + 1] - a) == per && per * keys.len() == total)
            .then_some((a, b))
            .filter(|_| self.offs[p..=q].windows(2).all(|w| w[1] - w[0] == per))
    }

    fn contains_all(&self, keys: &[u64]) -> bool {
        let mut at = 0;
        keys.iter().all(|&k| {
            at = self.find(at, k);
            self.keys.get(at) == Some(&k)
        })
    }

    /// Adds the missing `keys` (sorted) with `len(i)` zero values each.
    fn insert_missing(&mut self, keys: &[u64], len: impl Fn(usize) -> usize) {
        let mut nk = Vec::with_capacity(self.keys.len() + keys.len());
        let mut no = Vec::with_capacity(nk.capacity() + 1);
        let mut nv = Vec::with_capacity(self.vals.len());
        no.push(0);
        let (mut i, mut j) = (0, 0);
        while i < self.keys.len() || j < keys.len() {
            let take_old = j == keys.len() || (i < self.keys.len() && self.keys[i] <= keys[j]);
            if take_old {
                if j < keys.len() && self.keys[i] == keys[j] {
                    j += 1;
                }
                nk.push(self.keys[i]);
                nv.extend_from_slice(&self.vals[self.offs[i]..self.offs[i + 1]]);
                i += 1;
            } else {
                nk.push(keys[j]);
                nv.extend(std::iter::repeat_n(V::zeroed(), len(j)));
                j += 1;
            }
            no.push(nv.len());
        }
        self.keys = nk;
        self.offs = no;
        self.vals = nv;
    }

    /// Combines pushed values into the store with `apply(stored, pushed)`: key i of
    /// `keys` (sorted) has `lens[i]` values (or `vals.len() / keys.len()` without lens).
    /// Unknown keys start at zero. A key pushed with another length than stored is
    /// resized.
    pub fn push(&mut self, keys: &[u64], vals: &[V], lens: &[i32], mut apply: impl FnMut(&mut V, V)) {
        if keys.is_empty() {
            return;
        }
        let per = if lens.is_empty() { vals.len() / keys.len() } else { 0 };
        let len = |i: usize| if lens.is_empty() { per } else { lens[i] as usize };
        if let Some((a, b)) = self.uniform_run(keys, vals.len()) {
            for (d, s) in self.vals[a..b].iter_mut().zip(vals) {
                apply(d, *s);
            }
            return;
        }
        if !self.contains_all(keys) {
            self.insert_missing(keys, len);
        }
        let mut off = 0;
        let mut p = 0;
        for (i, &k) in keys.iter().enumerate() {
            p = self.find(p, k);
            let n = len(i);
            if self.offs[p + 1] - self.offs[p] != n {
                self.resize(p, n);
            }
            let dst = &mut self.vals[self.offs[p]..self.offs[p + 1]];
            for (d, s) in dst.iter_mut().zip(&vals[off..off + n]) {
                apply(d, *s);
            }
            off += n;
        }
    }

    fn resize(&mut self, p: usize, n: usize) {
        let (a, b) = (self.offs[p], self.offs[p + 1]);
        let mut v = self.vals[a..b].to_vec();
        v.resize(n, V::zeroed());
        self.vals.splice(a..b, v);
        let delta = n as isize - (b - a) as isize;
        for o in &mut self.offs[p + 1..] {
            *o = (*o as isize + delta) as usize;
        }
    }

    /// The values of `keys` (sorted) and their lengths (empty when every key has the
    /// same number of values); an unknown key gives `default_len(i)` zeros.
    pub fn pull(&self, keys: &[u64], default_len: impl Fn(usize) -> usize) -> (Vec<V>, Vec<i32>) {
        if let Some(p) = keys.first().map(|&k| self.find(0, k)) {
            let q = p + keys.len();
            if q <= self.keys.len() && self.keys[p..q] == *keys {
                let (a, b) = (self.offs[p], self.offs[q]);
                let per = self.offs[p + 1] - a;
                let uniform = per * keys.len() == b - a && self.offs[p..=q].windows(2).all(|w| w[1] - w[0] == per);
                let lens = if uniform {
                    Vec::new()
                } else {
                    self.offs[p..=q].windows(2).map(|w| (w[1] - w[0]) as i32).collect()
                };
                return (self.vals[a..b].to_vec(), lens);
            }
        }
        let mut vals = Vec::with_capacity(keys.len());
        let mut lens = Vec::with_capacity(keys.len());
        let mut p = 0;
        for (i, &k) in keys.iter().enumerate() {
            p = self.find(p, k);
            if p < self.keys.len() && self.keys[p] == k {
                let s = &self.vals[self.offs[p]..self.offs[p + 1]];
                vals.extend_from_slice(s);
                lens.push(s.len() as i32);
            } else {
                let n = default_len(i);
                vals.extend(std::iter::repeat_n(V::zeroed(), n));
                lens.push(n as i32);
            }
        }
        (vals, lens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_in_place_and_inserts_new_keys_in_order() {
        let mut s = SortedStore::<f32>::new();
        s.push(&[5, 9], &[1.0, 2.0], &[], |d, v| *d += v);
        s.push(&[1, 5, 7, 9], &[1.0, 1.0, 1.0, 1.0], &[], |d, v| *d += v);
        assert_eq!(s.len(), 4);
        let (v, l) = s.pull(&[1, 5, 6, 7, 9], |_| 1);
        assert_eq!(v, vec![1.0, 2.0, 0.0, 1.0, 3.0]);
        assert_eq!(l, vec![1; 5]);
    }

    #[test]
    fn per_key_lengths_and_resizing() {
        let mut s = SortedStore::<i32>::new();
        s.push(&[2, 4], &[1, 1, 2, 2, 2], &[2, 3], |d, v| *d += v);
        s.push(&[4], &[5], &[1], |d, v| *d += v);
        let (v, l) = s.pull(&[2, 4], |_| 0);
        assert_eq!((v, l), (vec![1, 1, 7], vec![2, 1]));
    }

    #[test]
    fn seek_finds_every_position() {
        let keys: Vec<u64> = (0..100).map(|i| i * 3).collect();
        for from in [0, 5, 50, 99, 100] {
            for k in 0..310u64 {
                let want = keys.partition_point(|&x| x < k).max(from);
                if keys[from.min(99)] <= k || from == 100 {
                    assert_eq!(seek(&keys, from, k), want, "from {from} key {k}");
                }
            }
        }
    }

    proptest::proptest! {
        /// Any sequence of pushes and pulls of sorted key sets (interleaved, sparse,
        /// overlapping) agrees with a map from key to summed value.
        #[test]
        fn agrees_with_a_map(sets in proptest::collection::vec(
            proptest::collection::btree_set(0u64..300, 0..60), 1..12)) {
            let mut s = SortedStore::<f64>::new();
            let mut model = std::collections::BTreeMap::new();
            for (n, set) in sets.iter().enumerate() {
                let keys: Vec<u64> = set.iter().copied().collect();
                let vals: Vec<f64> = keys.iter().map(|&k| (k as f64) + n as f64).collect();
                s.push(&keys, &vals, &[], |d, v| *d += v);
                for (k, v) in keys.iter().zip(&vals) {
                    *model.entry(*k).or_insert(0.0) += v;
                }
                let (got, _) = s.pull(&keys, |_| 1);
                let want: Vec<f64> = keys.iter().map(|k| model[k]).collect();
                proptest::prop_assert_eq!(got, want);
            }
            let all: Vec<u64> = (0..300).collect();
            let (got, _) = s.pull(&all, |_| 1);
            let want: Vec<f64> = all.iter().map(|k| model.get(k).copied().unwrap_or(0.0)).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
