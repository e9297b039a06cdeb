//! Where the master persists its queues: a `Store` takes the whole serialized state.

use super::error::StoreError;
use crate::storage::files::write_atomic;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

/// Durable storage of the master's queues.
pub trait Store: Send {
    /// The last saved state, if any.
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError>;
    /// Saves `state`; when this returns Ok the state survives a crash.
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError>;
}

/// The default store: one local file, replaced atomically (temp file, fsync, rename).
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// A store in `path`.
    pub fn new(path: impl Into<PathBuf>) -> FileStore {
        FileStore { path: path.into() }
    }
}

impl Store for FileStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        match std::fs::read(&self.path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Failed(format!("cannot read {}: {e}", self.path.display()))),
        }
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        write_atomic(&self.path, state)
            .map_err(|e| StoreError::Failed(format!("cannot write {}: {e}", self.path.display())))
    }
}

/// An in-memory store for tests; clones share the content. `fail` makes saves fail,
/// `stepped_down` makes them refused as to a scheduler that no longer acts.
#[derive(Clone, Default)]
pub struct MemStore {
    /// The saved state.
    pub data: Arc<Mutex<Option<Vec<u8>>>>,
    /// When true, saves fail ([`StoreError::Failed`]).
    pub fail: Arc<Mutex<bool>>,
    /// When true, saves are refused as another scheduler acts now
    /// ([`StoreError::SteppedDown`]).
    pub stepped_down: Arc<Mutex<bool>>,
}

impl Store for MemStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.data.lock().clone())
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        if *self.fail.lock() {
            return Err(StoreError::Failed("the store is unavailable".into()));
        }
        if *self.stepped_down.lock() {
            return Err(StoreError::SteppedDown(
                "this scheduler is not active (term 2 is)".into(),
            ));
        }
        *self.data.lock() = Some(state.to_vec());
        Ok(())
    }
}

#[cfg(feature = "etcd")]
impl Store for crate::master::etcd_store::EtcdStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        crate::master::etcd_store::EtcdStore::load(self)
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        crate::master::etcd_store::EtcdStore::save(self, state)
    }
}

/// A store whose every save first reaches the standby schedulers: the
/// active scheduler's van streams the state to them and waits for their acks, then
/// `inner` saves it locally. A standby that took over loads the state it was sent.
/// Saving fails on a scheduler that is not (or no longer) active.
pub struct ReplicatedStore {
    inner: Box<dyn Store>,
    van: Arc<ps_core::van::Van>,
}

impl ReplicatedStore {
    /// Replicates through `van` (a scheduler's), keeping a local copy in `inner`.
    pub fn new(inner: Box<dyn Store>, van: Arc<ps_core::van::Van>) -> ReplicatedStore {
        ReplicatedStore { inner, van }
    }
}

impl Store for ReplicatedStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        match self.van.replicated_app_state() {
            Some(b) => Ok(Some(b.to_vec())),
            None => self.inner.load(),
        }
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        self.van.replicate_app(bytes::Bytes::copy_from_slice(state))?;
        self.inner.save(state)
    }
}
