//! A simulated server of the summing job: psrs's own [`KVServer`] with replication
//! (`kv/replication/`: the push applied once through the request-id window, forwarded
//! to the other live holders and answered once they applied it, a replacement
//! copying its ranges from a live holder before it serves), over the sum handle of
//! [`Sums`], started as `psrs train` starts the training server (after the start
//! barrier, or at once for a replacement; then the final barrier). What the
//! simulator adds is the summing job: the handle, the copy of a range's state, and
//! the bookkeeping of which pushes each copy applied that the invariants read.

use crate::process::NodeLink;
use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use ps_core::kv::replication::RangeCopy;
use ps_core::kv::{KVMeta, KVPairs, KVResponder, KVServer, KeyRange, KvError, ReqHandle};
use ps_core::message::{Message, Meta};
use ps_core::node::id_to_rank;
use ps_core::protocol::course::Stage;
use ps_core::Postoffice;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The KV application id of the simulated job.
pub const KV_APP: i32 = 100;

/// A push's identity as the invariants track it: the request id of
/// `kv/replication/` (origin, its incarnation, customer, timestamp, range).
pub type PushKey = (i32, u64, i32, i32, i32);

/// One held range: its value (the sum of the pushes applied) and which pushes those
/// were.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RangeState {
    /// The sum.
    pub value: i64,
    /// Every push applied, with its value.
    pub applied: BTreeMap<PushKey, i64>,
}

/// Planted bugs of the server (for the simulator's own tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerBugs {
    /// Answer a push before the other holders applied it.
    pub early_ack: bool,
}

/// The summing job's state on one server: what its handle applied, per range.
#[derive(Default)]
pub struct Sums {
    /// The ranges this server applied pushes to or copied (by range).
    pub ranges: BTreeMap<usize, RangeState>,
    /// A value was applied twice under one request id: the invariant check reports it.
    pub double_apply: Option<String>,
}

/// The sum handle: a push adds its values to its range's sum, recording its id; it
/// is answered at once (the replication layer holds the answer until the other
/// holders applied it).
fn sum_handle(sums: Arc<Mutex<Sums>>, po: Arc<Postoffice>, bugs: ServerBugs) -> ReqHandle<i64> {
    Box::new(move |meta: &KVMeta, kvs: KVPairs<i64>, resp: &KVResponder| {
        if meta.push {
            let key = (
                meta.sender,
                meta.incarnation,
                meta.customer_id,
                meta.timestamp,
                meta.range,
            );
            let v: i64 = kvs.vals.iter().sum();
            let mut s = sums.lock();
            let r = s.ranges.entry(meta.range as usize).or_default();
            r.value += v;
            if r.applied.insert(key, v).is_some() {
                s.double_apply = Some(format!("push {key:?} applied twice on server {}", po.my_rank()));
            }
            if bugs.early_ack {
                early_answer(&po, meta);
            }
        }
        if let Err(e) = resp.response(meta, &KVPairs::<i64>::default()) {
            log::debug!("answer not sent: {e}");
        }
    })
}

/// The planted bug: the push's answer sent straight to the worker, before the other
/// holders applied it.
fn early_answer(po: &Postoffice, meta: &KVMeta) {
    let msg = Message {
        meta: Meta {
            head: meta.cmd,
            app_id: KV_APP,
            customer_id: meta.customer_id,
            timestamp: meta.timestamp,
            recver: meta.sender,
            recver_incarnation: meta.incarnation,
            push: true,
            range: meta.range,
            ..Default::default()
        },
        data: Vec::new(),
    };
    let _ = po.van().send(msg);
}

/// A range's state copied to a replacement server.
struct SumsCopy(Arc<Mutex<Sums>>);

impl RangeCopy for SumsCopy {
    fn snapshot(&mut self, range: usize, _keys: KeyRange) -> Bytes {
        let s = self.0.lock();
        let state = s.ranges.get(&range).cloned().unwrap_or_default();
        Bytes::from(bincode::serialize(&state).expect("a range state serializes"))
    }

    fn restore(&mut self, range: usize, _keys: KeyRange, data: &[u8]) -> Result<(), KvError> {
        let state: RangeState = bincode::deserialize(data).map_err(|e| KvError::BadCopy(e.to_string()))?;
        self.0.lock().ranges.insert(range, state);
        Ok(())
    }
}

/// A server process.
pub struct Server {
    /// Its postoffice.
    pub node: NodeLink,
    kv: Option<KVServer<i64>>,
    sums: Arc<Mutex<Sums>>,
    /// Why its KV server could not start (the process ends).
    pub failed: Option<String>,
    bugs: ServerBugs,
}

impl Server {
    /// A server process over `node`.
    pub fn new(node: NodeLink, bugs: ServerBugs) -> Server {
        Server {
            node,
            kv: None,
            sums: Arc::default(),
            failed: None,
            bugs,
        }
    }

    /// This server's rank (once it has its id).
    pub fn rank(&self) -> Option<usize> {
        id_to_rank(self.node.me().id).filter(|_| self.node.ready())
    }

    /// True while this replacement copies its ranges.
    pub fn catching_up(&self) -> bool {
        self.kv.as_ref().is_some_and(|kv| kv.catching_up())
    }

    /// What its handle applied.
    pub fn sums(&self) -> MutexGuard<'_, Sums> {
        self.sums.lock()
    }

    /// Released from the final barrier.
    pub fn finished(&self) -> bool {
        self.node.stage() == Stage::Done
    }

    /// After every step it took part in: its course moves on; once the server runs
    /// (after the start barrier, or at once for a replacement) its KV server starts
    /// (a replacement copying its ranges) and the final barrier is entered, as
    /// `psrs train` does.
    pub fn after_step(&mut self) {
        if !self.node.course() {
            return;
        }
        let po = Arc::clone(&self.node.po);
        let handle = sum_handle(Arc::clone(&self.sums), Arc::clone(&po), self.bugs);
        let copy: Box<dyn RangeCopy> = Box::new(SumsCopy(Arc::clone(&self.sums)));
        match KVServer::with_copy(&po, KV_APP, handle, Some(copy)) {
            Ok(kv) => self.kv = Some(kv),
            Err(e) => {
                self.failed = Some(e.to_string());
                return;
            }
        }
        self.node.finalize();
    }
}
