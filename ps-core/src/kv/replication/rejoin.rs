//! The catch-up shell (over the pure [`CatchUp`] and [`Joiners`]): a replacement
//! server asks each range's source for a copy, buffers the range's forwards until the
//! copy is installed, then announces it rejoined; a source answers a copy request
//! under its apply lock and forwards the range's pushes to the newcomer from then on.

use super::catchup::{CatchUp, Fetch};
use super::copy_wire::{CopyHead, OP_COPY, OP_FETCH, OP_REJOINED};
use super::shared::Shared;
use super::wire::FORWARD_CUSTOMER;
use crate::kv::error::KvError;
use crate::message::{Message, Meta};
use crate::node::{id_to_rank, server_rank_to_id, SERVER_GROUP, WORKER_GROUP};
use bytemuck::Pod;
use std::sync::Arc;

/// Sets up a replacement's catch-up: the copies to ask for, from each range's first
/// live holder. [`KvError::CannotServe`] if a range has no live copy.
pub(super) fn prepare<V: Pod + Send + Sync>(shared: &Shared<V>) -> Result<Vec<Fetch>, KvError> {
    let (c, fetches) = CatchUp::new(shared.holders, shared.me, &shared.dead(), shared.now_ms());
    let lost = c.lost();
    if !lost.is_empty() {
        return Err(KvError::CannotServe(format!(
            "server {} replaced a dead server, but no live replica holds its key ranges {lost:?}; not serving",
            shared.me
        )));
    }
    *shared.catchup.lock() = Some(c);
    Ok(fetches)
}

/// Starts a replacement's catch-up ([`prepare`]d): asks for every range's copy, and
/// asks again at the van's ticks when a copy does not come.
pub(super) fn start<V: Pod + Send + Sync + 'static>(shared: &Arc<Shared<V>>, fetches: Vec<Fetch>) {
    log::info!(
        "server {}: copying key ranges {fetches:?} from live replicas",
        shared.me
    );
    for f in fetches {
        shared.ask(f);
    }
    let weak = Arc::downgrade(shared);
    shared.po.van().on_tick(move |now| {
        let Some(s) = weak.upgrade() else { return };
        let mut cu = s.catchup.lock();
        let Some(c) = cu.as_mut().filter(|c| !c.done()) else {
            return;
        };
        let again = c.tick(now);
        drop(cu);
        for f in again {
            log::warn!("server {}: no copy of key range {} yet; asking again", s.me, f.range);
            s.ask(f);
        }
    });
}

impl<V: Pod + Send + Sync> Shared<V> {
    fn message(&self, head: i32, customer_id: i32, recver: i32, request: bool, range: i32, timestamp: i32) -> Meta {
        Meta {
            head,
            app_id: self.app_id,
            customer_id,
            timestamp,
            recver,
            request,
            range,
            ..Default::default()
        }
    }

    fn ask(&self, f: Fetch) {
        let ts = self.po.van().next_timestamp();
        let meta = self.message(
            OP_FETCH,
            FORWARD_CUSTOMER,
            server_rank_to_id(f.from),
            true,
            f.range as i32,
            ts,
        );
        self.send(Message { meta, data: Vec::new() });
    }

    /// A newcomer asks for a copy of a range this server holds: taken, sent and the
    /// newcomer made a forward target under the apply lock, so every push applied
    /// later reaches it. A range this server is still copying itself is not sent.
    pub(super) fn on_fetch(&self, msg: &Message) {
        let from = msg.meta.sender;
        let range = usize::try_from(msg.meta.range)
            .ok()
            .filter(|&r| self.holders.holds(self.me, r));
        let (Some(range), Some(rank)) = (range, id_to_rank(from)) else {
            return log::warn!("dropped a copy request from {from} for key range {}", msg.meta.range);
        };
        // a replacement itself still copying the range holds none of it yet (two
        // replacements at once may each take the other for a live holder): the
        // newcomer asks again after FETCH_RETRY_MS, by when the copy is in
        if self.catchup.lock().as_ref().is_some_and(|c| !c.copied(range)) {
            return log::info!(
                "server {}: key range {range} is still being copied here: server {rank} asks again",
                self.me
            );
        }
        let mut a = self.applied.lock();
        let ids = a
            .dedup
            .of_range(range as i32)
            .into_iter()
            .map(|(_, id, o)| (id, o))
            .collect();
        let Some(copy) = a.copy.as_mut() else {
            return log::warn!("server {}: this application cannot copy key ranges", self.me);
        };
        let state = copy.snapshot(range, self.ranges[range]);
        self.joiners.lock().add(range, rank, msg.meta.incarnation);
        let head = CopyHead { range, ids }.encode();
        let meta = self.message(OP_COPY, FORWARD_CUSTOMER, from, false, range as i32, msg.meta.timestamp);
        log::info!("server {}: sent a copy of key range {range} to server {rank}", self.me);
        self.send(Message {
            meta,
            data: vec![head, state],
        });
    }

    /// A copy arrived: installed (with its request ids) if it is the one awaited, then
    /// the forwards and requests buffered meanwhile are applied, in order, before any
    /// later one.
    pub(super) fn on_copy(&self, msg: Message) {
        let sender = msg.meta.sender;
        let head = match CopyHead::decode(&msg.data) {
            Ok(h) => h,
            Err(e) => return log::warn!("dropped a copy from {sender}: {e}"),
        };
        let (range, Some(from)) = (head.range, id_to_rank(sender)) else {
            return;
        };
        let mut cu = self.catchup.lock();
        let Some(c) = cu.as_mut().filter(|c| c.expects(range, from)) else {
            return log::debug!("dropped an unexpected copy of key range {range} from {sender}");
        };
        {
            let mut a = self.applied.lock();
            let now = self.now_ms();
            let Some(copy) = a.copy.as_mut() else { return };
            let Some(state) = msg.data.get(1) else {
                return log::warn!("dropped a copy from {sender}: no state frame");
            };
            if let Err(e) = copy.restore(range, self.ranges[range], state) {
                return log::warn!("dropped a copy of key range {range} from {sender}: {e}");
            }
            for (id, out) in head.ids {
                a.dedup.record(id, out, now);
            }
        }
        let buffered = c.on_copy(range, from).unwrap_or_default();
        log::info!(
            "server {}: installed key range {range} from server {from} ({} forwards buffered meanwhile)",
            self.me,
            buffered.len()
        );
        for f in buffered {
            match f.meta.customer_id {
                FORWARD_CUSTOMER => self.apply_forward(&f),
                _ => self.serve_request(&f),
            }
        }
        if c.take_rejoin() {
            drop(cu);
            self.announce();
        }
    }

    /// A forward of `range` applied here is relayed to the newcomers this server gave
    /// a copy of the range (see [`super::catchup::Joiners::relay_targets`]); their
    /// acknowledgements are not waited for.
    pub(super) fn relay(&self, fwd: &Message, range: i32) {
        let (Ok(r), Some(from)) = (usize::try_from(range), id_to_rank(fwd.meta.sender)) else {
            return;
        };
        let to = self.joiners.lock().relay_targets(r, self.me, from, self.now_ms());
        for rank in to {
            let ts = self.po.van().next_timestamp();
            let mut meta = self.message(
                fwd.meta.head,
                FORWARD_CUSTOMER,
                server_rank_to_id(rank),
                true,
                range,
                ts,
            );
            meta.push = true;
            self.send(Message {
                meta,
                data: fwd.data.clone(),
            });
        }
    }

    /// A forward or request of a range still being copied is kept (`None`);
    /// otherwise returned.
    pub(super) fn buffer_until_copied(&self, msg: Message) -> Option<Message> {
        let mut cu = self.catchup.lock();
        let Some(c) = cu.as_mut() else {
            return Some(msg);
        };
        match usize::try_from(msg.meta.range) {
            Ok(r) => c.on_forward(r, msg),
            Err(_) => Some(msg),
        }
    }

    /// Tells every server and worker this server holds its ranges again.
    fn announce(&self) {
        log::info!("server {}: every key range copied; rejoining as a holder", self.me);
        let me = self.po.my_id();
        for id in self.po.node_ids(SERVER_GROUP + WORKER_GROUP) {
            if id == me {
                continue;
            }
            let ts = self.po.van().next_timestamp();
            let meta = self.message(OP_REJOINED, self.app_id, id, true, -1, ts);
            self.send(Message { meta, data: Vec::new() });
        }
    }

    /// After deaths: copies whose source died are asked of the next live holder;
    /// newcomers that died are no longer forwarded to.
    pub(super) fn catch_up_dead(&self) {
        let gone = self.dead_processes();
        self.joiners.lock().forget(&gone);
        let dead = self.dead();
        let mut cu = self.catchup.lock();
        let Some(c) = cu.as_mut() else { return };
        let again = c.on_dead(&dead, self.now_ms());
        let lost = c.lost();
        drop(cu);
        if !lost.is_empty() {
            log::error!("server {}: no live replica holds key ranges {lost:?} any more", self.me);
        }
        for f in again {
            self.ask(f);
        }
    }
}
