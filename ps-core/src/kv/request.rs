//! One request as a KV server sees it: its [`KVMeta`], the pairs checked against the
//! server's key range ([`checked_pairs`]), the handle that serves it ([`ReqHandle`])
//! and the [`KVResponder`] it answers through (now, or later: the responder and the
//! meta can be kept).

use super::error::KvError;
use super::key_cache::KnownKeys;
use super::pairs::KVPairs;
use super::range::KeyRange;
use crate::customer::STATUS_NOT_COUNTED;
use crate::message::{Message, Meta};
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use bytes::Bytes;
use parking_lot::Mutex;
use std::io;
use std::sync::Arc;

const UNKNOWN_KEYS: &str = "unknown key list signature";

/// Status of a response to a request that was refused as invalid.
pub const STATUS_INVALID: i32 = -1;

/// The header of a KV request, as the handle sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KVMeta {
    /// Application command (the message head).
    pub cmd: i32,
    /// A push (values to apply).
    pub push: bool,
    /// A pull (values wanted back).
    pub pull: bool,
    /// The requesting worker.
    pub sender: i32,
    /// The request's timestamp.
    pub timestamp: i32,
    /// The requesting customer.
    pub customer_id: i32,
    /// Application-defined version sent with the request.
    pub version: u64,
    /// The key range (server rank) the request is about.
    pub range: i32,
    /// The requesting worker process's incarnation.
    pub incarnation: u64,
    /// On a push another holder of the range applied and forwarded here (replication):
    /// what that holder answered the worker. A copy that follows the range's primary
    /// takes its decisions from it (whether the push was taken, the version it moved
    /// to); None on a worker's own request.
    pub forwarded: Option<super::replication::Outcome>,
}

impl KVMeta {
    pub(crate) fn of(m: &Meta) -> KVMeta {
        KVMeta {
            cmd: m.head,
            push: m.push,
            pull: m.pull,
            sender: m.sender,
            timestamp: m.timestamp,
            customer_id: m.customer_id,
            version: m.version,
            range: m.range,
            incarnation: m.incarnation,
            forwarded: None,
        }
    }
}

/// Where a captured answer goes (see [`KVResponder::capturing`]).
pub(crate) type Captured = Arc<Mutex<Option<Message>>>;

/// Sends responses for a KV server; clonable, so a handle can answer later.
#[derive(Clone)]
pub struct KVResponder {
    po: Arc<Postoffice>,
    app_id: i32,
    capture: Option<Captured>,
}

impl KVResponder {
    pub(crate) fn new(po: &Arc<Postoffice>, app_id: i32) -> KVResponder {
        KVResponder {
            po: Arc::clone(po),
            app_id,
            capture: None,
        }
    }

    /// A responder that keeps the answer instead of sending it (a replica sends it
    /// when the others have applied the push, or never).
    pub(crate) fn capturing(&self) -> (KVResponder, Captured) {
        let slot: Captured = Arc::default();
        let r = KVResponder {
            capture: Some(Arc::clone(&slot)),
            ..self.clone()
        };
        (r, slot)
    }

    /// Answers `req` with `res` (pulled values; empty for a push). The keys are not
    /// sent back: they are the request's, which the worker still has.
    pub fn response<V: Pod + Send + Sync>(&self, req: &KVMeta, res: &KVPairs<V>) -> io::Result<()> {
        self.response_with(req, res, 0, req.version)
    }

    /// Answers with an application status and version.
    pub fn response_with<V: Pod + Send + Sync>(
        &self,
        req: &KVMeta,
        res: &KVPairs<V>,
        status: i32,
        version: u64,
    ) -> io::Result<()> {
        let data = if req.pull && !res.keys.is_empty() {
            res.to_frames()
        } else {
            Vec::new()
        };
        self.send(req, data, status, version)
    }

    /// Refuses `req` with a reason the worker will see.
    pub fn error(&self, req: &KVMeta, err: &KvError) -> io::Result<()> {
        self.send(req, vec![Bytes::from(err.to_string())], STATUS_INVALID, 0)
    }

    pub(crate) fn send(&self, req: &KVMeta, data: Vec<Bytes>, status: i32, version: u64) -> io::Result<()> {
        let msg = Message {
            meta: Meta {
                head: req.cmd,
                app_id: self.app_id,
                customer_id: req.customer_id,
                timestamp: req.timestamp,
                recver: req.sender,
                recver_incarnation: req.incarnation,
                request: false,
                push: req.push,
                pull: req.pull,
                version,
                status,
                range: req.range,
                ..Default::default()
            },
            data,
        };
        match &self.capture {
            Some(slot) => {
                *slot.lock() = Some(msg);
                Ok(())
            }
            None => self.po.van().send(msg).map(|_| ()),
        }
    }

    /// Refuses `meta` because of `err`: asks for the keys again if the cached key
    /// list is unknown, else answers with the error.
    pub(crate) fn refuse(&self, meta: &KVMeta, err: KvError) {
        match err {
            KvError::Transport(t) if t == UNKNOWN_KEYS => {
                if let Err(e) = self.send(meta, Vec::new(), STATUS_NOT_COUNTED, 0) {
                    log::warn!("key list request to {} not sent: {e}", meta.sender);
                }
            }
            e => {
                log::warn!("refused a request from {}: {e}", meta.sender);
                if let Err(e) = self.error(meta, &e) {
                    log::warn!("error response to {} not sent: {e}", meta.sender);
                }
            }
        }
    }
}

/// The request handle: gets each valid request's header, data and a responder.
pub type ReqHandle<V> = Box<dyn FnMut(&KVMeta, KVPairs<V>, &KVResponder) + Send>;

/// Decodes and validates a request's pairs: keys sorted, values fitting, a cached key
/// list resolved (or an `UNKNOWN_KEYS` error), every key inside `range`, at most
/// `max_keys` keys (`PS_MAX_KEYS`).
pub(crate) fn checked_pairs<V: Pod + Send + Sync>(
    msg: &Message,
    push: bool,
    known: &mut KnownKeys,
    range: KeyRange,
    max_keys: usize,
) -> Result<KVPairs<V>, KvError> {
    let sig = msg.meta.key_sig;
    let mut p = KVPairs::<V>::from_frames(&msg.data)?;
    if p.keys.len() > max_keys {
        return Err(KvError::BadFrame(format!(
            "{} keys in one request, above the limit of {max_keys} (PS_MAX_KEYS)",
            p.keys.len()
        )));
    }
    match (sig, p.keys.is_empty()) {
        (0, _) => p.validate(push)?,
        (_, false) => {
            p.validate(push)?;
            known.insert(sig, p.keys.clone());
        }
        (_, true) => match known.get(sig) {
            // validated when it was cached
            Some(keys) => {
                p.keys = keys;
                if push {
                    p.validate_counts()?;
                }
            }
            None => return Err(KvError::Transport(UNKNOWN_KEYS.into())),
        },
    }
    // keys are sorted: the ends decide
    let outside = [p.keys.first(), p.keys.last()]
        .into_iter()
        .flatten()
        .copied()
        .find(|&k| !range.contains(k));
    match outside {
        Some(k) => Err(KvError::OutOfRange(k, range)),
        None => Ok(p),
    }
}
