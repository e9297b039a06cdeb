//! The shell's side of an external lock service (`PS_ELECTION=etcd`): injecting it,
//! and saving the active scheduler's state under its lock before the active acts on it.
//! The decisions stay in [`super::LockCandidate`].

use super::error::FailoverError;
use super::lock_service::LockService;
use super::locked::{Lock, LockCandidate};
use super::state::{Failover, SchedFailover};
use crate::config::{Config, ElectionMode};
use crate::node::Role;
use bytes::Bytes;
use std::sync::Arc;

impl Failover {
    /// Hands a scheduler the lock service `PS_ELECTION=etcd` needs (before its van
    /// starts).
    pub fn set_lock_service(&self, ls: Arc<dyn LockService>) {
        *self.lock.write() = Some(ls);
    }

    pub(super) fn lock_service(&self) -> Option<Arc<dyn LockService>> {
        self.lock.read().clone()
    }

    /// [`FailoverError::NoLockService`] when `cfg` asks for a lock service this van
    /// was not given.
    pub fn check_lock_service(&self, cfg: &Config) -> Result<(), FailoverError> {
        let wanted = cfg.role == Role::Scheduler && matches!(cfg.election, ElectionMode::Etcd { .. });
        if wanted && self.lock_service().is_none() {
            return Err(FailoverError::NoLockService);
        }
        Ok(())
    }

    /// Active scheduler: applies `update` to the state (the application's, the node
    /// table) and saves the whole state under the lock before returning. Fails if
    /// this scheduler is not active or the lock is lost (the lock then reads as lost
    /// and the candidate steps down).
    pub(super) fn persist(
        &self,
        ls: &Arc<dyn LockService>,
        update: impl FnOnce(&mut Bytes, &mut Bytes),
    ) -> Result<(), FailoverError> {
        let s = self.sched.as_ref().ok_or(FailoverError::NotScheduler("keeps state"))?;
        let _in_order = self.persist_order.lock();
        let (core, app) = {
            let mut g = s.lock();
            let SchedFailover::Locked { cand, core, app } = &mut *g else {
                return Err(FailoverError::WrongElection(
                    "this scheduler keeps no state in a lock service",
                ));
            };
            if !cand.is_active() {
                return Err(FailoverError::NotActive(cand.epoch()));
            }
            update(app, core);
            cand.next_seq();
            (core.clone(), app.clone())
        };
        ls.save(&core, &app).map_err(|e| FailoverError::NotSaved(Box::new(e)))
    }
}

/// Seeks the lock when the candidate wants it; the lock as the service sees it.
pub(super) fn lock_view(cand: &LockCandidate, ls: &dyn LockService) -> Lock {
    if cand.wants_lock() {
        ls.campaign();
    }
    ls.lock()
}
