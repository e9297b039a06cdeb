//! `KVServer<V>`: a customer that validates each push/pull against this server's key
//! range and hands it to a request handle, which answers through a [`KVResponder`]
//! (now, or later: the responder and the request's [`KVMeta`] can be kept). With
//! `PS_REPLICAS` > 0 the requests go through the replication layer instead
//! (`kv/replication/`), which calls the same handle.

use super::error::KvError;
use super::key_cache::KnownKeys;
use super::range::{server_key_ranges, KeyRange};
use super::replication::{self, RangeCopy, Replication};
use super::request::{checked_pairs, KVMeta, KVResponder, ReqHandle};
use crate::customer::Customer;
use crate::message::Message;
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use std::sync::Arc;

/// A KV server. Create after the postoffice started (it needs its rank).
pub struct KVServer<V: Pod> {
    customer: Customer,
    replication: Option<Replication>,
    range: KeyRange,
    _v: std::marker::PhantomData<V>,
}

impl<V: Pod + Send + Sync + 'static> KVServer<V> {
    /// Serves app `app_id` with `handle`. Requests with unsorted keys, values that do
    /// not fit, or keys outside this server's range are refused with a clear error
    /// and never reach the handle. With `PS_REPLICAS` > 0, this server also holds the
    /// ranges of the servers before it on the ring (see `kv/replication/`); `handle`
    /// then gets those ranges' pushes too, and must answer a push at once. A
    /// replacement server cannot copy its ranges this way: see [`KVServer::with_copy`].
    /// Fails with [`KvError::Register`] if its customer cannot register, with
    /// [`KvError::CannotServe`] for a replacement that cannot take up its ranges.
    pub fn new(po: &Arc<Postoffice>, app_id: i32, handle: ReqHandle<V>) -> Result<KVServer<V>, KvError> {
        Self::with_copy(po, app_id, handle, None)
    }

    /// Like [`KVServer::new`], with `copy` giving (and installing) the state of a key
    /// range: with `PS_REPLICAS` > 0 a replacement server then copies its ranges from
    /// live replicas and rejoins as their holder (without `copy` it refuses to serve).
    pub fn with_copy(
        po: &Arc<Postoffice>,
        app_id: i32,
        handle: ReqHandle<V>,
        copy: Option<Box<dyn RangeCopy>>,
    ) -> Result<KVServer<V>, KvError> {
        let range = server_key_ranges(po.num_servers())[po.my_rank().min(po.num_servers().saturating_sub(1))];
        let responder = KVResponder::new(po, app_id);
        if po.config().replicas > 0 {
            let (customer, rep) = replication::serve(po, app_id, handle, copy, responder)?;
            return Ok(KVServer {
                customer,
                replication: Some(rep),
                range,
                _v: std::marker::PhantomData,
            });
        }
        let mut handle = handle;
        let mut known = KnownKeys::new(64);
        let max_keys = po.config().security.limits.max_keys;
        let customer = Customer::new_inline(po, app_id, app_id, move |msg: Message| {
            if !msg.meta.request {
                return;
            }
            let meta = KVMeta::of(&msg.meta);
            match checked_pairs::<V>(&msg, meta.push, &mut known, range, max_keys) {
                Ok(p) => handle(&meta, p, &responder),
                Err(e) => responder.refuse(&meta, e),
            }
        })?;
        Ok(KVServer {
            customer,
            replication: None,
            range,
            _v: std::marker::PhantomData,
        })
    }

    /// The key range this server owns (its primary range).
    pub fn range(&self) -> KeyRange {
        self.range
    }

    /// True while this replacement server copies its key ranges from live replicas
    /// (with `PS_REPLICAS` > 0; it serves them once copied).
    pub fn catching_up(&self) -> bool {
        self.replication.as_ref().is_some_and(|r| r.catching_up())
    }

    /// The underlying customer.
    pub fn customer(&self) -> &Customer {
        &self.customer
    }
}
