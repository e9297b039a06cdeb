//! A push waiting for a replica whose process is replaced (pure): the primary's view
//! of the processes ([`Peers`]), its newcomers ([`Joiners`]), the answers held for
//! acknowledgements ([`AckTable`]) and the applied ids ([`DedupWindow`]), composed as
//! the replica shell composes them (`Shared::dead_processes`, `release_dead`).

use super::acks::AckTable;
use super::catchup::Joiners;
use super::dedup::{DedupWindow, Outcome, RequestId};
use super::holders::dead_server_ranks;
use crate::node::{server_rank_to_id, test_node as node, worker_rank_to_id, Node, Role};
use crate::protocol::peers::Peers;
use std::collections::BTreeSet;

/// Server 0 (the primary of range 0, id 8) and its replica, server 1 (id 10).
const ME: usize = 0;
const REPLICA: usize = 1;
/// The replica's process the push was forwarded to, and the one replacing it.
const A: u64 = 869;
const B: u64 = 175;
const WORKER: i32 = 11;

fn table(replica: u64) -> Vec<Node> {
    vec![
        node(Role::Server, server_rank_to_id(ME), 553),
        node(Role::Server, server_rank_to_id(REPLICA), replica),
        node(Role::Worker, worker_rank_to_id(1), 435),
    ]
}

fn push(ts: i32) -> RequestId {
    RequestId {
        origin: WORKER,
        incarnation: 435,
        customer: 100,
        timestamp: ts,
        range: ME as i32,
    }
}

/// How the replica shell learns of a change of processes.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// The table naming the replacement came before any death notice.
    ReplacedWithoutNotice,
    /// The death notice came first, then the table.
    DeclaredDead,
}

/// The primary's state, and the dead ids the postoffice holds (`dead_nodes`).
struct Primary {
    peers: Peers,
    dead_ids: BTreeSet<i32>,
    joiners: Joiners,
    acks: AckTable<&'static str>,
    applied: DedupWindow,
}

impl Primary {
    /// Holding the table that names A, nothing applied or waiting yet.
    fn new() -> Primary {
        let mut peers = Peers::new();
        peers.on_table(&table(A));
        Primary {
            peers,
            dead_ids: BTreeSet::new(),
            joiners: Joiners::default(),
            acks: AckTable::default(),
            applied: DedupWindow::new(120_000, 1 << 10),
        }
    }

    /// `Shared::dead_processes`.
    fn dead_processes(&self) -> BTreeSet<usize> {
        let declared = dead_server_ranks(&self.dead_ids);
        self.joiners
            .dead(&declared, |r| self.peers.dead_incarnation(server_rank_to_id(r)))
    }

    /// The on-node-dead callback: `release_dead`, then `catch_up_dead`'s forgetting.
    fn on_nodes_dead(&mut self, ids: &[i32]) -> Vec<&'static str> {
        self.dead_ids.extend(ids.iter().copied());
        let dead = self.dead_processes();
        let answered = self.acks.on_dead(&dead);
        self.joiners.forget(&dead);
        answered
    }

    /// The van learning of `change` of the replica's process from A to B; the answers
    /// released on the way.
    fn replica_replaced(&mut self, change: Change) -> Vec<&'static str> {
        let me = node(Role::Server, server_rank_to_id(ME), 553);
        let mut answered = Vec::new();
        if let Change::DeclaredDead = change {
            let notice = self
                .peers
                .on_death(&[node(Role::Server, server_rank_to_id(REPLICA), A)], &me);
            answered.extend(self.on_nodes_dead(&notice.dead));
        }
        // `Van::merge_table`: the replaced first, then the table revives the id
        let replaced = self.peers.on_replaced(&table(B));
        answered.extend(self.on_nodes_dead(&replaced));
        for id in self.peers.on_table(&table(B)) {
            self.dead_ids.remove(&id);
        }
        answered
    }
}

#[test]
fn a_push_waiting_for_a_replaced_replica_is_answered_once_and_applied_once() {
    for change in [Change::ReplacedWithoutNotice, Change::DeclaredDead] {
        let mut p = Primary::new();
        // A copied both ranges from here earlier and rejoined
        p.joiners.add(0, REPLICA, A);
        p.joiners.add(1, REPLICA, A);
        p.joiners.rejoined(REPLICA, 1_000);
        // the push is applied here and forwarded to A; A's acknowledgement is lost
        let out = Outcome { status: 0, version: 1 };
        p.applied.record(push(15), out, 7_594);
        let targets = p.joiners.targets(ME, ME, vec![REPLICA]);
        assert_eq!(targets, vec![REPLICA]);
        assert_eq!(p.acks.add(push(15), targets, "answer to 15"), None);
        assert!(p.on_nodes_dead(&[]).is_empty(), "{change:?}: nothing dead yet");

        // A dies and B takes its id
        let answered = p.replica_replaced(change);
        assert_eq!(answered, vec!["answer to 15"], "{change:?}: answered once");
        assert!(p.acks.is_empty());
        assert!(
            !p.dead_ids.contains(&server_rank_to_id(REPLICA)),
            "{change:?}: B revives the id"
        );

        // B copies range 0 from here (under the apply lock: the push and its id are in
        // the copy) and a push of B's own range after that waits for B
        p.joiners.add(0, REPLICA, B);
        let mut on_b = DedupWindow::new(120_000, 1 << 10);
        for (t, id, o) in p.applied.of_range(ME as i32) {
            on_b.record(id, o, t);
        }
        assert_eq!(
            on_b.get(&push(15)),
            Some(out),
            "{change:?}: the push reaches B through the copy, so a resend is not applied again"
        );
        assert_eq!(
            p.acks.add(push(16), p.joiners.targets(ME, ME, vec![]), "answer to 16"),
            None
        );
        // A's lost acknowledgement turning up late, or B's of an earlier forward: the
        // answer is not sent again
        assert_eq!(p.acks.on_ack(&push(15), REPLICA), None, "{change:?}");
        assert!(p.on_nodes_dead(&[]).is_empty(), "{change:?}: B is waited for");
        assert_eq!(p.acks.on_ack(&push(16), REPLICA), Some("answer to 16"), "{change:?}");
    }
}

#[test]
fn a_newcomer_taking_a_copy_before_the_death_is_heard_is_waited_for() {
    // B's copy request came before A's death notice (a notice about A arriving after
    // the table naming B is one about an earlier process): B is no dead process
    let mut p = Primary::new();
    let replaced = p.peers.on_replaced(&table(B));
    p.on_nodes_dead(&replaced);
    for id in p.peers.on_table(&table(B)) {
        p.dead_ids.remove(&id);
    }
    p.joiners.add(0, REPLICA, B);
    assert_eq!(p.acks.add(push(1), p.joiners.targets(ME, ME, vec![]), "answer"), None);
    let me = node(Role::Server, server_rank_to_id(ME), 553);
    let late = p
        .peers
        .on_death(&[node(Role::Server, server_rank_to_id(REPLICA), A)], &me);
    assert!(late.dead.is_empty(), "a notice about A is not one about B");
    assert!(p.on_nodes_dead(&late.dead).is_empty());
    assert_eq!(p.acks.on_ack(&push(1), REPLICA), Some("answer"));
}
