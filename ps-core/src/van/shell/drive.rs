//! The van's steps, each one round of what its threads do: opening (bind, connect to
//! the scheduler candidates, start receiving), one attempt to join, one round of
//! heartbeats, one tick ([`Van::tick`]). [`Van::start`] runs them on the van's own
//! threads; a simulator opens a van without threads ([`Van::open`]) and runs the very
//! same steps under its clock.

use super::Van;
use crate::addr::host_port;
use crate::message::{Command, Message};
use crate::node::SCHEDULER;
use crate::van::error::VanError;
use std::io;
use std::sync::Arc;

/// What a node's heartbeats last found of the scheduler it follows
/// ([`Van::heartbeat_step`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchedulerWatch {
    /// Heard within the heartbeat timeout.
    #[default]
    Heard,
    /// Silent past the timeout: re-registering.
    Lost,
    /// Silent past `PS_JOIN_TIMEOUT`: the node stopped.
    GaveUp,
}

impl Van {
    /// Binds, points the links to the scheduler candidates and starts receiving;
    /// starts no thread of its own (see [`Van::start`] for what runs the steps).
    /// A port that cannot be bound is [`VanError::Io`].
    pub fn open(self: &Arc<Self>) -> Result<(), VanError> {
        self.fo.check_lock_service(&self.cfg)?;
        let want = self.me.read().port;
        let bind = self.cfg.bind_host.clone();
        let port = self
            .transport
            .bind(&bind, want)
            .map_err(|e| VanError::Io(format!("cannot bind {}: {e}", host_port(&bind, want))))?;
        self.me.write().port = port;
        {
            let me = self.me.read();
            self.transport.set_local_node(me.id, me.incarnation);
        }
        log::debug!("bound to {} (advertised as {})", host_port(&bind, port), self.my_node());
        self.transport
            .connect(SCHEDULER, &self.cfg.root_uri, self.cfg.root_port)
            .map_err(|e| VanError::Io(format!("cannot connect to the scheduler: {e}")))?;
        self.fo.connect_candidates(self.as_ref());
        let weak = Arc::downgrade(self);
        self.transport
            .start(Arc::new(move |frames, origin| {
                if let Some(van) = weak.upgrade() {
                    van.on_frames(frames, origin);
                }
            }))
            .map_err(|e| VanError::Io(format!("cannot start receiving: {e}")))
    }

    /// One attempt to join (a server or worker): ADD_NODE to the scheduler (its link
    /// opened first: a failure to open it is the result) and, with standby
    /// schedulers, to every candidate (whichever is active answers).
    pub fn join_step(&self) -> io::Result<usize> {
        let mut m = Message::control(SCHEDULER, Command::AddNode);
        m.meta.control.nodes = vec![self.my_node()];
        m.meta.timestamp = self.next_timestamp();
        let sent = self.send_opened(m.clone());
        if self.cfg.schedulers.len() > 1 {
            self.send_to_schedulers(m);
        }
        sent
    }

    /// True once the node table arrived (a scheduler: once it acts with one).
    pub fn is_ready(&self) -> bool {
        matches!(*self.ready.lock(), Some(Ok(())))
    }

    /// Why the scheduler refused this node while it joined, if it did ([`Van::start`]
    /// then fails with it, and the process ends).
    pub fn join_refusal(&self) -> Option<String> {
        match &*self.ready.lock() {
            Some(Err(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    /// One round of heartbeats (a server or worker, every `PS_HEARTBEAT_INTERVAL`):
    /// to the scheduler, or to every candidate with standbys. When the scheduler
    /// followed has been silent past the timeout (it died and may be restarting, or
    /// another took over), ADD_NODE with this node's id first, so the scheduler that
    /// answers rebuilds the same table. When no scheduler has answered for
    /// `PS_JOIN_TIMEOUT`, none is coming back (the cluster ended while this node was
    /// cut off from it, or it cannot be reached): the node stops, as an evicted one
    /// does ([`crate::van::VanHandler::on_evicted`]), once. `watch` carries what the
    /// last round found.
    pub fn heartbeat_step(&self, watch: &mut SchedulerWatch) {
        if *watch == SchedulerWatch::GaveUp {
            return;
        }
        let now = self.now_ms();
        let timeout = self.cfg.heartbeat_timeout.as_millis() as u64;
        let lost = timeout > 0 && self.fo.scheduler_lost(now);
        if lost
            && self
                .fo
                .scheduler_given_up(now, self.cfg.join_timeout.as_millis() as u64)
        {
            *watch = SchedulerWatch::GaveUp;
            self.evicted(&format!(
                "no word from any scheduler for {:.1} s (PS_JOIN_TIMEOUT {:?}): the cluster ended or cannot be reached",
                self.scheduler_silence_ms() as f64 / 1000.0,
                self.cfg.join_timeout
            ));
            return;
        }
        if lost {
            if *watch == SchedulerWatch::Heard {
                log::warn!(
                    "no word from the scheduler for {} ms; re-registering as {}",
                    self.scheduler_silence_ms(),
                    self.my_node()
                );
                *watch = SchedulerWatch::Lost;
            }
            let mut m = Message::control(SCHEDULER, Command::AddNode);
            m.meta.control.nodes = vec![self.my_node()];
            m.meta.timestamp = self.next_timestamp();
            let _ = self.send(m.clone());
            if self.cfg.schedulers.len() > 1 {
                self.send_to_schedulers(m);
            }
        } else if *watch == SchedulerWatch::Lost {
            log::info!("the scheduler is back");
            *watch = SchedulerWatch::Heard;
        }
        let mut m = Message::control(SCHEDULER, Command::Heartbeat);
        m.meta.timestamp = self.next_timestamp();
        // naming this node, as ps-lite's heartbeats do (ps-lite's scheduler answers
        // only a heartbeat that names its sender)
        m.meta.control.nodes = vec![self.my_node()];
        if self.cfg.schedulers.len() > 1 {
            // every candidate hears the node (a standby's witness)
            self.send_to_schedulers(m);
        } else if let Err(e) = self.send(m) {
            log::debug!("heartbeat not sent: {e}");
        }
    }
}
