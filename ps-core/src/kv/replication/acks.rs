//! Pushes waiting for the other replicas (pure): the replica a worker sent a push to
//! applies it, forwards it to the other live holders of its range, and answers the
//! worker only when every one of them acknowledged it or was declared dead.

use super::dedup::RequestId;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeSet;

/// Answers (of type `T`) held until the replicas acknowledged.
pub struct AckTable<T> {
    waiting: HashMap<RequestId, (BTreeSet<usize>, T)>,
}

impl<T> Default for AckTable<T> {
    fn default() -> Self {
        AckTable {
            waiting: HashMap::default(),
        }
    }
}

impl<T> AckTable<T> {
    /// Holds `answer` until every rank of `replicas` acknowledged `id`; returns it at
    /// once if there is none to wait for. If `id` is already waiting (the worker sent
    /// it again), the first answer stays and this one is dropped.
    pub fn add(&mut self, id: RequestId, replicas: impl IntoIterator<Item = usize>, answer: T) -> Option<T> {
        let set: BTreeSet<usize> = replicas.into_iter().collect();
        if self.waiting.contains_key(&id) {
            return None;
        }
        if set.is_empty() {
            return Some(answer);
        }
        self.waiting.insert(id, (set, answer));
        None
    }

    /// Rank `from` acknowledged `id`: the answer, if that was the last one missing.
    pub fn on_ack(&mut self, id: &RequestId, from: usize) -> Option<T> {
        let (set, _) = self.waiting.get_mut(id)?;
        set.remove(&from);
        if set.is_empty() {
            return self.waiting.remove(id).map(|(_, a)| a);
        }
        None
    }

    /// The ranks in `dead` will never acknowledge: the answers no longer waiting.
    pub fn on_dead(&mut self, dead: &BTreeSet<usize>) -> Vec<T> {
        let done: Vec<RequestId> = self
            .waiting
            .iter_mut()
            .filter_map(|(id, (set, _))| {
                set.retain(|r| !dead.contains(r));
                set.is_empty().then_some(*id)
            })
            .collect();
        done.iter()
            .filter_map(|id| self.waiting.remove(id))
            .map(|(_, a)| a)
            .collect()
    }

    /// The ranks `id`'s answer still waits for (None if it waits for nothing).
    pub fn missing(&self, id: &RequestId) -> Option<&BTreeSet<usize>> {
        self.waiting.get(id).map(|(set, _)| set)
    }

    /// Answers waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// True if nothing waits.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ts: i32) -> RequestId {
        RequestId {
            origin: 9,
            incarnation: 1,
            customer: 0,
            timestamp: ts,
            range: 0,
        }
    }

    #[test]
    fn answered_after_every_replica_acked() {
        let mut t = AckTable::default();
        assert_eq!(t.add(id(1), [], "a"), Some("a"));
        assert_eq!(t.add(id(2), [1, 2], "b"), None);
        assert_eq!(t.on_ack(&id(2), 1), None);
        assert_eq!(t.missing(&id(2)), Some(&[2].into_iter().collect()));
        assert_eq!(t.missing(&id(1)), None);
        assert_eq!(t.on_ack(&id(2), 1), None, "a repeated ack counts once");
        assert_eq!(t.on_ack(&id(2), 2), Some("b"));
        assert!(t.is_empty());
        assert_eq!(t.on_ack(&id(2), 2), None, "late ack of a finished push");
    }

    #[test]
    fn a_resent_push_keeps_the_first_answer() {
        let mut t = AckTable::default();
        assert_eq!(t.add(id(1), [1], "first"), None);
        assert_eq!(t.add(id(1), [1], "second"), None);
        assert_eq!(t.on_ack(&id(1), 1), Some("first"));
    }

    #[test]
    fn a_dead_replica_is_not_waited_for() {
        let mut t = AckTable::default();
        t.add(id(1), [1], "a");
        t.add(id(2), [1, 2], "b");
        t.add(id(3), [2], "c");
        let done = t.on_dead(&[1].into_iter().collect());
        assert_eq!(done, vec!["a"]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.on_ack(&id(2), 2), Some("b"));
    }
}
