//! `KVWorker<V>`: pushes and pulls key/value sets, slicing them across servers by key
//! range, tracking each request by timestamp, and reassembling pulled values in key
//! order. Every call returns at once with a timestamp; `wait*` blocks for the answer.

use super::error::KvError;
use super::key_cache::SentKeys;
use super::lazy::{may_defer, LazyLinks};
use super::pairs::KVPairs;
use super::range::{server_key_ranges, KeyRange};
use super::replication::Holders;
use super::reply::{Callback, ServerReply};
use super::sarray::SArray;
use super::worker_state::{finish, on_response, reroute, target, Pending, State};
use crate::customer::Customer;
use crate::message::{Message, Meta};
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

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

/// A KV worker for app `app_id`.
pub struct KVWorker<V: Pod> {
    sent: Arc<Mutex<SentKeys>>,
    customer: Customer,
    po: Arc<Postoffice>,
    ranges: Vec<KeyRange>,
    holders: Holders,
    state: State<V>,
    lazy: Arc<LazyLinks>,
}

impl<V: Pod + Send + Sync> KVWorker<V> {
    /// A worker talking to the KV servers of app `app_id`; [`KvError::Register`] if its
    /// customer cannot register.
    pub fn new(po: &Arc<Postoffice>, app_id: i32) -> Result<KVWorker<V>, KvError> {
        let state: State<V> = Arc::default();
        let st = Arc::clone(&state);
        let po2 = Arc::clone(po);
        let sent = Arc::new(Mutex::new(SentKeys::new(po.num_servers(), 8)));
        let sent2 = Arc::clone(&sent);
        let lazy: Arc<LazyLinks> = Arc::default();
        let lazy2 = Arc::clone(&lazy);
        let customer = Customer::new_inline(po, app_id, app_id, move |msg: Message| {
            if msg.meta.request {
                // a replacement server copied its key ranges and serves them again
                if msg.meta.head == super::replication::copy_wire::OP_REJOINED {
                    po2.mark_rejoined(msg.meta.sender);
                }
                return;
            }
            on_response(&st, &po2, &sent2, msg);
            // an answer came: what waited lazily behind it goes out
            lazy2.flush(po2.van());
        })?;
        let holders = Holders::new(po.num_servers(), po.config().replicas);
        let (weak, weak_po, weak_lazy) = (Arc::downgrade(&state), Arc::downgrade(po), Arc::downgrade(&lazy));
        po.on_node_dead(move |_| {
            let Some(po) = weak_po.upgrade() else { return };
            if let Some(lazy) = weak_lazy.upgrade() {
                lazy.flush(po.van()); // whatever waited for a dead server's answer
            }
            if let Some(st) = weak.upgrade().filter(|_| holders.replicas() > 0) {
                reroute(&st, &po, &holders);
            }
        });
        Ok(KVWorker {
            sent,
            customer,
            po: Arc::clone(po),
            ranges: server_key_ranges(po.num_servers()),
            holders,
            state,
            lazy,
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

    /// Sends `req`. Without a callback, wait for the returned timestamp. With one,
    /// `callback` runs once all answers are in (or one server refused the request), on
    /// the thread that received the last answer, and the request is then forgotten:
    /// do not wait for it (that would find an unknown request).
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
        if callback.is_some() {
            self.customer.forget_when_done(ts); // nobody waits for it
        }
        let mut out = Vec::with_capacity(targets.len());
        let mut full = vec![None; parts.len()];
        let mut sent_to = vec![0; parts.len()];
        // targets are chosen under the lock `reroute` takes after a death is known:
        // a part sent to a server that just died is rerouted
        let mut st = self.state.lock();
        // an earlier request awaits an answer, whose arrival flushes: send lazily
        let lazy = may_defer(&st, ts);
        for &r in &targets {
            let mut msg = Message {
                meta: Meta {
                    head: req.cmd,
                    app_id: self.customer.app_id(),
                    customer_id: self.customer.customer_id(),
                    timestamp: ts,
                    recver: target(&self.holders, r, &self.po),
                    request: true,
                    push: req.push,
                    pull: req.pull,
                    version: req.versions.get(r).copied().unwrap_or(0),
                    range: r as i32,
                    ..Default::default()
                },
                data: parts[r].to_frames(),
            };
            sent_to[r] = msg.meta.recver;
            // a ps-lite server takes every key list in full
            let sig = if self.po.van().is_pslite_id(msg.meta.recver) {
                None
            } else {
                self.sent.lock().signature(r, &parts[r].keys)
            };
            if let Some((sig, _)) = sig {
                msg.meta.key_sig = sig;
            }
            full[r] = Some(msg.clone());
            if sig.is_some_and(|(_, known)| known) {
                msg.data[0] = bytes::Bytes::new();
            }
            out.push((r, msg));
        }
        st.insert(
            ts,
            Pending {
                expected: targets.len(),
                replies: Vec::with_capacity(targets.len()),
                error: None,
                callback,
                keys: req.kvs.keys.clone(),
                sent_keys: parts.iter().map(|p| p.keys.clone()).collect(),
                full,
                keys_resent: vec![false; parts.len()],
                sent_to,
                answered: (0..parts.len()).map(|r| !targets.contains(&r)).collect(),
            },
        );
        drop(st);
        if targets.is_empty() {
            finish(&self.state, ts);
        }
        for (r, msg) in out {
            let to = msg.meta.recver;
            let sent = if lazy {
                self.po.van().send_lazy(msg)
            } else {
                self.po.van().send(msg)
            };
            match sent {
                Ok(_) if lazy => self.lazy.note(to),
                Ok(_) => {}
                // not in the node table (or this node stopped): the request cannot go
                Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {
                    let e = KvError::Transport(format!("cannot send to server {r}: {e}"));
                    self.abandon(ts);
                    return Err(e);
                }
                // the server's link broke (it may be dying): the part is lost as on a
                // lossy network; the resender sends it again, or the server's death
                // notice reroutes it to a replica or fails the request
                Err(e) => log::info!("request {ts}: part for server {r} not delivered: {e}"),
            }
        }
        // the answers awaited may all have come meanwhile (their flush ran first)
        if lazy && !may_defer(&self.state.lock(), ts) {
            self.lazy.flush(self.po.van());
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

    /// Requests sent and not yet waited for (or, with a callback, not yet answered).
    pub fn pending_requests(&self) -> usize {
        self.state.lock().len()
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
