//! The van's threads and sockets: a thin shell that feeds received messages to the
//! protocol state machines and carries out what they decide.

use super::transport::Transport;
use super::VanHandler;
use crate::config::Config;
use crate::message::{Command, Control, Message, Meta};
use crate::node::{Node, Role, EMPTY_ID, SCHEDULER};
use crate::protocol::peers::Peers;
use crate::protocol::resender::{needs_ack, signature, Incoming, Resender};
use crate::protocol::scheduler::{Action, SchedulerCore};
use parking_lot::{Condvar, Mutex, RwLock};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod failover;
mod failover_state;
use failover_state::Failover;
mod leased;
mod peers;
mod start;

/// How many times the resender resends one message before giving up.
pub const MAX_RESENDS: u32 = 10;
const POLL: Duration = Duration::from_millis(20);

/// Traffic counters of one van.
#[derive(Debug, Default)]
pub struct VanStats {
    /// Messages sent.
    pub sent_msgs: AtomicU64,
    /// Bytes sent (header and data).
    pub sent_bytes: AtomicU64,
    /// Messages received and decoded.
    pub recv_msgs: AtomicU64,
    /// Bytes received.
    pub recv_bytes: AtomicU64,
    /// Received messages that did not decode (dropped).
    pub malformed: AtomicU64,
    /// Data messages dropped by `PS_DROP_MSG`.
    pub injected_drops: AtomicU64,
    /// Duplicates dropped by the resender.
    pub duplicates: AtomicU64,
    /// Messages resent.
    pub resent: AtomicU64,
    /// Messages dropped as meant for an earlier process of this node's id, or sent by
    /// a process declared dead or replaced.
    pub stale: AtomicU64,
}

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
    epoch: Instant,
    last_from_scheduler: AtomicU64,
    peers: RwLock<Peers>,
    fo: Failover,
    heard_from_scheduler: AtomicBool,
    welcomed: Mutex<Vec<i32>>,
    /// Traffic counters.
    pub stats: VanStats,
}

fn control(recver: i32, cmd: Command) -> Message {
    Message {
        meta: Meta {
            recver,
            control: Control {
                cmd,
                ..Default::default()
            },
            ..Default::default()
        },
        data: Vec::new(),
    }
}

impl Van {
    /// A van for `cfg` over `transport`; nothing is bound until [`Van::start`].
    pub fn new(cfg: Config, transport: Arc<dyn Transport>) -> Arc<Van> {
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
            incarnation: rand::random::<u64>() | 1,
        };
        let sched = (cfg.role == Role::Scheduler).then(|| {
            Mutex::new(SchedulerCore::new(
                cfg.num_servers,
                cfg.num_workers,
                me.clone(),
                cfg.heartbeat_timeout.as_millis() as u64,
            ))
        });
        let resender = cfg
            .resend_timeout
            .map(|t| Mutex::new(Resender::new(t.as_millis() as u64, MAX_RESENDS)));
        Arc::new(Van {
            fo: Failover::new(&cfg, 0),
            cfg,
            transport,
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
            epoch: Instant::now(),
            last_from_scheduler: AtomicU64::new(0),
            peers: RwLock::new(Peers::new()),
            heard_from_scheduler: AtomicBool::new(false),
            welcomed: Mutex::new(Vec::new()),
            stats: VanStats::default(),
        })
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

    /// Milliseconds since the van was created.
    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
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
    /// resender when it is on. Returns the bytes sent.
    pub fn send(&self, mut msg: Message) -> io::Result<usize> {
        {
            let me = self.me.read();
            msg.meta.sender = me.id;
            msg.meta.incarnation = me.incarnation;
        }
        self.stamp(&mut msg);
        if let Some(r) = &self.resender {
            if needs_ack(&msg.meta) {
                r.lock().on_send(signature(&msg.meta), msg.clone(), self.now_ms());
            }
        }
        self.send_raw(&msg)
    }

    fn send_raw(&self, msg: &Message) -> io::Result<usize> {
        let mut frames = Vec::with_capacity(msg.data.len() + 1);
        frames.push(msg.encode_meta());
        frames.extend(msg.data.iter().cloned());
        log::trace!("send {msg}");
        let n = self.transport.send(msg.meta.recver, frames)?;
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

    /// Sends heartbeats; when the scheduler has been silent for longer than the
    /// heartbeat timeout (it died and may be restarting), re-registers with ADD_NODE
    /// carrying this node's id, so a restarted scheduler rebuilds the same table.
    fn heartbeat(self: Arc<Self>) {
        let interval = self.cfg.heartbeat_interval;
        let timeout = self.cfg.heartbeat_timeout.as_millis() as u64;
        let mut next = Instant::now();
        let mut was_lost = false;
        while !self.stop.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                let silence = self.scheduler_silence_ms();
                let lost = timeout > 0 && self.scheduler_lost();
                if lost {
                    if !was_lost {
                        log::warn!(
                            "no word from the scheduler for {silence} ms; re-registering as {}",
                            self.my_node()
                        );
                        was_lost = true;
                    }
                    let mut m = control(SCHEDULER, Command::AddNode);
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
                let mut m = control(SCHEDULER, Command::Heartbeat);
                m.meta.timestamp = self.next_timestamp();
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

    fn ticking(self: Arc<Self>) {
        while !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(POLL);
            self.tick(self.now_ms());
        }
    }

    fn tick(&self, now: u64) {
        if let Some(r) = &self.resender {
            let peers = self.peers.read().clone();
            let (resend, give_up) = r.lock().due(now, |m| peers.is_dead(m.meta.recver));
            for m in resend {
                self.stats.resent.fetch_add(1, Ordering::Relaxed);
                log::debug!("resend {m}");
                if let Err(e) = self.send_raw(&m) {
                    log::debug!("resend of {m} failed: {e}");
                }
            }
            for m in give_up {
                log::warn!("gave up on {m} after {MAX_RESENDS} resends");
            }
        }
        if let Some(s) = &self.sched {
            if self.is_active_scheduler() {
                let actions = s.lock().tick(now);
                self.execute(actions);
            }
            self.failover_tick(now);
        }
    }

    fn on_frames(&self, frames: Vec<bytes::Bytes>) {
        failover::IN_RECV.with(|r| r.set(true));
        let bytes: usize = frames.iter().map(|f| f.len()).sum();
        let msg = match Message::decode(frames) {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed.fetch_add(1, Ordering::Relaxed);
                log::warn!("dropped a malformed message ({bytes} B): {e}");
                return;
            }
        };
        self.stats.recv_msgs.fetch_add(1, Ordering::Relaxed);
        self.stats.recv_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        log::trace!("recv {msg}");
        if !self.screen(&msg) || !self.admit(&msg) {
            return;
        }
        if msg.meta.sender == SCHEDULER {
            self.last_from_scheduler.store(self.now_ms(), Ordering::Relaxed);
            self.heard_from_scheduler.store(true, Ordering::Relaxed);
        }
        if !msg.meta.is_control()
            && self.cfg.drop_msg_percent > 0
            && rand::random::<u8>() % 100 < self.cfg.drop_msg_percent
        {
            self.stats.injected_drops.fetch_add(1, Ordering::Relaxed);
            log::debug!("PS_DROP_MSG dropped {msg}");
            return;
        }
        if let Some(r) = &self.resender {
            let verdict = r.lock().on_receive(&msg.meta, self.now_ms());
            match verdict {
                Incoming::Ack => return,
                Incoming::Duplicate(sig) => {
                    self.stats.duplicates.fetch_add(1, Ordering::Relaxed);
                    self.ack(&msg, sig);
                    return;
                }
                Incoming::Fresh(sig) => self.ack(&msg, sig),
                Incoming::Untracked => {}
            }
        }
        self.process(msg);
    }

    fn ack(&self, msg: &Message, sig: u64) {
        if msg.meta.sender == EMPTY_ID {
            return;
        }
        let mut a = control(msg.meta.sender, Command::Ack);
        a.meta.recver_incarnation = msg.meta.incarnation;
        a.meta.control.msg_sig = sig;
        a.meta.timestamp = self.next_timestamp();
        if let Err(e) = self.send(a) {
            log::debug!("ack to {} not sent: {e}", msg.meta.sender);
        }
    }

    fn process(&self, msg: Message) {
        let cmd = msg.meta.control.cmd;
        match cmd {
            Command::Empty => match self.handler() {
                Some(h) => h.on_data(msg),
                None => log::warn!("no handler for {msg}; dropped"),
            },
            Command::Terminate => log::debug!("TERMINATE from {}", msg.meta.sender),
            Command::AddNode => self.on_add_node(msg),
            Command::Barrier => {
                if msg.meta.request {
                    if let Some(s) = &self.sched {
                        let actions = s.lock().on_barrier(msg.meta.control.barrier_group, msg.meta.sender);
                        self.execute(actions);
                    }
                } else if let Some(h) = self.handler() {
                    h.on_barrier_released(msg.meta.control.barrier_group);
                }
            }
            Command::Heartbeat => {
                if let Some(s) = &self.sched {
                    let actions = s
                        .lock()
                        .on_heartbeat(msg.meta.sender, msg.meta.incarnation, self.now_ms());
                    self.execute(actions);
                }
            }
            Command::NodeDead => {
                let ids = self.on_death_notice(&msg.meta.control.nodes);
                if ids.is_empty() {
                    return;
                }
                log::info!("scheduler declared dead: {ids:?}");
                if let Some(h) = self.handler() {
                    h.on_nodes_dead(&ids);
                }
            }
            Command::Ack | Command::Sync | Command::PeerBeat => {}
        }
    }

    fn on_add_node(&self, msg: Message) {
        if let Some(s) = &self.sched {
            if let Some(node) = msg.meta.control.nodes.into_iter().next() {
                let actions = s.lock().on_add_node(node, self.now_ms());
                self.execute(actions);
            }
            return;
        }
        if !msg.meta.control.reason.is_empty() {
            if self.me.read().id != EMPTY_ID {
                // registering again (the scheduler was silent), refused
                return self.evicted(&format!("the scheduler refused this node: {}", msg.meta.control.reason));
            }
            *self.ready.lock() = Some(Err(msg.meta.control.reason.clone()));
            self.ready_cv.notify_all();
            return;
        }
        let nodes = msg.meta.control.nodes;
        {
            let mut me = self.me.write();
            if me.id == EMPTY_ID {
                let found = nodes
                    .iter()
                    .find(|n| n.hostname == me.hostname && n.port == me.port && n.incarnation == me.incarnation);
                match found {
                    Some(n) => {
                        me.id = n.id;
                        me.is_recovery = n.is_recovery;
                    }
                    None => return,
                }
            }
        }
        self.merge_table(nodes);
        let mut ready = self.ready.lock();
        if ready.is_none() {
            *ready = Some(Ok(()));
            self.ready_cv.notify_all();
        }
    }

    /// Merges `nodes` into the table, (re)connecting to nodes that are new or whose
    /// process changed.
    fn merge_table(&self, nodes: Vec<Node>) {
        let revived = self.peers_from_table(&nodes);
        let mut table = self.table.write();
        for n in nodes {
            let known = table.iter().position(|t| t.id == n.id);
            let changed = known.is_none_or(|i| table[i] != n);
            if n.id != SCHEDULER && (changed || !self.transport.is_connected(n.id)) {
                if let Err(e) = self.transport.connect(n.id, &n.hostname, n.port) {
                    log::warn!("cannot connect to {n}: {e}");
                }
            }
            match known {
                Some(i) => table[i] = n,
                None => table.push(n),
            }
        }
        table.sort_by_key(|n| n.id);
        let snapshot = table.clone();
        drop(table);
        if let Some(h) = self.handler() {
            h.on_nodes_changed(&snapshot, &revived);
        }
    }

    fn execute(&self, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Connect(n) => {
                    if let Err(e) = self.transport.connect(n.id, &n.hostname, n.port) {
                        log::warn!("cannot connect to {n}: {e}");
                    }
                }
                Action::Send(mut m) => {
                    m.meta.timestamp = self.next_timestamp();
                    if let Err(e) = self.send(m) {
                        log::warn!("control message not sent: {e}");
                    }
                }
                Action::Reject { node, reason } => {
                    log::warn!("refused {node}: {reason}");
                    let key = -1 - node.port as i32;
                    if self.transport.connect(key, &node.hostname, node.port).is_ok() {
                        let mut m = control(key, Command::AddNode);
                        m.meta.control.reason = reason;
                        self.stamp(&mut m);
                        let _ = self.send_raw(&m);
                    }
                }
                Action::Welcome(n) => self.welcome(&n),
                Action::Table(t) => {
                    self.forget_welcomed();
                    let revived = self.peers_from_table(&t);
                    if t.first().is_some_and(|s| s.id == SCHEDULER && s.is_recovery) {
                        self.me.write().is_recovery = true;
                    }
                    log::info!(
                        "node table: {}",
                        t.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
                    );
                    *self.table.write() = t.clone();
                    let mut ready = self.ready.lock();
                    if ready.is_none() {
                        *ready = Some(Ok(()));
                        self.ready_cv.notify_all();
                    }
                    drop(ready);
                    if let Some(h) = self.handler() {
                        h.on_nodes_changed(&t, &revived);
                    }
                    self.replicate_core();
                }
                Action::Dead(ids) => {
                    let ids = self.on_declared_dead(&ids);
                    log::warn!(
                        "declared dead (no heartbeat for {:?}): {ids:?}",
                        self.cfg.heartbeat_timeout
                    );
                    if let Some(h) = self.handler() {
                        h.on_nodes_dead(&ids);
                    }
                    self.replicate_core();
                }
            }
        }
    }
}
