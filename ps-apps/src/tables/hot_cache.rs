//! A worker's bounded-staleness cache of the hot rows of one embedding table (as
//! Persia's, Monolith's and HugeCTR's workers keep one): the decisions only (which rows
//! are hot, when a cached row is too old, which row is evicted), with no sockets; the
//! worker pulls the rows it names and hands them back.
//!
//! # Semantics
//!
//! - **Steps.** The cache counts the worker's training steps ([`HotCache::advance`],
//!   once per step). A row pulled from the servers during step `p` holds the servers'
//!   value at that moment; the worker's own later gradients go to the servers (the
//!   owner of the row and of its optimizer state) and are *not* applied to the copy.
//! - **Staleness.** A cached row is served at step `t` only while `t - p <= staleness`
//!   (so for at most `staleness` steps after the step it was pulled in); after that
//!   it is pulled again (and its copy refreshed). A row read at step `t` is therefore
//!   the servers' value from step `t - staleness` or later: it misses at most
//!   `staleness` of this worker's own updates and whatever other workers pushed since
//!   its pull. `staleness = 0` serves nothing from the cache: every row is pulled, as
//!   without a cache.
//! - **Prefetches.** A lookup planned for the next step ([`HotCache::plan`] with
//!   `ahead = 1`) pulls the rows the cache will not hold fresh then, and is completed
//!   ([`HotCache::complete`]) at that step; a cached row that an earlier prefetch is
//!   pulling counts as fresh when that pull will be fresh enough (it is delivered
//!   first). Whatever the plan assumed, completion serves a row from the cache only
//!   if it is fresh then, and has the worker pull the others at once.
//! - **Hot rows.** Every lookup of a row counts one. The counts of the rows seen
//!   lately are kept in a bounded map (at most [`HotCache::tracked_limit`] keys): when
//!   it is full, every count is halved and the rows whose count reaches 0 are
//!   forgotten (cached rows keep at least 1), so counts follow recent traffic
//!   (TinyLFU's reset). A pulled row is admitted while the cache holds fewer than
//!   `capacity` rows; when it is full, it replaces the cached row with the lowest
//!   count (the smallest key among equal counts) if its own count is higher, else it
//!   is not cached. The cache never holds more than `capacity` rows.

use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// A cached row: where its values are and the step it was pulled in.
#[derive(Clone, Copy, Debug)]
struct Slot {
    at: usize,
    pulled: u64,
}

/// What a cache did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Rows served from the cache (one per row per lookup).
    pub hits: u64,
    /// Rows pulled from the servers through the cache (lookups it could not serve).
    pub pulls: u64,
    /// Rows the cache holds now.
    pub rows: u64,
    /// Cached rows replaced by hotter ones.
    pub evictions: u64,
}

/// The bounded-staleness cache of one table's hot rows on a worker (see the module
/// documentation for the exact rules).
#[derive(Debug)]
pub struct HotCache {
    capacity: usize,
    staleness: u64,
    dim: usize,
    now: u64,
    /// Lookups per key of the keys seen lately (aged by halving).
    counts: FxHashMap<u64, u32>,
    /// The cached rows by key.
    slots: FxHashMap<u64, Slot>,
    /// The cached rows ordered coldest first: (count, key).
    coldest: BTreeSet<(u32, u64)>,
    /// Cached rows a prefetch is pulling again: key, the step of that pull.
    pending: FxHashMap<u64, u64>,
    /// `capacity * dim` values; slot `at` is `values[at * dim..][..dim]`.
    values: Vec<f32>,
    free: Vec<usize>,
    stats: CacheStats,
}

impl HotCache {
    /// A cache of at most `capacity` rows of `dim` values, serving a row for
    /// `staleness` steps after its pull. `capacity = 0` or `staleness = 0` caches
    /// nothing.
    pub fn new(capacity: usize, staleness: u64, dim: usize) -> HotCache {
        let capacity = if staleness == 0 || dim == 0 { 0 } else { capacity };
        HotCache {
            capacity,
            staleness,
            dim,
            now: 0,
            counts: FxHashMap::default(),
            slots: FxHashMap::default(),
            coldest: BTreeSet::new(),
            pending: FxHashMap::default(),
            values: Vec::new(),
            free: Vec::new(),
            stats: CacheStats::default(),
        }
    }

    /// The steps counted so far (the current step).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The number of rows whose lookups are counted at most (8 per cached row, at
    /// least 1024).
    pub fn tracked_limit(&self) -> usize {
        (self.capacity.saturating_mul(8)).max(1024)
    }

    /// What the cache did so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            rows: self.slots.len() as u64,
            ..self.stats
        }
    }

    /// One training step is done: cached rows age by one.
    pub fn advance(&mut self) {
        self.now += 1;
        let (now, staleness) = (self.now, self.staleness);
        self.pending.retain(|_, p| now - *p <= staleness);
    }

    fn fresh_at(&self, slot: &Slot, step: u64) -> bool {
        self.staleness > 0 && step.saturating_sub(slot.pulled) <= self.staleness
    }

    /// Counts one lookup of each of `keys` (unique) to be served `ahead` steps from
    /// now (0: a lookup now; 1: a prefetch for the next step); the indices (into
    /// `keys`, ascending) of the keys the cache will not hold fresh then: the worker
    /// pulls those now. A prefetch counts on the rows an earlier prefetch is pulling
    /// (they arrive when that one is completed, before this one), and marks the
    /// cached rows it pulls as pending.
    pub fn plan(&mut self, keys: &[u64], ahead: u64) -> Vec<usize> {
        let (now, at) = (self.now, self.now + ahead);
        let mut pull = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            let c = self.counts.entry(k).or_insert(0);
            let old = *c;
            *c = c.saturating_add(1);
            let new = *c;
            let Some(s) = self.slots.get(&k) else {
                pull.push(i);
                continue;
            };
            let arriving = self
                .pending
                .get(&k)
                .is_some_and(|&p| self.staleness > 0 && at - p <= self.staleness);
            let fresh = self.fresh_at(s, at) || arriving;
            self.coldest.remove(&(old, k));
            self.coldest.insert((new, k));
            if !fresh {
                pull.push(i);
                if ahead > 0 {
                    self.pending.insert(k, now);
                }
            }
        }
        self.age_counts();
        pull
    }

    /// Copies the cached rows of `keys[i]` for each `i` in `which` into
    /// `out[i * dim..][..dim]` where they are fresh at the current step (counted as
    /// hits); the indices of `which` it could not serve (evicted or too old since the
    /// plan): the worker pulls those now.
    pub fn serve(&mut self, keys: &[u64], which: &[usize], out: &mut [f32]) -> Vec<usize> {
        let dim = self.dim;
        let mut missing = Vec::new();
        for &i in which {
            match self.slots.get(&keys[i]) {
                Some(s) if self.fresh_at(s, self.now) => {
                    out[i * dim..][..dim].copy_from_slice(&self.values[s.at * dim..][..dim]);
                    self.stats.hits += 1;
                }
                _ => missing.push(i),
            }
        }
        missing
    }

    /// The rows of `keys[i]` for each `i` in `which`, pulled from the servers during
    /// step `pulled` (`rows[j * dim..][..dim]` is the row of `keys[which[j]]`): a
    /// cached row's copy is refreshed; another is admitted if it is hot enough (see
    /// the module documentation).
    pub fn fill(&mut self, keys: &[u64], which: &[usize], rows: &[f32], pulled: u64) {
        let dim = self.dim;
        self.stats.pulls += which.len() as u64;
        if self.capacity == 0 {
            return;
        }
        for (j, &i) in which.iter().enumerate() {
            let k = keys[i];
            let row = &rows[j * dim..][..dim];
            if self.pending.get(&k).is_some_and(|&p| p <= pulled) {
                self.pending.remove(&k);
            }
            if let Some(s) = self.slots.get_mut(&k) {
                // a prefetch older than the copy does not replace it
                if pulled >= s.pulled {
                    s.pulled = pulled;
                    self.values[s.at * dim..][..dim].copy_from_slice(row);
                }
                continue;
            }
            let count = self.count(k);
            if self.slots.len() >= self.capacity {
                match self.coldest.first().copied() {
                    Some((c, victim)) if count > c => self.evict(victim, c),
                    _ => continue,
                }
            }
            let at = self.free.pop().unwrap_or_else(|| {
                self.values.resize(self.values.len() + dim, 0.0);
                self.values.len() / dim - 1
            });
            self.values[at * dim..][..dim].copy_from_slice(row);
            self.slots.insert(k, Slot { at, pulled });
            self.counts.insert(k, count);
            self.coldest.insert((count, k));
        }
    }

    /// Completes a lookup of `keys` into `out` (`keys.len() * dim` values) planned
    /// with [`HotCache::plan`]: `rows` are the rows of the keys the plan named
    /// (`pulled`, as [`HotCache::fill`] takes them), pulled during step `pulled_at`;
    /// every other key is served from the cache and the pulled rows are offered to
    /// it. Returns the indices of the keys the cache could no longer serve (evicted or
    /// gone stale since the plan, as a prefetch may be): the worker pulls them now
    /// and hands them to [`HotCache::deliver`].
    pub fn complete(
        &mut self,
        keys: &[u64],
        pulled: &[usize],
        rows: &[f32],
        pulled_at: u64,
        out: &mut [f32],
    ) -> Vec<usize> {
        scatter(pulled, rows, self.dim, out);
        let mut hits = Vec::with_capacity(keys.len() - pulled.len());
        let mut p = pulled.iter().peekable();
        for i in 0..keys.len() {
            if p.peek() == Some(&&i) {
                p.next();
            } else {
                hits.push(i);
            }
        }
        let missing = self.serve(keys, &hits, out);
        self.fill(keys, pulled, rows, pulled_at);
        missing
    }

    /// The rows of `keys[which[j]]` pulled at the current step (`rows` as
    /// [`HotCache::fill`] takes them) into `out`, and offered to the cache.
    pub fn deliver(&mut self, keys: &[u64], which: &[usize], rows: &[f32], out: &mut [f32]) {
        scatter(which, rows, self.dim, out);
        self.fill(keys, which, rows, self.now);
    }

    fn evict(&mut self, key: u64, count: u32) {
        self.pending.remove(&key);
        if let Some(s) = self.slots.remove(&key) {
            self.free.push(s.at);
            self.coldest.remove(&(count, key));
            self.stats.evictions += 1;
        }
    }

    /// Keeps at most `tracked_limit()` counts: halves every count until enough rows
    /// reach 0 and are forgotten (a cached row keeps at least 1).
    fn age_counts(&mut self) {
        let limit = self.tracked_limit();
        if self.counts.len() <= limit {
            return;
        }
        while self.counts.len() > limit {
            let slots = &self.slots;
            self.counts.retain(|k, c| {
                *c /= 2;
                if slots.contains_key(k) {
                    *c = (*c).max(1);
                }
                *c > 0
            });
        }
        let counts = &self.counts;
        self.coldest = self
            .slots
            .keys()
            .map(|&k| (counts.get(&k).copied().unwrap_or(0), k))
            .collect();
    }

    /// Whether `key` is cached (whatever its age).
    pub fn holds(&self, key: u64) -> bool {
        self.slots.contains_key(&key)
    }

    /// The lookups counted for `key` (after aging).
    pub fn count(&self, key: u64) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }
}

/// `rows[j * dim..][..dim]` into `out[which[j] * dim..][..dim]`.
fn scatter(which: &[usize], rows: &[f32], dim: usize, out: &mut [f32]) {
    for (j, &i) in which.iter().enumerate() {
        out[i * dim..][..dim].copy_from_slice(&rows[j * dim..][..dim]);
    }
}

#[cfg(test)]
#[path = "hot_cache_tests.rs"]
mod tests;
