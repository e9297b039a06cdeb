//! Many named stores replicated as one (the jobs cluster's scheduler failover): the job table
//! and every job's queues are separate stores, but the standby schedulers receive one
//! application state. A [`ReplicatedSet`] keeps the last saved bytes of every named
//! store; each save replaces its entry and sends the whole set (bincode) through the
//! replicate function — the active scheduler's van, which returns once the standbys
//! have it — before the inner store saves locally. A standby that took over builds
//! its set from the state it received, so every named store loads what was replicated.

use super::error::{MasterError, StoreError};
use super::store::Store;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Sends the encoded set to the standbys; an error fails the save.
pub type ReplicateFn = Arc<dyn Fn(Bytes) -> Result<(), StoreError> + Send + Sync>;

/// The set of named stores replicated together.
#[derive(Clone)]
pub struct ReplicatedSet {
    entries: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    replicate: ReplicateFn,
    /// Whether the set started from a received state (then it wins over local files).
    received: bool,
}

impl ReplicatedSet {
    /// A set starting from `received` (the state a standby was sent; None or empty on
    /// a first start), sending every change through `replicate`. Corrupt bytes are
    /// [`MasterError::Corrupt`].
    pub fn new(received: Option<&[u8]>, replicate: ReplicateFn) -> Result<ReplicatedSet, MasterError> {
        let (entries, received) = match received.filter(|b| !b.is_empty()) {
            Some(b) => (
                bincode::deserialize(b)
                    .map_err(|e| MasterError::Corrupt(format!("the replicated jobs state is corrupt: {e}")))?,
                true,
            ),
            None => (BTreeMap::new(), false),
        };
        Ok(ReplicatedSet {
            entries: Arc::new(Mutex::new(entries)),
            replicate,
            received,
        })
    }

    /// The store named `name`, saving locally through `inner` after replicating.
    pub fn open(&self, name: &str, inner: Box<dyn Store>) -> Box<dyn Store> {
        Box::new(Named {
            set: self.clone(),
            name: name.to_string(),
            inner,
        })
    }
}

struct Named {
    set: ReplicatedSet,
    name: String,
    inner: Box<dyn Store>,
}

impl Store for Named {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        if self.set.received {
            return Ok(self.set.entries.lock().get(&self.name).cloned());
        }
        let local = self.inner.load()?;
        if let Some(b) = &local {
            self.set.entries.lock().insert(self.name.clone(), b.clone());
        }
        Ok(local)
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        let all = {
            let mut e = self.set.entries.lock();
            e.insert(self.name.clone(), state.to_vec());
            bincode::serialize(&*e).map_err(|e| StoreError::Failed(e.to_string()))?
        };
        (self.set.replicate)(Bytes::from(all))?;
        self.inner.save(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::MemStore;

    #[test]
    fn every_named_store_reaches_the_standby_and_loads_there() {
        let sent: Arc<Mutex<Vec<Bytes>>> = Arc::default();
        let s2 = Arc::clone(&sent);
        let set = ReplicatedSet::new(
            None,
            Arc::new(move |b| {
                s2.lock().push(b);
                Ok(())
            }),
        )
        .unwrap();
        let (mut a, mut b) = (
            set.open("jobs", Box::new(MemStore::default())),
            set.open("job-1", Box::new(MemStore::default())),
        );
        assert_eq!(a.load().unwrap(), None);
        a.save(b"table").unwrap();
        b.save(b"queues").unwrap();
        a.save(b"table2").unwrap();
        assert_eq!(sent.lock().len(), 3, "each save is replicated before it is kept");
        // the standby takes over with the last state it received, not its own files
        let last = sent.lock().last().unwrap().clone();
        let local = MemStore::default();
        *local.data.lock() = Some(b"stale".to_vec());
        let standby = ReplicatedSet::new(Some(&last), Arc::new(|_| Ok(()))).unwrap();
        assert_eq!(
            standby.open("jobs", Box::new(local)).load().unwrap().as_deref(),
            Some(&b"table2"[..])
        );
        assert_eq!(
            standby
                .open("job-1", Box::new(MemStore::default()))
                .load()
                .unwrap()
                .as_deref(),
            Some(&b"queues"[..])
        );
        assert_eq!(
            standby.open("job-2", Box::new(MemStore::default())).load().unwrap(),
            None
        );
        assert!(matches!(
            ReplicatedSet::new(Some(b"\xff"), Arc::new(|_| Ok(()))),
            Err(MasterError::Corrupt(_))
        ));
    }

    #[test]
    fn a_failed_replication_fails_the_save_and_keeps_nothing_locally() {
        let epoch = ps_core::failover::Epoch { term: 2, candidate: 1 };
        let refuse = move |_| Err(StoreError::from(ps_core::failover::FailoverError::NotActive(epoch)));
        let set = ReplicatedSet::new(None, Arc::new(refuse)).unwrap();
        let local = MemStore::default();
        let mut s = set.open("jobs", Box::new(local.clone()));
        let e = s.save(b"x").unwrap_err();
        assert!(matches!(e, StoreError::SteppedDown(_)), "{e:?}");
        assert!(e.to_string().contains("not active"), "{e}");
        assert_eq!(*local.data.lock(), None);
        let set = ReplicatedSet::new(None, Arc::new(|_| Err(StoreError::Failed("no standby link".into())))).unwrap();
        let e = set.open("jobs", Box::new(MemStore::default())).save(b"x").unwrap_err();
        assert_eq!(e, StoreError::Failed("no standby link".into()));
    }
}
