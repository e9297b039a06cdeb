//! The door to an external lock service (`PS_ELECTION=etcd`): a lease-backed lock
//! deciding which scheduler candidate is active, and the state the active one keeps
//! there. The implementation (etcd's, `super::etcd` with the `etcd` cargo feature) is
//! handed to the scheduler's van before it starts (`Van::set_lock_service`), so a
//! build without the feature holds no etcd client.

use super::error::FailoverError;
use super::locked::Lock;

/// A lease-backed lock and the state saved under it. Every method returns at once
/// except `save` and `load` (one round trip to the service).
pub trait LockService: Send + Sync {
    /// Starts seeking the lock (idempotent): from now on the service keeps trying to
    /// hold it, renews its lease while it does, and seeks it again after losing it.
    fn campaign(&self);
    /// The lock as last seen: free (sought or not), held under a term, or lost.
    fn lock(&self) -> Lock;
    /// Saves the node table and the application state, only while the lock is held;
    /// fails with [`FailoverError::LockLost`] (and the lock reads as lost) when it is
    /// not, with [`FailoverError::Unavailable`] when the service does not answer.
    fn save(&self, core: &[u8], app: &[u8]) -> Result<(), FailoverError>;
    /// The node table and application state saved last (empty when none); fails with
    /// [`FailoverError::Unavailable`] when the service does not answer.
    fn load(&self) -> Result<(Vec<u8>, Vec<u8>), FailoverError>;
}
