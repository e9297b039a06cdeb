//! Tests of the shard rules.

use super::*;
use crate::train::versions::{Versioned, EVERY_LIVE_WORKER};
use std::collections::BTreeSet;

const SGD: Sgd = Sgd {
    lr: 0.5,
    momentum: 0.0,
    weight_decay: 0.0,
};

fn sync(k: usize, timeout: u64) -> Shard {
    Shard::new(
        100,
        vec![1.0, 2.0, 3.0],
        Mode::Sync {
            grads_per_version: k,
            timeout_ms: timeout,
        },
        SGD,
        k,
    )
}

#[test]
fn sync_applies_the_average_once_enough_workers_pushed() {
    let mut s = sync(2, 0);
    assert_eq!(
        s.push(9, 0, None, &[1.0, 1.0, 1.0], 0),
        Ok(PushOutcome::Accepted { applied: false })
    );
    assert!(s.pull_must_wait(Some(0)));
    // the same worker again for the same version: rejected
    assert_eq!(
        s.push(9, 0, None, &[5.0, 5.0, 5.0], 1),
        Ok(PushOutcome::Rejected { current: 0 })
    );
    assert_eq!(
        s.push(11, 0, None, &[3.0, 3.0, 3.0], 2),
        Ok(PushOutcome::Accepted { applied: true })
    );
    assert_eq!(s.version(), 1);
    // mean gradient 2.0, lr 0.5
    assert_eq!(s.params, vec![0.0, 1.0, 2.0]);
    assert!(!s.pull_must_wait(Some(0)));
    // a push on the old version is rejected with the current one
    assert_eq!(
        s.push(9, 0, None, &[1.0; 3], 3),
        Ok(PushOutcome::Rejected { current: 1 })
    );
}

#[test]
fn sync_timeout_applies_partial_versions() {
    let mut s = sync(3, 100);
    s.push(9, 0, Some(&[1]), &[2.0], 50).unwrap();
    assert!(!s.tick(149));
    assert!(s.tick(150));
    assert_eq!(s.params, vec![1.0, 1.0, 3.0]);
    assert_eq!(s.version(), 1);
    assert!(!s.tick(1000), "nothing pending");
}

fn dead(ids: &[i32]) -> BTreeSet<i32> {
    ids.iter().copied().collect()
}

#[test]
fn a_dead_workers_gradient_is_not_waited_for() {
    let mut s = sync(3, 0);
    s.push(9, 0, None, &[1.0; 3], 0).unwrap();
    s.push(11, 0, None, &[1.0; 3], 0).unwrap();
    assert_eq!(s.version(), 0);
    assert!(s.set_dead_workers(&dead(&[13]), 10));
    assert_eq!(s.version(), 1);
    // the next version needs the two live workers
    s.push(9, 1, None, &[1.0; 3], 11).unwrap();
    assert_eq!(s.version(), 1);
    s.push(11, 1, None, &[1.0; 3], 12).unwrap();
    assert_eq!(s.version(), 2);
    // a replacement took id 13: not waited for while it starts up...
    assert!(!s.set_dead_workers(&dead(&[]), 13));
    assert!(s.rule.is_idle(13));
    s.push(9, 2, None, &[1.0; 3], 14).unwrap();
    s.push(11, 2, None, &[1.0; 3], 14).unwrap();
    assert_eq!(s.version(), 3);
    // ...but from its first push on
    s.push(13, 3, None, &[1.0; 3], 15).unwrap();
    s.push(9, 3, None, &[1.0; 3], 15).unwrap();
    assert_eq!(s.version(), 3);
    s.push(11, 3, None, &[1.0; 3], 16).unwrap();
    assert_eq!(s.version(), 4);
}

#[test]
fn a_gradient_pushed_before_death_still_counts() {
    let mut s = sync(3, 0);
    s.push(13, 0, None, &[3.0; 3], 0).unwrap();
    assert!(!s.set_dead_workers(&dead(&[13]), 1), "9 and 11 have not pushed");
    s.push(9, 0, None, &[0.0; 3], 2).unwrap();
    assert_eq!(
        s.push(11, 0, None, &[0.0; 3], 3),
        Ok(PushOutcome::Accepted { applied: true })
    );
    // mean of 3, 0, 0 = 1, lr 0.5
    assert_eq!(s.params, vec![0.5, 1.5, 2.5]);
}

/// At the end of a pass one worker trains the last task while
/// the others wait for the pass to complete; its versions must not wait (the sync
/// timeout per minibatch) for gradients the idle workers will never send.
#[test]
fn idle_workers_are_not_waited_for() {
    let mut s = sync(3, 500);
    assert!(!s.set_idle(11, 0));
    s.push(9, 0, None, &[1.0; 3], 0).unwrap();
    assert_eq!(s.version(), 0, "13 is still training");
    assert_eq!(
        s.push(13, 0, None, &[1.0; 3], 1),
        Ok(PushOutcome::Accepted { applied: true })
    );
    // 13 finishes its task too: 9 alone completes the versions at once
    assert!(!s.set_idle(13, 2));
    for v in 1..5 {
        assert_eq!(
            s.push(9, v, None, &[0.0; 3], 2 + v),
            Ok(PushOutcome::Accepted { applied: true }),
            "version {v} applied without waiting"
        );
    }
    // an idle notice that completes the collecting version applies it
    s.push(11, 5, None, &[0.0; 3], 10).unwrap();
    assert!(!s.rule.is_idle(11), "a push ends the idle spell");
    assert_eq!(s.version(), 5, "9 is training");
    assert!(s.set_idle(9, 11), "11 contributed, 9 and 13 are idle");
    assert_eq!(s.version(), 6);
    // and one that leaves a training worker outstanding does not
    s.push(9, 6, None, &[0.0; 3], 12).unwrap();
    assert!(!s.set_idle(13, 12));
    assert_eq!(s.version(), 6, "11 pushed on 5 and is training");
}

#[test]
fn a_rejected_push_ends_the_idle_spell() {
    let mut s = sync(2, 0);
    s.set_idle(11, 0);
    s.push(9, 0, None, &[0.0; 3], 0).unwrap();
    assert_eq!(s.version(), 1);
    // 11 got a task and pushes on a stale version: training again, so waited for
    assert_eq!(
        s.push(11, 0, None, &[0.0; 3], 1),
        Ok(PushOutcome::Rejected { current: 1 })
    );
    assert!(!s.rule.is_idle(11));
    s.push(9, 1, None, &[0.0; 3], 2).unwrap();
    assert_eq!(s.version(), 1, "waits for 11's retry");
    s.push(11, 1, None, &[0.0; 3], 3).unwrap();
    assert_eq!(s.version(), 2);
}

#[test]
fn dead_and_idle_workers_are_counted_once() {
    let mut s = sync(3, 0);
    s.set_idle(13, 0);
    s.set_dead_workers(&dead(&[13]), 0);
    s.push(9, 0, None, &[0.0; 3], 1).unwrap();
    assert_eq!(s.version(), 0, "11 is live and training");
    s.push(11, 0, None, &[0.0; 3], 2).unwrap();
    assert_eq!(s.version(), 1);
    // everyone idle or dead: the version still needs one gradient
    s.set_idle(9, 3);
    s.set_idle(11, 3);
    assert!(!s.tick(4));
    assert_eq!(s.version(), 1);
}

#[test]
fn async_and_bounded_staleness() {
    let mut a = Shard::new(0, vec![0.0; 2], Mode::Async, SGD, 4);
    assert_eq!(
        a.push(9, 0, None, &[2.0, 2.0], 0),
        Ok(PushOutcome::Accepted { applied: true })
    );
    assert_eq!(
        a.push(11, 0, None, &[2.0, 2.0], 0),
        Ok(PushOutcome::Accepted { applied: true })
    );
    assert_eq!((a.version(), a.params.clone()), (2, vec![-2.0, -2.0]));
    let mut b = Shard::new(0, vec![0.0], Mode::Bounded { staleness: 1 }, SGD, 4);
    b.push(9, 0, None, &[1.0], 0).unwrap();
    b.push(9, 1, None, &[1.0], 0).unwrap();
    assert_eq!(b.push(11, 0, None, &[1.0], 0), Ok(PushOutcome::Rejected { current: 2 }));
    assert_eq!(
        b.push(11, 1, None, &[1.0], 0),
        Ok(PushOutcome::Accepted { applied: true })
    );
    assert_eq!(
        b.push(11, 7, None, &[1.0], 0),
        Ok(PushOutcome::Rejected { current: 3 }),
        "from the future"
    );
    assert!(!b.pull_must_wait(Some(3)));
}

#[test]
fn bad_pushes_are_errors_not_panics() {
    let mut s = sync(1, 0);
    assert_eq!(s.push(9, 0, Some(&[3]), &[1.0], 0), Err(PushError::KeyOutOfRange(103)));
    assert_eq!(s.push(9, 0, Some(&[0, 1]), &[1.0], 0), Err(PushError::LengthMismatch));
    assert_eq!(s.push(9, 0, None, &[1.0], 0), Err(PushError::LengthMismatch));
    assert_eq!(s.values(Some(&[5])), Err(PushError::KeyOutOfRange(105)));
    assert_eq!(s.values(Some(&[2, 0])), Ok(vec![3.0, 1.0]));
}

#[test]
fn momentum_and_weight_decay() {
    let sgd = Sgd {
        lr: 1.0,
        momentum: 0.5,
        weight_decay: 0.0,
    };
    let mut s = Shard::new(0, vec![0.0], Mode::Async, sgd, 1);
    s.push(9, 0, None, &[1.0], 0).unwrap();
    s.push(9, 1, None, &[1.0], 0).unwrap();
    // v1 = 1, p = -1; v2 = 0.5 + 1 = 1.5, p = -2.5
    assert_eq!(s.params, vec![-2.5]);
    let sgd = Sgd {
        lr: 0.1,
        momentum: 0.0,
        weight_decay: 1.0,
    };
    let mut s = Shard::new(0, vec![10.0], Mode::Async, sgd, 1);
    s.push(9, 0, None, &[0.0], 0).unwrap();
    assert!((s.params[0] - 9.0).abs() < 1e-6);
}

#[test]
fn sync_follows_workers_joining_and_leaving() {
    // 2 workers (ids 9, 11), one gradient from every live worker
    let mode = Mode::Sync {
        grads_per_version: EVERY_LIVE_WORKER,
        timeout_ms: 0,
    };
    let mut s = Shard::new(100, vec![1.0, 2.0, 3.0], mode, SGD, 2);
    let g = [1.0, 1.0, 1.0];
    // worker 13 joined: it is not waited for before its first push
    s.rule.set_num_workers(3);
    s.push(9, 0, None, &g, 0).unwrap();
    assert_eq!(s.push(11, 0, None, &g, 0), Ok(PushOutcome::Accepted { applied: true }));
    // once it pushed, every version waits for its gradient too
    assert_eq!(s.push(13, 1, None, &g, 0), Ok(PushOutcome::Accepted { applied: false }));
    s.push(9, 1, None, &g, 0).unwrap();
    assert_eq!(s.push(11, 2, None, &g, 0), Ok(PushOutcome::Rejected { current: 1 }));
    assert_eq!(s.push(11, 1, None, &g, 0), Ok(PushOutcome::Accepted { applied: true }));
    // worker 11 left (it is among the gone): versions wait for 9 and 13 only
    assert!(!s.set_dead_workers(&BTreeSet::from([11]), 0));
    s.push(9, 2, None, &g, 0).unwrap();
    assert_eq!(s.push(13, 2, None, &g, 0), Ok(PushOutcome::Accepted { applied: true }));
    // a count below the known one changes nothing
    s.rule.set_num_workers(1);
    s.push(9, 3, None, &g, 0).unwrap();
    assert!(s.pull_must_wait(Some(3)), "13 is still waited for");
}

/// A primary and a backup of one sync range: the primary takes pushes and applies
/// versions on quorum and on timeout; the backup is forwarded each push with the
/// primary's answer, later than the primary saw it, and runs its own ticker at other
/// moments. Its copy must end as the primary's.
#[test]
fn a_backup_that_follows_its_primary_ends_equal_whatever_its_own_clock() {
    let mut primary = sync(3, 100);
    let mut backup = sync(3, 100);
    let grad = |w: i32, step: u64| [w as f32 * 0.1, step as f32 * 0.01, 1.0];
    let mut now = 0;
    let mut step = 0;
    for round in 0..40u64 {
        // two or three workers push (the third late every fifth round: a timeout)
        let workers: &[i32] = if round % 5 == 0 { &[9, 11] } else { &[9, 11, 13] };
        let mut forwards = Vec::new();
        for &w in workers {
            step += 1;
            let v = primary.version();
            let g = grad(w, step);
            let out = primary.push(w, v, None, &g, now).unwrap();
            let answer = PrimaryAnswer {
                taken: matches!(out, PushOutcome::Accepted { .. }),
                version: primary.version(),
            };
            forwards.push((w, v, g, answer));
            now += 7;
        }
        // a push for a version already applied: refused by the primary
        let stale = primary.version().saturating_sub(1);
        if round % 7 == 3 && stale < primary.version() {
            let out = primary.push(13, stale, None, &[5.0, 5.0, 5.0], now).unwrap();
            assert!(matches!(out, PushOutcome::Rejected { .. }));
            let answer = PrimaryAnswer {
                taken: false,
                version: primary.version(),
            };
            forwards.push((13, stale, [5.0, 5.0, 5.0], answer));
        }
        // the primary's timeout applies a short version before the backup hears of it
        now += 150;
        primary.tick(now);
        // the backup's own clock runs ahead: its ticker would apply what it holds
        // before the forwards arrive, if it decided on its own
        for (w, v, g, a) in forwards {
            backup.follow(w, v, None, &g, a, now + 200).unwrap();
        }
    }
    let (p, b) = (primary.settled(), backup.settled());
    assert_eq!(p.version(), b.version());
    assert_eq!(p.params, b.params);
}

#[test]
fn a_backup_that_decided_by_its_own_push_and_tick_diverges() {
    // what a backup did before it followed its primary: the same pushes, its own
    // ticker first; a version the primary applied with three gradients is applied
    // here with two, and the third is refused
    let mut primary = sync(3, 100);
    let mut backup = sync(3, 100);
    for (w, t) in [(9, 0), (11, 10), (13, 90)] {
        primary.push(w, 0, None, &[w as f32, 1.0, 1.0], t).unwrap();
    }
    backup.push(9, 0, None, &[9.0, 1.0, 1.0], 5).unwrap();
    backup.push(11, 0, None, &[11.0, 1.0, 1.0], 15).unwrap();
    backup.tick(105);
    backup.push(13, 0, None, &[13.0, 1.0, 1.0], 110).unwrap();
    assert_ne!(primary.settled().params, backup.settled().params);
}

#[test]
fn only_a_sync_copy_whose_primary_is_elsewhere_follows_it() {
    let s = sync(2, 100);
    assert!(s.rule.follows_primary(true));
    assert!(!s.rule.follows_primary(false), "the primary decides for itself");
    for mode in [Mode::Async, Mode::Bounded { staleness: 1 }] {
        let a = Shard::new(0, vec![0.0], mode, SGD, 2);
        assert!(
            !a.rule.follows_primary(true),
            "{mode:?}: any copy applies each push at once"
        );
    }
}
