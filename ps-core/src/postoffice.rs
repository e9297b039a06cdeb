//! The postoffice: one per node (no process-wide global). It owns the van, knows the node ids and groups,
//! runs start / barrier / finalize, routes data messages to registered customers, keeps
//! the set of dead nodes and runs exit callbacks.

use crate::config::Config;
use crate::error::PostofficeError;
use crate::held::Held;
use crate::message::{Command, Control, Message, Meta, RELEASE_ALL};
use crate::node::{group_members, Node, Role, SCHEDULER};
use crate::protocol::barrier_ask::BarrierAsk;
use crate::protocol::course::{Course, Stage};
use crate::van::{Transport, Van, VanHandler};
use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex, RwLock};
use rustc_hash::FxHashMap;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

mod course;

/// A barrier request in flight, with the scheduler it was made of: that scheduler's
/// process incarnation and the epoch it acts under.
pub type Asked = BarrierAsk<(u64, crate::failover::Epoch)>;

/// How long a data message waits for its customer to register before it is dropped.
/// Messages can legitimately arrive first: a peer released from the start barrier
/// earlier may send before this node has created its customers.
const CUSTOMER_WAIT: Duration = Duration::from_secs(30);

/// How long a worker of a ps-lite scheduler waits after the start barrier before it
/// may send. ps-lite's scheduler releases the workers from that barrier before the
/// servers, and a ps-lite server that gets a request before its own release stops
/// (its receiving thread waits 5 s for a customer that only the release it holds back
/// lets it create). ps-lite's own workers rarely hit this: their first request comes
/// later than a psrs worker's.
pub const PSLITE_SERVERS_GRACE: Duration = Duration::from_millis(200);

/// Exit status of a process the scheduler declared dead (or refused when it registered
/// again, e.g. after a network partition healed): its tasks went to others and its id
/// may be a replacement's, so it stops instead of sending stale work. The postoffice
/// reports the eviction ([`Postoffice::on_evicted`]); the program that owns the
/// process (the `psrs` binary, the Python package) ends it with this status.
pub const EXIT_EVICTED: i32 = 3;

/// Where a customer's messages go.
#[derive(Clone)]
pub enum Route {
    /// Into the customer's queue, drained by its own thread.
    Queue(Sender<Message>),
    /// Straight to a handle, on the thread that received the message (no hand-off).
    Inline(Arc<dyn Fn(Message) + Send + Sync>),
}

impl Route {
    fn deliver(&self, msg: Message) {
        match self {
            Route::Queue(q) => {
                if q.send(msg).is_err() {
                    log::warn!("customer is gone; message dropped");
                }
            }
            Route::Inline(f) => f(msg),
        }
    }
}

/// Customer routes, and messages held for customers not registered yet.
#[derive(Default)]
struct Customers {
    /// (Fx: looked up for every message; the keys are this process's own)
    routes: FxHashMap<(i32, i32), Route>,
    held: Held,
    /// The next request timestamp of each closed customer: a new customer of the same
    /// ids goes on from there. Timestamps restarting at 0 would repeat the signatures
    /// of the old customer's messages, which the receivers' resenders remember (for
    /// about a minute) and drop as duplicates: a worker that comes back to a job it
    /// worked on got no answer to its first requests.
    next_ts: FxHashMap<(i32, i32), i32>,
}

type ExitCallback = Box<dyn FnOnce() + Send>;
type DeadCallback = Arc<dyn Fn(&[i32]) + Send + Sync>;
type EvictedCallback = Box<dyn Fn(&str) + Send + Sync>;
type TookOverCallback = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// The per-process postoffice.
pub struct Postoffice {
    cfg: Config,
    van: Arc<Van>,
    customers: Mutex<Customers>,
    barrier_done: Mutex<HashMap<i32, bool>>,
    barrier_cv: Condvar,
    course: Mutex<Course<Asked>>,
    dead: RwLock<BTreeSet<i32>>,
    catching_up: RwLock<BTreeSet<i32>>,
    left: RwLock<BTreeSet<i32>>,
    dead_callbacks: Mutex<Vec<DeadCallback>>,
    exit_callbacks: Mutex<Vec<ExitCallback>>,
    evicted_callback: Mutex<Option<EvictedCallback>>,
    took_over_callbacks: Mutex<Vec<TookOverCallback>>,
}

impl Postoffice {
    /// A postoffice for `cfg` over the transport `cfg.van_type` names. There is no
    /// process-wide global: the caller passes the `Arc` to whatever needs it (a
    /// process may run several postoffices, e.g. in tests). An invalid configuration
    /// is [`PostofficeError::Config`].
    pub fn new(cfg: Config) -> Result<Arc<Postoffice>, PostofficeError> {
        cfg.validate()?;
        let transport = crate::van::factory::create(
            &cfg.van_type,
            cfg.role,
            &cfg.security,
            cfg.spin,
            &cfg.shm,
            cfg.local_socket,
        )?;
        cfg.security.log_once();
        Ok(Postoffice::with_transport(cfg, transport))
    }

    /// A postoffice over any transport.
    pub fn with_transport(cfg: Config, transport: Arc<dyn Transport>) -> Arc<Postoffice> {
        Postoffice::with_van(cfg.clone(), Van::new(cfg, transport))
    }

    /// A postoffice over `van` (made for `cfg`; a simulator's, with its own clock:
    /// [`Van::with_clock`]).
    pub fn with_van(cfg: Config, van: Arc<Van>) -> Arc<Postoffice> {
        let po = Arc::new(Postoffice {
            cfg,
            van,
            customers: Mutex::new(Customers::default()),
            barrier_done: Mutex::new(HashMap::new()),
            barrier_cv: Condvar::new(),
            course: Mutex::new(Course::new(true)),
            dead: RwLock::new(BTreeSet::new()),
            catching_up: RwLock::new(BTreeSet::new()),
            left: RwLock::new(BTreeSet::new()),
            dead_callbacks: Mutex::new(Vec::new()),
            exit_callbacks: Mutex::new(Vec::new()),
            evicted_callback: Mutex::new(None),
            took_over_callbacks: Mutex::new(Vec::new()),
        });
        let weak: std::sync::Weak<dyn VanHandler> = Arc::downgrade(&po) as _;
        po.van.set_handler(weak);
        po
    }

    /// Joins the cluster: binds, registers with the scheduler and waits for the node
    /// table. With `do_barrier`, then waits until every node has started (a node that
    /// replaced a dead one skips this barrier: the others passed it long ago). The
    /// steps of its course ([`Postoffice::step_course`]), waiting between them. A
    /// failed join is [`PostofficeError::Van`].
    pub fn start(&self, do_barrier: bool) -> Result<(), PostofficeError> {
        *self.course.lock() = Course::new(do_barrier);
        self.van.start(self.cfg.join_timeout)?;
        self.wait_course(Stage::Running);
        let barrier = self.course.lock().passed_start_barrier();
        if barrier && self.cfg.role == Role::Worker && self.van.is_pslite_id(SCHEDULER) {
            std::thread::sleep(PSLITE_SERVERS_GRACE);
        }
        Ok(())
    }

    /// True when [`Postoffice::start`] waits at the start barrier once it has its
    /// node table: not for a process that replaced a dead one (it joins a job that
    /// runs).
    pub fn waits_at_start(&self) -> bool {
        !self.is_recovery()
    }

    /// Waits at a barrier with every live node of `group` (the steps of
    /// [`Postoffice::barrier_begin`] and [`Postoffice::barrier_poll`], waiting
    /// between them).
    pub fn barrier(&self, group: i32) {
        let Some(mut ask) = self.barrier_begin(group) else {
            return;
        };
        self.wait_steps(group, || self.barrier_poll(&mut ask));
    }

    /// Calls `step` until it says done, waiting up to 200 ms between calls unless
    /// `group`'s barrier was released meanwhile (what this thread corked is sent
    /// before each wait).
    fn wait_steps(&self, group: i32, mut step: impl FnMut() -> bool) {
        while !step() {
            crate::van::cork::flush();
            let mut done = self.barrier_done.lock();
            if done.get(&group) != Some(&true) {
                self.barrier_cv.wait_for(&mut done, Duration::from_millis(200));
            }
        }
    }

    /// Enters `group`'s barrier without waiting: the request goes to the scheduler
    /// (one that could not be sent is sent again at each poll); None when there is
    /// nothing to wait for (a group of one). Then [`Postoffice::barrier_poll`] until
    /// it says released.
    pub fn barrier_begin(&self, group: i32) -> Option<Asked> {
        if self.node_ids(group).len() <= 1 {
            return None;
        }
        self.barrier_done.lock().insert(group, false);
        let mut ask = BarrierAsk::new(group, self.barrier_scheduler());
        self.send_barrier_request(&mut ask);
        Some(ask)
    }

    /// True once the barrier `ask` waits at was released (it is left then). A
    /// scheduler that restarted, or that acts anew, lost the barrier counts: while
    /// waiting, the request is made again of the one acting now.
    pub fn barrier_poll(&self, ask: &mut Asked) -> bool {
        let group = ask.group();
        if self.barrier_done.lock().get(&group) != Some(&false) {
            self.barrier_done.lock().remove(&group);
            return true;
        }
        if ask.again(self.barrier_scheduler()) {
            if ask.failed_sends() == 0 {
                log::info!("repeating the barrier request for group {group}: another scheduler acts");
            }
            self.send_barrier_request(ask);
        }
        false
    }

    /// The scheduler a barrier request goes to, as [`BarrierAsk`] tells them apart:
    /// its process and the epoch it acts under.
    fn barrier_scheduler(&self) -> (u64, crate::failover::Epoch) {
        (self.van.scheduler_incarnation(), self.van.scheduler_epoch().0)
    }

    /// Sends `ask`'s request and records whether it left: the first failure of a run
    /// is logged as an error, the retries that follow (every poll) only at debug
    /// level, so a scheduler that refuses connections for good does not fill the log.
    fn send_barrier_request(&self, ask: &mut Asked) {
        let group = ask.group();
        let m = Message {
            meta: Meta {
                recver: SCHEDULER,
                request: true,
                timestamp: self.van.next_timestamp(),
                control: Control {
                    cmd: Command::Barrier,
                    barrier_group: group,
                    ..Default::default()
                },
                ..Default::default()
            },
            data: Vec::new(),
        };
        match self.van.send(m) {
            Ok(_) => ask.sent(),
            Err(e) if ask.unsent() == 1 => {
                log::error!("barrier request for group {group} not sent (sent again at each poll until it is): {e}")
            }
            Err(e) => log::debug!("barrier request for group {group} not sent again: {e}"),
        }
    }

    /// Leaves the cluster: with `do_barrier`, waits until every live node finalizes
    /// (the end of its course: [`Postoffice::finish_course`]), then stops the van and
    /// runs the exit callbacks (last registered first).
    pub fn finalize(&self, do_barrier: bool) {
        self.finish_course(do_barrier);
        self.wait_course(Stage::Done);
        self.van.stop();
        let st = &self.van.stats;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        log::info!(
            "{} traffic: sent {} msgs {} B, received {} msgs {} B, malformed {}, injected drops {}, duplicates {}, resent {}, {}",
            self.van.my_node(),
            get(&st.sent_msgs),
            get(&st.sent_bytes),
            get(&st.recv_msgs),
            get(&st.recv_bytes),
            get(&st.malformed),
            get(&st.injected_drops),
            get(&st.duplicates),
            get(&st.resent),
            st.shm
        );
        let callbacks = std::mem::take(&mut *self.exit_callbacks.lock());
        for cb in callbacks.into_iter().rev() {
            cb();
        }
    }

    /// Leaves the cluster on purpose (an elastic worker's goodbye): the scheduler and
    /// every node count this node as gone, not dead, and no barrier waits for it. Then
    /// stops the van and runs the exit callbacks, without a finalize barrier. Fails if
    /// the scheduler does not answer within `timeout` (the van is stopped anyway).
    pub fn leave(&self, timeout: Duration) -> Result<(), PostofficeError> {
        let r = self.van.leave(timeout);
        self.finalize(false);
        Ok(r?)
    }

    /// Runs `cb` at [`Postoffice::finalize`].
    pub fn register_exit_callback(&self, cb: impl FnOnce() + Send + 'static) {
        self.exit_callbacks.lock().push(Box::new(cb));
    }

    /// Calls `cb` with the reason when the scheduler declares this process dead, or
    /// refuses it when it registers again: the process may not go on (its tasks went
    /// to others, its id to a replacement). The owner of the process decides what to
    /// do, normally to end it with [`EXIT_EVICTED`]; set it before
    /// [`Postoffice::start`]. Replaces an earlier `cb`.
    pub fn on_evicted(&self, cb: impl Fn(&str) + Send + Sync + 'static) {
        *self.evicted_callback.lock() = Some(Box::new(cb));
    }

    /// Calls `cb` with the ids of nodes the scheduler declares dead.
    pub fn on_node_dead(&self, cb: impl Fn(&[i32]) + Send + Sync + 'static) {
        self.dead_callbacks.lock().push(Arc::new(cb));
    }

    /// Registers a callback run (on the van's thread, before any node's message is
    /// taken again) each time this scheduler takes over as the active one, with the
    /// application's state the active one before it replicated (empty if none): a
    /// scheduler that acted before and won again resumes from it, not from its own.
    pub fn on_took_over(&self, cb: impl Fn(&[u8]) + Send + Sync + 'static) {
        self.took_over_callbacks.lock().push(Arc::new(cb));
    }

    /// Registers a customer's route; data for `(app_id, customer_id)` goes there,
    /// starting with any that arrived before it registered.
    /// [`PostofficeError::CustomerTaken`] if the pair is taken.
    pub fn add_customer(&self, app_id: i32, customer_id: i32, route: Route) -> Result<(), PostofficeError> {
        let key = (app_id, customer_id);
        let held = {
            let mut c = self.customers.lock();
            if c.routes.contains_key(&key) {
                return Err(PostofficeError::CustomerTaken { app_id, customer_id });
            }
            c.routes.insert(key, route.clone());
            c.held.take(key)
        };
        for m in held {
            route.deliver(m);
        }
        Ok(())
    }

    /// Unregisters a customer; its queue's sender is dropped.
    pub fn remove_customer(&self, app_id: i32, customer_id: i32) {
        self.customers.lock().routes.remove(&(app_id, customer_id));
    }

    /// Unregisters a customer whose next request timestamp is `next_ts`: the next
    /// customer of these ids starts there ([`Postoffice::first_timestamp`]).
    pub(crate) fn close_customer(&self, app_id: i32, customer_id: i32, next_ts: i32) {
        let mut c = self.customers.lock();
        c.routes.remove(&(app_id, customer_id));
        c.next_ts.insert((app_id, customer_id), next_ts);
    }

    /// The first request timestamp of a new customer of these ids: where the last
    /// closed one stopped, else 0.
    pub(crate) fn first_timestamp(&self, app_id: i32, customer_id: i32) -> i32 {
        self.customers
            .lock()
            .next_ts
            .get(&(app_id, customer_id))
            .copied()
            .unwrap_or(0)
    }

    /// The van.
    pub fn van(&self) -> &Arc<Van> {
        &self.van
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// This node's id (valid after start).
    pub fn my_id(&self) -> i32 {
        self.van.my_node().id
    }

    /// This node's role.
    pub fn role(&self) -> Role {
        self.cfg.role
    }

    /// True if this node took over a dead node's id.
    pub fn is_recovery(&self) -> bool {
        self.van.my_node().is_recovery
    }

    /// This node's rank among its role (0 for the scheduler).
    pub fn my_rank(&self) -> usize {
        crate::node::id_to_rank(self.my_id()).unwrap_or(0)
    }

    /// Number of servers.
    pub fn num_servers(&self) -> usize {
        self.cfg.num_servers
    }

    /// Number of worker ids: `DMLC_NUM_WORKER`, more once workers joined the running
    /// cluster (`PS_ELASTIC_WORKERS`; read from the node table).
    pub fn num_workers(&self) -> usize {
        let joined = self
            .van
            .nodes()
            .iter()
            .filter(|n| n.role == Role::Worker)
            .filter_map(|n| crate::node::id_to_rank(n.id))
            .map(|r| r + 1)
            .max()
            .unwrap_or(0);
        self.cfg.num_workers.max(joined)
    }

    /// The node ids a group id (or node id) stands for.
    pub fn node_ids(&self, group: i32) -> Vec<i32> {
        group_members(group, self.cfg.num_servers, self.num_workers())
    }

    /// Workers that left on their own (goodbye) and whose id no new worker took; they
    /// are among [`Postoffice::dead_nodes`] too (nothing waits for them).
    pub fn departed_nodes(&self) -> BTreeSet<i32> {
        self.left.read().clone()
    }

    /// Ids the scheduler declared dead, or that left (and not yet replaced).
    pub fn dead_nodes(&self) -> BTreeSet<i32> {
        self.dead.read().clone()
    }

    /// With `PS_REPLICAS`: the ids of servers that do not serve their key ranges —
    /// dead, or replacements still copying their ranges from a live replica (from
    /// the node table naming them until their rejoin notice).
    pub fn unavailable_servers(&self) -> BTreeSet<i32> {
        let mut out: BTreeSet<i32> = self.dead.read().clone();
        out.extend(self.catching_up.read().iter().copied());
        out
    }

    /// Server `id`, a replacement, copied its ranges and serves them again.
    pub fn mark_rejoined(&self, id: i32) {
        if self.catching_up.write().remove(&id) {
            log::info!("server {id} rejoined as a holder of its key ranges");
        }
    }

    /// The node table.
    pub fn nodes(&self) -> Vec<Node> {
        self.van.nodes()
    }
}

impl VanHandler for Postoffice {
    fn on_data(&self, msg: Message) {
        // ps-lite's servers (and scheduler) take a request for an app by the app's id
        // alone, so a ps-lite worker's customers (one per thread) share them
        let by_app = msg.meta.request && self.cfg.role != Role::Worker && self.van.is_pslite_id(msg.meta.sender);
        let customer = if by_app { msg.meta.app_id } else { msg.meta.customer_id };
        let key = (msg.meta.app_id, customer);
        let mut c = self.customers.lock();
        if !c.held.is_empty() {
            for (k, m) in c.held.expire(self.van.now_ms(), CUSTOMER_WAIT) {
                log::warn!(
                    "no customer {} of app {} within {CUSTOMER_WAIT:?}; dropped {m}",
                    k.1,
                    k.0
                );
            }
        }
        let most = self.cfg.security.limits.max_held_messages;
        if !c.routes.contains_key(&key) && c.held.len() >= most {
            // full: first drop what strangers (senders outside the node table) sent
            drop(c);
            let members: HashSet<i32> = self.van.nodes().iter().map(|n| n.id).collect();
            c = self.customers.lock();
            let n = c.held.drop_strangers(&members);
            if n > 0 {
                log::warn!("dropped {n} held messages from senders outside the node table");
            }
        }
        match c.routes.get(&key).cloned() {
            Some(route) => {
                drop(c);
                route.deliver(msg);
            }
            // A customer sends requests only once registered, so a response for one
            // this process does not have answers a customer that is gone (e.g. a job's
            // KV app a worker dropped when it moved to another job): nobody will take
            // it. Dropped quietly rather than held and warned about.
            None if !msg.meta.request => {
                drop(c);
                log::debug!(
                    "late response for closed customer {} of app {}; dropped {msg}",
                    key.1,
                    key.0
                );
            }
            None if c.held.len() >= most => {
                let held = c.held.len();
                log::warn!("dropped {msg}: {held} messages already held for customers not registered yet (PS_MAX_HELD_MESSAGES)");
            }
            None => c.held.push(key, self.van.now_ms(), msg),
        }
    }

    fn on_barrier_released(&self, group: i32) {
        let mut done = self.barrier_done.lock();
        if group == RELEASE_ALL {
            done.values_mut().for_each(|d| *d = true);
        } else {
            done.insert(group, true);
        }
        drop(done);
        self.barrier_cv.notify_all();
    }

    fn on_nodes_dead(&self, nodes: &[i32]) {
        self.dead.write().extend(nodes.iter().copied());
        let cbs = self.dead_callbacks.lock().clone();
        for cb in cbs {
            cb(nodes);
        }
    }

    fn on_took_over(&self, dead: &[i32], app: &[u8]) {
        {
            let mut d = self.dead.write();
            d.clear();
            d.extend(dead.iter().copied());
            self.left.write().retain(|id| dead.contains(id));
        }
        let cbs = self.took_over_callbacks.lock().clone();
        for cb in cbs {
            cb(app);
        }
    }

    fn on_nodes_left(&self, nodes: &[i32]) {
        self.left.write().extend(nodes.iter().copied());
        self.on_nodes_dead(nodes);
    }

    fn on_nodes_changed(&self, table: &[Node], revived: &[i32]) {
        let mut left = self.left.write();
        left.retain(|id| !revived.contains(id));
        drop(left);
        let mut dead = self.dead.write();
        let replicated = self.cfg.replicas > 0;
        for id in revived {
            let server = table.iter().any(|n| n.id == *id && n.role == Role::Server);
            if dead.remove(id) && replicated && server {
                // its ranges are empty until it copied them (kv/replication/catchup.rs)
                self.catching_up.write().insert(*id);
            }
        }
    }

    fn on_evicted(&self, reason: &str) {
        match &*self.evicted_callback.lock() {
            Some(cb) => cb(reason),
            None => log::error!("evicted, and the program set no eviction handler: {reason}"),
        }
    }
}
