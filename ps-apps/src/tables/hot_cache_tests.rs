//! Tests of the hot-row cache: against a model server whose row `k` reads
//! `[step, k]` at every step (a value tells the step it was pulled in).

use super::*;
use proptest::prelude::*;

const DIM: usize = 2;

/// Looks `keys` up through `cache` at its current step from the model server; the rows
/// read and the keys pulled.
fn read(cache: &mut HotCache, keys: &[u64]) -> (Vec<f32>, Vec<u64>) {
    let step = cache.now();
    let now = step as f32;
    let mut out = vec![f32::NAN; keys.len() * DIM];
    let server = |which: &[usize]| -> Vec<f32> { which.iter().flat_map(|&i| [now, keys[i] as f32]).collect() };
    let pull = cache.plan(keys, 0);
    let rows = server(&pull);
    let missing = cache.complete(keys, &pull, &rows, step, &mut out);
    assert!(
        missing.is_empty(),
        "planned at this step: nothing goes stale before completion"
    );
    let pulled = pull.iter().map(|&i| keys[i]).collect();
    (out, pulled)
}

/// The step each row read was pulled in (and checks each row is its key's).
fn pulled_steps(keys: &[u64], out: &[f32]) -> Vec<u64> {
    keys.iter()
        .enumerate()
        .map(|(i, &k)| {
            assert_eq!(out[i * DIM + 1], k as f32, "row {i} is not key {k}'s");
            out[i * DIM] as u64
        })
        .collect()
}

#[test]
fn a_cached_row_is_served_for_staleness_steps_then_pulled_again() {
    let mut c = HotCache::new(4, 2, DIM);
    let (out, pulled) = read(&mut c, &[7]);
    assert_eq!((pulled_steps(&[7], &out), pulled), (vec![0], vec![7]));
    for step in 1..=2 {
        c.advance();
        let (out, pulled) = read(&mut c, &[7]);
        assert_eq!(pulled_steps(&[7], &out), vec![0], "step {step}: the copy from step 0");
        assert!(pulled.is_empty());
    }
    c.advance();
    let (out, pulled) = read(&mut c, &[7]);
    assert_eq!(
        (pulled_steps(&[7], &out), pulled),
        (vec![3], vec![7]),
        "3 steps old: pulled again"
    );
    assert_eq!(
        c.stats(),
        CacheStats {
            hits: 2,
            pulls: 2,
            rows: 1,
            evictions: 0
        }
    );
}

#[test]
fn staleness_zero_serves_nothing_and_stores_nothing() {
    let mut c = HotCache::new(8, 0, DIM);
    for step in 0..5u64 {
        let keys = [1, 2, 3];
        let (out, pulled) = read(&mut c, &keys);
        assert_eq!(pulled, keys, "step {step}: every row pulled");
        assert_eq!(pulled_steps(&keys, &out), vec![step; 3]);
        c.advance();
    }
    assert_eq!(c.stats().hits, 0);
    assert_eq!(c.stats().rows, 0);
    assert_eq!(c.stats().pulls, 15);
}

#[test]
fn a_full_cache_keeps_the_most_looked_up_rows() {
    let mut c = HotCache::new(2, 100, DIM);
    // 1 and 2 fill the cache; 3 is looked up once: no hotter than either, not cached
    read(&mut c, &[1, 2]);
    read(&mut c, &[3]);
    assert!(c.holds(1) && c.holds(2) && !c.holds(3));
    // 1 is looked up again (count 2, served from the cache); 3 a second time (count
    // 2): it replaces 2, the coldest (count 1)
    let (_, pulled) = read(&mut c, &[1, 3]);
    assert_eq!(pulled, vec![3]);
    assert!(c.holds(1) && c.holds(3) && !c.holds(2));
    assert_eq!(c.stats().evictions, 1);
    // 4 at count 1 and 2 at count 2 replace nobody (1 and 3 have 2: ties keep the
    // cached row)
    read(&mut c, &[2, 4]);
    assert!(c.holds(1) && c.holds(3) && !c.holds(2) && !c.holds(4));
    assert_eq!((c.count(1), c.count(2), c.count(3), c.count(4)), (2, 2, 2, 1));
    assert_eq!(c.stats().rows, 2);
}

#[test]
fn a_re_pulled_row_counts_as_a_pull_and_keeps_its_slot() {
    let mut c = HotCache::new(1, 1, DIM);
    read(&mut c, &[5]);
    c.advance();
    c.advance();
    let (out, pulled) = read(&mut c, &[5]);
    assert_eq!((pulled_steps(&[5], &out), pulled), (vec![2], vec![5]));
    c.advance();
    let (out, pulled) = read(&mut c, &[5]);
    assert_eq!(
        (pulled_steps(&[5], &out), pulled),
        (vec![2], vec![]),
        "the refreshed copy"
    );
    assert_eq!(c.stats().rows, 1);
}

#[test]
fn counts_are_bounded_by_halving_and_cached_rows_keep_theirs() {
    let mut c = HotCache::new(4, 10, DIM);
    let limit = c.tracked_limit() as u64;
    for _ in 0..3 {
        read(&mut c, &[0]);
    }
    // every other key once: the map fills and is halved (the ones at 1 are forgotten)
    for k in 1..=limit {
        read(&mut c, &[k]);
    }
    assert!(c.counts.len() <= c.tracked_limit());
    assert_eq!(c.count(0), 1, "3 halved, then kept at 1 while cached");
    assert!(c.holds(0));
    // the cold order follows the halved counts (the cache stays consistent)
    assert_eq!(c.coldest.len(), c.slots.len());
    for &(n, k) in &c.coldest {
        assert_eq!(n, c.count(k));
    }
}

#[test]
fn a_prefetch_is_planned_for_the_next_step_and_completed_then() {
    let mut c = HotCache::new(4, 1, DIM);
    // 1 pulled at step 0; planned at step 0 for step 1: 1 is fresh then (1 step
    // old), 2 is pulled now
    read(&mut c, &[1]);
    let pull = c.plan(&[1, 2], 1);
    assert_eq!(pull, vec![1]);
    let early = vec![0.0, 2.0]; // key 2 as the servers had it at step 0
    c.advance();
    let mut out = vec![f32::NAN; 2 * DIM];
    let late = c.complete(&[1, 2], &pull, &early, 0, &mut out);
    assert_eq!(pulled_steps(&[1, 2], &out), vec![0, 0]);
    assert!(late.is_empty());
    // planned at step 1 for step 2: both pulled at step 0 are 2 steps old then
    assert_eq!(c.plan(&[1, 2], 1), vec![0, 1]);
    // a plan completed a step later than planned: the rows gone stale meanwhile are
    // pulled at completion
    assert!(c.plan(&[1], 0).is_empty(), "fresh at step 1");
    c.advance();
    let mut out = vec![f32::NAN; DIM];
    let late = c.complete(&[1], &[], &[], 1, &mut out);
    assert_eq!(late, vec![0]);
    c.deliver(&[1], &late, &[2.0, 1.0], &mut out);
    assert_eq!(pulled_steps(&[1], &out), vec![2], "stale at completion: pulled then");
}

#[test]
fn a_prefetch_counts_on_the_rows_an_earlier_prefetch_is_pulling() {
    let mut c = HotCache::new(4, 2, DIM);
    read(&mut c, &[1]); // pulled at step 0
    c.advance();
    c.advance();
    // prefetch A at step 2 for step 3: 1 would be 3 steps old, pulled now
    let a = c.plan(&[1], 1);
    assert_eq!(a, vec![0]);
    c.advance();
    // prefetch B at step 3 for step 4, planned before A is completed: A's pull (step
    // 2) is 2 steps old at step 4, so B pulls nothing
    let b = c.plan(&[1], 1);
    assert!(b.is_empty());
    let mut out = vec![f32::NAN; DIM];
    assert!(c.complete(&[1], &a, &[2.0, 1.0], 2, &mut out).is_empty());
    assert_eq!(pulled_steps(&[1], &out), vec![2]);
    c.advance();
    assert!(c.complete(&[1], &b, &[], 3, &mut out).is_empty());
    assert_eq!(pulled_steps(&[1], &out), vec![2], "served from A's pull");
    // prefetch C (step 4) pulls 1 again; D (step 5) counts on it; C is dropped
    // without being completed: D finds the row stale at completion and has it pulled
    assert_eq!(c.plan(&[1], 1), vec![0]);
    c.advance();
    let d = c.plan(&[1], 1);
    assert!(d.is_empty());
    c.advance();
    let late = c.complete(&[1], &d, &[], 5, &mut out);
    assert_eq!(late, vec![0]);
    c.deliver(&[1], &late, &[6.0, 1.0], &mut out);
    assert_eq!(pulled_steps(&[1], &out), vec![6]);
    assert!(c.pending.is_empty(), "the delivered pull is no longer pending");
}

#[test]
fn an_older_prefetch_does_not_replace_a_newer_copy() {
    let mut c = HotCache::new(4, 5, DIM);
    c.advance();
    c.advance();
    read(&mut c, &[9]); // pulled at step 2
    c.fill(&[9], &[0], &[0.0, 9.0], 0);
    let (out, _) = read(&mut c, &[9]);
    assert_eq!(pulled_steps(&[9], &out), vec![2]);
}

proptest! {
    /// Any run of lookups and steps: every row read was pulled at most `staleness`
    /// steps before (exactly now with 0), the cache never holds more than its
    /// capacity, each row read is a hit or a pull, and the cold order matches the
    /// counts.
    #[test]
    fn reads_are_never_staler_than_the_bound_and_the_cache_never_overflows(
        capacity in 0usize..6,
        staleness in 0u64..4,
        steps in proptest::collection::vec(proptest::collection::btree_set(0u64..12, 0..8), 1..40),
    ) {
        let mut c = HotCache::new(capacity, staleness, DIM);
        let mut reads = 0u64;
        for keys in &steps {
            let keys: Vec<u64> = keys.iter().copied().collect();
            let (out, _) = read(&mut c, &keys);
            for p in pulled_steps(&keys, &out) {
                prop_assert!(c.now() - p <= staleness, "read at {} a row pulled at {p}", c.now());
            }
            reads += keys.len() as u64;
            let st = c.stats();
            prop_assert!(st.rows as usize <= capacity);
            prop_assert_eq!(st.hits + st.pulls, reads);
            if staleness == 0 {
                prop_assert_eq!(st.hits, 0);
            }
            prop_assert_eq!(c.coldest.len(), c.slots.len());
            for &(n, k) in &c.coldest {
                prop_assert_eq!(n, c.count(k));
            }
            c.advance();
        }
    }
}
