//! `KVWorker<V>`: pushes and pulls key/value sets, slicing them across servers by key
//! range, tracking each request by timestamp, and reassembling pulled values in key
//! order. Every call returns at once with a timestamp; `wait*` blocks for the answer.

use super::key_cache::SentKeys;
use super::pairs::{KVPairs, KvError};
use super::range::{server_key_ranges, KeyRange};
use super::sarray::SArray;
use super::server::STATUS_INVALID;
use crate::customer::{Customer, STATUS_NOT_COUNTED};
use crate::message::{Message, Meta};
use crate::node::server_rank_to_id;
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// One server's answer to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerReply<V: Pod> {
    /// Server rank.
    pub rank: usize,
    /// Status (0 = ok; the application defines positive values).
    pub status: i32,
    /// Version the server sent back.
    pub version: u64,
    /// Pulled values (empty for a push).
    pub data: KVPairs<V>,
}

/// Called once when every server answered (or one refused the request).
pub type Callback<V> = Box<dyn FnOnce(Result<&[ServerReply<V>], &KvError>) + Send>;

/// A request: what to send, to which servers, with what version.
pub struct KvRequest<V: Pod> {
    /// Keys (sorted) and, for a push, values.
    pub kvs: KVPairs<V>,
    /// Application command (sent as the message head).
    pub cmd: i32,
    /// Send values to apply.
    pub push: bool,
    /// Ask for values back.
    pub pull: bool,
    /// Per server rank: the version to send (default 0).
    pub versions: Vec<u64>,
    /// Per server rank: whether to send to it at all (default: every server holding
    /// one of the keys).
    pub only: Vec<bool>,
}

impl<V: Pod> KvRequest<V> {
    /// A request with default versions and servers.
    pub fn new(kvs: KVPairs<V>, cmd: i32, push: bool, pull: bool) -> KvRequest<V> {
        KvRequest {
            kvs,
            cmd,
            push,
            pull,
            versions: Vec::new(),
            only: Vec::new(),
        }
    }
}

struct Pending<V: Pod> {
    expected: usize,
    replies: Vec<ServerReply<V>>,
    error: Option<KvError>,
    callback: Option<Callback<V>>,
    keys: SArray<u64>,
    /// The keys sent to each server rank (servers do not send them back).
    sent_keys: Vec<SArray<u64>>,
    /// Per rank: the request with its full key list, for a server that lost the cached
    /// list.
    full: Vec<Option<Message>>,
    /// Per rank: whether its answer is in (ranks not asked count as answered).
    answered: Vec<bool>,
}

type State<V> = Arc<Mutex<HashMap<i32, Pending<V>>>>;

/// A KV worker for app `app_id`.
pub struct KVWorker<V: Pod> {
    sent: Arc<Mutex<SentKeys>>,
    customer: Customer,
    po: Arc<Postoffice>,
    ranges: Vec<KeyRange>,
    state: State<V>,
}

impl<V: Pod + Send + Sync> KVWorker<V> {
    /// A worker talking to the KV servers of app `app_id`.
    pub fn new(po: &Arc<Postoffice>, app_id: i32) -> Result<KVWorker<V>, String> {
        let state: State<V> = Arc::default();
        let st = Arc::clone(&state);
        let po2 = Arc::clone(po);
        let sent = Arc::new(Mutex::new(SentKeys::new(po.num_servers(), 8)));
        let sent2 = Arc::clone(&sent);
        let customer = Customer::new_inline(po, app_id, app_id, move |msg: Message| {
            if msg.meta.request {
                return;
            }
            on_response(&st, &po2, &sent2, msg);
        })?;
        Ok(KVWorker {
            sent,
            customer,
            po: Arc::clone(po),
            ranges: server_key_ranges(po.num_servers()),
            state,
        })
    }

    /// The servers' key ranges, in rank order.
    pub fn ranges(&self) -> &[KeyRange] {
        &self.ranges
    }

    /// Pushes `vals` of `keys` (copied); `lens` may be empty.
    pub fn push(&self, keys: &[u64], vals: &[V], lens: &[i32], cmd: i32) -> Result<i32, KvError> {
        self.zpush(KVPairs::new(keys.to_vec(), vals.to_vec(), lens.to_vec()), cmd)
    }

    /// Pushes without copying the arrays.
    pub fn zpush(&self, kvs: KVPairs<V>, cmd: i32) -> Result<i32, KvError> {
        self.request(KvRequest::new(kvs, cmd, true, false), None)
    }

    /// Pulls `keys` (copied); fetch the values with [`KVWorker::wait_pull`].
    pub fn pull(&self, keys: &[u64], cmd: i32) -> Result<i32, KvError> {
        self.zpull(keys.to_vec().into(), cmd)
    }

    /// Pulls without copying the keys.
    pub fn zpull(&self, keys: SArray<u64>, cmd: i32) -> Result<i32, KvError> {
        let kvs = KVPairs {
            keys,
            ..Default::default()
        };
        self.request(KvRequest::new(kvs, cmd, false, true), None)
    }

    /// Pushes and pulls in one round trip: the values after the push.
    pub fn push_pull(&self, kvs: KVPairs<V>, cmd: i32) -> Result<i32, KvError> {
        self.request(KvRequest::new(kvs, cmd, true, true), None)
    }

    /// Sends `req`; `callback` runs on the customer thread once all answers are in.
    pub fn request(&self, req: KvRequest<V>, callback: Option<Callback<V>>) -> Result<i32, KvError> {
        req.kvs.validate(req.push)?;
        let parts = req.kvs.slice(&self.ranges, req.push);
        let targets: Vec<usize> = (0..parts.len())
            .filter(|&r| match req.only.get(r) {
                Some(&only) => only,
                None => !parts[r].keys.is_empty(),
            })
            .collect();
        let ts = self.customer.new_request_expecting(targets.len());
        self.state.lock().insert(
            ts,
            Pending {
                expected: targets.len(),
                replies: Vec::with_capacity(targets.len()),
                error: None,
                callback,
                keys: req.kvs.keys.clone(),
                sent_keys: parts.iter().map(|p| p.keys.clone()).collect(),
                full: vec![None; parts.len()],
                answered: (0..parts.len()).map(|r| !targets.contains(&r)).collect(),
            },
        );
        if targets.is_empty() {
            finish(&self.state, ts);
        }
        for r in targets {
            let mut msg = Message {
                meta: Meta {
                    head: req.cmd,
                    app_id: self.customer.app_id(),
                    customer_id: self.customer.customer_id(),
                    timestamp: ts,
                    recver: server_rank_to_id(r),
                    request: true,
                    push: req.push,
                    pull: req.pull,
                    version: req.versions.get(r).copied().unwrap_or(0),
                    ..Default::default()
                },
                data: parts[r].to_frames(),
            };
            let sig = self.sent.lock().signature(r, &parts[r].keys);
            if let Some((sig, known)) = sig {
                msg.meta.key_sig = sig;
                if let Some(p) = self.state.lock().get_mut(&ts) {
                    p.full[r] = Some(msg.clone());
                }
                if known {
                    msg.data[0] = bytes::Bytes::new();
                }
            }
            if let Err(e) = self.po.van().send(msg) {
                let e = KvError::Transport(format!("cannot send to server {r}: {e}"));
                self.abandon(ts);
                return Err(e);
            }
        }
        Ok(ts)
    }

    /// Waits for request `ts`; errors if a server refused it.
    pub fn wait(&self, ts: i32) -> Result<(), KvError> {
        self.wait_replies(ts, None).map(|_| ())
    }

    /// Waits for pull `ts` and returns the values of the requested keys, in key order.
    pub fn wait_pull(&self, ts: i32) -> Result<KVPairs<V>, KvError> {
        let (replies, keys) = self.take(ts, None)?;
        let out = KVPairs::concat(replies.into_iter().map(|r| r.data).collect());
        if out.keys[..] != keys[..] {
            return Err(KvError::BadLength(format!(
                "asked for {} keys, got {} back",
                keys.len(),
                out.keys.len()
            )));
        }
        Ok(out)
    }

    /// Waits at most `timeout` for request `ts`: `None` if it is still incomplete (it
    /// stays pending: wait again, or [`KVWorker::abandon`] it), else its replies sorted
    /// by server rank.
    pub fn try_wait(&self, ts: i32, timeout: Duration) -> Option<Result<Vec<ServerReply<V>>, KvError>> {
        if !self.customer.wait_request_timeout(ts, timeout) {
            return None;
        }
        Some(self.take(ts, None).map(|(r, _)| r))
    }

    /// Forgets request `ts`: later answers to it are dropped.
    pub fn abandon(&self, ts: i32) {
        self.state.lock().remove(&ts);
        self.customer.forget_request(ts);
    }

    /// The postoffice this worker sends through.
    pub fn postoffice(&self) -> &Arc<Postoffice> {
        &self.po
    }

    /// Waits (at most `timeout`, if given) for every server's reply to `ts`, sorted by
    /// server rank.
    pub fn wait_replies(&self, ts: i32, timeout: Option<Duration>) -> Result<Vec<ServerReply<V>>, KvError> {
        self.take(ts, timeout).map(|(r, _)| r)
    }

    fn take(&self, ts: i32, timeout: Option<Duration>) -> Result<(Vec<ServerReply<V>>, SArray<u64>), KvError> {
        match timeout {
            None => self.customer.wait_request(ts),
            Some(t) => {
                if !self.customer.wait_request_timeout(ts, t) {
                    self.abandon(ts);
                    return Err(KvError::Transport(format!("no reply to request {ts} within {t:?}")));
                }
            }
        }
        let p = self
            .state
            .lock()
            .remove(&ts)
            .ok_or_else(|| KvError::Transport(format!("unknown request {ts}")))?;
        if let Some(e) = p.error {
            return Err(e);
        }
        let mut replies = p.replies;
        replies.sort_by_key(|r| r.rank);
        Ok((replies, p.keys))
    }
}

fn on_response<V: Pod + Send + Sync>(state: &State<V>, po: &Postoffice, sent: &Mutex<SentKeys>, msg: Message) {
    let ts = msg.meta.timestamp;
    let rank = crate::node::id_to_rank(msg.meta.sender).unwrap_or(0);
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
            // the server lost the cached key list (it restarted): send the keys again,
            // once (a second copy could be applied twice under its new signature)
            if let Some(mut full) = p.full.get_mut(rank).and_then(Option::take) {
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

/// Runs the callback of `ts` if it has one and every answer is in.
fn finish<V: Pod + Send + Sync>(state: &State<V>, ts: i32) {
    let (cb, replies, error) = {
        let mut st = state.lock();
        let Some(p) = st.get_mut(&ts) else { return };
        let Some(cb) = p.callback.take() else { return };
        (cb, p.replies.clone(), p.error.clone())
    };
    match &error {
        Some(e) => cb(Err(e)),
        None => cb(Ok(&replies)),
    }
}
