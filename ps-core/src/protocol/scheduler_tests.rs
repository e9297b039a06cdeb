//! Tests of [`super::SchedulerCore`].

use super::*;
use crate::node::{Role, ALL_GROUP, WORKER_GROUP};

use crate::protocol::membership::tests::node;

fn sends(actions: &[Action]) -> Vec<(i32, Command)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) => Some((m.meta.recver, m.meta.control.cmd)),
            _ => None,
        })
        .collect()
}

fn cluster() -> SchedulerCore {
    let mut s = SchedulerCore::new(1, 2, node(Role::Scheduler, 1), 1000);
    assert_eq!(
        s.on_add_node(node(Role::Worker, 3), 0),
        vec![Action::Welcome(node(Role::Worker, 3))]
    );
    assert_eq!(
        s.on_add_node(node(Role::Worker, 4), 0),
        vec![Action::Welcome(node(Role::Worker, 4))]
    );
    let a = s.on_add_node(node(Role::Server, 2), 0);
    assert_eq!(
        sends(&a),
        vec![(8, Command::AddNode), (9, Command::AddNode), (11, Command::AddNode)]
    );
    s
}

#[test]
fn barrier_over_all_nodes() {
    let mut s = cluster();
    for id in [1, 8, 9] {
        assert!(s.on_barrier(ALL_GROUP, id).is_empty());
    }
    let a = s.on_barrier(ALL_GROUP, 11);
    assert_eq!(sends(&a).len(), 4);
    assert!(sends(&a).iter().all(|(_, c)| *c == Command::Barrier));
    let order: Vec<i32> = sends(&a).iter().map(|(id, _)| *id).collect();
    assert_eq!(order, [8, 9, 11, 1], "servers, workers, the scheduler itself last");
    let mut two = SchedulerCore::new(2, 1, node(Role::Scheduler, 1), 0);
    for (role, port) in [(Role::Server, 2), (Role::Server, 3), (Role::Worker, 4)] {
        two.on_add_node(node(role, port), 0);
    }
    for id in [1, 8, 9] {
        assert!(two.on_barrier(ALL_GROUP, id).is_empty());
    }
    let order: Vec<i32> = sends(&two.on_barrier(ALL_GROUP, 10))
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(order, [8, 10, 9, 1], "every server before any worker");
}

#[test]
fn death_releases_barrier_and_replacement_gets_id() {
    let mut s = cluster();
    s.on_heartbeat(8, 0, 900);
    s.on_heartbeat(9, 0, 900);
    assert!(s.on_barrier(WORKER_GROUP, 9).is_empty());
    assert!(s.tick(1000).is_empty());
    let a = s.tick(1001);
    assert!(a.contains(&Action::Dead(vec![11])));
    // the barrier of the worker group is released for worker 9
    assert!(sends(&a).contains(&(9, Command::Barrier)));
    // living nodes are told
    assert!(sends(&a).contains(&(8, Command::NodeDead)));
    assert!(!sends(&a).iter().any(|(id, _)| *id == 11));
    // a heartbeat from the dead is answered: you are dead
    assert_eq!(sends(&s.on_heartbeat(11, 4, 1100)), vec![(11, Command::NodeDead)]);
    let a = s.on_add_node(node(Role::Worker, 77), 1200);
    assert!(matches!(&a[0], Action::Connect(n) if n.id == 11 && n.port == 77));
    assert_eq!(sends(&a)[0], (11, Command::AddNode));
    assert!(sends(&a).contains(&(9, Command::AddNode)));
    assert!(sends(&a).contains(&(8, Command::AddNode)));
}

#[test]
fn a_standby_adopts_the_table_and_keeps_the_dead_dead() {
    let mut s = cluster();
    s.on_heartbeat(8, 0, 900);
    s.on_heartbeat(9, 0, 900);
    s.tick(1001);
    let exported = s.export();
    let mut standby = SchedulerCore::new(1, 2, node(Role::Scheduler, 5), 1000);
    assert!(matches!(
        standby.adopt(b"junk", node(Role::Scheduler, 5), 0),
        Err(crate::protocol::ProtocolError::CorruptTable(_))
    ));
    let a = standby.adopt(&exported, node(Role::Scheduler, 5), 5000).unwrap();
    // each live node gets the table and the news that worker 11 is dead
    assert_eq!(
        sends(&a),
        vec![
            (8, Command::AddNode),
            (8, Command::NodeDead),
            (9, Command::AddNode),
            (9, Command::NodeDead)
        ]
    );
    let Some(Action::Table(t)) = a.last() else {
        panic!("no table: {a:?}")
    };
    assert_eq!((t[0].id, t[0].port, t[0].is_recovery), (SCHEDULER, 5, true));
    assert!(standby.membership().dead().contains(&11));
    // watched from the takeover on, not from the old heartbeats
    assert!(standby.tick(5900).is_empty());
    assert!(standby.tick(6001).contains(&Action::Dead(vec![8, 9])));
    // a node that re-registers under its id is sent the table
    let mut again = node(Role::Worker, 3);
    again.id = 9;
    let mut standby2 = SchedulerCore::new(1, 2, node(Role::Scheduler, 5), 1000);
    standby2.adopt(&exported, node(Role::Scheduler, 5), 0).unwrap();
    let a = standby2.on_add_node(again, 10);
    assert_eq!(sends(&a), vec![(9, Command::AddNode), (9, Command::NodeDead)]);
}

#[test]
fn rejects_a_surplus_node() {
    let mut s = SchedulerCore::new(1, 0, node(Role::Scheduler, 1), 0);
    assert!(matches!(
        s.on_add_node(node(Role::Worker, 3), 0).as_slice(),
        [Action::Reject { .. }]
    ));
}

fn sent(actions: &[Action]) -> Vec<&Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(m) => Some(m),
            _ => None,
        })
        .collect()
}

#[test]
fn a_replacement_waiting_for_the_death_is_not_told_its_id_is_dead() {
    // the replacement registered before the death was declared and takes the id in
    // the same tick: the notice about its predecessor must not reach it
    let mut s = cluster();
    assert!(sent(&s.on_add_node(node(Role::Worker, 77), 500)).is_empty());
    s.on_heartbeat(8, 2, 900);
    s.on_heartbeat(9, 3, 900);
    let a = s.tick(1001);
    assert!(a.contains(&Action::Dead(vec![11])));
    let notices: Vec<i32> = sent(&a)
        .iter()
        .filter(|m| m.meta.control.cmd == Command::NodeDead)
        .map(|m| m.meta.recver)
        .collect();
    assert_eq!(notices, vec![1, 8, 9]);
    // the notice names the dead process, not its replacement
    let n = sent(&a)
        .into_iter()
        .find(|m| m.meta.control.cmd == Command::NodeDead)
        .unwrap();
    assert_eq!(
        (n.meta.control.nodes[0].id, n.meta.control.nodes[0].incarnation),
        (11, 4)
    );
    // the replacement gets the table, addressed to its own process
    let to_new: Vec<&Message> = sent(&a).into_iter().filter(|m| m.meta.recver == 11).collect();
    assert_eq!(to_new.len(), 1);
    assert_eq!(to_new[0].meta.control.cmd, Command::AddNode);
    assert_eq!(to_new[0].meta.recver_incarnation, 77);
}

#[test]
fn every_message_is_addressed_to_the_process_holding_the_id() {
    let mut s = cluster();
    let a = s.on_add_node(node(Role::Worker, 3), 10);
    assert_eq!(sent(&a)[0].meta.recver_incarnation, 3);
    for id in [1, 8, 9] {
        s.on_barrier(ALL_GROUP, id);
    }
    let a = s.on_barrier(ALL_GROUP, 11);
    let to: Vec<(i32, u64)> = sent(&a)
        .iter()
        .map(|m| (m.meta.recver, m.meta.recver_incarnation))
        .collect();
    assert_eq!(to, vec![(8, 2), (9, 3), (11, 4), (1, 1)]);
    assert_eq!(sent(&s.on_heartbeat(9, 3, 20))[0].meta.recver_incarnation, 3);
}

#[test]
fn a_replaced_process_is_told_it_is_dead_and_its_beats_do_not_count() {
    let mut s = cluster();
    s.on_heartbeat(8, 2, 900);
    s.on_heartbeat(9, 3, 900);
    s.tick(1001);
    s.on_add_node(node(Role::Worker, 77), 1100);
    // worker 11's old process comes back (a healed partition): told it is dead
    let a = s.on_heartbeat(11, 4, 1200);
    let m = &sent(&a)[0];
    assert_eq!((m.meta.recver, m.meta.recver_incarnation), (11, 4));
    assert_eq!(m.meta.control.cmd, Command::NodeDead);
    assert_eq!(
        (m.meta.control.nodes[0].id, m.meta.control.nodes[0].incarnation),
        (11, 4)
    );
    // its beats do not keep id 11 alive: the silent replacement dies on time (the
    // scheduler checks every few ms; a long gap between checks would be its own stall)
    for t in [1500, 2000, 2099] {
        s.on_heartbeat(8, 2, t);
        s.on_heartbeat(9, 3, t);
        s.on_heartbeat(11, 4, t);
        assert!(s.tick(t).is_empty(), "{t}");
    }
    assert!(s.tick(2101).contains(&Action::Dead(vec![11])));
}

#[test]
fn a_dead_process_registering_again_is_refused() {
    // a worker cut off past the heartbeat timeout re-registers when the link heals
    let mut s = cluster();
    s.on_heartbeat(8, 2, 900);
    s.on_heartbeat(9, 3, 900);
    s.tick(1001);
    let mut again = node(Role::Worker, 4);
    again.id = 11;
    let a = s.on_add_node(again, 1200);
    assert!(
        matches!(a.as_slice(), [Action::Reject { node, reason }] if node.port == 4 && reason.contains("declared dead")),
        "{a:?}"
    );
    // its id still goes to a new process
    let a = s.on_add_node(node(Role::Worker, 77), 1300);
    assert!(matches!(&a[0], Action::Connect(n) if n.id == 11 && n.port == 77));
}

#[test]
fn a_worker_joins_the_running_cluster_and_another_leaves() {
    let mut s = cluster();
    s.set_elastic_workers(true);
    // the newcomer gets the table, everyone else the newcomer
    let a = s.on_add_node(node(Role::Worker, 5), 10);
    assert_eq!(
        sends(&a),
        vec![
            (13, Command::AddNode),
            (8, Command::AddNode),
            (9, Command::AddNode),
            (11, Command::AddNode)
        ]
    );
    assert_eq!(s.membership().alive_members(WORKER_GROUP), vec![9, 11, 13]);
    // worker 9 waits at the worker barrier; 11 says goodbye: answered, the others
    // told it left (not dead), the barrier released for the rest
    assert!(s.on_barrier(WORKER_GROUP, 9).is_empty());
    assert!(s.on_barrier(WORKER_GROUP, 13).is_empty());
    let a = s.on_leave(11, 4, 20);
    assert_eq!(
        sends(&a),
        vec![
            (11, Command::Leave),
            (8, Command::NodeDead),
            (9, Command::NodeDead),
            (13, Command::NodeDead),
            (9, Command::Barrier),
            (13, Command::Barrier)
        ]
    );
    assert!(a.contains(&Action::Left(vec![11])));
    let reasons: Vec<&str> = a
        .iter()
        .filter_map(|x| match x {
            Action::Send(m) if m.meta.control.cmd == Command::NodeDead => Some(m.meta.control.reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, vec![LEFT; 3]);
    // a repeated goodbye is answered again, nothing else; a goodbye from another
    // process of the id is ignored
    assert_eq!(sends(&s.on_leave(11, 4, 30)), vec![(11, Command::Leave)]);
    assert!(s.on_leave(9, 77, 30).is_empty());
    // its silence afterwards is no death
    for id in [8, 9, 13] {
        s.on_heartbeat(id, 0, 5000);
    }
    assert!(!s.tick(5001).iter().any(|a| matches!(a, Action::Dead(_))));
    assert!(s.membership().dead().is_empty());
}

#[test]
fn watching_resumes_afresh_after_a_spell_without_the_lease() {
    let mut s = cluster();
    // nothing heard from anyone since 0; the scheduler could not hear a majority
    s.resume_watch(5000);
    assert!(s.tick(5999).is_empty(), "silent for a timeout only from now on");
    let a = s.tick(6001);
    assert!(a.contains(&Action::Dead(vec![8, 9, 11])));
    // the dead stay dead
    s.resume_watch(7000);
    assert!(s.tick(9000).is_empty());
}

#[test]
fn a_process_dead_in_an_adopted_table_is_told_so_when_heard() {
    let mut active = cluster();
    active.on_heartbeat(8, 0, 900);
    active.on_heartbeat(9, 0, 900);
    assert!(active.tick(1001).contains(&Action::Dead(vec![11])));
    // a standby takes the table over; its own liveness never saw worker 11 die
    let mut standby = SchedulerCore::new(1, 2, node(Role::Scheduler, 5), 1000);
    standby.adopt(&active.export(), node(Role::Scheduler, 5), 2000).unwrap();
    let inc = standby.membership().get(11).unwrap().incarnation;
    assert_eq!(
        sends(&standby.on_heartbeat(11, inc, 2100)),
        vec![(11, Command::NodeDead)]
    );
    assert_eq!(sends(&standby.on_heartbeat(9, 0, 2100)), vec![(9, Command::Heartbeat)]);
}

#[test]
fn a_node_taking_the_table_also_hears_who_is_dead() {
    let mut s = cluster();
    s.on_heartbeat(9, 0, 900);
    let a = s.tick(1001);
    assert!(a.contains(&Action::Dead(vec![8, 11])));
    // a new worker takes worker 11's id: the table, then the death of server 8
    let a = s.on_add_node(node(Role::Worker, 77), 1100);
    let to_new: Vec<&Message> = sent(&a).into_iter().filter(|m| m.meta.recver == 11).collect();
    assert_eq!(to_new[0].meta.control.cmd, Command::AddNode);
    assert_eq!(to_new[1].meta.control.cmd, Command::NodeDead);
    assert_eq!(
        to_new[1].meta.control.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        vec![8]
    );
    // a standby taking over tells every live node the same
    let mut standby = SchedulerCore::new(1, 2, node(Role::Scheduler, 5), 1000);
    let a = standby.adopt(&s.export(), node(Role::Scheduler, 5), 2000).unwrap();
    let deaths: Vec<i32> = sent(&a)
        .iter()
        .filter(|m| m.meta.control.cmd == Command::NodeDead)
        .map(|m| m.meta.recver)
        .collect();
    assert_eq!(deaths, vec![9, 11]);
}

#[test]
fn a_ps_lite_process_with_two_customers_counts_as_two_workers_under_one_id() {
    // ps-lite registers once per customer: two registrations of one address, no
    // incarnation; a ps-lite server beside them
    let lite = |role, port| Node {
        incarnation: 0,
        ..node(role, port)
    };
    let mut s = SchedulerCore::new(1, 2, node(Role::Scheduler, 1), 0);
    assert_eq!(s.on_add_node(lite(Role::Worker, 5), 0).len(), 1);
    assert_eq!(
        s.on_add_node(lite(Role::Worker, 5), 0).len(),
        1,
        "a second customer is a second node"
    );
    let a = s.on_add_node(lite(Role::Server, 2), 0);
    let Some(Action::Table(table)) = a.last() else {
        panic!("no table: {a:?}")
    };
    let at_5: Vec<i32> = table.iter().filter(|n| n.port == 5).map(|n| n.id).collect();
    assert_eq!(at_5, vec![9, 11]);
    assert_eq!(
        sends(&a),
        vec![(8, Command::AddNode), (9, Command::AddNode)],
        "the process takes the table once, under its first id"
    );
    assert!(!a.contains(&Action::Connect(table[3].clone())));
    // both customers' barrier requests come from id 9
    for id in [1, 8, 9] {
        assert!(s.on_barrier(ALL_GROUP, id).is_empty());
    }
    assert!(s.on_barrier(ALL_GROUP, 9).iter().any(|a| matches!(a, Action::Send(_))));
    let released = sends(&s.on_barrier(ALL_GROUP, 9));
    assert!(released.is_empty(), "a new round: 9 waits for the others");
    // the release of a round goes to the process once
    let mut s2 = SchedulerCore::new(1, 2, node(Role::Scheduler, 1), 0);
    s2.on_add_node(lite(Role::Worker, 5), 0);
    s2.on_add_node(lite(Role::Worker, 5), 0);
    s2.on_add_node(lite(Role::Server, 2), 0);
    for id in [9, 1, 8] {
        assert!(s2.on_barrier(ALL_GROUP, id).is_empty());
    }
    let order: Vec<i32> = sends(&s2.on_barrier(ALL_GROUP, 9)).iter().map(|(id, _)| *id).collect();
    assert_eq!(order, [8, 9, 1]);
}
