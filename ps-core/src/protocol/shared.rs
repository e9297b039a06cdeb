//! ps-lite processes registered more than once. ps-lite registers one node per
//! customer that starts (a worker process running several worker threads, each its
//! own customer, registers once per thread), and its scheduler counts each
//! registration as a node of the cluster. psrs's scheduler gives each registration
//! its own id, all at the process's one address; the process takes the first (lowest)
//! id, and the later ones are its aliases: nothing is sent to an alias (its process
//! has the message already), a barrier request the process sends while its own id
//! already waits at that barrier counts for its next alias, and its heartbeats count
//! for its aliases. A ps-lite process is a node table entry without incarnation.

use crate::node::Node;
use std::collections::BTreeMap;

/// The aliases of a node table, each with the id of the process holding it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shared {
    holder_of: BTreeMap<i32, i32>,
}

impl Shared {
    /// The aliases in `table`: entries of ps-lite processes (no incarnation) at the
    /// address of an entry with a lower id.
    pub fn from_table(table: &[Node]) -> Shared {
        let mut first: BTreeMap<(&str, u16), i32> = BTreeMap::new();
        let mut entries: Vec<&Node> = table.iter().filter(|n| n.incarnation == 0).collect();
        entries.sort_by_key(|n| n.id);
        let mut holder_of = BTreeMap::new();
        for n in entries {
            match first.get(&(n.hostname.as_str(), n.port)) {
                Some(&h) => {
                    holder_of.insert(n.id, h);
                }
                None => {
                    first.insert((n.hostname.as_str(), n.port), n.id);
                }
            }
        }
        Shared { holder_of }
    }

    /// True if `id` is an alias (nothing is sent to it).
    pub fn is_alias(&self, id: i32) -> bool {
        self.holder_of.contains_key(&id)
    }

    /// The aliases of the process holding `id`, in id order.
    pub fn aliases_of(&self, id: i32) -> Vec<i32> {
        self.holder_of
            .iter()
            .filter(|(_, &h)| h == id)
            .map(|(&a, _)| a)
            .collect()
    }

    /// The id a barrier request from `sender` counts for: `sender` itself unless
    /// `arrived` says it waits already, then its first alias that does not.
    pub fn barrier_slot(&self, sender: i32, arrived: impl Fn(i32) -> bool) -> i32 {
        if !arrived(sender) {
            return sender;
        }
        self.aliases_of(sender)
            .into_iter()
            .find(|&a| !arrived(a))
            .unwrap_or(sender)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Role;

    fn n(id: i32, port: u16, incarnation: u64) -> Node {
        Node {
            role: Role::Worker,
            id,
            hostname: "10.0.0.1".into(),
            port,
            is_recovery: false,
            incarnation,
        }
    }

    #[test]
    fn a_ps_lite_process_registered_twice_holds_one_alias() {
        let s = Shared::from_table(&[
            n(13, 5000, 0),
            n(9, 5000, 0),
            n(11, 6000, 0),
            n(15, 7000, 3),
            n(17, 7000, 3),
        ]);
        assert!(s.is_alias(13) && !s.is_alias(9) && !s.is_alias(11));
        assert_eq!(s.aliases_of(9), vec![13]);
        assert!(!s.is_alias(17), "psrs processes never share an id");
        let waiting = [9];
        assert_eq!(s.barrier_slot(9, |id| waiting.contains(&id)), 13);
        assert_eq!(s.barrier_slot(11, |id| waiting.contains(&id)), 11);
        let both = [9, 13];
        assert_eq!(s.barrier_slot(9, |id| both.contains(&id)), 9, "a repeat counts once");
    }
}
