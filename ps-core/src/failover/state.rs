//! The failover state a van keeps: a scheduler candidate's role, the standbys it
//! streams to and the state it holds; what a node follows. The rules are in
//! [`super::candidate`], [`super::election`], [`super::replicas`] and [`super::view`];
//! [`super::shell`] is the wiring.

use super::candidacy::{voters, Timing};
use super::candidate::Candidate;
use super::election::{Election, Leased, Majority};
use super::gate::LeaseGate;
use super::lock_service::LockService;
use super::replicas::Replicas;
use super::view::ActiveView;
use crate::config::{Config, ElectionMode};
use crate::message::Message;
use crate::node::Role;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A scheduler candidate's failover state (scheduler processes only).
pub(super) struct SchedFailover {
    pub(super) cand: Candidate,
    pub(super) replicas: Replicas,
    /// The newest node table and application state (own when active, followed when not).
    pub(super) core: Bytes,
    pub(super) app: Bytes,
    pub(super) live_nodes: usize,
    pub(super) next_beat_ms: u64,
    pub(super) refusal: String,
    /// The active scheduler's lease under the embedded election (`None` with one
    /// candidate, the etcd election, or no failure detection): acts wait while it
    /// does not hold.
    pub(super) gate: Option<LeaseGate<Message>>,
}

/// The failover state of one van: create with [`Failover::new`]; the van feeds it
/// through the methods of [`super::shell`].
pub struct Failover {
    pub(super) sched: Option<Mutex<SchedFailover>>,
    /// The external lock service (`PS_ELECTION=etcd`), set before the van starts.
    pub(super) lock: RwLock<Option<Arc<dyn LockService>>>,
    /// Serializes saves to the lock service, so they land in the order taken.
    pub(super) persist_order: Mutex<()>,
    pub(super) acked: Condvar,
    pub(super) view: Mutex<ActiveView>,
    pub(super) term: AtomicU64,
    pub(super) active: AtomicU32,
    pub(super) seq: AtomicU64,
    /// The scheduler candidates (`PS_SCHEDULERS`).
    pub(super) schedulers: Vec<(String, u16)>,
    /// This process's index among them (a scheduler's own; for other roles, the one at
    /// the root address).
    pub(super) me: usize,
    /// True on a scheduler process.
    pub(super) is_scheduler: bool,
    /// `PS_HEARTBEAT_INTERVAL`.
    pub(super) heartbeat_interval: Duration,
    /// `PS_HEARTBEAT_TIMEOUT`.
    pub(super) heartbeat_timeout: Duration,
}

impl Failover {
    /// The failover state for a van of `cfg`'s role at `now_ms`.
    pub fn new(cfg: &Config, now_ms: u64) -> Failover {
        let timeout = cfg.heartbeat_timeout.as_millis() as u64;
        let me = cfg.scheduler_index().unwrap_or(0);
        let n = cfg.schedulers.len();
        let sched = (cfg.role == Role::Scheduler).then(|| {
            let rule: Box<dyn Election> = match cfg.election {
                ElectionMode::Embedded => Box::new(Majority),
                ElectionMode::Etcd { .. } => Box::new(Leased::new(!cfg.scheduler_standby)),
            };
            let cand = Candidate::with_rule(me, n, timeout, cfg.scheduler_standby, now_ms, rule);
            // with the state in the lock service, nothing is streamed to standbys
            let streamed = !cand.external_state();
            let peers = (0..n).filter(|&i| i != me && streamed);
            let beat_ms = match cfg.heartbeat_interval.as_millis() as u64 {
                0 => 200,
                ms => ms,
            };
            let lease_ms = Timing {
                timeout_ms: timeout,
                beat_ms,
            }
            .lease_ms();
            let gate = (n > 1 && streamed && lease_ms > 0)
                .then(|| LeaseGate::new(voters(cfg.num_servers, cfg.num_workers), lease_ms));
            Mutex::new(SchedFailover {
                gate,
                replicas: Replicas::new(peers, timeout, now_ms),
                cand,
                core: Bytes::new(),
                app: Bytes::new(),
                live_nodes: 0,
                next_beat_ms: 0,
                refusal: String::new(),
            })
        });
        let f = Failover {
            sched,
            lock: RwLock::new(None),
            persist_order: Mutex::new(()),
            acked: Condvar::new(),
            view: Mutex::new(ActiveView::new(me, timeout, now_ms)),
            term: AtomicU64::new(0),
            active: AtomicU32::new(me as u32),
            seq: AtomicU64::new(0),
            schedulers: cfg.schedulers.clone(),
            me,
            is_scheduler: cfg.role == Role::Scheduler,
            heartbeat_interval: cfg.heartbeat_interval,
            heartbeat_timeout: cfg.heartbeat_timeout,
        };
        if let Some(s) = &f.sched {
            f.publish(&s.lock().cand);
        }
        f
    }

    pub(super) fn publish(&self, c: &Candidate) {
        self.term.store(c.epoch().term, Ordering::Relaxed);
        self.active.store(c.epoch().candidate, Ordering::Relaxed);
        self.seq.store(c.seq(), Ordering::Relaxed);
    }
}
