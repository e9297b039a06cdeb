//! The van's background threads: heartbeats to the scheduler (re-registering when it
//! falls silent) and the tick that drives the resender and the scheduler's timeouts.

use super::{Van, MAX_RESENDS, POLL};
use crate::message::{Command, Message};
use crate::node::SCHEDULER;
use crate::protocol::resender::RECONNECT_AT;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl Van {
    /// Sends heartbeats; when the scheduler has been silent for longer than the
    /// heartbeat timeout (it died and may be restarting), re-registers with ADD_NODE
    /// carrying this node's id, so a restarted scheduler rebuilds the same table.
    pub(super) fn heartbeat(self: Arc<Self>) {
        let interval = self.cfg.heartbeat_interval;
        let timeout = self.cfg.heartbeat_timeout.as_millis() as u64;
        let mut next = Instant::now();
        let mut was_lost = false;
        while !self.stop.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                let silence = self.scheduler_silence_ms();
                let lost = timeout > 0 && self.fo.scheduler_lost(self.now_ms());
                if lost {
                    if !was_lost {
                        log::warn!(
                            "no word from the scheduler for {silence} ms; re-registering as {}",
                            self.my_node()
                        );
                        was_lost = true;
                    }
                    let mut m = Message::control(SCHEDULER, Command::AddNode);
                    m.meta.control.nodes = vec![self.my_node()];
                    m.meta.timestamp = self.next_timestamp();
                    let _ = self.send(m.clone());
                    if self.cfg.schedulers.len() > 1 {
                        self.send_to_schedulers(m);
                    }
                } else if was_lost {
                    log::info!("the scheduler is back");
                    was_lost = false;
                }
                let mut m = Message::control(SCHEDULER, Command::Heartbeat);
                m.meta.timestamp = self.next_timestamp();
                // naming this node, as ps-lite's heartbeats do (ps-lite's scheduler
                // answers only a heartbeat that names its sender)
                m.meta.control.nodes = vec![self.my_node()];
                if self.cfg.schedulers.len() > 1 {
                    // every candidate hears the node (a standby's witness)
                    self.send_to_schedulers(m);
                } else if let Err(e) = self.send(m) {
                    log::debug!("heartbeat not sent: {e}");
                }
                next += interval;
            }
            std::thread::sleep(POLL.min(interval));
        }
    }

    pub(super) fn ticking(self: Arc<Self>) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(POLL);
            self.tick(self.now_ms());
        }
    }

    /// Replaces the connection to `peer` (a node in the table) with a fresh one,
    /// opened at the next send: its link looks stalled (see
    /// [`crate::protocol::resender::RECONNECT_AT`]).
    fn reopen(&self, peer: i32) {
        let node = self.table.read().iter().find(|n| n.id == peer).cloned();
        if let Some(n) = node {
            log::info!(
                "no acknowledgement from node {peer} after {RECONNECT_AT} resends: opening a new connection to it"
            );
            if let Err(e) = self.transport.connect(peer, &n.hostname, n.port) {
                log::warn!("cannot reconnect to node {peer}: {e}");
            }
        }
    }

    pub(super) fn tick(&self, now: u64) {
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
            // liveness only under the lease: an active scheduler cut off from the
            // majority does not declare the nodes it cannot hear dead
            if self.fo.is_active_scheduler() && self.fo.may_act(now) {
                let actions = s.lock().tick(now);
                self.execute(actions);
            }
            self.fo.tick(self, now);
        }
    }
}
