//! Where the master persists its queues: a `Store` takes the whole serialized state.

use crate::fsutil::write_atomic;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

/// Durable storage of the master's queues.
pub trait Store: Send {
    /// The last saved state, if any.
    fn load(&mut self) -> Result<Option<Vec<u8>>, String>;
    /// Saves `state`; when this returns Ok the state survives a crash.
    fn save(&mut self, state: &[u8]) -> Result<(), String>;
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
    fn load(&mut self) -> Result<Option<Vec<u8>>, String> {
        match std::fs::read(&self.path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {}: {e}", self.path.display())),
        }
    }
    fn save(&mut self, state: &[u8]) -> Result<(), String> {
        write_atomic(&self.path, state).map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

/// An in-memory store for tests; clones share the content. `fail` makes saves fail.
#[derive(Clone, Default)]
pub struct MemStore {
    /// The saved state.
    pub data: Arc<Mutex<Option<Vec<u8>>>>,
    /// When true, saves fail.
    pub fail: Arc<Mutex<bool>>,
}

impl Store for MemStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, String> {
        Ok(self.data.lock().clone())
    }
    fn save(&mut self, state: &[u8]) -> Result<(), String> {
        if *self.fail.lock() {
            return Err("the store is unavailable".into());
        }
        *self.data.lock() = Some(state.to_vec());
        Ok(())
    }
}

#[cfg(feature = "etcd")]
impl Store for crate::etcd_store::EtcdStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, String> {
        crate::etcd_store::EtcdStore::load(self)
    }
    fn save(&mut self, state: &[u8]) -> Result<(), String> {
        crate::etcd_store::EtcdStore::save(self, state)
    }
}
