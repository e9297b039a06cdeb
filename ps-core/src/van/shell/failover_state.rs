//! The failover state a van keeps (issue 11): a scheduler candidate's role, the
//! standbys it streams to and the state it holds; what a node follows. The rules are in
//! [`crate::protocol::failover`]; [`super::failover`] is the wiring.

use crate::config::ElectionMode;
use crate::node::Role;
use crate::protocol::failover::{ActiveView, Candidate, Leased, Majority, Replicas};
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
}

/// Failover state of a van.
pub(super) struct Failover {
    pub(super) sched: Option<Mutex<SchedFailover>>,
    /// The external lock service (`PS_ELECTION=etcd`), set before the van starts.
    pub(super) lock: parking_lot::RwLock<Option<std::sync::Arc<dyn crate::van::LockService>>>,
    /// Serializes saves to the lock service, so they land in the order taken.
    pub(super) persist: Mutex<()>,
    pub(super) acked: Condvar,
    pub(super) view: Mutex<ActiveView>,
    pub(super) term: AtomicU64,
    pub(super) active: AtomicU32,
    pub(super) seq: AtomicU64,
}

impl Failover {
    /// The failover state for a van of `cfg`'s role at `now_ms`.
    pub(super) fn new(cfg: &crate::config::Config, now_ms: u64) -> Failover {
        let timeout = cfg.heartbeat_timeout.as_millis() as u64;
        let me = cfg.scheduler_index().unwrap_or(0);
        let n = cfg.schedulers.len();
        let sched = (cfg.role == Role::Scheduler).then(|| {
            let rule: Box<dyn crate::protocol::failover::Election> = match cfg.election {
                ElectionMode::Embedded => Box::new(Majority),
                ElectionMode::Etcd { .. } => Box::new(Leased::new(!cfg.scheduler_standby)),
            };
            let cand = Candidate::with_rule(me, n, timeout, cfg.scheduler_standby, now_ms, rule);
            // with the state in the lock service, nothing is streamed to standbys
            let streamed = !cand.external_state();
            let peers = (0..n).filter(|&i| i != me && streamed);
            Mutex::new(SchedFailover {
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
            lock: parking_lot::RwLock::new(None),
            persist: Mutex::new(()),
            acked: Condvar::new(),
            view: Mutex::new(ActiveView::new(me, timeout, now_ms)),
            term: AtomicU64::new(0),
            active: AtomicU32::new(me as u32),
            seq: AtomicU64::new(0),
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
