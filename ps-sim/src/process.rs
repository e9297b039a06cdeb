//! A simulated process: psrs's own postoffice and van, over a [`SimTransport`] and
//! the world's clock, configured from the same variables a real process reads, with
//! no thread of their own: the world runs their steps (the van's join, heartbeat and
//! tick steps at the times its threads would, and deliveries: [`crate::world`]). On top, the application of its
//! role ([`crate::server`], [`crate::worker`], [`crate::scheduler`]) sees the
//! postoffice through a [`NodeLink`], and steps the production course of every
//! process ([`ps_core::protocol::course`]: the start barrier, the application, the
//! final barrier) as events arrive.

use crate::transport::{SimTransport, BASE_PORT};
use ps_core::addr::HostLookup;
use ps_core::node::{Node, Role};
use ps_core::protocol::course::Stage;
use ps_core::van::{Clock, Van};
use ps_core::{Config, Postoffice};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The world's clock, shared by every process's van.
#[derive(Default)]
pub struct SimClock(AtomicU64);

impl SimClock {
    /// Moves the clock to `ms`.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::Relaxed);
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A process's clock: the world's, read from when the process started (a van's
/// clock starts at 0 when it is made; the processes' clocks are not in step).
pub struct ProcClock {
    world: Arc<SimClock>,
    born: u64,
}

impl ProcClock {
    /// The clock of a process started now.
    pub fn new(world: Arc<SimClock>) -> ProcClock {
        let born = world.now_ms();
        ProcClock { world, born }
    }
}

impl Clock for ProcClock {
    fn now_ms(&self) -> u64 {
        self.world.now_ms().saturating_sub(self.born)
    }

    /// The world's time: every process's log lines name the same clock, and a seed's
    /// lines replay byte for byte.
    fn unix_ms(&self) -> u64 {
        self.world.now_ms()
    }
}

/// Every simulated host is 127.0.0.1 and routes to itself: no name service, no
/// interfaces are consulted.
struct SimLookup;

const HOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl HostLookup for SimLookup {
    fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        host.parse().map(|ip| vec![ip]).map_err(std::io::Error::other)
    }
    fn route_source(&self, _to: IpAddr) -> std::io::Result<IpAddr> {
        Ok(HOST)
    }
    fn interface_addrs(&self, _name: &str) -> Vec<IpAddr> {
        Vec::new()
    }
    fn local_addrs(&self) -> Vec<IpAddr> {
        vec![HOST]
    }
}

/// The shape and timings every process of a run is configured with.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Scheduler candidates (slots `0..schedulers`).
    pub schedulers: usize,
    /// Servers.
    pub servers: usize,
    /// Workers.
    pub workers: usize,
    /// `PS_REPLICAS`.
    pub replicas: usize,
    /// `PS_HEARTBEAT_INTERVAL` (ms).
    pub heartbeat_ms: u64,
    /// `PS_HEARTBEAT_TIMEOUT` (ms).
    pub timeout_ms: u64,
    /// `PS_RESEND_TIMEOUT` (ms; the resender is on).
    pub resend_ms: u64,
}

/// The configuration of the process in `slot` of `shape` (a candidate that is not
/// the first one's first start runs as a standby), read as a real process reads its
/// environment.
pub fn config(shape: &Shape, slot: usize, role: Role, standby: bool) -> Config {
    let port = |s: usize| (BASE_PORT + s as u16).to_string();
    let candidates: Vec<String> = (0..shape.schedulers)
        .map(|s| format!("127.0.0.1:{}", port(s)))
        .collect();
    let secs = |ms: u64| format!("{}", ms as f64 / 1000.0);
    let mut vars: HashMap<String, String> = [
        ("DMLC_ROLE", role.to_string()),
        ("DMLC_PS_ROOT_URI", "127.0.0.1".into()),
        (
            "DMLC_PS_ROOT_PORT",
            port(if role == Role::Scheduler { slot } else { 0 }),
        ),
        ("DMLC_NUM_SERVER", shape.servers.to_string()),
        ("DMLC_NUM_WORKER", shape.workers.to_string()),
        ("DMLC_NODE_HOST", "127.0.0.1".into()),
        ("PORT", port(slot)),
        ("PS_HEARTBEAT_INTERVAL", secs(shape.heartbeat_ms)),
        ("PS_HEARTBEAT_TIMEOUT", secs(shape.timeout_ms)),
        ("PS_RESEND", "1".into()),
        ("PS_RESEND_TIMEOUT", shape.resend_ms.to_string()),
        ("PS_REPLICAS", shape.replicas.to_string()),
        ("PS_SCHEDULERS", candidates.join(",")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if standby {
        vars.insert("PS_SCHEDULER_STANDBY".into(), "1".into());
    }
    Config::from_vars_with(&vars, &SimLookup).expect("the simulator's configuration is valid")
}

/// A process's postoffice and van over the simulated network, opened (bound,
/// receiving), with no thread: the world drives it.
pub fn postoffice(cfg: Config, clock: Arc<ProcClock>, incarnation: u64) -> (Arc<Postoffice>, Arc<SimTransport>) {
    let net = Arc::new(SimTransport::new());
    let van = Van::with_clock(cfg.clone(), net.clone(), clock, incarnation);
    let po = Postoffice::with_van(cfg, van);
    po.van().open().expect("a simulated van opens");
    (po, net)
}

/// What an application sees of its postoffice.
pub struct NodeLink {
    /// The postoffice.
    pub po: Arc<Postoffice>,
    /// The scheduler declared this process dead, or refused it: it must stop.
    pub evicted: Arc<AtomicBool>,
}

impl NodeLink {
    /// The application's view of `po`.
    pub fn new(po: Arc<Postoffice>) -> NodeLink {
        let evicted = Arc::new(AtomicBool::new(false));
        let e = Arc::clone(&evicted);
        po.on_evicted(move |_| e.store(true, Ordering::Relaxed));
        NodeLink { po, evicted }
    }

    /// This process as the cluster knows it.
    pub fn me(&self) -> Node {
        self.po.van().my_node()
    }

    /// True once the node table arrived.
    pub fn ready(&self) -> bool {
        self.po.van().is_ready()
    }

    /// Sends `msg` through the van (a failure is a lost message, as on a real link).
    pub fn send(&self, msg: ps_core::Message) {
        if let Err(e) = self.po.van().send(msg) {
            log::debug!("not sent: {e}");
        }
    }

    /// A fresh message timestamp.
    pub fn next_ts(&self) -> i32 {
        self.po.van().next_timestamp()
    }

    /// The node table.
    pub fn table(&self) -> Vec<Node> {
        self.po.nodes()
    }

    /// Moves the process's course on as far as it can go now (the production
    /// course, [`Postoffice::step_course`]): true when its application starts now
    /// (after the start barrier, or at the table for a replacement).
    pub fn course(&self) -> bool {
        self.po.step_course()
    }

    /// Where the process is in its course.
    pub fn stage(&self) -> Stage {
        self.po.course_stage()
    }

    /// The application is done: the final barrier ([`Postoffice::finalize`]'s first
    /// step, [`Postoffice::finish_course`]).
    pub fn finalize(&self) {
        self.po.finish_course(true);
    }
}
