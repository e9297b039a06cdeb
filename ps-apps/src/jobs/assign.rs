//! Which worker works on which job, given how many each job should have: workers stay
//! where they are as far as the targets allow (a move costs a task switch), the
//! surplus of a job leaves it (highest node ids first), and jobs short of workers take
//! free ones in job order (lowest node ids first). Deterministic, no I/O.

use std::collections::{BTreeMap, BTreeSet};

/// Node id of a worker.
pub type WorkerId = i32;

/// The new assignment of the live `workers` to jobs (`targets`: job → count, counts
/// summing to at most the number of workers; a job absent from `targets` gets none).
/// `current` is the present assignment; workers not in `workers` (dead) are dropped.
/// A worker absent from the result is idle.
pub fn assign<J: Ord + Copy>(
    current: &BTreeMap<WorkerId, J>,
    targets: &BTreeMap<J, usize>,
    workers: &BTreeSet<WorkerId>,
) -> BTreeMap<WorkerId, J> {
    let mut out = BTreeMap::new();
    let mut have: BTreeMap<J, usize> = BTreeMap::new();
    for (&w, &j) in current {
        if !workers.contains(&w) {
            continue;
        }
        let want = targets.get(&j).copied().unwrap_or(0);
        let n = have.entry(j).or_insert(0);
        if *n < want {
            *n += 1;
            out.insert(w, j);
        }
    }
    let free: Vec<WorkerId> = workers.iter().copied().filter(|w| !out.contains_key(w)).collect();
    let mut free = free.into_iter();
    for (&j, &want) in targets {
        let n = have.get(&j).copied().unwrap_or(0);
        for _ in n..want {
            match free.next() {
                Some(w) => {
                    out.insert(w, j);
                }
                None => return out,
            }
        }
    }
    out
}

/// How many workers each job has in `assignment`.
pub fn counts<J: Ord + Copy>(assignment: &BTreeMap<WorkerId, J>) -> BTreeMap<J, usize> {
    let mut c = BTreeMap::new();
    for &j in assignment.values() {
        *c.entry(j).or_insert(0) += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ws: &[i32]) -> BTreeSet<i32> {
        ws.iter().copied().collect()
    }

    #[test]
    fn stable_moves_only_the_surplus() {
        let workers = set(&[9, 11, 13, 15]);
        let t: BTreeMap<u32, usize> = [(1, 4)].into();
        let a = assign(&BTreeMap::new(), &t, &workers);
        assert_eq!(a.values().filter(|&&j| j == 1).count(), 4);
        // a second job arrives: 2 / 2, the highest ids of job 1 move
        let t: BTreeMap<u32, usize> = [(1, 2), (2, 2)].into();
        let b = assign(&a, &t, &workers);
        assert_eq!(b, [(9, 1), (11, 1), (13, 2), (15, 2)].into());
        // worker 11 dies: job 1 is short; nobody else moves
        let c = assign(&b, &[(1, 1), (2, 2)].into(), &set(&[9, 13, 15]));
        assert_eq!(c, [(9, 1), (13, 2), (15, 2)].into());
        // job 1 ends: its worker is free and goes to job 2
        let d = assign(&c, &[(2, 3)].into(), &set(&[9, 13, 15]));
        assert_eq!(d, [(9, 2), (13, 2), (15, 2)].into());
        assert_eq!(counts(&d), [(2, 3)].into());
    }

    #[test]
    fn more_targets_than_workers_leaves_the_rest_short() {
        let a = assign(&BTreeMap::new(), &[(1u32, 2), (2, 2)].into(), &set(&[9, 11, 13]));
        assert_eq!(counts(&a), [(1, 2), (2, 1)].into());
        let idle = assign(&a, &BTreeMap::<u32, usize>::new(), &set(&[9, 11, 13]));
        assert!(idle.is_empty());
    }
}
