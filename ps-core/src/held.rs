//! Data messages held for customers that have not registered yet (a peer released
//! from the start barrier first may send before this node created its customers).
//! Bounded in count (`PS_MAX_HELD_MESSAGES`) and in time; when full, messages from
//! senders outside the node table are dropped first, so a stranger's junk cannot crowd
//! out the members' messages. Plain data, no I/O: the postoffice calls it under its lock.

use crate::message::Message;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Messages waiting for their customer, by (app id, customer id).
#[derive(Default)]
pub(crate) struct Held {
    by_key: HashMap<(i32, i32), Vec<(u64, Message)>>,
    count: usize,
}

impl Held {
    /// How many messages are held.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// True when nothing is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Holds `msg` for `key`, received at `now_ms` (the van's clock).
    pub(crate) fn push(&mut self, key: (i32, i32), now_ms: u64, msg: Message) {
        self.by_key.entry(key).or_default().push((now_ms, msg));
        self.count += 1;
    }

    /// Takes every message held for `key`, in arrival order.
    pub(crate) fn take(&mut self, key: (i32, i32)) -> Vec<Message> {
        let taken = self.by_key.remove(&key).unwrap_or_default();
        self.count -= taken.len();
        taken.into_iter().map(|(_, m)| m).collect()
    }

    /// Drops (and returns, with their keys) the messages held for `wait` or longer at
    /// `now_ms`.
    pub(crate) fn expire(&mut self, now_ms: u64, wait: Duration) -> Vec<((i32, i32), Message)> {
        let mut gone = Vec::new();
        for (k, msgs) in self.by_key.iter_mut() {
            let (old, young): (Vec<_>, Vec<_>) = std::mem::take(msgs)
                .into_iter()
                .partition(|(t, _)| now_ms.saturating_sub(*t) >= wait.as_millis() as u64);
            *msgs = young;
            gone.extend(old.into_iter().map(|(_, m)| (*k, m)));
        }
        self.by_key.retain(|_, v| !v.is_empty());
        self.count -= gone.len();
        gone
    }

    /// Drops the messages whose sender is not in `members` (the node table's ids) and
    /// returns how many; drops nothing when `members` is empty (the table is not known
    /// yet, so nobody can be told apart).
    pub(crate) fn drop_strangers(&mut self, members: &HashSet<i32>) -> usize {
        if members.is_empty() {
            return 0;
        }
        let before = self.count;
        for msgs in self.by_key.values_mut() {
            msgs.retain(|(_, m)| members.contains(&m.meta.sender));
        }
        self.by_key.retain(|_, v| !v.is_empty());
        self.count = self.by_key.values().map(Vec::len).sum();
        before - self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Meta;

    fn from(sender: i32, timestamp: i32) -> Message {
        Message {
            meta: Meta {
                sender,
                timestamp,
                ..Default::default()
            },
            data: vec![],
        }
    }

    #[test]
    fn take_returns_a_keys_messages_in_order_and_counts_stay_right() {
        let mut h = Held::default();
        let t = 1_000u64;
        h.push((0, 0), t, from(9, 1));
        h.push((7, 7), t, from(9, 2));
        h.push((0, 0), t, from(9, 3));
        assert_eq!(h.len(), 3);
        let got: Vec<i32> = h.take((0, 0)).iter().map(|m| m.meta.timestamp).collect();
        assert_eq!(got, [1, 3]);
        assert_eq!(h.len(), 1);
        assert!(h.take((0, 0)).is_empty());
    }

    #[test]
    fn old_messages_expire_young_ones_stay() {
        let mut h = Held::default();
        let t = 1_000u64;
        h.push((0, 0), t, from(9, 1));
        h.push((0, 0), t + 20_000, from(9, 2));
        let gone = h.expire(t + 30_000, Duration::from_secs(30));
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].1.meta.timestamp, 1);
        assert_eq!(h.len(), 1);
        assert_eq!(h.take((0, 0))[0].meta.timestamp, 2);
    }

    #[test]
    fn strangers_are_dropped_only_once_the_table_is_known() {
        let mut h = Held::default();
        let t = 1_000u64;
        for ts in 0..5 {
            h.push((77, 77), t, from(11, ts));
        }
        h.push((0, 0), t, from(9, 9));
        assert_eq!(h.drop_strangers(&HashSet::new()), 0);
        assert_eq!(h.len(), 6);
        assert_eq!(h.drop_strangers(&HashSet::from([1, 8, 9])), 5);
        assert_eq!(h.len(), 1);
        assert!(h.take((77, 77)).is_empty());
        assert_eq!(h.take((0, 0)).len(), 1);
    }
}
