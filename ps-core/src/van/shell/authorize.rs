//! The van's wiring of per-message authorization ([`crate::van::authz`]): answers the
//! pure rules' questions from the van's state (the certificates the node table names,
//! the data requests this node sent, the certificates heard speaking for the
//! scheduler) and logs refusals, rate-limited. Only wiring: the rules are in `authz`.

use super::Van;
use crate::failover::Epoch;
use crate::message::{Command, Message, Meta};
use crate::van::authz::{ActiveScheduler, Facts, LogLimit, Refusal};
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashSet;

/// A kind of refusal is logged at most this many times per interval.
const LOG_BURST: u32 = 8;
/// The interval of the log's rate limit.
const LOG_EVERY_MS: u64 = 10_000;

/// What the van keeps for authorization.
pub(super) struct AuthzState {
    /// (node, app, customer) of every data request this node sent.
    asked: RwLock<FxHashSet<(i32, i32, i32)>>,
    /// The certificates heard speaking for the scheduler (servers and workers).
    active: Mutex<ActiveScheduler>,
    /// The refusals' log lines.
    log: Mutex<LogLimit>,
}

impl Default for AuthzState {
    fn default() -> Self {
        AuthzState {
            asked: RwLock::default(),
            active: Mutex::default(),
            log: Mutex::new(LogLimit::new(LOG_EVERY_MS, LOG_BURST)),
        }
    }
}

impl Facts for Van {
    fn registered(&self, id: i32) -> Option<u64> {
        self.peers.read().cert(id)
    }

    fn asked(&self, peer: i32, app: i32, customer: i32) -> bool {
        self.authz.asked.read().contains(&(peer, app, customer))
    }

    fn speaks_for_scheduler(&self, cmd: Command, epoch: Epoch, fp: u64) -> Result<(), Refusal> {
        let election = self.cfg.schedulers.len() > 1;
        let lost = self.fo.scheduler_lost(self.now_ms());
        self.authz.active.lock().check(cmd, epoch, fp, election, lost)
    }
}

impl Van {
    /// Remembers that this node sends a data request of header `meta`: answers to it
    /// are taken from its receiver ([`Facts::asked`]).
    pub(super) fn note_request(&self, meta: &Meta) {
        if meta.is_control() || !meta.request {
            return;
        }
        let key = (meta.recver, meta.app_id, meta.customer_id);
        if !self.authz.asked.read().contains(&key) {
            self.authz.asked.write().insert(key);
        }
    }

    /// Drops `msg`, refused for `why`: one log line, rate-limited by kind.
    pub(super) fn refused(&self, msg: &Message, why: &Refusal) {
        self.stats.refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(held) = self.authz.log.lock().allow(why.kind(), self.now_ms()) else {
            return;
        };
        let more = if held > 0 {
            format!(" ({held} more refused like it in the last {} s)", LOG_EVERY_MS / 1000)
        } else {
            String::new()
        };
        log::warn!("dropped a message: {why}{more}");
        log::debug!("dropped {msg}");
    }

    /// A held message (from a link whose certificate has `fingerprint`), once its
    /// sender is in this node's table: the certificate must be the one the sender
    /// registered with.
    pub(super) fn registered_certificate(&self, msg: &Message, fingerprint: Option<u64>) -> Result<(), Refusal> {
        match (fingerprint, self.registered(msg.meta.sender)) {
            (Some(fp), Some(reg)) if reg != 0 && reg != fp => Err(Refusal::NotItsCertificate {
                cmd: msg.meta.control.cmd,
                id: msg.meta.sender,
            }),
            _ => Ok(()),
        }
    }
}
