//! The replica shell: a KV server's requests and its forwards from other replicas,
//! over the pure holders / dedup / ack tables.

use super::acks::AckTable;
use super::catchup::Joiners;
use super::copy_wire::{OP_COPY, OP_FETCH, OP_REJOINED};
use super::dedup::{DedupWindow, Outcome, RequestId};
use super::dedup::{DEDUP_CAP, DEDUP_WINDOW_MS};
use super::holders::{dead_server_ranks, Holders};
use super::range_copy::RangeCopy;
use super::shared::{Applied, Shared};
use super::wire::ForwardHead;
use super::wire::FORWARD_CUSTOMER;
use crate::customer::Customer;
use crate::kv::error::KvError;
use crate::kv::key_cache::KnownKeys;
use crate::kv::pairs::KVPairs;
use crate::kv::range::{server_key_ranges, KeyRange};
use crate::kv::request::{checked_pairs, KVMeta, KVResponder, ReqHandle};
use crate::message::{Message, Meta};
use crate::node::{id_role, id_to_rank, server_rank_to_id, Role};
use crate::postoffice::Postoffice;
use bytemuck::Pod;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

/// A running replica: its forward customer (dropping it stops taking forwards).
pub struct Replication {
    _forwards: Customer,
    catching_up: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Replication {
    /// True while this replacement server copies its key ranges (it does not serve
    /// them yet).
    pub fn catching_up(&self) -> bool {
        (self.catching_up)()
    }
}

/// Serves app `app_id` as one replica: returns the customer taking the workers'
/// requests, and the replication state. A replacement server first copies its ranges
/// through `copy` from live replicas (without one it refuses to start:
/// [`KvError::CannotServe`]).
pub(crate) fn serve<V: Pod + Send + Sync + 'static>(
    po: &Arc<Postoffice>,
    app_id: i32,
    handle: ReqHandle<V>,
    copy: Option<Box<dyn RangeCopy>>,
    responder: KVResponder,
) -> Result<(Customer, Replication), KvError> {
    if po.is_recovery() && copy.is_none() {
        return Err(KvError::CannotServe(format!(
            "server {} replaced a dead server, but its application cannot copy key ranges from a live replica (KVServer::with_copy); not serving (the other replicas hold its ranges)",
            po.my_rank()
        )));
    }
    let n = po.num_servers();
    let shared = Arc::new(Shared {
        po: Arc::clone(po),
        app_id,
        holders: Holders::new(n, po.config().replicas),
        me: po.my_rank(),
        ranges: server_key_ranges(n),
        responder,
        applied: Mutex::new(Applied {
            handle,
            dedup: DedupWindow::new(DEDUP_WINDOW_MS, DEDUP_CAP),
            copy,
        }),
        acks: Mutex::new(AckTable::default()),
        catchup: Mutex::new(None),
        joiners: Mutex::new(Joiners::default()),
        known: Mutex::new(KnownKeys::new(64)),
    });
    log::info!(
        "server {} holds key ranges {:?} ({} replicas)",
        shared.me,
        shared.holders.ranges_of(shared.me),
        shared.holders.replicas()
    );
    // a replacement's catch-up is set up before any request or forward is taken: those
    // that arrived first (held by the postoffice) are buffered until their range's copy
    let fetches = match po.is_recovery() {
        true => Some(super::rejoin::prepare(&shared)?),
        false => None,
    };
    let s = Arc::clone(&shared);
    let requests = Customer::new_inline(po, app_id, app_id, move |msg: Message| match msg.meta.request {
        true if msg.meta.head == OP_REJOINED && !msg.meta.push && !from_server(&msg) => {}
        true if msg.meta.head == OP_REJOINED && !msg.meta.push => {
            if let Some(rank) = id_to_rank(msg.meta.sender) {
                s.joiners.lock().rejoined(rank, s.now_ms());
            }
            s.po.mark_rejoined(msg.meta.sender)
        }
        true => s.on_request(msg),
        false => {}
    })?;
    let s = Arc::clone(&shared);
    let forwards = Customer::new_inline(po, app_id, FORWARD_CUSTOMER, move |msg: Message| {
        if !from_server(&msg) {
            return;
        }
        match (msg.meta.request, msg.meta.push, msg.meta.head) {
            (true, true, _) => s.on_forward(msg),
            (false, true, _) => s.on_ack(&msg),
            (true, false, OP_FETCH) => s.on_fetch(&msg),
            (false, false, OP_COPY) => s.on_copy(msg),
            _ => log::warn!("dropped an unknown replica message from {}", msg.meta.sender),
        }
    })?;
    let weak: Weak<Shared<V>> = Arc::downgrade(&shared);
    po.on_node_dead(move |_| {
        if let Some(s) = weak.upgrade() {
            s.release_dead();
            s.catch_up_dead();
        }
    });
    if let Some(fetches) = fetches {
        super::rejoin::start(&shared, fetches);
    }
    let catching_up = Box::new(move || shared.catchup.lock().as_ref().is_some_and(|c| !c.done()));
    Ok((
        requests,
        Replication {
            _forwards: forwards,
            catching_up,
        },
    ))
}

/// True if `msg` comes from a server: replicas talk among themselves only (the van
/// binds the sender id to the link's certificate, so a worker cannot send as one).
/// Anything else is dropped with a line.
fn from_server(msg: &Message) -> bool {
    let ok = id_role(msg.meta.sender) == Some(Role::Server);
    if !ok {
        log::warn!(
            "dropped a replica message from node {}, which is no server",
            msg.meta.sender
        );
    }
    ok
}

impl<V: Pod + Send + Sync> Shared<V> {
    /// Server ranks that do not serve: dead, or still copying their ranges.
    pub(super) fn dead(&self) -> BTreeSet<usize> {
        dead_server_ranks(&self.po.unavailable_servers())
    }

    /// The key range `range` names, if this server holds it.
    fn held(&self, range: i32) -> Result<KeyRange, KvError> {
        usize::try_from(range)
            .ok()
            .filter(|&r| self.holders.holds(self.me, r))
            .map(|r| self.ranges[r])
            .ok_or_else(|| KvError::Transport(format!("server {} does not hold key range {range}", self.me)))
    }

    pub(super) fn send(&self, msg: Message) {
        let to = msg.meta.recver;
        if let Err(e) = self.po.van().send(msg) {
            log::warn!("message to {to} not sent: {e}");
        }
    }

    /// A worker's request: buffered while this replacement waits for its range's copy
    /// (one sent to the process it replaced: applied before the copy, the copy would
    /// overwrite it while its id stays recorded as applied), else served.
    fn on_request(&self, msg: Message) {
        if let Some(msg) = self.buffer_until_copied(msg) {
            self.serve_request(&msg);
        }
    }

    /// A worker's request: a pull is served here; a push is applied here (once),
    /// forwarded to the other live holders, and answered when they applied it.
    pub(super) fn serve_request(&self, msg: &Message) {
        let meta = KVMeta::of(&msg.meta);
        let pairs = self.held(meta.range).and_then(|range| {
            let max_keys = self.po.config().security.limits.max_keys;
            checked_pairs::<V>(msg, meta.push, &mut self.known.lock(), range, max_keys)
        });
        let kvs = match pairs {
            Ok(p) => p,
            Err(e) => return self.responder.refuse(&meta, e),
        };
        if !meta.push {
            return (self.applied.lock().handle)(&meta, kvs, &self.responder);
        }
        let id = RequestId {
            origin: meta.sender,
            incarnation: meta.incarnation,
            customer: meta.customer_id,
            timestamp: meta.timestamp,
            range: meta.range,
        };
        let Some(answer) = self.apply(&meta, id, kvs.clone()) else {
            log::warn!(
                "the handle did not answer push {} of {} at once",
                meta.timestamp,
                meta.sender
            );
            return;
        };
        let answered = Outcome {
            status: answer.meta.status,
            version: answer.meta.version,
        };
        let others = self.holders.others(id.range as usize, self.me, &self.dead());
        let others = self.joiners.lock().targets(id.range as usize, self.me, others);
        if let Some(a) = self.acks.lock().add(id, others.iter().copied(), answer) {
            return self.send(a);
        }
        let head = ForwardHead {
            id,
            cmd: meta.cmd,
            version: meta.version,
            answered,
        }
        .encode();
        for r in others {
            let mut data = vec![head.clone()];
            data.extend(kvs.to_frames());
            self.send(Message {
                meta: Meta {
                    head: meta.cmd,
                    app_id: self.app_id,
                    customer_id: FORWARD_CUSTOMER,
                    timestamp: self.po.van().next_timestamp(),
                    recver: server_rank_to_id(r),
                    request: true,
                    push: true,
                    range: id.range,
                    ..Default::default()
                },
                data,
            });
        }
        // a replica declared dead while this push was being forwarded
        self.release_dead();
    }

    /// Applies a push unless its id was applied already; returns the answer for the
    /// worker (the first application's status and version).
    fn apply(&self, meta: &KVMeta, id: RequestId, kvs: KVPairs<V>) -> Option<Message> {
        let (resp, slot) = self.responder.capturing();
        let mut a = self.applied.lock();
        if let Some(out) = a.dedup.get(&id) {
            log::debug!("push {id:?} was applied already");
            if meta.pull {
                let pull = KVMeta {
                    push: false,
                    ..meta.clone()
                };
                (a.handle)(&pull, kvs, &resp);
            } else if let Err(e) = resp.send(meta, Vec::new(), out.status, out.version) {
                log::warn!("{e}");
            }
            let mut m = slot.lock().take()?;
            m.meta.push = meta.push;
            m.meta.status = out.status;
            m.meta.version = out.version;
            return Some(m);
        }
        (a.handle)(meta, kvs, &resp);
        let m = slot.lock().take();
        let out = m.as_ref().map_or(
            Outcome {
                status: 0,
                version: meta.version,
            },
            |m| Outcome {
                status: m.meta.status,
                version: m.meta.version,
            },
        );
        let now = self.now_ms();
        a.dedup.record(id, out, now);
        m
    }

    /// A push another replica applied: apply it here too (once), then acknowledge
    /// (buffered while this replacement waits for the range's copy).
    pub(super) fn on_forward(&self, msg: Message) {
        if let Some(msg) = self.buffer_until_copied(msg) {
            self.apply_forward(&msg);
        }
    }

    /// Applies a forward (once) and acknowledges it.
    pub(super) fn apply_forward(&self, msg: &Message) {
        let head = match ForwardHead::decode(&msg.data) {
            Ok(h) => h,
            Err(e) => return log::warn!("dropped a forward from {}: {e}", msg.meta.sender),
        };
        let id = head.id;
        let checked = self.held(id.range).and_then(|range| {
            let p = KVPairs::<V>::from_frames(&msg.data[1..])?;
            p.validate(true)?;
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
        let kvs = match checked {
            Ok(p) => p,
            Err(e) => return log::warn!("dropped a forward from {}: {e}", msg.meta.sender),
        };
        let meta = KVMeta {
            cmd: head.cmd,
            push: true,
            pull: false,
            sender: id.origin,
            timestamp: id.timestamp,
            customer_id: id.customer,
            version: head.version,
            range: id.range,
            incarnation: id.incarnation,
            forwarded: Some(head.answered),
        };
        self.apply(&meta, id, kvs);
        self.relay(msg, id.range);
        self.send(Message {
            meta: Meta {
                head: head.cmd,
                app_id: self.app_id,
                customer_id: FORWARD_CUSTOMER,
                timestamp: msg.meta.timestamp,
                recver: msg.meta.sender,
                recver_incarnation: msg.meta.incarnation,
                request: false,
                push: true,
                range: id.range,
                ..Default::default()
            },
            data: vec![msg.data[0].clone()],
        });
    }

    /// Another replica applied a push this one forwarded.
    fn on_ack(&self, msg: &Message) {
        let head = match ForwardHead::decode(&msg.data) {
            Ok(h) => h,
            Err(e) => return log::warn!("dropped an acknowledgement from {}: {e}", msg.meta.sender),
        };
        let Some(from) = id_to_rank(msg.meta.sender) else {
            return;
        };
        let done = self.acks.lock().on_ack(&head.id, from);
        if let Some(a) = done {
            self.send(a);
        }
    }

    /// Server ranks whose process is dead (declared dead or left; see
    /// [`super::catchup::Joiners::dead`]). A replacement still copying its ranges is
    /// not one of them: it acknowledges a push once it applied it after its copy.
    pub(super) fn dead_processes(&self) -> BTreeSet<usize> {
        let declared = dead_server_ranks(&self.po.dead_nodes());
        let van = self.po.van();
        self.joiners
            .lock()
            .dead(&declared, |r| van.dead_incarnation(server_rank_to_id(r)))
    }

    /// Answers the pushes that waited only for replicas now dead. A holder still
    /// copying its ranges is waited for: answered before it applied the push, the
    /// push could end up on one copy only.
    fn release_dead(&self) {
        let dead = self.dead_processes();
        if dead.is_empty() {
            return;
        }
        let done = self.acks.lock().on_dead(&dead);
        for a in done {
            self.send(a);
        }
    }
}
