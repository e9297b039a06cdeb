//! The state a replica's request, forward and rejoin handlers share.

use super::acks::AckTable;
use super::catchup::{CatchUp, Joiners};
use super::dedup::DedupWindow;
use super::holders::Holders;
use super::range_copy::RangeCopy;
use crate::kv::key_cache::KnownKeys;
use crate::kv::range::KeyRange;
use crate::kv::request::{KVResponder, ReqHandle};
use crate::message::Message;
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use parking_lot::Mutex;
use std::sync::Arc;

/// The handle and the ids it applied, under one lock: applying a push and recording
/// its id are one step.
/// Copying a range (taking it, installing it) happens under the same lock.
pub(super) struct Applied<V: Pod> {
    pub(super) handle: ReqHandle<V>,
    pub(super) dedup: DedupWindow,
    pub(super) copy: Option<Box<dyn RangeCopy>>,
}

/// What a replica's handlers share: the server's handle and ranges, the acks it
/// awaits, a replacement's catch-up and the newcomers it forwards to.
pub(super) struct Shared<V: Pod> {
    pub(super) po: Arc<Postoffice>,
    pub(super) app_id: i32,
    pub(super) holders: Holders,
    pub(super) me: usize,
    pub(super) ranges: Vec<KeyRange>,
    pub(super) responder: KVResponder,
    pub(super) applied: Mutex<Applied<V>>,
    pub(super) acks: Mutex<AckTable<Message>>,
    /// A replacement's catch-up (None once rejoined, or for a first server).
    pub(super) catchup: Mutex<Option<CatchUp<Message>>>,
    /// Newcomers this server forwards pushes to while they copy its ranges.
    pub(super) joiners: Mutex<Joiners>,
    /// The key lists the workers cached here.
    pub(super) known: Mutex<KnownKeys>,
}

impl<V: Pod> Shared<V> {
    /// The van's clock (ms): the time the dedup window and the catch-up's retries
    /// are measured in.
    pub(super) fn now_ms(&self) -> u64 {
        self.po.van().now_ms()
    }
}
