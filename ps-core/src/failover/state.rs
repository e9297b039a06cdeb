//! The failover state a van keeps: a scheduler candidate's machine (the embedded
//! election's [`Candidacy`], or a [`LockCandidate`] under a lock service); what a
//! node follows ([`Follower`]). The rules are in those machines; [`super::shell`]
//! is the wiring.

use super::candidacy::{voters, Candidacy, Timing};
use super::follower::Follower;
use super::lock_service::LockService;
use super::locked::LockCandidate;
use crate::config::{Config, ElectionMode};
use crate::node::Role;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A scheduler candidate's failover state (scheduler processes only).
pub(super) enum SchedFailover {
    /// The embedded election: lease, votes, held messages and the state streamed to
    /// the standbys, all in the candidacy.
    Embedded(Box<Candidacy>),
    /// Under a lock service: the candidate and the state last saved (own when
    /// active, read from the service on takeover).
    Locked {
        cand: LockCandidate,
        core: Bytes,
        app: Bytes,
    },
}

/// The failover state of one van: create with [`Failover::new`]; the van feeds it
/// through the methods of [`super::shell`].
pub struct Failover {
    pub(super) sched: Option<Mutex<SchedFailover>>,
    /// The external lock service (`PS_ELECTION=etcd`), set before the van starts.
    pub(super) lock: RwLock<Option<Arc<dyn LockService>>>,
    /// Serializes saves to the lock service, so they land in the order taken.
    pub(super) persist_order: Mutex<()>,
    pub(super) view: Mutex<Follower>,
    /// The scheduler candidates (`PS_SCHEDULERS`).
    pub(super) schedulers: Vec<(String, u16)>,
    /// The node ids that vote ([`super::voters`]).
    pub(super) voters: BTreeSet<i32>,
    /// This process's index among them (a scheduler's own; for other roles, the one at
    /// the root address).
    pub(super) me: usize,
    /// True on a scheduler process.
    pub(super) is_scheduler: bool,
    /// `PS_HEARTBEAT_INTERVAL` (200 ms when 0).
    pub(super) beat_ms: u64,
    /// Under a lock service: when the next beat to the other candidates is due.
    pub(super) next_peer_beat_ms: Mutex<u64>,
    /// A takeover is being carried out (the node table adopted, the application
    /// told): node messages wait until it is done.
    pub(super) taking_over: AtomicBool,
}

impl Failover {
    /// The failover state for a van of `cfg`'s role at `now_ms`.
    pub fn new(cfg: &Config, now_ms: u64) -> Failover {
        let timeout_ms = cfg.heartbeat_timeout.as_millis() as u64;
        let me = cfg.scheduler_index().unwrap_or(0);
        let n = cfg.schedulers.len().max(1);
        let beat_ms = match cfg.heartbeat_interval.as_millis() as u64 {
            0 => 200,
            ms => ms,
        };
        let sched = (cfg.role == Role::Scheduler).then(|| {
            Mutex::new(match cfg.election {
                ElectionMode::Embedded => {
                    let mut c = Candidacy::new(
                        me,
                        n,
                        cfg.scheduler_standby,
                        voters(cfg.num_servers, cfg.num_workers),
                        Timing { timeout_ms, beat_ms },
                        now_ms,
                    );
                    c.planted = cfg.planted;
                    SchedFailover::Embedded(Box::new(c))
                }
                ElectionMode::Etcd { .. } => SchedFailover::Locked {
                    cand: LockCandidate::new(me, !cfg.scheduler_standby),
                    core: Bytes::new(),
                    app: Bytes::new(),
                },
            })
        });
        Failover {
            sched,
            lock: RwLock::new(None),
            persist_order: Mutex::new(()),
            view: Mutex::new(Follower::new(me, n, timeout_ms, now_ms)),
            schedulers: cfg.schedulers.clone(),
            voters: voters(cfg.num_servers, cfg.num_workers),
            me,
            is_scheduler: cfg.role == Role::Scheduler,
            beat_ms,
            next_peer_beat_ms: Mutex::new(0),
            taking_over: AtomicBool::new(false),
        }
    }
}
