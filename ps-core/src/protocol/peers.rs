//! A node's view of the processes behind the ids: which incarnation holds each id,
//! which were declared dead, and which were replaced. An id outlives its process (a
//! replacement takes a dead node's id), so every decision about "node 11" is about one
//! incarnation of it: a death notice about an id's earlier holder does not kill its
//! replacement, a message meant for the earlier holder is not delivered to the
//! replacement, and a message from a process declared dead is not accepted.

use crate::message::{Command, Meta};
use crate::node::{Node, EMPTY_ID};
use std::collections::{BTreeMap, BTreeSet};

/// What to do with a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Deliver it.
    Accept,
    /// It was meant for another incarnation of this node's id (an earlier holder):
    /// acknowledge it so that its sender stops resending, and drop it.
    NotForMe,
    /// A data message from a process declared dead or replaced: drop it (its tasks were
    /// handed to others; what it sends now would be applied twice or out of date).
    FromTheDead,
}

/// What a death notice means to the node that received it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notice {
    /// Ids whose current holder is now dead (notices about replaced holders and about
    /// this node are left out).
    pub dead: Vec<i32>,
    /// This very process was declared dead: it must stop (its id may be handed on).
    pub evicted: bool,
}

/// The version of a node table: the term its scheduler acted under, then that
/// scheduler's state sequence (sequences of different terms do not compare).
pub type TableVersion = (u64, u64);

/// Incarnations per id, as one node knows them.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    holders: BTreeMap<i32, u64>,
    /// The version (the scheduler's term, then its state sequence) of the newest
    /// table entry taken for each id.
    versions: BTreeMap<i32, TableVersion>,
    dead: BTreeMap<i32, u64>,
    retired: BTreeSet<(i32, u64)>,
    /// The certificate each id's holder registered with (see [`Node::cert`]).
    certs: BTreeMap<i32, u64>,
}

impl Peers {
    /// Knows no node yet.
    pub fn new() -> Peers {
        Peers::default()
    }

    /// What a scheduler candidate taking over knows of the processes: the node table
    /// `table` it adopts, with `dead` declared dead in it, seen by `me`. The deaths it
    /// saw while it acted before are forgotten (a node it once declared dead may have
    /// served a newer scheduler since): the table adopted says who is dead now.
    /// Returns the peers and the ids dead in them.
    pub fn adopted(table: &[Node], dead: &[Node], me: &Node) -> (Peers, Vec<i32>) {
        let mut p = Peers::new();
        p.on_table(table);
        let notice = p.on_death(dead, me);
        (p, notice.dead)
    }

    /// The ids of `nodes` (a node table's entries, after [`Peers::fresh`]) whose
    /// process replaces one this node holds for the id and never heard declared dead
    /// (the table overtook the death notice): the earlier process is dead all the
    /// same, and is taken as declared dead here, as its notice would have made it
    /// ([`Peers::dead_incarnation`] names it until [`Peers::on_table`] revives the
    /// id). Call before [`Peers::on_table`].
    pub fn on_replaced(&mut self, nodes: &[Node]) -> Vec<i32> {
        let replaced: Vec<(i32, u64)> = nodes
            .iter()
            .filter(|n| n.id != crate::node::SCHEDULER && n.id != EMPTY_ID && !self.stale(n))
            .filter(|n| !self.dead.contains_key(&n.id))
            .filter_map(|n| {
                let h = self.holders.get(&n.id).copied()?;
                (h != n.incarnation).then_some((n.id, h))
            })
            .collect();
        for &(id, earlier) in &replaced {
            self.dead.insert(id, earlier);
        }
        replaced.into_iter().map(|(id, _)| id).collect()
    }

    /// Nodes from a (full or partial) node table. An id now held by another process
    /// than before is no longer dead and its earlier holder is retired; a table that
    /// names a dead process again does not revive it. Returns the ids that were dead
    /// and are now held by a new process.
    pub fn on_table(&mut self, nodes: &[Node]) -> Vec<i32> {
        let mut revived = Vec::new();
        let fresh: Vec<&Node> = nodes.iter().filter(|n| n.id != EMPTY_ID && !self.stale(n)).collect();
        for n in fresh {
            self.certs.insert(n.id, n.cert);
            if let Some(old) = self.holders.insert(n.id, n.incarnation) {
                if old != n.incarnation {
                    self.retired.insert((n.id, old));
                }
            }
            // a process holding its id again (a scheduler candidate active once more
            // after another one was) is no longer retired
            self.retired.remove(&(n.id, n.incarnation));
            if self.dead.get(&n.id).is_some_and(|&inc| inc != n.incarnation) {
                self.dead.remove(&n.id);
                revived.push(n.id);
            }
        }
        revived
    }

    /// The entries of a node table decided on scheduler state `version` (the term
    /// its scheduler acted under, then the state sequence, its messages' `seq`:
    /// sequences of different terms do not compare, and a newer term's table is
    /// newer) that are news here: an entry older than one already taken
    /// for its id, or naming a process that no longer holds it ([`Peers::stale`]),
    /// is left out (tables arrive out of order). Call before [`Peers::on_table`].
    pub fn fresh(&mut self, nodes: Vec<Node>, version: TableVersion) -> Vec<Node> {
        nodes
            .into_iter()
            .filter(|n| {
                let newer = self.versions.get(&n.id).is_none_or(|&v| version >= v);
                if newer && !self.stale(n) {
                    self.versions.insert(n.id, version);
                    true
                } else {
                    false
                }
            })
            .collect()
    }

    /// True if `n` names a process that no longer holds its id here: one replaced by
    /// a later process, or one declared dead while another holds the id. Such an
    /// entry comes from a table older than what this node knows (tables can arrive
    /// out of order) and is skipped. The scheduler's id moves between candidates and
    /// back, so an entry for it is never stale.
    pub fn stale(&self, n: &Node) -> bool {
        if n.id == crate::node::SCHEDULER {
            return false;
        }
        let holder = self.holders.get(&n.id).copied();
        self.retired.contains(&(n.id, n.incarnation))
            || (self.dead.get(&n.id) == Some(&n.incarnation) && holder.is_some_and(|h| h != n.incarnation))
    }

    /// A death notice naming `nodes` (with the incarnation declared dead), received by
    /// `me`. A node named with another incarnation than the one holding its id here
    /// is an earlier holder: ignored. `me` named with its own incarnation: evicted.
    pub fn on_death(&mut self, nodes: &[Node], me: &Node) -> Notice {
        let mut out = Notice::default();
        for n in nodes {
            if n.id == me.id {
                out.evicted |= n.incarnation == me.incarnation;
                continue;
            }
            let holder = self.holders.get(&n.id).copied();
            if holder.is_some_and(|h| h != n.incarnation) || self.retired.contains(&(n.id, n.incarnation)) {
                continue;
            }
            if self.dead.insert(n.id, n.incarnation).is_none() {
                out.dead.push(n.id);
            }
        }
        out
    }

    /// True if the process holding `id` was declared dead.
    pub fn is_dead(&self, id: i32) -> bool {
        self.dead.contains_key(&id)
    }

    /// True when the process of `meta` (its sender and incarnation) is not the one
    /// this node holds for the id, nor one it retired: a process that took the id
    /// since, whose table entry has not arrived yet. Its messages wait for that entry
    /// (an answer now would go to the earlier holder's address, and once counted as
    /// seen, the message's resends would be dropped as duplicates, the answer lost).
    /// An entry without incarnation (a ps-lite scheduler's table has none) names
    /// whichever process holds the id.
    pub fn unknown_sender(&self, meta: &Meta) -> bool {
        let (id, inc) = (meta.sender, meta.incarnation);
        inc != 0
            && self.holders.get(&id).is_some_and(|&h| h != 0 && h != inc)
            && !self.retired.contains(&(id, inc))
            && self.dead.get(&id) != Some(&inc)
    }

    /// The incarnation of `id` declared dead, while its id is dead (None if it is not).
    pub fn dead_incarnation(&self, id: i32) -> Option<u64> {
        self.dead.get(&id).copied()
    }

    /// The fingerprint of the certificate the process holding `id` registered with
    /// (None if unknown; 0: no certificate).
    pub fn cert(&self, id: i32) -> Option<u64> {
        self.certs.get(&id).copied()
    }

    /// The incarnation holding `id` (None if unknown).
    pub fn holder(&self, id: i32) -> Option<u64> {
        self.holders.get(&id).copied()
    }

    /// Whether the process of incarnation `mine` takes the message of header `meta`.
    /// Control messages from the dead are accepted (the scheduler answers a dead
    /// process's heartbeat by telling it it is dead).
    pub fn admit(&self, meta: &Meta, mine: u64) -> Admit {
        if meta.recver_incarnation != 0 && meta.recver_incarnation != mine {
            return Admit::NotForMe;
        }
        let from = (meta.sender, meta.incarnation);
        let dead = self.dead.get(&from.0) == Some(&from.1) || self.retired.contains(&from);
        if dead && meta.control.cmd == Command::Empty && from.1 != 0 {
            return Admit::FromTheDead;
        }
        Admit::Accept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Role;

    fn node(id: i32, incarnation: u64) -> Node {
        let role = if id % 2 == 0 { Role::Server } else { Role::Worker };
        crate::node::test_node(role, id, incarnation)
    }

    fn data(sender: i32, incarnation: u64, recver_incarnation: u64) -> Meta {
        Meta {
            sender,
            incarnation,
            recver: 11,
            recver_incarnation,
            ..Default::default()
        }
    }

    fn cluster() -> Peers {
        let mut p = Peers::new();
        assert!(p
            .on_table(&[node(1, 100), node(8, 800), node(9, 900), node(11, 1100)])
            .is_empty());
        p
    }

    #[test]
    fn a_table_without_incarnations_holds_for_any_process() {
        // a ps-lite scheduler's table: no incarnations; psrs nodes in it still send theirs
        let mut p = Peers::new();
        p.on_table(&[node(1, 0), node(8, 0), node(9, 0)]);
        assert!(!p.unknown_sender(&data(9, 900, 0)));
        assert_eq!(p.admit(&data(9, 900, 0), 1100), Admit::Accept);
        // a table with incarnations tells processes apart
        assert!(cluster().unknown_sender(&data(9, 901, 0)));
    }

    #[test]
    fn a_death_then_its_replacement() {
        let mut p = cluster();
        let me = node(8, 800);
        let n = p.on_death(&[node(11, 1100)], &me);
        assert_eq!(
            n,
            Notice {
                dead: vec![11],
                evicted: false
            }
        );
        assert!(p.is_dead(11));
        assert_eq!(p.dead_incarnation(11), Some(1100));
        assert_eq!(p.dead_incarnation(9), None);
        // the same notice again (resent) changes nothing
        assert_eq!(p.on_death(&[node(11, 1100)], &me), Notice::default());
        // the table names the dead process again: still dead
        assert!(p.on_table(&[node(11, 1100)]).is_empty());
        assert!(p.is_dead(11));
        assert!(!p.stale(&node(11, 1100)), "the dead process still holds its id");
        // a replacement takes id 11
        assert_eq!(p.on_table(&[node(11, 1111)]), vec![11]);
        assert!(!p.is_dead(11));
        assert_eq!(p.holder(11), Some(1111));
        // an older table naming the dead process arrives late: skipped
        assert!(p.stale(&node(11, 1100)));
        assert!(p.on_table(&[node(11, 1100), node(9, 900)]).is_empty());
        assert_eq!(p.holder(11), Some(1111));
        assert!(!p.is_dead(11));
    }

    #[test]
    fn an_older_table_arriving_late_is_left_out() {
        let mut p = cluster();
        // the change of node 11 (state 52) overtakes the full table of state 51
        let fresh = p.fresh(vec![node(11, 1111)], (1, 52));
        assert_eq!(fresh, vec![node(11, 1111)]);
        p.on_table(&fresh);
        let fresh = p.fresh(vec![node(9, 900), node(11, 1100)], (1, 51));
        assert_eq!(
            fresh,
            vec![node(9, 900)],
            "node 11's entry is older than what was taken"
        );
        p.on_table(&fresh);
        assert_eq!(p.holder(11), Some(1111));
        // without versions (one scheduler: always 0), every entry is news
        assert_eq!(p.fresh(vec![node(8, 800)], (0, 0)).len(), 1);
    }

    /// A scheduler that took over under a newer term counts its state afresh (an
    /// etcd lock holder that loaded the saved state): its table is news however low
    /// its sequence, and the old term's late tables are not.
    #[test]
    fn a_newer_terms_table_is_news_whatever_its_sequence() {
        let mut p = cluster();
        assert_eq!(p.fresh(vec![node(11, 1100)], (2, 40)).len(), 1);
        let fresh = p.fresh(vec![node(1, 77), node(11, 1100)], (31, 3));
        assert_eq!(fresh, vec![node(1, 77), node(11, 1100)]);
        assert!(p.fresh(vec![node(11, 1100)], (2, 41)).is_empty());
    }

    #[test]
    fn a_stale_death_notice_does_not_kill_the_replacement() {
        // the replacement's table arrived before the notice about its predecessor
        let mut p = cluster();
        p.on_table(&[node(11, 1111)]);
        let n = p.on_death(&[node(11, 1100)], &node(8, 800));
        assert_eq!(n, Notice::default());
        assert!(!p.is_dead(11));
        // the notice about the replacement itself counts
        assert_eq!(p.on_death(&[node(11, 1111)], &node(8, 800)).dead, vec![11]);
    }

    #[test]
    fn a_notice_about_my_id() {
        let mut p = cluster();
        p.on_table(&[node(11, 1111)]);
        // about my predecessor: nothing (the replacement must not take itself for
        // dead)
        assert_eq!(p.on_death(&[node(11, 1100)], &node(11, 1111)), Notice::default());
        assert!(!p.is_dead(11));
        // about me: evicted
        let n = p.on_death(&[node(11, 1111), node(9, 900)], &node(11, 1111));
        assert_eq!(
            n,
            Notice {
                dead: vec![9],
                evicted: true
            }
        );
    }

    #[test]
    fn messages_for_an_earlier_holder_are_not_for_me() {
        let p = cluster();
        assert_eq!(p.admit(&data(8, 800, 0), 1111), Admit::Accept);
        assert_eq!(p.admit(&data(8, 800, 1111), 1111), Admit::Accept);
        // an answer to a request of the dead worker 11, resent to its replacement
        assert_eq!(p.admit(&data(8, 800, 1100), 1111), Admit::NotForMe);
    }

    #[test]
    fn data_from_the_dead_is_refused_control_is_not() {
        let mut p = cluster();
        p.on_death(&[node(9, 900)], &node(8, 800));
        assert_eq!(p.admit(&data(9, 900, 0), 800), Admit::FromTheDead);
        let mut beat = data(9, 900, 0);
        beat.control.cmd = Command::Heartbeat;
        assert_eq!(p.admit(&beat, 800), Admit::Accept);
        // replaced: the new holder is heard, the old one still refused
        p.on_table(&[node(9, 909)]);
        assert_eq!(p.admit(&data(9, 909, 0), 800), Admit::Accept);
        assert_eq!(p.admit(&data(9, 900, 0), 800), Admit::FromTheDead);
        // a process that was replaced without being declared dead here (this node
        // missed the notice) is refused too
        p.on_table(&[node(11, 1111)]);
        assert_eq!(p.admit(&data(11, 1100, 0), 800), Admit::FromTheDead);
        // the scheduler's id held by another candidate, then by the first one again
        p.on_table(&[node(1, 200)]);
        assert_eq!(p.admit(&data(1, 100, 0), 800), Admit::FromTheDead);
        p.on_table(&[node(1, 100)]);
        assert_eq!(p.admit(&data(1, 100, 0), 800), Admit::Accept);
        assert_eq!(p.admit(&data(1, 200, 0), 800), Admit::FromTheDead);
    }

    #[test]
    fn a_replacement_whose_death_notice_was_overtaken_is_named() {
        let mut p = cluster();
        // 9's holder 900 is replaced by 901 without a death notice; 8 is unchanged
        let table = [node(8, 800), node(9, 901)];
        assert_eq!(p.on_replaced(&table), vec![9]);
        // the earlier process is dead as if its notice had come, until the table
        // revives the id
        assert_eq!(p.dead_incarnation(9), Some(900));
        assert_eq!(p.dead_incarnation(8), None);
        assert_eq!(p.on_table(&table), vec![9]);
        assert_eq!(p.dead_incarnation(9), None);
        assert_eq!(p.admit(&data(9, 900, 0), 800), Admit::FromTheDead);
        assert_eq!(p.admit(&data(9, 901, 0), 800), Admit::Accept);
        assert!(p.on_replaced(&table).is_empty(), "named once");
        let mut q = cluster();
        q.on_death(&[node(9, 900)], &node(11, 1100));
        assert!(q.on_replaced(&[node(9, 901)]).is_empty(), "a known death is a revival");
        assert_eq!(q.dead_incarnation(9), Some(900));
        assert!(p.on_replaced(&[node(42, 1)]).is_empty(), "a new id replaces nothing");
    }

    #[test]
    fn a_candidate_taking_over_knows_only_the_tables_deaths() {
        let me = node(1, 100);
        let table = [node(1, 100), node(8, 800), node(9, 900), node(11, 1100)];
        let (p, dead) = Peers::adopted(&table, &[node(9, 900)], &me);
        assert_eq!(dead, vec![9]);
        assert!(p.is_dead(9) && !p.is_dead(8) && !p.is_dead(11));
    }
}
