use super::*;

const T: u64 = 1000;

fn e(term: u64, candidate: u32) -> Epoch {
    Epoch { term, candidate }
}

/// Candidate 1 of 3 following the initial active (candidate 0, term 1) with state 5.
fn standby(me: usize) -> Candidate {
    let mut c = Candidate::new(me, 3, T, true, 0);
    assert_eq!(c.on_peer(e(1, 0), 0, 100), Decision::Nothing);
    assert!(c.on_state(e(1, 0), 5));
    c
}

fn report_silent(c: &mut Candidate, nodes: &[i32], silence: u64, seq: u64, now: u64) {
    for &n in nodes {
        assert_eq!(c.on_witness(n, e(1, 0), silence, seq, now), Decision::Nothing);
    }
}

#[test]
fn takes_over_when_the_active_and_the_nodes_agree_it_is_silent() {
    let mut c = standby(1);
    assert_eq!(
        c.tick(1100, 3),
        Decision::Nothing,
        "not silent for longer than the timeout yet"
    );
    assert_eq!(
        c.tick(1101, 3),
        Decision::Refused(Refusal::NoMajority { have: 0, need: 2 }),
        "no node has lost it yet"
    );
    report_silent(&mut c, &[8, 9], 1050, 5, 1150);
    assert_eq!(c.tick(1200, 3), Decision::TakeOver(e(2, 1)));
    assert!(c.is_active());
    assert_eq!(c.next_seq(), 6, "the sequence continues from the state taken over");
    assert_eq!(c.tick(5000, 3), Decision::Nothing);
}

#[test]
fn a_standby_cut_off_from_a_living_active_does_not_take_over() {
    let mut c = standby(1);
    // the nodes still hear the active one
    report_silent(&mut c, &[8, 9, 11], 150, 5, 1150);
    assert_eq!(
        c.tick(1200, 3),
        Decision::Refused(Refusal::NoMajority { have: 0, need: 2 })
    );
    // one node loses it too: still no majority
    report_silent(&mut c, &[8], 1100, 5, 1250);
    assert_eq!(
        c.tick(1300, 3),
        Decision::Refused(Refusal::NoMajority { have: 1, need: 2 })
    );
    // old reports do not count
    report_silent(&mut c, &[9], 1100, 5, 1300);
    assert_eq!(
        c.tick(2400, 3),
        Decision::Refused(Refusal::NoMajority { have: 0, need: 2 })
    );
    assert!(!c.is_active());
}

#[test]
fn a_standby_that_missed_a_write_never_takes_over() {
    let mut c = standby(1);
    // the active acted on state 6 (a node saw it) before this standby got it
    report_silent(&mut c, &[8, 9], 1100, 5, 1150);
    report_silent(&mut c, &[11], 1100, 6, 1150);
    assert_eq!(c.tick(1200, 3), Decision::Refused(Refusal::Stale { mine: 5, seen: 6 }));
    // caught up by an active scheduler: the refusal goes away
    c.on_peer(e(1, 0), 0, 1300);
    assert!(c.on_state(e(1, 0), 6));
    report_silent(&mut c, &[8, 9, 11], 1100, 6, 2350);
    assert_eq!(c.tick(2400, 3), Decision::TakeOver(e(2, 1)));
}

#[test]
fn the_nearest_standby_wins_and_the_next_one_follows_it() {
    let mut b = standby(1);
    let mut c = standby(2);
    for x in [&mut b, &mut c] {
        report_silent(x, &[8, 9], 1100, 5, 1150);
    }
    assert_eq!(
        c.tick(1200, 2),
        Decision::Nothing,
        "candidate 2 waits half a timeout more"
    );
    assert_eq!(b.tick(1200, 2), Decision::TakeOver(e(2, 1)));
    // the new active's heartbeat reaches candidate 2
    assert_eq!(c.on_peer(e(2, 1), 1, 1210), Decision::Nothing);
    assert!(c.on_state(e(2, 1), 5));
    assert_eq!(c.epoch(), e(2, 1));
    assert_eq!(c.tick(1700, 2), Decision::Nothing);
    // the new active dies too: candidate 2 is next after it, no extra wait
    report_silent(&mut c, &[8, 9], 1100, 5, 2300);
    assert_eq!(c.tick(2300, 2), Decision::TakeOver(e(3, 2)));
}

#[test]
fn an_old_active_steps_down_before_a_better_epoch() {
    let mut a = Candidate::new(0, 2, T, false, 0);
    assert_eq!(a.epoch(), e(1, 0));
    assert_eq!(a.on_peer(e(1, 0), 0, 10), Decision::Nothing);
    assert_eq!(a.on_peer(e(0, 0), 0, 10), Decision::Nothing);
    assert_eq!(a.on_peer(e(2, 1), 1, 20), Decision::StepDown(e(2, 1)));
    assert!(!a.is_active());
    // a state of the new epoch is followed, an older one is not
    assert!(!a.on_state(e(1, 0), 9));
    assert!(a.on_state(e(2, 1), 4));
    // a node following a newer epoch also makes an active step down
    let mut a = Candidate::new(0, 2, T, false, 0);
    assert_eq!(a.on_witness(8, e(1, 0), 0, 0, 5), Decision::Nothing);
    assert_eq!(a.on_witness(8, e(3, 1), 0, 0, 5), Decision::StepDown(e(3, 1)));
}

#[test]
fn only_the_active_one_counts_as_heard() {
    let mut b = standby(1);
    // candidate 2, another standby, keeps beating: it does not stand for the active one
    for t in [500, 1000, 1500] {
        assert_eq!(b.on_peer(e(1, 0), 2, t), Decision::Nothing);
    }
    assert_eq!(b.tick(1200, 0), Decision::TakeOver(e(2, 1)));
}

#[test]
fn states_only_move_forward_within_an_epoch() {
    let mut c = standby(1);
    assert!(!c.on_state(e(1, 0), 4), "an older state is ignored");
    assert!(c.on_state(e(1, 0), 5), "the same state again is kept (a catch-up)");
    assert!(!c.on_state(e(0, 0), 9), "a worse epoch is ignored");
    assert_eq!(c.seq(), 5);
}

#[test]
fn no_nodes_no_witnesses_needed_and_zero_timeout_never_takes_over() {
    let mut c = standby(1);
    assert_eq!(c.tick(1101, 0), Decision::TakeOver(e(2, 1)));
    let mut c = Candidate::new(1, 2, 0, true, 0);
    assert_eq!(c.tick(u64::MAX, 0), Decision::Nothing);
}

#[test]
fn under_a_lock_the_holder_is_active_and_a_lost_lease_steps_down() {
    use crate::failover::election::{Leased, Lock};
    let mut a = Candidate::with_rule(0, 2, T, false, 0, Box::new(Leased::new(true)));
    assert!(!a.is_active(), "even the first candidate waits for the lock");
    assert!(a.wants_lock() && a.external_state());
    assert_eq!(a.tick(10, 0), Decision::Nothing);
    a.on_lock(Lock::Held(12));
    assert_eq!(a.tick(20, 0), Decision::TakeOver(e(12, 0)));
    let mut b = Candidate::with_rule(1, 2, T, true, 0, Box::new(Leased::new(false)));
    assert!(!b.wants_lock(), "a standby seeks the lock once it follows an active");
    assert_eq!(b.on_peer(e(12, 0), 0, 30), Decision::Nothing);
    assert!(b.wants_lock());
    // the active one is silent and the nodes agree, but the lock decides
    report_silent(&mut b, &[8, 9], 5 * T, 0, 5 * T);
    assert_eq!(b.tick(5 * T, 2), Decision::Nothing);
    // a's lease expires (killed, or cut off from etcd): it steps down; b wins the lock
    a.on_lock(Lock::Lost);
    assert_eq!(a.tick(6 * T, 0), Decision::StepDown(e(12, 0)));
    assert!(!a.is_active());
    b.on_lock(Lock::Held(15));
    assert_eq!(b.tick(6 * T, 2), Decision::TakeOver(e(15, 1)));
    // a hears the new term and follows it
    assert_eq!(a.on_peer(e(15, 1), 1, 6 * T + 10), Decision::Nothing);
    assert_eq!(a.epoch(), e(15, 1));
}
