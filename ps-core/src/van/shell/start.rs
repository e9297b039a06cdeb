//! Joining the cluster: bind, connect to the scheduler, register, and wait for the
//! node table while telling the user what the node waits for (see
//! [`crate::van::join_watch`]).

use super::Van;
use crate::addr::{host_port, system::tcp_reachable};
use crate::message::{Command, Message};
use crate::node::{Node, SCHEDULER};
use crate::protocol::join_backoff::JoinBackoff;
use crate::van::error::VanError;
use crate::van::join_watch::{scheduler_gave_up, scheduler_waiting, JoinEvent, JoinView, JoinWatch};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds between "still waiting" lines.
const LOG_EVERY_MS: u64 = 5_000;
/// How long the scheduler may be up but silent before this node concludes that the
/// scheduler cannot connect back to it.
pub const UNREACHABLE_AFTER_MS: u64 = 6_000;

/// Joins refused for this node's credentials after which the node gives up.
const CREDENTIAL_TRIES: u32 = 3;

/// The connection key under which the scheduler reaches a node that has no id yet
/// (negative, below the keys of refusals, stable for one process).
pub(super) fn welcome_key(n: &Node) -> i32 {
    let mut h = DefaultHasher::new();
    (&n.hostname, n.port, n.incarnation).hash(&mut h);
    -70_000 - (h.finish() % (1 << 30)) as i32
}

impl Van {
    /// Binds, starts the receiving thread, registers with the scheduler and waits until
    /// the scheduler sent the node table (every node has joined), then starts the
    /// heartbeat thread. While waiting it logs what it waits for every few seconds,
    /// and fails within seconds when the scheduler is up but cannot reach this node
    /// ([`VanError::Unreachable`]). A scheduler that refuses this node is
    /// [`VanError::Refused`], a cluster that does not complete in `join_timeout`
    /// [`VanError::Timeout`], a port or thread this host cannot have [`VanError::Io`].
    pub fn start(self: &Arc<Self>, join_timeout: Duration) -> Result<(), VanError> {
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
            .start(Arc::new(move |frames, roles| {
                if let Some(van) = weak.upgrade() {
                    van.on_frames(frames, roles);
                }
            }))
            .map_err(|e| VanError::Io(format!("cannot start receiving: {e}")))?;
        let me = Arc::clone(self);
        self.threads.lock().push(
            std::thread::Builder::new()
                .name("van-tick".into())
                .spawn(move || me.ticking())
                .map_err(|e| VanError::Io(e.to_string()))?,
        );
        let deadline = Instant::now() + join_timeout;
        let scheduler = host_port(&self.cfg.root_uri, self.cfg.root_port);
        let expected = (self.cfg.num_servers, self.cfg.num_workers);
        let mut watch = JoinWatch::new(self.now_ms(), LOG_EVERY_MS, UNREACHABLE_AFTER_MS);
        let mut backoff = JoinBackoff::default();
        let mut refused = 0;
        let mut registered = false;
        loop {
            let mut wait = Duration::from_secs(1);
            // ps-lite's scheduler takes every ADD_NODE for another node: on its wire a
            // registration that went out is repeated only to a scheduler heard to be
            // psrs's (a ZMQ socket keeps it until the scheduler is up anyway)
            let once = registered && self.pslite_scheduler_possible();
            if self.sched.is_none() && !once {
                let mut m = Message::control(SCHEDULER, Command::AddNode);
                m.meta.control.nodes = vec![self.my_node()];
                m.meta.timestamp = self.next_timestamp();
                let reached = match self.send(m.clone()) {
                    Ok(_) => {
                        refused = 0;
                        registered = true;
                        true
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                        // TLS: the scheduler refused this node's credentials (or they
                        // refused the scheduler's): retrying will not change that
                        refused += 1;
                        if refused >= CREDENTIAL_TRIES {
                            return Err(VanError::Refused(format!(
                                "cannot join the scheduler at {scheduler}: {e}"
                            )));
                        }
                        log::warn!("{e}");
                        false
                    }
                    Err(e) => {
                        // the scheduler may simply not be up yet
                        log::debug!("cannot send ADD_NODE to the scheduler: {e}");
                        false
                    }
                };
                wait = backoff.after(reached);
                if self.cfg.schedulers.len() > 1 {
                    // whichever candidate is active answers
                    self.send_to_schedulers(m);
                }
            }
            let mut timed_out = false;
            {
                let mut ready = self.ready.lock();
                let wait_until = (Instant::now() + wait).min(deadline);
                if ready.is_none() {
                    self.ready_cv.wait_until(&mut ready, wait_until);
                }
                match ready.clone() {
                    Some(Ok(())) => break,
                    Some(Err(reason)) => {
                        return Err(VanError::Refused(format!("the scheduler refused this node: {reason}")))
                    }
                    // a standby waits as long as the active scheduler lives
                    None if Instant::now() >= deadline && !self.cfg.scheduler_standby => {
                        if self.sched.is_none() {
                            return Err(VanError::Timeout(format!(
                            "no node table from the scheduler at {scheduler} within {join_timeout:?}; is it running, and are all {} servers and {} workers started?",
                            expected.0, expected.1
                        )));
                        }
                        timed_out = true;
                    }
                    None => {}
                }
            }
            if timed_out {
                // outside the `ready` lock: the receiving thread takes it under the scheduler's
                let have = self
                    .sched
                    .as_ref()
                    .map_or((0, 0), |s| s.lock().membership().pending_counts());
                return Err(VanError::Timeout(scheduler_gave_up(
                    have,
                    expected,
                    join_timeout.as_secs_f64(),
                )));
            }
            match &self.sched {
                Some(s) => {
                    if watch.check(self.now_ms(), &self.scheduler_view(&scheduler, true)) != JoinEvent::Quiet {
                        let have = s.lock().membership().pending_counts();
                        log::info!("{}", scheduler_waiting(have, expected));
                    }
                }
                None => {
                    let heard = self.heard_from_scheduler.load(Ordering::Relaxed);
                    let now = self.now_ms();
                    let up = heard
                        || backoff.recent_probe(now).unwrap_or_else(|| {
                            let up = tcp_reachable(&self.cfg.root_uri, self.cfg.root_port, Duration::from_millis(500));
                            backoff.probed(now, up);
                            up
                        });
                    match watch.check(self.now_ms(), &self.scheduler_view(&scheduler, up)) {
                        JoinEvent::Quiet => {}
                        JoinEvent::Log(line) => log::info!("{line}"),
                        JoinEvent::Fail(e) => return Err(VanError::Unreachable(e)),
                    }
                }
            }
        }
        if self.sched.is_none() && !self.cfg.heartbeat_interval.is_zero() {
            let me = Arc::clone(self);
            self.threads.lock().push(
                std::thread::Builder::new()
                    .name("van-heartbeat".into())
                    .spawn(move || me.heartbeat())
                    .map_err(|e| VanError::Io(e.to_string()))?,
            );
        }
        log::info!("{} started", self.my_node());
        Ok(())
    }

    fn scheduler_view(&self, scheduler: &str, up: bool) -> JoinView {
        JoinView {
            scheduler: scheduler.to_string(),
            me: self.my_node().addr(),
            scheduler_up: up,
            heard: self.sched.is_some() || self.heard_from_scheduler.load(Ordering::Relaxed),
            may_stay_silent: self.pslite_scheduler_possible(),
            expected: (self.cfg.num_servers, self.cfg.num_workers),
        }
    }

    /// True while the scheduler may be a ps-lite one: this van speaks ps-lite's wire
    /// and has not heard a psrs scheduler (which welcomes a registering node; ps-lite's
    /// answers only with the node table).
    fn pslite_scheduler_possible(&self) -> bool {
        self.transport.speaks_pslite() && !self.heard_psrs_scheduler.load(Ordering::Relaxed)
    }

    /// The scheduler's answer to an ADD_NODE while the cluster is incomplete: a
    /// heartbeat over a connection of its own, proving to the node that the scheduler
    /// can reach it.
    pub(super) fn welcome(&self, n: &Node) {
        if self.is_pslite(n) {
            // a ps-lite node waits for the table alone (and a second socket to it
            // under this scheduler's identity would collide with the table's)
            return;
        }
        let key = welcome_key(n);
        if !self.transport.is_connected(key) {
            if let Err(e) = self.transport.connect(key, &n.hostname, n.port) {
                log::warn!("cannot connect back to {n}: {e}");
                return;
            }
            self.welcomed.lock().push(key);
        }
        let mut m = Message::control(key, Command::Heartbeat);
        m.meta.timestamp = self.next_timestamp();
        if let Err(e) = self.send(m) {
            log::warn!(
                "cannot reach {n}, which registered: {e}; it must advertise an address this scheduler can connect to"
            );
        }
    }

    /// Opens the link to `n` (it is in the node table): the connection [`Van::welcome`]
    /// opened to it, under its id now (its handshake is not repeated), or else a new
    /// one, opened at the first send.
    pub(super) fn connect_member(&self, n: &Node) {
        self.note_peer(n);
        let key = welcome_key(n);
        let mut welcomed = self.welcomed.lock();
        if let Some(i) = welcomed.iter().position(|&k| k == key) {
            if self.transport.rekey(key, n.id) {
                welcomed.swap_remove(i);
                return;
            }
        }
        drop(welcomed);
        if let Err(e) = self.transport.connect(n.id, &n.hostname, n.port) {
            log::warn!("cannot connect to {n}: {e}");
        }
    }

    /// Closes the connections [`Van::welcome`] opened (the table is out).
    pub(super) fn forget_welcomed(&self) {
        for key in std::mem::take(&mut *self.welcomed.lock()) {
            self.transport.disconnect(key);
        }
    }
}
