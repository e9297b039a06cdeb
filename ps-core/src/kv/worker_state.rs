//! A `KVWorker`'s pending requests and what happens to them when answers come in, or
//! (with replication) when a server holding one of their ranges dies.

use super::error::KvError;
use super::key_cache::SentKeys;
use super::pairs::KVPairs;
use super::replication::{dead_server_ranks, Holders};
use super::reply::{Callback, ServerReply};
use super::request::STATUS_INVALID;
use super::sarray::SArray;
use crate::customer::STATUS_NOT_COUNTED;
use crate::message::Message;
use crate::node::server_rank_to_id;
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;

/// One request in flight; every `Vec` is indexed by key range (server rank).
pub(crate) struct Pending<V: Pod> {
    pub(crate) expected: usize,
    pub(crate) replies: Vec<ServerReply<V>>,
    pub(crate) error: Option<KvError>,
    pub(crate) callback: Option<Callback<V>>,
    pub(crate) keys: SArray<u64>,
    /// The keys sent for each range (servers do not send them back).
    pub(crate) sent_keys: Vec<SArray<u64>>,
    /// Per range: the request with its full key list, for a server that lost the
    /// cached list, or (with replication) for the next holder of the range.
    pub(crate) full: Vec<Option<Message>>,
    /// Per range: whether the full request was sent again for the key list already.
    pub(crate) keys_resent: Vec<bool>,
    /// Per range: the server it was last sent to.
    pub(crate) sent_to: Vec<i32>,
    /// Per range: whether its answer is in (ranges not asked count as answered).
    pub(crate) answered: Vec<bool>,
}

/// The pending requests by timestamp.
pub(crate) type State<V> = Arc<Mutex<FxHashMap<i32, Pending<V>>>>;

/// Where range `r`'s requests go: its first live holder (the server of rank `r`
/// without replication, dead or not: its replacement gets what was parked).
pub(crate) fn target(holders: &Holders, r: usize, po: &Postoffice) -> i32 {
    if holders.replicas() == 0 {
        return server_rank_to_id(r);
    }
    let dead = dead_server_ranks(&po.unavailable_servers());
    server_rank_to_id(holders.primary(r, &dead).unwrap_or(r))
}

/// With replication: sends every unanswered part whose server died to the range's
/// next live holder, with its full key list (that holder applies it unless it
/// applied it already, forwarded by the dead one).
pub(crate) fn reroute<V: Pod + Send + Sync>(state: &State<V>, po: &Postoffice, holders: &Holders) {
    let dead = dead_server_ranks(&po.unavailable_servers());
    let dead_ids: Vec<i32> = dead.iter().map(|&r| server_rank_to_id(r)).collect();
    let mut resend = Vec::new();
    {
        let mut st = state.lock();
        for (ts, p) in st.iter_mut() {
            for r in 0..p.answered.len() {
                if p.answered[r] || !dead_ids.contains(&p.sent_to[r]) {
                    continue;
                }
                let Some(next) = holders.primary(r, &dead) else {
                    log::warn!("request {ts}: every holder of key range {r} is dead");
                    continue;
                };
                if let Some(mut m) = p.full[r].clone() {
                    m.meta.recver = server_rank_to_id(next);
                    m.meta.key_sig = 0;
                    p.sent_to[r] = m.meta.recver;
                    log::info!("request {ts}: key range {r} now goes to server {next}");
                    resend.push(m);
                }
            }
        }
    }
    for m in resend {
        if let Err(e) = po.van().send(m) {
            log::warn!("cannot resend a request to the next replica: {e}");
        }
    }
}

/// An answer from a server: counts it for its key range (`meta.range`), or sends the
/// keys again if the server lost the cached list.
pub(crate) fn on_response<V: Pod + Send + Sync>(
    state: &State<V>,
    po: &Postoffice,
    sent: &Mutex<SentKeys>,
    msg: Message,
) {
    let ts = msg.meta.timestamp;
    let rank = usize::try_from(msg.meta.range).unwrap_or(usize::MAX);
    {
        let mut st = state.lock();
        let Some(p) = st.get_mut(&ts) else {
            log::debug!("response to unknown or abandoned request {ts} from {}", msg.meta.sender);
            return;
        };
        if p.answered.get(rank).copied().unwrap_or(true) {
            // a second answer from one server (a request it was sent twice): the first
            // one counted; counting this one too would finish the request early
            log::debug!("request {ts}: another answer from server {rank} ignored");
            return;
        }
        if msg.meta.status == STATUS_NOT_COUNTED {
            // the server lost the cached key list (it restarted, or took the range
            // over): send the keys again, once (without replication a second copy
            // could be applied twice under its new signature)
            let first = !std::mem::replace(&mut p.keys_resent[rank], true);
            if let Some(mut full) = p.full.get(rank).cloned().flatten().filter(|_| first) {
                full.meta.recver = p.sent_to[rank];
                drop(st);
                full.meta.key_sig = sent.lock().renew(rank, full.meta.key_sig);
                if let Err(e) = po.van().send(full) {
                    log::warn!("cannot resend request {ts} to server {rank}: {e}");
                }
            }
            return;
        }
        p.answered[rank] = true;
        if msg.meta.status == STATUS_INVALID {
            let text = msg
                .data
                .first()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            p.error.get_or_insert(KvError::Server(msg.meta.sender, text));
        } else {
            let parsed = KVPairs::from_frames(&msg.data).and_then(|mut d| {
                if d.keys.is_empty() && !d.vals.is_empty() {
                    d.keys = p.sent_keys.get(rank).cloned().unwrap_or_default();
                }
                d.validate_counts().map(|_| d)
            });
            match parsed {
                Ok(data) => p.replies.push(ServerReply {
                    data,
                    rank,
                    status: msg.meta.status,
                    version: msg.meta.version,
                }),
                Err(e) => {
                    p.error.get_or_insert(e);
                }
            }
        }
        if p.replies.len() + usize::from(p.error.is_some()) < p.expected && p.error.is_none() {
            return;
        }
    }
    finish(state, ts);
}

/// Runs the callback of `ts` if it has one and every answer is in; a request with a
/// callback is then forgotten (nobody waits for it).
pub(crate) fn finish<V: Pod + Send + Sync>(state: &State<V>, ts: i32) {
    let (cb, p) = {
        let mut st = state.lock();
        let Entry::Occupied(mut e) = st.entry(ts) else { return };
        let Some(cb) = e.get_mut().callback.take() else { return };
        (cb, e.remove())
    };
    match &p.error {
        Some(e) => cb(Err(e)),
        None => cb(Ok(&p.replies)),
    }
}
