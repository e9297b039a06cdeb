use super::*;

fn set(v: &[usize]) -> BTreeSet<usize> {
    v.iter().copied().collect()
}

#[test]
fn each_range_is_copied_from_its_first_other_live_holder() {
    // 3 servers, 1 replica: rank 1 holds ranges 1 (own, also on 2) and 0 (on 0)
    let (c, fetches) = CatchUp::<u32>::new(Holders::new(3, 1), 1, &set(&[]), 0);
    assert_eq!(fetches, vec![Fetch { range: 0, from: 0 }, Fetch { range: 1, from: 2 }]);
    assert!(!c.done());
    // 4 servers, 2 replicas, rank 3 of range 2's holders [2, 3, 0] dead too
    let (_, fetches) = CatchUp::<u32>::new(Holders::new(4, 2), 0, &set(&[2]), 0);
    assert_eq!(
        fetches,
        vec![
            Fetch { range: 0, from: 1 },
            Fetch { range: 2, from: 3 },
            Fetch { range: 3, from: 3 },
        ]
    );
}

#[test]
fn forwards_wait_for_the_copy_then_the_rejoin_is_announced_once() {
    let (mut c, _) = CatchUp::<u32>::new(Holders::new(3, 1), 1, &set(&[]), 0);
    assert_eq!(c.on_forward(1, 10), None);
    assert_eq!(c.on_forward(1, 11), None);
    // a copy from a rank not asked is dropped
    assert_eq!(c.on_copy(1, 0), None);
    assert!(!c.copied(1));
    assert_eq!(c.on_copy(1, 2), Some(vec![10, 11]));
    assert!(
        c.copied(1) && !c.copied(0) && c.copied(2),
        "range 2 is not one of rank 1's"
    );
    // a duplicate copy is dropped; forwards of a copied range apply at once
    assert_eq!(c.on_copy(1, 2), None);
    assert_eq!(c.on_forward(1, 12), Some(12));
    assert!(!c.take_rejoin());
    assert_eq!(c.on_copy(0, 0), Some(vec![]));
    assert!(c.done());
    assert!(c.take_rejoin());
    assert!(!c.take_rejoin());
}

#[test]
fn a_source_dying_mid_copy_is_replaced_and_a_range_with_no_copy_is_lost() {
    let (mut c, _) = CatchUp::<u32>::new(Holders::new(4, 2), 0, &set(&[]), 0);
    // range 0 from 1, range 3 from 3, range 2 from 2
    assert_eq!(c.on_forward(0, 7), None);
    let again = c.on_dead(&set(&[1]), 100);
    assert_eq!(again, vec![Fetch { range: 0, from: 2 }]);
    // the buffered forward survives the change of source; the old source's copy is
    // no longer accepted
    assert_eq!(c.on_copy(0, 1), None);
    assert_eq!(c.on_copy(0, 2), Some(vec![7]));
    // every other holder of range 3 ([3, 0, 1]) dead: lost
    assert_eq!(c.on_dead(&set(&[1, 3]), 200), vec![]);
    assert_eq!(c.lost(), vec![3]);
    assert!(!c.done());
}

#[test]
fn unanswered_copies_are_asked_again() {
    let (mut c, _) = CatchUp::<u32>::new(Holders::new(3, 1), 1, &set(&[]), 0);
    assert_eq!(c.tick(FETCH_RETRY_MS - 1), vec![]);
    assert_eq!(c.on_copy(0, 0), Some(vec![]));
    assert_eq!(c.tick(FETCH_RETRY_MS), vec![Fetch { range: 1, from: 2 }]);
    assert_eq!(c.tick(FETCH_RETRY_MS + 1), vec![]);
}

#[test]
fn a_source_forwards_to_newcomers_until_they_die() {
    let mut j = Joiners::default();
    assert_eq!(j.targets(1, 2, vec![]), Vec::<usize>::new());
    j.add(1, 1, 7);
    assert_eq!(j.targets(1, 2, vec![]), vec![1]);
    // once rejoined, the newcomer is a live holder: not forwarded to twice
    assert_eq!(j.targets(1, 2, vec![1]), vec![1]);
    assert_eq!(j.targets(0, 2, vec![0]), vec![0]);
    j.forget(&set(&[1]));
    assert_eq!(j.targets(1, 2, vec![]), Vec::<usize>::new());
}

#[test]
fn a_source_relays_forwards_to_its_newcomers_until_after_their_rejoin() {
    // 4 servers, 2 replicas: range 1 on [1, 2, 3]; newcomer 1 copied it from 3 while
    // the workers' primary was 2: 3 relays what 2 forwards it, never back to the sender
    let mut j = Joiners::default();
    assert_eq!(j.relay_targets(1, 3, 2, 0), Vec::<usize>::new());
    j.add(1, 1, 7);
    assert_eq!(j.relay_targets(1, 3, 2, 0), vec![1]);
    assert_eq!(j.relay_targets(1, 3, 1, 0), Vec::<usize>::new());
    assert_eq!(j.relay_targets(0, 3, 2, 0), Vec::<usize>::new());
    // after the rejoin, for the grace period only (then every primary forwards to it)
    j.rejoined(1, 1_000);
    j.rejoined(1, 5_000);
    assert_eq!(j.relay_targets(1, 3, 2, 1_000 + RELAY_GRACE_MS - 1), vec![1]);
    assert_eq!(j.relay_targets(1, 3, 2, 1_000 + RELAY_GRACE_MS), Vec::<usize>::new());
    // a primary still forwards to it (it is a live holder anyway)
    assert_eq!(j.targets(1, 3, vec![]), vec![1]);
    // a newcomer of that rank copying again (its process died and was replaced)
    j.add(1, 1, 7);
    assert_eq!(j.relay_targets(1, 3, 2, 1_000 + RELAY_GRACE_MS), vec![1]);
    j.forget(&set(&[1]));
    assert_eq!(j.relay_targets(1, 3, 2, 0), Vec::<usize>::new());
}

#[test]
fn a_newcomer_is_no_dead_process_while_its_id_is_still_declared_dead() {
    // rank 1's process 5 was declared dead; its replacement, process 7, took a copy
    // before this server got the table that revives the id
    let mut j = Joiners::default();
    let declared = set(&[1, 2]);
    assert_eq!(j.dead(&declared, |_| Some(5)), set(&[1, 2]));
    j.add(0, 1, 7);
    assert_eq!(j.dead(&declared, |_| Some(5)), set(&[2]), "the newcomer is waited for");
    assert_eq!(j.dead(&declared, |_| None), set(&[2]));
    // the newcomer itself died
    assert_eq!(j.dead(&declared, |_| Some(7)), set(&[1, 2]));
    j.forget(&set(&[1]));
    assert_eq!(j.dead(&declared, |_| Some(5)), set(&[1, 2]));
}
