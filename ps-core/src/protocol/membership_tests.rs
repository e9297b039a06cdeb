use super::*;

/// A node of `role` on 127.0.0.1:`port`, not yet given an id (incarnation = port).
pub(crate) fn node(role: Role, port: u16) -> Node {
    Node {
        role,
        id: EMPTY_ID,
        hostname: "127.0.0.1".into(),
        port,
        is_recovery: false,
        incarnation: port as u64,
        cert: 0,
    }
}

fn sched() -> Node {
    node(Role::Scheduler, 1000)
}

#[test]
fn assigns_ids_once_complete_and_deterministically() {
    let mut m = Membership::new(2, 2, sched());
    assert_eq!(m.add_node(node(Role::Worker, 5002)), Join::Waiting);
    assert_eq!(m.add_node(node(Role::Server, 5004)), Join::Waiting);
    assert_eq!(m.add_node(node(Role::Worker, 5001)), Join::Waiting);
    let Join::Ready { table } = m.add_node(node(Role::Server, 5003)) else {
        panic!("not ready")
    };
    let ids: Vec<(i32, u16)> = table.iter().map(|n| (n.id, n.port)).collect();
    assert_eq!(ids, vec![(1, 1000), (8, 5003), (9, 5001), (10, 5004), (11, 5002)]);
    assert!(m.is_ready());
}

#[test]
fn duplicate_and_excess_registrations() {
    let mut m = Membership::new(1, 1, sched());
    assert_eq!(m.add_node(node(Role::Worker, 1)), Join::Waiting);
    assert_eq!(m.add_node(node(Role::Worker, 1)), Join::Waiting);
    assert!(matches!(m.add_node(node(Role::Worker, 2)), Join::Rejected(_)));
    assert!(matches!(m.add_node(node(Role::Server, 3)), Join::Ready { .. }));
    assert!(matches!(m.add_node(node(Role::Server, 3)), Join::Known { node, .. } if node.id == 8));
    assert!(matches!(m.add_node(node(Role::Scheduler, 4)), Join::Rejected(_)));
}

#[test]
fn replacement_takes_the_dead_id() {
    let mut m = Membership::new(1, 2, sched());
    for p in [1, 2, 3] {
        m.add_node(node(if p == 3 { Role::Server } else { Role::Worker }, p));
    }
    assert_eq!(m.alive_members(4), vec![9, 11]);
    assert_eq!(m.mark_dead(11), Some(None));
    assert_eq!(m.mark_dead(11), None);
    assert_eq!(m.alive_members(4), vec![9]);
    let Join::Replaced { node: n, table } = m.add_node(node(Role::Worker, 7)) else {
        panic!()
    };
    assert_eq!(n.id, 11);
    assert!(n.is_recovery);
    assert!(table.iter().any(|t| t.id == 11 && t.port == 7));
    assert_eq!(m.alive_members(4), vec![9, 11]);
}

#[test]
fn restarted_scheduler_gives_rejoining_nodes_their_ids() {
    let mut m = Membership::new(2, 2, sched());
    let mut rejoin = |role, port, id| {
        let mut n = node(role, port);
        n.id = id;
        m.add_node(n)
    };
    assert_eq!(rejoin(Role::Worker, 1, 11), Join::Waiting);
    assert_eq!(rejoin(Role::Server, 2, 8), Join::Waiting);
    assert_eq!(rejoin(Role::Server, 3, 10), Join::Waiting);
    // a node that lost its id (it was replaced meanwhile) gets the free one
    let Join::Ready { table } = rejoin(Role::Worker, 4, EMPTY_ID) else {
        panic!()
    };
    let ids: Vec<(i32, u16, bool)> = table.iter().map(|n| (n.id, n.port, n.is_recovery)).collect();
    assert_eq!(
        ids,
        vec![
            (1, 1000, true),
            (8, 2, false),
            (9, 4, true),
            (10, 3, false),
            (11, 1, false)
        ]
    );
}

#[test]
fn invalid_preassigned_ids_are_reassigned() {
    let mut m = Membership::new(1, 1, sched());
    let mut n = node(Role::Worker, 1);
    n.id = 8; // a server id claimed by a worker
    m.add_node(n);
    let Join::Ready { table } = m.add_node(node(Role::Server, 2)) else {
        panic!()
    };
    assert_eq!(
        table.iter().map(|n| (n.id, n.port)).collect::<Vec<_>>(),
        vec![(1, 1000), (8, 2), (9, 1)]
    );
}

#[test]
fn early_replacement_waits_for_the_death() {
    let mut m = Membership::new(1, 1, sched());
    m.add_node(node(Role::Worker, 1));
    m.add_node(node(Role::Server, 2));
    assert_eq!(m.add_node(node(Role::Server, 9)), Join::Waiting);
    let Some(Some(Join::Replaced { node: n, .. })) = m.mark_dead(8) else {
        panic!()
    };
    assert_eq!((n.id, n.port), (8, 9));
    assert!(m.dead().is_empty());
}

fn started(workers: u16) -> Membership {
    let mut m = Membership::new(1, workers as usize, sched());
    m.add_node(node(Role::Server, 100));
    for p in 0..workers {
        m.add_node(node(Role::Worker, 200 + p));
    }
    assert!(m.is_ready());
    m
}

#[test]
fn elastic_workers_join_under_new_ids_and_take_departed_ones_first() {
    let mut m = started(2);
    // not elastic: a surplus worker waits for a death
    assert_eq!(m.add_node(node(Role::Worker, 300)), Join::Waiting);
    let mut m = started(2);
    m.set_elastic_workers(true);
    let Join::Replaced { node: n, table } = m.add_node(node(Role::Worker, 300)) else {
        panic!()
    };
    assert_eq!((n.id, n.is_recovery), (13, true));
    assert_eq!(table.len(), 5);
    assert_eq!(m.num_workers(), 3);
    assert_eq!(m.alive_members(4), vec![9, 11, 13]);
    // a resent ADD_NODE of the same process gets its id again
    assert!(matches!(m.add_node(node(Role::Worker, 300)), Join::Known { node, .. } if node.id == 13));
    // servers never grow
    assert_eq!(m.add_node(node(Role::Server, 301)), Join::Waiting);
    // a departed worker's id is taken before a new one
    assert_eq!(m.leave(9), Some(None));
    assert_eq!(m.alive_members(4), vec![11, 13]);
    assert!(m.dead().is_empty());
    let Join::Replaced { node: n, .. } = m.add_node(node(Role::Worker, 302)) else {
        panic!()
    };
    assert_eq!(n.id, 9);
    assert!(m.left().is_empty());
    assert_eq!(m.num_workers(), 3);
}

#[test]
fn a_departed_worker_is_not_declared_dead_and_leaves_once() {
    let mut m = started(2);
    assert_eq!(m.leave(11), Some(None));
    assert_eq!(m.leave(11), None);
    assert_eq!(m.mark_dead(11), None, "its silence after the goodbye is no death");
    assert!(m.dead().is_empty());
    assert_eq!(m.alive_members(7), vec![1, 8, 9]);
    // only live workers leave
    assert_eq!(m.leave(8), None);
    assert_eq!(m.leave(99), None);
    assert_eq!(m.mark_dead(9), Some(None));
    assert_eq!(m.leave(9), None);
    // a worker waiting for an id (not elastic) takes the departed one's
    let mut m = started(1);
    assert_eq!(m.add_node(node(Role::Worker, 300)), Join::Waiting);
    let Some(Some(Join::Replaced { node: n, .. })) = m.leave(9) else {
        panic!()
    };
    assert_eq!((n.id, n.port), (9, 300));
}

#[test]
fn a_replaced_process_claiming_its_old_id_is_refused() {
    let mut m = Membership::new(1, 1, sched());
    m.add_node(node(Role::Worker, 1));
    let Join::Ready { table } = m.add_node(node(Role::Server, 2)) else {
        panic!()
    };
    let mut old = table.iter().find(|n| n.id == 9).unwrap().clone();
    m.mark_dead(9);
    let Join::Replaced { node: new, .. } = m.add_node(node(Role::Worker, 3)) else {
        panic!()
    };
    assert_eq!(new.id, 9);
    // the replacement dies too; the first process, cut off all along, registers again
    m.mark_dead(9);
    old.is_recovery = false;
    assert!(matches!(m.add_node(old), Join::Rejected(r) if r.contains("replaced")));
    // a new process takes the id
    assert!(matches!(m.add_node(node(Role::Worker, 4)), Join::Replaced { node, .. } if node.id == 9));
}
