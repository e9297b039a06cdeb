//! The van's threads and sockets: a thin shell that feeds received messages to the
//! protocol state machines and carries out what they decide.

use super::clock::{Clock, WallClock};
use super::handler::VanHandler;
use super::stats::VanStats;
use super::transport::{PeerKind, Transport};
use super::zmq::ack::pslite_signature;
use crate::config::Config;
use crate::failover::{is_candidate_key, Epoch, Failover};
use crate::message::{Command, Message};
use crate::node::{Node, Role, EMPTY_ID, SCHEDULER};
use crate::protocol::peers::{Peers, TableVersion};
use crate::protocol::resender::{needs_ack, signature, Resender};
use crate::protocol::scheduler::SchedulerCore;
use parking_lot::{Condvar, Mutex, RwLock};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

mod authorize;
mod background;
mod drive;
pub use drive::SchedulerWatch;
mod failover_host;
mod leave;
mod peers;
mod receive;
#[cfg(test)]
mod receive_tests;
#[cfg(test)]
mod send_tests;
mod start;

/// How a message waits for its link (see [`Van::send`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pace {
    /// Now, never waiting for the connection to open.
    Prompt,
    /// May wait in the link's queue ([`Van::send_lazy`]); never waits for the
    /// connection to open.
    Lazy,
    /// Now, opening a missing connection first on this thread ([`Van::send_opened`]).
    Opened,
    /// Again, as it was sent (the resender): never waits for the connection.
    Resend,
}

/// How many times the resender resends one message before giving up.
pub const MAX_RESENDS: u32 = 10;
/// The period of the van's tick ([`Van::tick`]: the resender, the scheduler's
/// timeouts); the heartbeat thread wakes at it too.
pub const TICK_EVERY: Duration = Duration::from_millis(20);

/// The van of one process. Create with [`Van::new`], then [`Van::start`].
pub struct Van {
    cfg: Config,
    transport: Arc<dyn Transport>,
    me: RwLock<Node>,
    table: RwLock<Vec<Node>>,
    ready: Mutex<Option<Result<(), String>>>,
    ready_cv: Condvar,
    timestamp: AtomicI32,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
    resender: Option<Mutex<Resender<Message>>>,
    sched: Option<Mutex<SchedulerCore>>,
    handler: RwLock<Option<Weak<dyn VanHandler>>>,
    clock: Arc<dyn Clock>,
    last_from_scheduler: AtomicU64,
    peers: RwLock<Peers>,
    fo: Failover,
    heard_from_scheduler: AtomicBool,
    /// A message from a psrs scheduler (one with an incarnation) arrived.
    heard_psrs_scheduler: AtomicBool,
    welcomed: Mutex<Vec<i32>>,
    goodbye: Mutex<bool>,
    goodbye_cv: Condvar,
    /// The epoch stamped on the last node table (or table notice) this node took from
    /// the scheduler: a scheduler taking over sends every node the table under its new
    /// epoch, and starts its barrier counts afresh (see [`Van::scheduler_generation`]).
    table_epoch: Mutex<Epoch>,
    /// Data messages from processes this one cannot answer yet (see `Van::waits`),
    /// with the fingerprint of the certificate of the link each came on, replayed
    /// when a table or connection arrives.
    unconnected: Mutex<std::collections::VecDeque<(Message, Option<u64>)>>,
    /// Node table changes that arrived before this node's own table, with the state
    /// they were decided on, taken after it.
    early: Mutex<Vec<(TableVersion, Vec<Node>)>>,
    /// Per-message authorization's state ([`crate::van::authz`]).
    authz: authorize::AuthzState,
    /// Ids whose process is a ps-lite one (see [`Van::is_pslite`]).
    pslite_ids: RwLock<std::collections::HashSet<i32>>,
    /// Work run at every tick after the van's own ([`Van::on_tick`]).
    tick_hooks: Mutex<Vec<TickHook>>,
    /// Traffic counters.
    pub stats: VanStats,
}

/// Work an application runs at every tick of the van ([`Van::on_tick`]).
pub type TickHook = Arc<dyn Fn(u64) + Send + Sync>;

impl Van {
    /// A van for `cfg` over `transport`; nothing is bound until [`Van::start`].
    pub fn new(cfg: Config, transport: Arc<dyn Transport>) -> Arc<Van> {
        Van::with_clock(cfg, transport, Arc::new(WallClock::new()), rand::random::<u64>() | 1)
    }

    /// A van as [`Van::new`] makes it, reading `clock`, for process `incarnation`
    /// (odd, unique per process): a simulator's van.
    pub fn with_clock(cfg: Config, transport: Arc<dyn Transport>, clock: Arc<dyn Clock>, incarnation: u64) -> Arc<Van> {
        let me = Node {
            role: cfg.role,
            id: if cfg.role == Role::Scheduler {
                SCHEDULER
            } else {
                EMPTY_ID
            },
            hostname: cfg.node_host.clone(),
            port: if cfg.role == Role::Scheduler {
                cfg.root_port
            } else {
                cfg.port
            },
            is_recovery: false,
            incarnation,
            cert: transport.fingerprint(),
        };
        let sched = (cfg.role == Role::Scheduler).then(|| {
            Mutex::new({
                let mut core = SchedulerCore::new(
                    cfg.num_servers,
                    cfg.num_workers,
                    me.clone(),
                    cfg.heartbeat_timeout.as_millis() as u64,
                );
                core.set_elastic_workers(cfg.elastic_workers);
                core
            })
        });
        let resender = cfg
            .resend_timeout
            .map(|t| Mutex::new(Resender::new(t.as_millis() as u64, MAX_RESENDS)));
        Arc::new(Van {
            fo: Failover::new(&cfg, 0),
            cfg,
            me: RwLock::new(me),
            table: RwLock::new(Vec::new()),
            ready: Mutex::new(None),
            ready_cv: Condvar::new(),
            timestamp: AtomicI32::new(0),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            resender,
            sched,
            handler: RwLock::new(None),
            clock,
            last_from_scheduler: AtomicU64::new(0),
            peers: RwLock::new(Peers::new()),
            heard_from_scheduler: AtomicBool::new(false),
            heard_psrs_scheduler: AtomicBool::new(false),
            table_epoch: Mutex::default(),
            unconnected: Mutex::default(),
            early: Mutex::default(),
            authz: authorize::AuthzState::default(),
            pslite_ids: RwLock::default(),
            welcomed: Mutex::new(Vec::new()),
            goodbye: Mutex::new(false),
            goodbye_cv: Condvar::new(),
            tick_hooks: Mutex::default(),
            stats: VanStats {
                shm: transport.shm_stats().unwrap_or_default(),
                ..VanStats::default()
            },
            transport,
        })
    }

    /// True if `n` is a ps-lite process, on a transport that can talk to one (its table
    /// entry has no incarnation): it gets none of psrs's extras (refusals, welcomes,
    /// resends, acknowledgements).
    pub(super) fn is_pslite(&self, n: &Node) -> bool {
        self.transport.speaks_pslite() && PeerKind::of(n) == PeerKind::PsLite
    }

    /// True if node `id` is a ps-lite process ([`Van::is_pslite`]).
    pub fn is_pslite_id(&self, id: i32) -> bool {
        self.transport.speaks_pslite() && self.pslite_ids.read().contains(&id)
    }

    /// Records what the process of table entry `n` is, for this van and its transport.
    pub(super) fn note_peer(&self, n: &Node) {
        let pslite = self.is_pslite(n);
        let known = self.pslite_ids.read().contains(&n.id);
        if pslite != known {
            let mut ids = self.pslite_ids.write();
            if pslite {
                ids.insert(n.id);
            } else {
                ids.remove(&n.id);
            }
        }
        let kind = if pslite { PeerKind::PsLite } else { PeerKind::Psrs };
        self.transport.set_peer_kind(n.id, kind);
    }

    /// Sets the layer above that receives data and events.
    pub fn set_handler(&self, h: Weak<dyn VanHandler>) {
        *self.handler.write() = Some(h);
    }

    fn handler(&self) -> Option<Arc<dyn VanHandler>> {
        self.handler.read().as_ref().and_then(|w| w.upgrade())
    }

    /// The configuration the van was made with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// This node (its id is set once the scheduler assigned it).
    pub fn my_node(&self) -> Node {
        self.me.read().clone()
    }

    /// The node table as last received (scheduler first).
    pub fn nodes(&self) -> Vec<Node> {
        self.table.read().clone()
    }

    /// Milliseconds since the van was created (its [`Clock`]).
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// A fresh timestamp for a control message.
    pub fn next_timestamp(&self) -> i32 {
        self.timestamp.fetch_add(1, Ordering::Relaxed)
    }

    /// The incarnation of the scheduler in the node table (changes when a restarted
    /// scheduler sends a new table; 0 before the first table).
    pub fn scheduler_incarnation(&self) -> u64 {
        self.table
            .read()
            .iter()
            .find(|n| n.id == SCHEDULER)
            .map_or(0, |n| n.incarnation)
    }

    /// What the scheduler's barrier counts belong to: the scheduler's process (its
    /// incarnation in the node table) and the epoch its last table came under. Either
    /// changes when a scheduler took over with counts started afresh: a restarted one,
    /// a standby, or this same process again under a new term (it lost its lease or
    /// its lock and won it back, dropping what it held). A node waiting at a barrier
    /// asks again when it changes.
    pub fn scheduler_generation(&self) -> (u64, Epoch) {
        (self.scheduler_incarnation(), *self.table_epoch.lock())
    }

    /// Milliseconds since the scheduler was last heard from (non-schedulers).
    pub fn scheduler_silence_ms(&self) -> u64 {
        self.now_ms()
            .saturating_sub(self.last_from_scheduler.load(Ordering::Relaxed))
    }

    /// The scheduler's heartbeat view: `(id, ms since last heartbeat or None if dead)`.
    pub fn heartbeat_table(&self) -> Vec<(i32, Option<u64>)> {
        let Some(s) = &self.sched else {
            return Vec::new();
        };
        let s = s.lock();
        let now = self.now_ms();
        s.membership()
            .table()
            .iter()
            .filter(|n| n.id != SCHEDULER)
            .map(|n| (n.id, s.liveness().silence_ms(n.id, now)))
            .collect()
    }

    /// Sends `msg` to `msg.meta.recver`, filling in the sender; tracked by the
    /// resender when it is on. Returns the bytes sent (0 for a message the resender
    /// tracks whose link broke: it is sent again, not failed). Fails if the receiver is
    /// unknown (`NotConnected`), or the link broke and no resender tracks it.
    /// No message waits for its link's connection to open (it waits in the link's
    /// queue instead: [`crate::van::Transport::send_nowait`]): no thread stalls on a
    /// peer that is cut off, and a failed connection loses the message as a failed
    /// write does.
    pub fn send(&self, msg: Message) -> io::Result<usize> {
        self.send_with(msg, Pace::Prompt)
    }

    /// Like [`Van::send`], but the message may wait in its link's queue until
    /// [`Van::flush_link`], this thread's next wait, or the link's next prompt send
    /// ([`crate::van::Transport::send_lazy`]).
    pub fn send_lazy(&self, msg: Message) -> io::Result<usize> {
        self.send_with(msg, Pace::Lazy)
    }

    /// Like [`Van::send`], but a missing connection is opened first, on this thread,
    /// so that a failure to open it is this call's error (joining: a refusal of this
    /// node's credentials ends the join).
    pub(super) fn send_opened(&self, msg: Message) -> io::Result<usize> {
        self.send_with(msg, Pace::Opened)
    }

    fn send_with(&self, mut msg: Message, pace: Pace) -> io::Result<usize> {
        {
            let me = self.me.read();
            if obsolete_registration(&msg, me.id) {
                // built before the scheduler's table gave this node its id, sent after:
                // stamped with the id, it would register a node without one in a
                // member's name (a standby would refuse it as forged)
                log::debug!(
                    "not sent: a registration without an id, now that this node is {}",
                    me.id
                );
                return Ok(0);
            }
            msg.meta.sender = me.id;
            msg.meta.incarnation = me.incarnation;
        }
        let Some(msg) = self.fo.outgoing(self, msg) else {
            // held by the active scheduler, or dropped (see `Failover::outgoing`)
            return Ok(0);
        };
        self.note_request(&msg.meta);
        self.send_tracked(msg, pace)
    }

    /// Sends `msg`, stamped by the failover machine already (its own messages, the
    /// acts it held), as it is.
    pub(super) fn send_as_is(&self, mut msg: Message) -> io::Result<usize> {
        {
            let me = self.me.read();
            msg.meta.sender = me.id;
            msg.meta.incarnation = me.incarnation;
        }
        self.send_tracked(msg, Pace::Prompt)
    }

    fn send_tracked(&self, msg: Message, pace: Pace) -> io::Result<usize> {
        let mut tracked = false;
        if let Some(r) = &self.resender {
            if let Some(sig) = self.tracked_as(&msg) {
                r.lock().on_send(sig, msg.clone(), self.now_ms());
                tracked = true;
            }
        }
        match self.send_frames(&msg, pace) {
            // the resender has it and sends it again: a broken link loses it like a
            // lossy network would, it does not fail the send (a link to a peer that
            // just died fails on TCP where ZMQ would have queued the message)
            Err(e) if tracked && e.kind() != io::ErrorKind::NotConnected => {
                log::debug!("{msg} not written ({e}); the resender sends it again");
                Ok(0)
            }
            r => r,
        }
    }

    /// The signature the resender tracks `msg` under, None if untracked. A ps-lite
    /// process acknowledges by ps-lite's signature (with its own `PS_RESEND` on, as it
    /// must be when psrs's is), and only once started: only data messages to it are
    /// tracked.
    fn tracked_as(&self, msg: &Message) -> Option<u64> {
        let m = &msg.meta;
        if !needs_ack(m) {
            return None;
        }
        if !self.is_pslite_id(m.recver) {
            return Some(signature(m));
        }
        (!m.is_control()).then(|| pslite_signature(m.app_id, m.sender, m.recver, m.timestamp, m.request))
    }

    /// Writes what waits in the link to `peer` (see [`Van::send_lazy`]).
    pub fn flush_link(&self, peer: i32) {
        self.transport.flush_link(peer);
    }

    /// Sends `msg` as it is (a resend, a refusal): never waits for a connection.
    fn send_raw(&self, msg: &Message) -> io::Result<usize> {
        self.send_frames(msg, Pace::Resend)
    }

    fn send_frames(&self, msg: &Message, pace: Pace) -> io::Result<usize> {
        let frames = self.transport.encode(msg);
        log::trace!("send {msg}");
        let to = msg.meta.recver;
        let n = match pace {
            Pace::Lazy => self.transport.send_lazy(to, frames)?,
            Pace::Opened => self.transport.send(to, frames)?,
            // the candidates' own messages (the state stream, beats, votes): a later
            // one supersedes a dropped one, and no thread may wait for a candidate
            // that stopped taking bytes (the active scheduler's master would stall)
            Pace::Prompt | Pace::Resend if is_candidate_key(to) => self.transport.send_if_room(to, frames)?,
            Pace::Prompt | Pace::Resend => self.transport.send_nowait(to, frames)?,
        };
        self.stats.sent_msgs.fetch_add(1, Ordering::Relaxed);
        self.stats.sent_bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    /// Stops the threads and closes the sockets.
    pub fn stop(&self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        self.transport.close();
        log::debug!("{} stopped", self.my_node());
    }
}

/// Whether `msg` is an ADD_NODE registering this node without an id while this node,
/// of id `me`, has one: a join attempt overtaken by the table that answered it.
fn obsolete_registration(msg: &Message, me: i32) -> bool {
    me != EMPTY_ID
        && msg.meta.control.cmd == Command::AddNode
        && matches!(msg.meta.control.nodes.as_slice(), [n] if n.id == EMPTY_ID)
}
