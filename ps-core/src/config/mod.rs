//! The node's configuration, read once from the `DMLC_*` / `PS_*` environment variables
//! (the names ps-lite and the dmlc tracker use) into a typed, validated struct.

mod election;
mod error;
mod planted;
mod security;
mod shm;
pub mod slurm;

pub use election::{parse_candidates, parse_election, ElectionMode};
pub(crate) use error::err;
pub use error::ConfigError;
pub use planted::Planted;
pub use security::{LimitError, Limits, Security};
pub use shm::{ShmConfig, DEFAULT_MIN_BYTES, DEFAULT_REGION_MB, REGION_MB_RANGE};

use crate::addr::{self, patient::Patient, patient::RESOLVE_PATIENCE, system::SystemLookup, AddrVars, HostLookup};
use crate::node::Role;
use std::collections::HashMap;
use std::time::Duration;

/// The most nodes of one role a cluster may have (node ids are `i32`s, two per rank).
pub const MAX_NODES_PER_ROLE: usize = 10_000;

/// The longest `PS_SPIN_US` accepted: past that, spinning costs far more than it saves.
pub const MAX_SPIN: Duration = Duration::from_micros(10_000);

/// Everything a node needs to join the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `DMLC_ROLE`.
    pub role: Role,
    /// `DMLC_PS_ROOT_URI`: the scheduler's host.
    pub root_uri: String,
    /// `DMLC_PS_ROOT_PORT`: the scheduler's port.
    pub root_port: u16,
    /// `DMLC_NUM_SERVER`.
    pub num_servers: usize,
    /// `DMLC_NUM_WORKER`.
    pub num_workers: usize,
    /// The host this node advertises: `DMLC_NODE_HOST`, else the address of
    /// `DMLC_INTERFACE`, else the scheduler's host for the scheduler, else the local
    /// address of the route to the scheduler (see [`crate::addr`]).
    pub node_host: String,
    /// The IP the receiving socket binds: `DMLC_BIND_HOST`, else the advertised address
    /// when it is local, else the wildcard of its family (see [`crate::addr`]).
    pub bind_host: String,
    /// `PORT`: the port to bind (0 = any free port). The scheduler always binds
    /// `DMLC_PS_ROOT_PORT`.
    pub port: u16,
    /// `PS_VERBOSE`: 0, 1 or 2.
    pub verbose: u8,
    /// `PS_RESEND` (non-zero enables) and `PS_RESEND_TIMEOUT` (ms, default 1000).
    pub resend_timeout: Option<Duration>,
    /// `PS_DROP_MSG`: percent (0..=100) of received data messages to drop.
    pub drop_msg_percent: u8,
    /// `PS_HEARTBEAT_INTERVAL`: seconds between heartbeats (fractions allowed; 0 = off).
    pub heartbeat_interval: Duration,
    /// `PS_HEARTBEAT_TIMEOUT`: seconds of silence after which the scheduler declares a
    /// node dead (fractions allowed; 0 = never).
    pub heartbeat_timeout: Duration,
    /// `DMLC_PS_VAN_TYPE`: the transport, `tcp` (default) or `zmq` (ps-lite's).
    pub van_type: String,
    /// `PS_JOIN_TIMEOUT`: seconds a node waits for the scheduler's node table before it
    /// gives up, and goes on without word from any scheduler (re-registering) before it
    /// stops (default 120).
    pub join_timeout: Duration,
    /// `PS_SCHEDULERS`: every scheduler candidate as `host:port,host:port`, in order
    /// (see `failover`); defaults to the one at `DMLC_PS_ROOT_URI` /
    /// `DMLC_PS_ROOT_PORT`. A scheduler finds itself in the list by its root address.
    pub schedulers: Vec<(String, u16)>,
    /// `PS_SCHEDULER_STANDBY`: non-zero makes this scheduler a standby that follows the
    /// active one and takes over when it dies.
    pub scheduler_standby: bool,
    /// `PS_ELECTION` (`embedded` or `etcd`), with `PS_ETCD_ENDPOINTS` and
    /// `PS_ETCD_PREFIX`: how the active scheduler is chosen (see `failover`).
    pub election: ElectionMode,
    /// `PS_REPLICAS`: how many next servers (on the ring of server ranks) also hold
    /// each server's key range (0, the default: no replication).
    pub replicas: usize,
    /// `PS_ELASTIC_WORKERS` (scheduler): non-zero lets a worker join the running
    /// cluster under a new id beyond `DMLC_NUM_WORKER` when no dead worker's id is free
    /// (otherwise it waits for a death, as a standby). Workers may leave (goodbye)
    /// either way.
    pub elastic_workers: bool,
    /// `PS_SPIN_US` (microseconds, default 0 = off, at most 10000): the low-latency
    /// mode. The TCP van's reader threads poll their socket for this long before they
    /// sleep in a blocking read (see [`crate::van::tcp::spin_read`]); costs CPU while idle.
    pub spin: Duration,
    /// `PS_SHM` (1 default, 0 off), `PS_SHM_MB`, `PS_SHM_MIN_BYTES`: the TCP van's
    /// shared memory to peers on this host (see [`crate::van::tcp::shm`]).
    pub shm: ShmConfig,
    /// `PS_LOCAL_SOCKET` (1 default, 0 off): the TCP van's links to nodes on this host
    /// go over Unix sockets instead of loopback TCP (see [`crate::van::tcp::stream`]).
    pub local_socket: bool,
    /// The cluster secret, encryption and resource limits (`PS_SECRET_FILE`, ...).
    pub security: Security,
    /// Bugs planted on purpose by the simulator's tests (none here: never read from
    /// the environment).
    pub planted: Planted,
}

struct Vars<'a>(&'a HashMap<String, String>);

impl Vars<'_> {
    fn get(&self, var: &str) -> Option<&str> {
        self.0.get(var).map(|s| s.trim()).filter(|s| !s.is_empty())
    }
    fn required(&self, var: &str, what: &str) -> Result<&str, ConfigError> {
        self.get(var)
            .ok_or_else(|| err(var, format!("not set; set it to {what}")))
    }
    fn parse<T: std::str::FromStr>(&self, var: &str, what: &str) -> Result<Option<T>, ConfigError> {
        match self.get(var) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| err(var, format!("'{v}' is not {what}"))),
        }
    }
    fn seconds(&self, var: &str, default: f64) -> Result<Duration, ConfigError> {
        let v: f64 = self.parse(var, "a number of seconds")?.unwrap_or(default);
        if !(0.0..=86_400.0).contains(&v) {
            return Err(err(var, format!("{v} is outside 0..=86400 seconds")));
        }
        Ok(Duration::from_secs_f64(v))
    }
}

impl Config {
    /// Reads the process environment. See [`Config::from_vars`].
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_vars(&std::env::vars().collect())
    }

    /// Reads and validates the configuration from a variable map, resolving host names
    /// and routes through the operating system (a name that does not resolve is asked
    /// again for up to [`RESOLVE_PATIENCE`]).
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Config, ConfigError> {
        Config::from_vars_with(vars, &Patient::new(SystemLookup, RESOLVE_PATIENCE))
    }

    /// Reads and validates the configuration from a variable map, asking `lookup` about
    /// names, routes and interfaces.
    pub fn from_vars_with(vars: &HashMap<String, String>, lookup: &dyn HostLookup) -> Result<Config, ConfigError> {
        let mut vars = vars.clone();
        slurm::fill_from_slurm(&mut vars)?;
        let role = vars.get("DMLC_ROLE").and_then(|r| Role::parse(r));
        Config::read(&vars, lookup).map_err(|e| ConfigError { role, ..e })
    }

    fn read(vars: &HashMap<String, String>, lookup: &dyn HostLookup) -> Result<Config, ConfigError> {
        let v = Vars(vars);
        let role_s = v.required("DMLC_ROLE", "scheduler, server or worker")?;
        let role = Role::parse(role_s)
            .ok_or_else(|| err("DMLC_ROLE", format!("'{role_s}' is not scheduler, server or worker")))?;
        let root_uri = v
            .required("DMLC_PS_ROOT_URI", "the scheduler's host, e.g. 127.0.0.1")?
            .to_string();
        let root_port = v
            .parse::<u16>("DMLC_PS_ROOT_PORT", "a port number (1-65535)")?
            .ok_or_else(|| err("DMLC_PS_ROOT_PORT", "not set; set it to the scheduler's port"))?;
        let num_servers = v
            .parse("DMLC_NUM_SERVER", "a count of servers")?
            .ok_or_else(|| err("DMLC_NUM_SERVER", "not set; set it to the number of servers"))?;
        let num_workers = v
            .parse("DMLC_NUM_WORKER", "a count of workers")?
            .ok_or_else(|| err("DMLC_NUM_WORKER", "not set; set it to the number of workers"))?;
        let addrs = addr::plan(
            &AddrVars {
                is_scheduler: role == Role::Scheduler,
                root_uri: &root_uri,
                node_host: v.get("DMLC_NODE_HOST"),
                interface: v.get("DMLC_INTERFACE"),
                bind_host: v.get("DMLC_BIND_HOST"),
            },
            lookup,
        )?;
        let port = v.parse("PORT", "a port number (0-65535)")?.unwrap_or(0);
        let verbose = v.parse("PS_VERBOSE", "0, 1 or 2")?.unwrap_or(0);
        let resend = v.parse::<i64>("PS_RESEND", "0 or 1")?.unwrap_or(0) != 0;
        let resend_ms: u64 = v
            .parse("PS_RESEND_TIMEOUT", "a number of milliseconds")?
            .unwrap_or(1000);
        let drop_msg_percent = v.parse("PS_DROP_MSG", "a percent (0-100)")?.unwrap_or(0);
        let schedulers = match v.get("PS_SCHEDULERS") {
            None => vec![(root_uri.clone(), root_port)],
            Some(list) => parse_candidates(list)?,
        };
        let scheduler_standby = v.parse::<i64>("PS_SCHEDULER_STANDBY", "0 or 1")?.unwrap_or(0) != 0;
        let election = parse_election(
            v.get("PS_ELECTION"),
            v.get("PS_ETCD_ENDPOINTS"),
            v.get("PS_ETCD_PREFIX"),
        )?;
        let cfg = Config {
            role,
            root_uri,
            root_port,
            num_servers,
            num_workers,
            node_host: addrs.advertise,
            bind_host: addrs.bind,
            port,
            verbose,
            resend_timeout: resend.then(|| Duration::from_millis(resend_ms)),
            drop_msg_percent,
            heartbeat_interval: v.seconds("PS_HEARTBEAT_INTERVAL", 0.0)?,
            heartbeat_timeout: v.seconds("PS_HEARTBEAT_TIMEOUT", 0.0)?,
            join_timeout: v.seconds("PS_JOIN_TIMEOUT", 120.0)?,
            van_type: v.get("DMLC_PS_VAN_TYPE").unwrap_or("tcp").to_string(),
            schedulers,
            scheduler_standby,
            election,
            replicas: v.parse("PS_REPLICAS", "a count of replicas (0 = none)")?.unwrap_or(0),
            elastic_workers: v.parse::<i64>("PS_ELASTIC_WORKERS", "0 or 1")?.unwrap_or(0) != 0,
            spin: Duration::from_micros(
                v.parse("PS_SPIN_US", "a number of microseconds (0-10000)")?
                    .unwrap_or(0),
            ),
            shm: ShmConfig {
                enabled: v.parse::<i64>("PS_SHM", "0 or 1")?.unwrap_or(1) != 0,
                region_mb: v
                    .parse("PS_SHM_MB", "a number of MiB (1-4096)")?
                    .unwrap_or(DEFAULT_REGION_MB),
                min_bytes: v
                    .parse("PS_SHM_MIN_BYTES", "a number of bytes")?
                    .unwrap_or(DEFAULT_MIN_BYTES),
            },
            local_socket: v.parse::<i64>("PS_LOCAL_SOCKET", "0 or 1")?.unwrap_or(1) != 0,
            security: Security::from_vars(vars)?,
            planted: Planted::default(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the values against each other; the error names the variable to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.root_port == 0 {
            return Err(err("DMLC_PS_ROOT_PORT", "must be 1-65535, not 0"));
        }
        if self.num_servers == 0 && self.num_workers == 0 {
            return Err(err(
                "DMLC_NUM_SERVER",
                "the cluster needs at least one server or worker",
            ));
        }
        for (var, n) in [
            ("DMLC_NUM_SERVER", self.num_servers),
            ("DMLC_NUM_WORKER", self.num_workers),
        ] {
            if n > MAX_NODES_PER_ROLE {
                return Err(err(
                    var,
                    format!("{n}: more than {MAX_NODES_PER_ROLE} nodes of one role is not supported"),
                ));
            }
        }
        if !matches!(self.van_type.as_str(), "zmq" | "tcp") {
            return Err(err(
                "DMLC_PS_VAN_TYPE",
                format!("'{}' is not zmq or tcp", self.van_type),
            ));
        }
        self.security.validate(&self.van_type)?;
        self.security.credentials(crate::tls::CertRole::of_node(self.role))?;
        if self.spin > MAX_SPIN {
            return Err(err(
                "PS_SPIN_US",
                format!("{} is above {} (10 ms)", self.spin.as_micros(), MAX_SPIN.as_micros()),
            ));
        }
        if !self.spin.is_zero() && self.van_type != "tcp" {
            return Err(err(
                "PS_SPIN_US",
                "only the TCP van spins (set DMLC_PS_VAN_TYPE=tcp, or PS_SPIN_US=0)",
            ));
        }
        self.shm.validate()?;
        if self.verbose > 2 {
            return Err(err("PS_VERBOSE", format!("{} is not 0, 1 or 2", self.verbose)));
        }
        if self.drop_msg_percent > 100 {
            return Err(err("PS_DROP_MSG", format!("{} is above 100", self.drop_msg_percent)));
        }
        if self.replicas > 0 && self.replicas >= self.num_servers {
            return Err(err(
                "PS_REPLICAS",
                format!(
                    "{} replicas need at least {} servers (DMLC_NUM_SERVER is {})",
                    self.replicas,
                    self.replicas + 1,
                    self.num_servers
                ),
            ));
        }
        if let Some(t) = self.resend_timeout {
            if t.is_zero() {
                return Err(err("PS_RESEND_TIMEOUT", "must be above 0 ms when PS_RESEND is on"));
            }
        }
        if !self.heartbeat_timeout.is_zero()
            && !self.heartbeat_interval.is_zero()
            && self.heartbeat_timeout <= self.heartbeat_interval
        {
            return Err(err(
                "PS_HEARTBEAT_TIMEOUT",
                "must exceed PS_HEARTBEAT_INTERVAL, or every node would be declared dead",
            ));
        }
        if self.role == Role::Scheduler && self.scheduler_index().is_none() {
            return Err(err(
                "PS_SCHEDULERS",
                format!(
                    "this scheduler ({}:{}, from DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT) is not in the list",
                    self.root_uri, self.root_port
                ),
            ));
        }
        if self.scheduler_standby && (self.role != Role::Scheduler || self.schedulers.len() < 2) {
            return Err(err(
                "PS_SCHEDULER_STANDBY",
                "only a scheduler can be a standby, and PS_SCHEDULERS must list at least two",
            ));
        }
        let etcd = matches!(self.election, ElectionMode::Etcd { .. });
        if etcd && self.role == Role::Scheduler && (self.schedulers.len() < 2 || self.heartbeat_timeout.is_zero()) {
            return Err(err(
                "PS_ELECTION",
                "etcd needs PS_SCHEDULERS listing at least two schedulers and PS_HEARTBEAT_TIMEOUT (the lease) above 0",
            ));
        }
        Ok(())
    }

    /// This scheduler's index in [`Config::schedulers`] (its own root address); for
    /// other roles, the index of the scheduler at the root address (the first active
    /// one), if listed.
    pub fn scheduler_index(&self) -> Option<usize> {
        self.schedulers
            .iter()
            .position(|(h, p)| *h == self.root_uri && *p == self.root_port)
    }

    /// The `log` level `PS_VERBOSE` maps onto: 0 → info, 1 → debug, 2 → trace.
    pub fn log_level(&self) -> log::LevelFilter {
        match self.verbose {
            0 => log::LevelFilter::Info,
            1 => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    }
}

#[cfg(test)]
mod tests;
