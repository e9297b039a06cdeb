//! The master's queues persisted in etcd, as the master design says: written under one
//! key by a transaction conditioned on holding the master lock, a lock attached to a
//! lease the master keeps alive. A master that lost its lease (it hung, or the network
//! cut it off) can no longer write: its saves fail, and a new master holding the lock
//! carries on from what was saved last.

use super::error::StoreError;
use etcd_client::{Client, Compare, CompareOp, LockOptions, Txn, TxnOp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default key the queues are stored under.
pub const DEFAULT_KEY: &str = "/psrs/task_queues";
/// Default name of the master lock.
pub const DEFAULT_LOCK: &str = "/psrs/master_lock";

/// A store in etcd guarded by a lease-backed lock.
pub struct EtcdStore {
    rt: tokio::runtime::Runtime,
    client: Client,
    key: String,
    lock_key: Vec<u8>,
    lease: i64,
    stop: Arc<AtomicBool>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

/// etcd (or the runtime talking to it) failed at `what`.
fn err(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Failed(format!("etcd: {what}: {e}"))
}

impl EtcdStore {
    /// Connects to `endpoints`, grants a lease of `ttl`, acquires lock `lock` with it
    /// (waiting at most `lock_wait` for another master to let go) and keeps the lease
    /// alive from a background thread. The queues live under `key`. Every failure is a
    /// [`StoreError`] naming the etcd call.
    pub fn connect(
        endpoints: &[String],
        key: &str,
        lock: &str,
        ttl: Duration,
        lock_wait: Duration,
    ) -> Result<EtcdStore, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| err("runtime", e))?;
        let opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(10));
        let mut client = rt
            .block_on(Client::connect(endpoints, Some(opts)))
            .map_err(|e| err(&format!("cannot connect to {endpoints:?}"), e))?;
        let ttl_s = ttl.as_secs().max(2) as i64;
        let lease = rt
            .block_on(client.lease_grant(ttl_s, None))
            .map_err(|e| err("lease grant", e))?
            .id();
        let lock_key = rt
            .block_on(async {
                tokio::time::timeout(lock_wait, client.lock(lock, Some(LockOptions::new().with_lease(lease)))).await
            })
            .map_err(|_| {
                StoreError::Failed(format!(
                    "etcd: another master holds {lock}; gave up after {lock_wait:?}"
                ))
            })?
            .map_err(|e| err("lock", e))?
            .key()
            .to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let keeper = {
            let stop = Arc::clone(&stop);
            let mut c = client.clone();
            let period = Duration::from_secs((ttl_s as u64 / 3).max(1));
            std::thread::Builder::new()
                .name("etcd-lease".into())
                .spawn(move || keep_alive(&mut c, lease, period, &stop))
                .map_err(|e| err("thread", e))?
        };
        log::info!("etcd: holding the master lock {lock} with lease {lease:x} (ttl {ttl_s} s)");
        Ok(EtcdStore {
            rt,
            client,
            key: key.to_string(),
            lock_key,
            lease,
            stop,
            keeper: Some(keeper),
        })
    }

    /// The stored queues, if any.
    pub fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        let resp = self
            .rt
            .block_on(self.client.get(self.key.as_str(), None))
            .map_err(|e| err("get", e))?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    /// Writes the queues, only while this master still holds the lock.
    pub fn save(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let txn = Txn::new()
            .when([Compare::version(self.lock_key.clone(), CompareOp::Greater, 0)])
            .and_then([TxnOp::put(self.key.as_str(), bytes, None)]);
        let resp = self.rt.block_on(self.client.txn(txn)).map_err(|e| err("txn", e))?;
        if resp.succeeded() {
            Ok(())
        } else {
            Err(StoreError::SteppedDown(
                "etcd: this master no longer holds the master lock (its lease expired); not saved".into(),
            ))
        }
    }

    /// Gives up the lock at once (for tests and orderly hand-over).
    pub fn revoke(&mut self) -> Result<(), StoreError> {
        self.stop.store(true, Ordering::Relaxed);
        self.rt
            .block_on(self.client.lease_revoke(self.lease))
            .map(|_| ())
            .map_err(|e| err("lease revoke", e))
    }
}

fn keep_alive(client: &mut Client, lease: i64, period: Duration, stop: &AtomicBool) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return log::error!("etcd keep-alive runtime: {e}"),
    };
    // every wait on etcd has a deadline, so a stop is seen even when etcd stops
    // answering (the store's drop joins this thread)
    let deadline = period.max(Duration::from_secs(1));
    rt.block_on(async {
        let (mut keeper, _stream) = loop {
            match tokio::time::timeout(deadline, client.lease_keep_alive(lease)).await {
                Ok(Ok(k)) => break k,
                Ok(Err(e)) => return log::error!("etcd keep-alive: {e}"),
                Err(_) if stop.load(Ordering::Relaxed) => return,
                Err(_) => log::warn!("etcd keep-alive: no answer within {deadline:?}; asking again"),
            }
        };
        while !stop.load(Ordering::Relaxed) {
            match tokio::time::timeout(deadline, keeper.keep_alive()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => log::warn!("etcd keep-alive failed: {e}"),
                Err(_) => log::warn!("etcd keep-alive: no answer within {deadline:?}"),
            }
            let mut slept = Duration::ZERO;
            while slept < period && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
                slept += Duration::from_millis(100);
            }
        }
    });
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.keeper.take() {
            let _ = t.join();
        }
    }
}
