//! Streaming the active scheduler's state to its standbys (embedded failover) or into
//! the lock service (leased election): the node table after every change, the
//! application's state (the master's queues, the jobs table) before it acts on it.

use super::failover::{SchedFailover, IN_RECV};
use super::{control, Van};
use crate::message::{Command, Message};
use crate::protocol::failover::candidate_key;
use bytes::Bytes;
use std::time::{Duration, Instant};

impl Van {
    pub(super) fn sync_msg(&self, g: &SchedFailover, to: usize) -> Message {
        let mut m = control(candidate_key(to), Command::Sync);
        m.data = vec![g.core.clone(), g.app.clone()];
        m
    }

    /// Streams the state (sequence `seq`) to every standby; with `wait`, waits up to a
    /// bound for the live ones to acknowledge it.
    pub(super) fn stream(&self, g: parking_lot::MutexGuard<'_, SchedFailover>, seq: u64, wait: bool) {
        let s = self.fo.sched.as_ref().expect("scheduler");
        let msgs: Vec<Message> = g.replicas.peers().into_iter().map(|p| self.sync_msg(&g, p)).collect();
        drop(g);
        for m in msgs {
            let _ = self.send(m);
        }
        if !wait || IN_RECV.with(|r| r.get()) {
            return;
        }
        let deadline = Instant::now() + Duration::from_millis(self.beat_ms().max(100));
        let mut g = s.lock();
        while !g.replicas.waiting_for(seq, self.now_ms()).is_empty() {
            if self.fo.acked.wait_until(&mut g, deadline).timed_out() {
                log::debug!(
                    "standbys {:?} did not acknowledge state {seq} in time",
                    g.replicas.waiting_for(seq, self.now_ms())
                );
                break;
            }
        }
    }

    /// Active scheduler: the application's new state (the master's queues) reaches the
    /// live standbys before this returns. Fails if this scheduler is not active.
    pub fn replicate_app(&self, state: Bytes) -> Result<(), String> {
        let Some(s) = &self.fo.sched else {
            return Err("only a scheduler replicates state".into());
        };
        if let Some(ls) = self.lock_service() {
            return self.persist(&ls, |g| g.app = state);
        }
        let mut g = s.lock();
        if !g.cand.is_active() {
            return Err(format!("this scheduler is not active ({} is)", g.cand.epoch()));
        }
        g.app = state;
        let seq = g.cand.next_seq();
        self.fo.publish(&g.cand);
        self.stream(g, seq, true);
        Ok(())
    }

    /// The application state last received from the active scheduler (a standby that
    /// took over resumes from it), if any.
    pub fn replicated_app_state(&self) -> Option<Bytes> {
        let g = self.fo.sched.as_ref()?.lock();
        (!g.app.is_empty()).then(|| g.app.clone())
    }

    /// Active scheduler: the node table changed; stream it to the standbys.
    pub(super) fn replicate_core(&self) {
        let (Some(s), Some(core)) = (&self.fo.sched, &self.sched) else {
            return;
        };
        if !self.multi() {
            return;
        }
        let core = Bytes::from(core.lock().export());
        if let Some(ls) = self.lock_service() {
            if let Err(e) = self.persist(&ls, |g| g.core = core) {
                log::error!("{e}");
            }
            return;
        }
        let mut g = s.lock();
        if !g.cand.is_active() {
            return;
        }
        g.core = core;
        let seq = g.cand.next_seq();
        self.fo.publish(&g.cand);
        self.stream(g, seq, false);
    }
}
