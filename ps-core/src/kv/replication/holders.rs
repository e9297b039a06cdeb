//! Who holds which key range (pure). Server rank `r`'s range is held by the ranks
//! `r, r+1, …, r+k` (mod n, the ring of the Parameter Server paper); the first live
//! holder is the range's primary, which workers talk to and which forwards each push
//! to every other live holder.

use crate::node::{id_role, id_to_rank, Role};
use std::collections::BTreeSet;

/// The replication layout of `servers` servers with `replicas` copies besides the
/// primary (clamped to `servers - 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holders {
    servers: usize,
    replicas: usize,
}

impl Holders {
    /// The layout for `servers` servers and `replicas` extra copies of each range.
    pub fn new(servers: usize, replicas: usize) -> Holders {
        let servers = servers.max(1);
        Holders {
            servers,
            replicas: replicas.min(servers - 1),
        }
    }

    /// Extra copies of each range (0: no replication).
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// The ranks holding range `range`, primary first when all are alive.
    pub fn holders(&self, range: usize) -> Vec<usize> {
        (0..=self.replicas).map(|i| (range + i) % self.servers).collect()
    }

    /// True if `rank` holds a copy of `range`.
    pub fn holds(&self, rank: usize, range: usize) -> bool {
        range < self.servers && self.holders(range).contains(&rank)
    }

    /// The ranges `rank` holds: its own first, then those it backs up.
    pub fn ranges_of(&self, rank: usize) -> Vec<usize> {
        (0..=self.replicas)
            .map(|i| (rank + self.servers - i) % self.servers)
            .collect()
    }

    /// The live holders of `range`, in ring order.
    pub fn live_holders(&self, range: usize, dead: &BTreeSet<usize>) -> Vec<usize> {
        self.holders(range).into_iter().filter(|r| !dead.contains(r)).collect()
    }

    /// The first live holder of `range`, or `None` if every copy is dead.
    pub fn primary(&self, range: usize, dead: &BTreeSet<usize>) -> Option<usize> {
        self.holders(range).into_iter().find(|r| !dead.contains(r))
    }

    /// The ranges server `rank` holds whose first live holder (with the servers in
    /// `dead` dead) is another server: its copies of them follow that primary.
    pub fn followed(&self, rank: usize, dead: &BTreeSet<usize>) -> BTreeSet<usize> {
        self.ranges_of(rank)
            .into_iter()
            .filter(|&r| self.primary(r, dead) != Some(rank))
            .collect()
    }

    /// The live holders of `range` other than `me`: where `me` forwards a push.
    pub fn others(&self, range: usize, me: usize, dead: &BTreeSet<usize>) -> Vec<usize> {
        self.live_holders(range, dead)
            .into_iter()
            .filter(|&r| r != me)
            .collect()
    }
}

/// The server ranks among a set of dead node ids.
pub fn dead_server_ranks(dead: &BTreeSet<i32>) -> BTreeSet<usize> {
    dead.iter()
        .filter(|&&id| id_role(id) == Some(Role::Server))
        .filter_map(|&id| id_to_rank(id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{server_rank_to_id, worker_rank_to_id};

    fn set(v: &[usize]) -> BTreeSet<usize> {
        v.iter().copied().collect()
    }

    #[test]
    fn holders_wrap_around_the_ring() {
        let c = Holders::new(3, 1);
        assert_eq!(c.holders(0), vec![0, 1]);
        assert_eq!(c.holders(2), vec![2, 0]);
        assert_eq!(c.ranges_of(0), vec![0, 2]);
        assert!(c.holds(0, 2) && !c.holds(0, 1) && !c.holds(0, 3));
        // every range has k+1 distinct holders, and every rank holds k+1 ranges
        let c = Holders::new(5, 2);
        for r in 0..5 {
            assert_eq!(set(&c.holders(r)).len(), 3);
            for h in c.ranges_of(r) {
                assert!(c.holds(r, h));
            }
        }
    }

    #[test]
    fn a_server_follows_the_ranges_whose_primary_is_another_live_server() {
        let c = Holders::new(3, 1);
        // server 1 holds ranges 1 (its own) and 0 (server 0's)
        assert_eq!(c.followed(1, &set(&[])), set(&[0]));
        // server 0 dead: server 1 is range 0's primary now
        assert_eq!(c.followed(1, &set(&[0])), set(&[]));
        assert_eq!(Holders::new(3, 0).followed(1, &set(&[])), set(&[]));
    }

    #[test]
    fn no_replication_is_todays_layout() {
        let c = Holders::new(4, 0);
        for r in 0..4 {
            assert_eq!(c.holders(r), vec![r]);
            assert_eq!(c.primary(r, &set(&[])), Some(r));
            assert_eq!(c.primary(r, &set(&[r])), None);
        }
        // more replicas than other servers: clamped
        assert_eq!(Holders::new(2, 5).replicas(), 1);
    }

    #[test]
    fn the_next_live_holder_takes_over() {
        let c = Holders::new(3, 1);
        let dead = set(&[1]);
        assert_eq!(c.primary(0, &dead), Some(0));
        assert_eq!(c.primary(1, &dead), Some(2));
        assert_eq!(c.others(0, 0, &dead), Vec::<usize>::new());
        assert_eq!(c.others(2, 2, &dead), vec![0]);
        // both copies of range 1 dead
        assert_eq!(c.primary(1, &set(&[1, 2])), None);
        let c = Holders::new(4, 2);
        assert_eq!(c.primary(3, &set(&[3, 0])), Some(1));
        assert_eq!(c.live_holders(3, &set(&[0])), vec![3, 1]);
    }

    #[test]
    fn only_servers_count_as_dead_ranks() {
        let dead: BTreeSet<i32> = [server_rank_to_id(2), worker_rank_to_id(1), 1].into_iter().collect();
        assert_eq!(dead_server_ranks(&dead), set(&[2]));
    }
}
