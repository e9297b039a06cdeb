//! `KVServer<V>`: a customer that validates each push/pull against this server's key
//! range and hands it to a request handle, which answers through a [`KVResponder`]
//! (now, or later: the responder and the request's [`KVMeta`] can be kept).

use super::key_cache::KnownKeys;
use super::pairs::{KVPairs, KvError};
use super::range::{server_key_ranges, KeyRange};
use crate::customer::{Customer, STATUS_NOT_COUNTED};

const UNKNOWN_KEYS: &str = "unknown key list signature";
use crate::message::{Message, Meta};
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use bytes::Bytes;
use std::io;
use std::sync::Arc;

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
}

/// Sends responses for a KV server; clonable, so a handle can answer later.
#[derive(Clone)]
pub struct KVResponder {
    po: Arc<Postoffice>,
    app_id: i32,
}

impl KVResponder {
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
                request: false,
                push: req.push,
                pull: req.pull,
                version,
                status,
                ..Default::default()
            },
            data,
        };
        self.po.van().send(msg).map(|_| ())
    }
}

/// The request handle: gets each valid request's header, data and a responder.
pub type ReqHandle<V> = Box<dyn FnMut(&KVMeta, KVPairs<V>, &KVResponder) + Send>;

/// A KV server. Create after the postoffice started (it needs its rank).
pub struct KVServer<V: Pod> {
    customer: Customer,
    range: KeyRange,
    _v: std::marker::PhantomData<V>,
}

impl<V: Pod + Send + Sync> KVServer<V> {
    /// Serves app `app_id` with `handle`. Requests with unsorted keys, values that do
    /// not fit, or keys outside this server's range are refused with a clear error
    /// and never reach the handle.
    pub fn new(po: &Arc<Postoffice>, app_id: i32, mut handle: ReqHandle<V>) -> Result<KVServer<V>, String> {
        let range = server_key_ranges(po.num_servers())[po.my_rank().min(po.num_servers().saturating_sub(1))];
        let responder = KVResponder {
            po: Arc::clone(po),
            app_id,
        };
        let mut known = KnownKeys::new(64);
        let customer = Customer::new_inline(po, app_id, app_id, move |msg: Message| {
            if !msg.meta.request {
                return;
            }
            let m = &msg.meta;
            let meta = KVMeta {
                cmd: m.head,
                push: m.push,
                pull: m.pull,
                sender: m.sender,
                timestamp: m.timestamp,
                customer_id: m.customer_id,
                version: m.version,
            };
            let sig = msg.meta.key_sig;
            let checked = KVPairs::<V>::from_frames(&msg.data).and_then(|mut p| {
                match (sig, p.keys.is_empty()) {
                    (0, _) => p.validate(meta.push)?,
                    (_, false) => {
                        p.validate(meta.push)?;
                        known.insert(sig, p.keys.clone());
                    }
                    (_, true) => match known.get(sig) {
                        // validated when it was cached
                        Some(keys) => {
                            p.keys = keys;
                            if meta.push {
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
            });
            match checked {
                Ok(p) => handle(&meta, p, &responder),
                Err(KvError::Transport(t)) if t == UNKNOWN_KEYS => {
                    if let Err(e) = responder.send(&meta, Vec::new(), STATUS_NOT_COUNTED, 0) {
                        log::warn!("key list request to {} not sent: {e}", meta.sender);
                    }
                }
                Err(e) => {
                    log::warn!("refused a request from {}: {e}", meta.sender);
                    if let Err(e) = responder.error(&meta, &e) {
                        log::warn!("error response to {} not sent: {e}", meta.sender);
                    }
                }
            }
        })?;
        Ok(KVServer {
            customer,
            range,
            _v: std::marker::PhantomData,
        })
    }

    /// The key range this server owns.
    pub fn range(&self) -> KeyRange {
        self.range
    }

    /// The underlying customer.
    pub fn customer(&self) -> &Customer {
        &self.customer
    }
}
