//! Seeds that found bugs in psrs's own code, each run again: every one of them failed
//! before its fix and must pass now.

use ps_sim::{run, Outcome, SimConfig};

/// Seed and what it found (with the default cluster of `psrs simulate`).
const FOUND: &[(u64, &str)] = &[
    // a replacement server applied a push held for the process it replaced, then the
    // range copy overwrote it while its id still counted as applied
    (
        26,
        "a push answered to worker 11 missing from server 0's copy of range 0",
    ),
    // a newcomer still copying a range released a waiting push as if it were dead
    (
        78,
        "a push answered to worker 9 missing from server 1's copy of range 1",
    ),
    // the resender's signature ignored the receiver's incarnation: a restarted
    // worker's answer matched its dead predecessor's, and its push hung
    (2930, "the job did not finish within 60 s after the faults stopped"),
    // a primary waited forever for a replica's acknowledgement of a forwarded push:
    // the replica died with the acknowledgement lost, and its replacement's table
    // came before any death notice, so the dead process was not counted as dead
    (2252, "the job did not finish within 60 s after the faults stopped"),
    // an active scheduler that had declared a majority of the nodes dead (their
    // heartbeats lost, one crashed) lost its lease and was never elected again: it
    // asked only the nodes alive in its table, and they refused it while they heard
    // its answers to their heartbeats
    (2414, "the job did not finish within 60 s after the faults stopped"),
    // a scheduler that stepped down kept ticking its master: its pending tasks timed
    // out, and each tick's save was refused (the lines repeated until it ended)
    (
        33,
        "scheduler slot 0's master ticker failed: this scheduler is not active",
    ),
];

/// A cluster's shape: scheduler candidates, servers, workers, replicas.
type Shape = (usize, usize, usize, usize);

/// Seeds of other shapes: the shape, the seed, what it found.
const FOUND_IN_SHAPES: &[(Shape, u64, &str)] = &[
    // two replacement servers caught up at once (PS_REPLICAS=2): one, still copying
    // a range, sent the other its empty copy of it
    (
        (2, 3, 3, 2),
        24,
        "a push answered to worker 9 missing from server 2's copy of range 2",
    ),
];

#[test]
fn seeds_that_found_bugs_in_other_shapes_pass() {
    for &((schedulers, servers, workers, replicas), seed, found) in FOUND_IN_SHAPES {
        let cfg = SimConfig {
            schedulers,
            servers,
            workers,
            replicas,
            ..SimConfig::default()
        };
        match run(&cfg, seed) {
            Outcome::Passed { .. } => {}
            Outcome::Beyond { why, .. } => panic!("seed {seed} ({found}) stopped beyond the fault model: {why}"),
            Outcome::Failed { violation, .. } => panic!("seed {seed} ({found}) fails again: {violation:?}"),
        }
    }
}

#[test]
fn seeds_that_found_bugs_pass() {
    let cfg = SimConfig::default();
    for &(seed, found) in FOUND {
        match run(&cfg, seed) {
            Outcome::Passed { .. } => {}
            Outcome::Beyond { why, .. } => panic!("seed {seed} ({found}) stopped beyond the fault model: {why}"),
            Outcome::Failed { violation, .. } => panic!("seed {seed} ({found}) fails again: {violation:?}"),
        }
    }
}
