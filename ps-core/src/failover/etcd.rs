//! The etcd lock service of `PS_ELECTION=etcd`: a thin shell over etcd's lock API
//! implementing [`super::lock_service::LockService`]. One thread seeks the lock
//! `<prefix>/scheduler_lock` with a lease of `PS_HEARTBEAT_TIMEOUT` (etcd rounds it up
//! to its minimum, 2 s by default), renews the lease while it holds it, and reports the
//! lock lost when a renewal fails or the lease runs out; then it seeks it again with a
//! new lease. The term is etcd's revision when the lock was acquired, so every later
//! holder has a higher one. The node table and the application state are saved under
//! `<prefix>/scheduler_core` and `<prefix>/scheduler_app` by a transaction that only
//! succeeds while this candidate's lock key exists. Every decision is in
//! [`super::locked::LockCandidate`].

use super::error::FailoverError;
use super::lock_service::LockService;
use super::locked::Lock;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, LeaseKeepAliveStream, LeaseKeeper, LockOptions, Txn, TxnOp,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// etcd (or the runtime talking to it) failed at `what`.
fn err(what: &str, e: impl std::fmt::Display) -> FailoverError {
    FailoverError::Unavailable(format!("etcd: {what}: {e}"))
}

fn runtime() -> Result<Runtime, FailoverError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| err("runtime", e))
}

fn connect(rt: &Runtime, endpoints: &[String]) -> Result<Client, FailoverError> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5));
    rt.block_on(Client::connect(endpoints, Some(opts)))
        .map_err(|e| err(&format!("cannot connect to {endpoints:?}"), e))
}

/// What the lock thread shares with the saving side.
struct Shared {
    lock: Mutex<(Lock, Vec<u8>)>,
    stop: AtomicBool,
}

impl Shared {
    fn set(&self, lock: Lock, key: Vec<u8>) {
        *self.lock.lock() = (lock, key);
    }
}

/// The etcd lock service of one scheduler candidate.
pub struct EtcdElection {
    endpoints: Vec<String>,
    prefix: String,
    ttl: Duration,
    shared: Arc<Shared>,
    started: AtomicBool,
    /// The saving side: its own runtime and client (a client is bound to its runtime).
    io: Mutex<(Runtime, Client)>,
}

impl EtcdElection {
    /// Connects to `endpoints` (failing at once with [`FailoverError::Unavailable`],
    /// one line, when etcd is not reachable); the lock and state keys live under
    /// `prefix`; leases last `ttl`.
    pub fn connect(endpoints: &[String], prefix: &str, ttl: Duration) -> Result<EtcdElection, FailoverError> {
        let rt = runtime()?;
        let client = connect(&rt, endpoints)?;
        Ok(EtcdElection {
            endpoints: endpoints.to_vec(),
            prefix: prefix.to_string(),
            ttl,
            shared: Arc::new(Shared {
                lock: Mutex::new((Lock::Free, Vec::new())),
                stop: AtomicBool::new(false),
            }),
            started: AtomicBool::new(false),
            io: Mutex::new((rt, client)),
        })
    }

    fn key(&self, what: &str) -> String {
        format!("{}/{what}", self.prefix)
    }
}

impl LockService for EtcdElection {
    fn campaign(&self) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let (endpoints, name, ttl) = (self.endpoints.clone(), self.key("scheduler_lock"), self.ttl);
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("etcd-election".into())
            .spawn(move || hold_lock(&endpoints, &name, ttl, &shared));
        if let Err(e) = spawned {
            log::error!("etcd: cannot start the election thread: {e}");
        }
    }

    fn lock(&self) -> Lock {
        self.shared.lock.lock().0
    }

    fn save(&self, core: &[u8], app: &[u8]) -> Result<(), FailoverError> {
        let (lock, key) = self.shared.lock.lock().clone();
        if !matches!(lock, Lock::Held(_)) {
            return Err(FailoverError::LockLost(
                "this scheduler does not hold the etcd lock".into(),
            ));
        }
        let txn = Txn::new()
            .when([Compare::version(key, CompareOp::Greater, 0)])
            .and_then([
                TxnOp::put(self.key("scheduler_core"), core, None),
                TxnOp::put(self.key("scheduler_app"), app, None),
            ]);
        let mut io = self.io.lock();
        let (rt, client) = &mut *io;
        let resp = rt.block_on(client.txn(txn)).map_err(|e| err("txn", e))?;
        if resp.succeeded() {
            return Ok(());
        }
        self.shared.set(Lock::Lost, Vec::new());
        Err(FailoverError::LockLost(
            "etcd: the scheduler lock is gone (its lease expired); not saved".into(),
        ))
    }

    fn load(&self) -> Result<(Vec<u8>, Vec<u8>), FailoverError> {
        let mut io = self.io.lock();
        let (rt, client) = &mut *io;
        let mut get = |k: String| -> Result<Vec<u8>, FailoverError> {
            let r = rt.block_on(client.get(k, None)).map_err(|e| err("get", e))?;
            Ok(r.kvs().first().map(|kv| kv.value().to_vec()).unwrap_or_default())
        };
        Ok((get(self.key("scheduler_core"))?, get(self.key("scheduler_app"))?))
    }
}

impl Drop for EtcdElection {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// The election thread: seek the lock, hold it while the lease is renewed, report it
/// lost, seek it again. Errors are logged and retried.
fn hold_lock(endpoints: &[String], name: &str, ttl: Duration, shared: &Arc<Shared>) {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return log::error!("{e}"),
    };
    while !shared.stop.load(Ordering::Relaxed) {
        if let Err(e) = rt.block_on(term_once(endpoints, name, ttl, shared)) {
            log::warn!("{e}; seeking the scheduler lock again");
        }
        if matches!(shared.lock.lock().0, Lock::Held(_)) {
            shared.set(Lock::Lost, Vec::new());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One holding of the lock, from seeking it to losing it. The lease is renewed from
/// its grant on, also while waiting in the lock's queue (else it would expire there and
/// the lock would be lost as soon as it is won).
async fn term_once(endpoints: &[String], name: &str, ttl: Duration, shared: &Arc<Shared>) -> Result<(), FailoverError> {
    let mut client = Client::connect(endpoints, None).await.map_err(|e| err("connect", e))?;
    let ttl_s = ttl.as_secs_f64().ceil().max(1.0) as i64;
    let lease = client
        .lease_grant(ttl_s, None)
        .await
        .map_err(|e| err("lease grant", e))?;
    let granted = Duration::from_secs(lease.ttl().max(1) as u64);
    let lease = lease.id();
    let (keeper, answers) = client.lease_keep_alive(lease).await.map_err(|e| err("keep-alive", e))?;
    let renewing = tokio::spawn(renew(keeper, answers, granted, Arc::clone(shared)));
    let resp = client.lock(name, Some(LockOptions::new().with_lease(lease))).await;
    let resp = match resp {
        Ok(r) if !renewing.is_finished() => r,
        Ok(_) => {
            return Err(FailoverError::LockLost(
                "etcd: the lease expired while waiting for the scheduler lock".into(),
            ))
        }
        Err(e) => {
            renewing.abort();
            return Err(err("lock", e));
        }
    };
    let term = resp.header().map_or(0, |h| h.revision()).max(1) as u64;
    shared.set(Lock::Held(term), resp.key().to_vec());
    log::info!("etcd: holding {name} (lease {lease:x}, {granted:?}, term {term})");
    renewing.await.map_err(|e| err("keep-alive task", e))?
}

/// Renews lease through `keeper` every quarter of its `granted` time until `shared`
/// stops; fails when a renewal fails or the lease was not renewed for `granted`.
async fn renew(
    mut keeper: LeaseKeeper,
    mut answers: LeaseKeepAliveStream,
    granted: Duration,
    shared: Arc<Shared>,
) -> Result<(), FailoverError> {
    let mut renewed = Instant::now();
    let period = granted / 4;
    while !shared.stop.load(Ordering::Relaxed) {
        keeper.keep_alive().await.map_err(|e| err("keep-alive", e))?;
        match tokio::time::timeout(period, answers.message()).await {
            Ok(Ok(Some(a))) if a.ttl() > 0 => renewed = Instant::now(),
            Ok(Ok(Some(_))) => {
                return Err(FailoverError::LockLost(
                    "etcd: the scheduler lock's lease expired".into(),
                ))
            }
            Ok(Ok(None)) => return Err(FailoverError::Unavailable("etcd: the keep-alive stream closed".into())),
            Ok(Err(e)) => return Err(err("keep-alive", e)),
            Err(_) => {}
        }
        if renewed.elapsed() >= granted {
            return Err(FailoverError::LockLost(
                "etcd: the lease was not renewed in time".into(),
            ));
        }
        tokio::time::sleep(period.saturating_sub(renewed.elapsed().min(period))).await;
    }
    Ok(())
}
