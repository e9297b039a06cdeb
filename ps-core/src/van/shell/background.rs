//! The van's background threads: heartbeats to the scheduler (re-registering when it
//! falls silent) and the tick that drives the resender and the scheduler's timeouts.

use super::{Van, MAX_RESENDS, TICK_EVERY};
use crate::node::SCHEDULER;
use crate::protocol::resender::RECONNECT_AT;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl Van {
    /// Runs [`Van::heartbeat_step`] every `PS_HEARTBEAT_INTERVAL` until the van stops.
    pub(super) fn heartbeat(self: Arc<Self>) {
        let interval = self.cfg.heartbeat_interval;
        let mut next = Instant::now();
        let mut watch = super::SchedulerWatch::default();
        while !self.stop.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                self.heartbeat_step(&mut watch);
                next += interval;
            }
            std::thread::sleep(TICK_EVERY.min(interval));
        }
    }

    pub(super) fn ticking(self: Arc<Self>) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(TICK_EVERY);
            self.tick(self.now_ms());
        }
    }

    /// Replaces the connection to `peer` (a node in the table) with a fresh one,
    /// opened at the next send: its link looks stalled (see
    /// [`crate::protocol::resender::RECONNECT_AT`]).
    fn reopen(&self, peer: i32) {
        // the scheduler is the candidate this node follows (the table may still name
        // the one before, if the new one's table has not come yet)
        let addr = match self.fo.followed_scheduler() {
            Some(addr) if peer == SCHEDULER => Some(addr),
            _ => self
                .table
                .read()
                .iter()
                .find(|n| n.id == peer)
                .map(|n| (n.hostname.clone(), n.port)),
        };
        if let Some((host, port)) = addr {
            log::info!(
                "no acknowledgement from node {peer} after {RECONNECT_AT} resends: opening a new connection to it"
            );
            if let Err(e) = self.transport.connect(peer, &host, port) {
                log::warn!("cannot reconnect to node {peer}: {e}");
            }
        }
    }

    /// Runs `hook` with the van's time (ms) at every tick, after the van's own work:
    /// an application's timers (a replica asking again for a copy, forwards sent
    /// again) run on the van's ticking thread, or in a simulator's steps, without a
    /// thread of their own. A hook holds what it needs weakly and does nothing once
    /// that is gone.
    pub fn on_tick(&self, hook: impl Fn(u64) + Send + Sync + 'static) {
        self.tick_hooks.lock().push(Arc::new(hook));
    }

    /// One tick (every 20 ms on the van's ticking thread): resends due (a stalled
    /// link reopened first); on a scheduler, the election's step, then liveness while
    /// it acts; then the applications' hooks ([`Van::on_tick`]).
    pub fn tick(&self, now: u64) {
        if let Some(r) = &self.resender {
            let peers = self.peers.read().clone();
            let due = r.lock().due(now, |m| peers.is_dead(m.meta.recver));
            // a stalled link first gets a new connection, which the resends then take
            // (several stalled messages to one peer reconnect once: may_reconnect)
            // (not a ps-lite peer's: a second socket under this node's identity would
            // be refused by its ROUTER, which lets no identity take another's place)
            for peer in due.stalled.iter().map(|m| m.meta.recver) {
                if !self.is_pslite_id(peer) && r.lock().may_reconnect(peer, now) {
                    self.reopen(peer);
                }
            }
            for m in due.resend {
                self.stats.resent.fetch_add(1, Ordering::Relaxed);
                log::debug!("resend {m}");
                if let Err(e) = self.send_raw(&m) {
                    log::debug!("resend of {m} failed: {e}");
                }
            }
            for m in due.give_up {
                log::warn!("gave up on {m} after {MAX_RESENDS} resends");
            }
        }
        if let Some(s) = &self.sched {
            // the election first: a takeover it decided is carried out before liveness
            // looks at the table
            self.fo.tick(self, now);
            // liveness only while acting, and only over what it could hear since: an
            // active scheduler cut off from the majority declares no node dead, nor
            // does one that just took over or got its lease back, from heartbeats it
            // could not hear before
            if let Some(since) = self.fo.acting_since(now).filter(|_| self.fo.is_active_scheduler()) {
                let since = if self.cfg.planted.silence_before_acting {
                    0
                } else {
                    since
                };
                let actions = s.lock().tick(now, since);
                self.execute(actions);
            }
        }
        let hooks = self.tick_hooks.lock().clone();
        for hook in hooks {
            hook(now);
        }
    }
}
