//! A simulated server holding its key ranges with `PS_REPLICAS` copies: the sum
//! handle over one value per range, and the replication of `kv/replication/` (the
//! push applied once through the request-id window, forwarded to the other live
//! holders, answered once they applied it; a replacement copying its ranges from a
//! live holder before it serves). The bookkeeping of which pushes each copy applied
//! is what the invariants read.

use crate::process::{Changes, NodeLink};
use bytes::Bytes;
use ps_core::kv::replication::acks::AckTable;
use ps_core::kv::replication::catchup::{CatchUp, Fetch, Joiners};
use ps_core::kv::replication::copy_wire::{CopyHead, OP_COPY, OP_FETCH, OP_REJOINED};
use ps_core::kv::replication::wire::ForwardHead;
use ps_core::kv::replication::{dead_server_ranks, DedupWindow, Holders, Outcome, RequestId};
use ps_core::kv::replication::{DEDUP_CAP, DEDUP_WINDOW_MS, FORWARD_CUSTOMER};
use ps_core::message::{Message, Meta};
use ps_core::node::{id_to_rank, server_rank_to_id, ALL_GROUP};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A push whose answer still waits for a holder is forwarded to it again after this.
pub const FORWARD_RETRY_MS: u64 = 2_000;

/// The KV application id of the simulated job.
pub const KV_APP: i32 = 100;

/// A push's identity as the invariants track it.
pub type PushKey = (i32, u64, i32, i32, i32);

/// The key of request `id`.
pub fn push_key(id: &RequestId) -> PushKey {
    (id.origin, id.incarnation, id.customer, id.timestamp, id.range)
}

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

/// A server process.
pub struct Server {
    /// Its postoffice.
    pub node: NodeLink,
    holders: Holders,
    servers: usize,
    /// The ranges this server holds (by range), once it knows its rank.
    pub ranges: BTreeMap<usize, RangeState>,
    dedup: DedupWindow,
    acks: AckTable<Message>,
    catchup: Option<CatchUp<Message>>,
    joiners: Joiners,
    /// The forwards of the pushes whose answers wait, with when they were last sent:
    /// sent again to the holders still missing after [`FORWARD_RETRY_MS`] (the
    /// resender gives up on a holder cut off for long).
    forwards: BTreeMap<PushKey, (RequestId, Message, u64)>,
    /// The process (incarnation) of each newcomer this server gave a copy to.
    joiner_inc: BTreeMap<usize, u64>,
    /// A value was applied twice under one request id: the invariant check reports it.
    pub double_apply: Option<String>,
    started: bool,
    /// Released from the final barrier.
    pub finished: bool,
    bugs: ServerBugs,
}

fn value_of(data: &[Bytes], at: usize) -> Option<i64> {
    let b = data.get(at)?;
    Some(i64::from_le_bytes(b.as_ref().try_into().ok()?))
}

impl Server {
    /// A server process over `node` in a cluster of `servers` servers with `replicas`
    /// extra copies.
    pub fn new(node: NodeLink, servers: usize, replicas: usize, bugs: ServerBugs) -> Server {
        Server {
            node,
            holders: Holders::new(servers, replicas),
            servers,
            ranges: BTreeMap::new(),
            dedup: DedupWindow::new(DEDUP_WINDOW_MS, DEDUP_CAP),
            acks: AckTable::default(),
            catchup: None,
            joiners: Joiners::default(),
            joiner_inc: BTreeMap::new(),
            forwards: BTreeMap::new(),
            double_apply: None,
            started: false,
            finished: false,
            bugs,
        }
    }

    /// This server's rank (once it has its id).
    pub fn rank(&self) -> Option<usize> {
        id_to_rank(self.node.me().id).filter(|_| self.node.ready())
    }

    /// True while this replacement copies its ranges.
    pub fn catching_up(&self) -> bool {
        self.catchup.as_ref().is_some_and(|c| !c.done())
    }

    fn unavailable(&self) -> BTreeSet<usize> {
        dead_server_ranks(&self.node.unavailable())
    }

    fn send(&mut self, msg: Message, _now: u64) {
        self.node.send(msg);
    }

    fn meta(&mut self, head: i32, customer: i32, recver: i32, request: bool, range: i32) -> Meta {
        Meta {
            head,
            app_id: KV_APP,
            customer_id: customer,
            timestamp: self.node.next_ts(),
            recver,
            request,
            range,
            ..Default::default()
        }
    }

    /// What changed in its postoffice (after every step it took part in).
    pub fn on_changes(&mut self, c: Changes, now: u64) {
        if c.table {
            self.on_table(now);
        }
        if c.unavailable {
            self.on_dead(now);
        }
        if c.released.is_some() {
            if self.started {
                self.finished = true;
            } else {
                self.started = true;
                // a training server finalizes at once: it waits in the final barrier
                self.node.barrier(ALL_GROUP);
            }
        }
    }

    fn on_table(&mut self, now: u64) {
        let Some(me) = self.rank() else { return };
        if !self.ranges.is_empty() || self.catchup.is_some() {
            // a table after the first one: nothing to start
            return;
        }
        for r in self.holders.ranges_of(me) {
            self.ranges.insert(r, RangeState::default());
        }
        if self.node.me().is_recovery {
            let (c, fetches) = CatchUp::new(self.holders, me, &self.unavailable(), now);
            self.catchup = Some(c);
            for f in fetches {
                self.ask(f, now);
            }
            // a replacement skips the start barrier; it finalizes at once
            self.started = true;
            self.node.barrier(ALL_GROUP);
        } else {
            self.node.barrier(ALL_GROUP);
        }
    }

    /// A message for the server's KV app (its requests and forwards customers).
    pub fn on_data(&mut self, msg: Message, now: u64) {
        if msg.meta.app_id != KV_APP {
            return;
        }
        if msg.meta.customer_id == FORWARD_CUSTOMER {
            match (msg.meta.request, msg.meta.push, msg.meta.head) {
                (true, true, _) => self.on_forward(msg, now),
                (false, true, _) => self.on_ack(&msg, now),
                (true, false, OP_FETCH) => self.on_fetch(&msg, now),
                (false, false, OP_COPY) => self.on_copy(msg, now),
                _ => {}
            }
            return;
        }
        if msg.meta.request && msg.meta.head == OP_REJOINED && !msg.meta.push {
            if let Some(rank) = id_to_rank(msg.meta.sender) {
                self.joiners.rejoined(rank, now);
            }
            self.node.po.mark_rejoined(msg.meta.sender);
            return;
        }
        if msg.meta.request && msg.meta.push {
            self.on_push(&msg, now);
        }
    }

    fn holds(&self, range: i32) -> bool {
        let me = self.rank();
        usize::try_from(range)
            .ok()
            .is_some_and(|r| me.is_some_and(|m| self.holders.holds(m, r)) && r < self.servers)
    }

    /// Applies push `id` of `v` unless applied already; the outcome to answer with.
    fn apply(&mut self, id: RequestId, v: i64, now: u64) -> Outcome {
        if let Some(out) = self.dedup.get(&id) {
            return out;
        }
        let out = Outcome { status: 0, version: 0 };
        let rank = self.rank();
        let r = self.ranges.entry(id.range as usize).or_default();
        if r.applied.insert(push_key(&id), v).is_some() {
            self.double_apply = Some(format!("push {id:?} applied twice on server {rank:?}"));
        }
        r.value += v;
        self.dedup.record(id, out, now);
        out
    }

    fn answer(&mut self, req: &Meta, out: Outcome) -> Message {
        let mut meta = self.meta(0, req.customer_id, req.sender, false, req.range);
        meta.timestamp = req.timestamp;
        meta.recver_incarnation = req.incarnation;
        meta.push = true;
        meta.status = out.status;
        meta.version = out.version;
        Message { meta, data: Vec::new() }
    }

    fn on_push(&mut self, msg: &Message, now: u64) {
        // a push reaching a replacement before its copy (sent to the process it
        // replaced) waits for the copy, as forwards do: applied before, the copy
        // would overwrite it while its id stays recorded as applied
        if let (Some(c), Ok(r)) = (self.catchup.as_mut(), usize::try_from(msg.meta.range)) {
            if c.on_forward(r, msg.clone()).is_none() {
                return;
            }
        }
        let m = &msg.meta;
        let (Some(v), true) = (value_of(&msg.data, 0), self.holds(m.range)) else {
            return;
        };
        let id = RequestId {
            origin: m.sender,
            incarnation: m.incarnation,
            customer: m.customer_id,
            timestamp: m.timestamp,
            range: m.range,
        };
        let out = self.apply(id, v, now);
        let answer = self.answer(m, out);
        let me = self.rank().expect("holds a range");
        let others = self.holders.others(id.range as usize, me, &self.unavailable());
        let others = self.joiners.targets(id.range as usize, me, others);
        if self.bugs.early_ack {
            self.send(answer.clone(), now);
        }
        log::debug!(
            "push {id:?} targets {others:?} unavailable {:?} dead {:?}",
            self.unavailable(),
            self.node.po.dead_nodes()
        );
        let held = self.acks.add(id, others.iter().copied(), answer);
        if let Some(a) = held {
            if !self.bugs.early_ack {
                self.send(a, now);
            }
            return;
        }
        let head = ForwardHead { id, cmd: 0, version: 0 }.encode();
        let fwd = Message {
            meta: Meta::default(),
            data: vec![head, msg.data[0].clone()],
        };
        self.forwards.insert(push_key(&id), (id, fwd.clone(), now));
        for r in others {
            self.forward(&fwd, id, r, now);
        }
        self.release_dead(now);
    }

    fn forward(&mut self, fwd: &Message, id: RequestId, rank: usize, now: u64) {
        let mut meta = self.meta(0, FORWARD_CUSTOMER, server_rank_to_id(rank), true, id.range);
        meta.push = true;
        self.send(
            Message {
                meta,
                data: fwd.data.clone(),
            },
            now,
        );
    }

    /// Ranks whose process is dead: declared dead, unless the newcomer of that rank
    /// this server gave a copy to is another process than the one declared dead (its
    /// copy request can overtake the table that revives its id).
    fn dead_ranks(&self) -> BTreeSet<usize> {
        dead_server_ranks(&self.node.po.dead_nodes())
            .into_iter()
            .filter(|&r| match self.joiner_inc.get(&r) {
                Some(&inc) => self.node.po.van().dead_incarnation(server_rank_to_id(r)) == Some(inc),
                None => true,
            })
            .collect()
    }

    /// Answers the pushes that waited only for holders now dead. A holder still
    /// copying its ranges is waited for: it acknowledges once it applied the push
    /// after its copy, and answering before would leave a push on one copy only.
    fn release_dead(&mut self, now: u64) {
        let dead = self.dead_ranks();
        if dead.is_empty() {
            return;
        }
        let mut done = self.acks.on_dead(&dead);
        done.sort_by_key(|m| (m.meta.recver, m.meta.timestamp, m.meta.range));
        for a in done {
            if !self.bugs.early_ack {
                self.send(a, now);
            }
        }
    }

    fn on_forward(&mut self, msg: Message, now: u64) {
        let msg = match (self.catchup.as_mut(), usize::try_from(msg.meta.range)) {
            (Some(c), Ok(r)) => match c.on_forward(r, msg) {
                Some(m) => m,
                None => return,
            },
            (_, _) => msg,
        };
        self.apply_forward(&msg, now);
    }

    fn apply_forward(&mut self, msg: &Message, now: u64) {
        let Ok(head) = ForwardHead::decode(&msg.data) else {
            return;
        };
        let (Some(v), true) = (value_of(&msg.data, 1), self.holds(head.id.range)) else {
            return;
        };
        self.apply(head.id, v, now);
        // relay to newcomers copying the range from this server
        if let (Ok(r), Some(from), Some(me)) =
            (usize::try_from(head.id.range), id_to_rank(msg.meta.sender), self.rank())
        {
            for rank in self.joiners.relay_targets(r, me, from, now) {
                let mut meta = self.meta(
                    msg.meta.head,
                    FORWARD_CUSTOMER,
                    server_rank_to_id(rank),
                    true,
                    head.id.range,
                );
                meta.push = true;
                self.send(
                    Message {
                        meta,
                        data: msg.data.clone(),
                    },
                    now,
                );
            }
        }
        let mut meta = self.meta(0, FORWARD_CUSTOMER, msg.meta.sender, false, head.id.range);
        meta.timestamp = msg.meta.timestamp;
        meta.recver_incarnation = msg.meta.incarnation;
        meta.push = true;
        self.send(
            Message {
                meta,
                data: vec![msg.data[0].clone()],
            },
            now,
        );
    }

    fn on_ack(&mut self, msg: &Message, now: u64) {
        let (Ok(head), Some(from)) = (ForwardHead::decode(&msg.data), id_to_rank(msg.meta.sender)) else {
            return;
        };
        if let Some(a) = self.acks.on_ack(&head.id, from) {
            if !self.bugs.early_ack {
                self.send(a, now);
            }
        }
    }

    fn on_dead(&mut self, now: u64) {
        self.release_dead(now);
        let gone = self.dead_ranks();
        self.joiners.forget(&gone);
        self.joiner_inc.retain(|r, _| !gone.contains(r));
        let unavailable = self.unavailable();
        let again = match self.catchup.as_mut() {
            Some(c) => c.on_dead(&unavailable, now),
            None => Vec::new(),
        };
        for f in again {
            self.ask(f, now);
        }
    }

    fn ask(&mut self, f: Fetch, now: u64) {
        let meta = self.meta(
            OP_FETCH,
            FORWARD_CUSTOMER,
            server_rank_to_id(f.from),
            true,
            f.range as i32,
        );
        self.send(Message { meta, data: Vec::new() }, now);
    }

    fn on_fetch(&mut self, msg: &Message, now: u64) {
        let (Some(rank), true) = (id_to_rank(msg.meta.sender), self.holds(msg.meta.range)) else {
            return;
        };
        let range = msg.meta.range as usize;
        if self.catchup.as_ref().is_some_and(|c| !c.copied(range)) {
            // still copying this range itself: nothing to give (asked again later)
            return;
        }
        let ids = self
            .dedup
            .of_range(range as i32)
            .into_iter()
            .map(|(_, id, o)| (id, o))
            .collect();
        let state = self.ranges.get(&range).cloned().unwrap_or_default();
        self.joiners.add(range, rank);
        self.joiner_inc.insert(rank, msg.meta.incarnation);
        let head = CopyHead { range, ids }.encode();
        let mut meta = self.meta(OP_COPY, FORWARD_CUSTOMER, msg.meta.sender, false, range as i32);
        meta.timestamp = msg.meta.timestamp;
        let body = Bytes::from(bincode::serialize(&state).expect("a range state serializes"));
        self.send(
            Message {
                meta,
                data: vec![head, body],
            },
            now,
        );
    }

    fn on_copy(&mut self, msg: Message, now: u64) {
        let (Ok(head), Some(from)) = (CopyHead::decode(&msg.data), id_to_rank(msg.meta.sender)) else {
            return;
        };
        let range = head.range;
        if !self.catchup.as_ref().is_some_and(|c| c.expects(range, from)) {
            return;
        }
        let Some(Ok(state)) = msg.data.get(1).map(|b| bincode::deserialize::<RangeState>(b)) else {
            return;
        };
        self.ranges.insert(range, state);
        for (id, out) in head.ids {
            self.dedup.record(id, out, now);
        }
        let c = self.catchup.as_mut().expect("checked above");
        let buffered = c.on_copy(range, from).unwrap_or_default();
        let rejoin = c.take_rejoin();
        for f in buffered {
            if f.meta.customer_id == FORWARD_CUSTOMER {
                self.apply_forward(&f, now);
            } else {
                self.on_push(&f, now);
            }
        }
        if rejoin {
            let me = self.node.me().id;
            let ids: Vec<i32> = self
                .node
                .table()
                .iter()
                .map(|n| n.id)
                .filter(|&id| id != me && id >= 8)
                .collect();
            for id in ids {
                let mut meta = self.meta(OP_REJOINED, KV_APP, id, true, -1);
                meta.customer_id = 0;
                self.send(Message { meta, data: Vec::new() }, now);
            }
        }
    }

    /// Periodic work: copies asked again.
    pub fn tick(&mut self, now: u64) {
        // forwards still unacknowledged go again to the holders missing
        let due: Vec<PushKey> = self
            .forwards
            .iter()
            .filter(|(_, (_, _, at))| now.saturating_sub(*at) >= FORWARD_RETRY_MS)
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            let Some((id, fwd, _)) = self.forwards.get(&k).cloned() else {
                continue;
            };
            match self.acks.missing(&id).cloned() {
                Some(missing) => {
                    for r in missing {
                        self.forward(&fwd, id, r, now);
                    }
                    self.forwards.insert(k, (id, fwd, now));
                }
                None => {
                    self.forwards.remove(&k);
                }
            }
        }
        let again = match self.catchup.as_mut() {
            Some(c) if !c.done() => c.tick(now),
            _ => Vec::new(),
        };
        for f in again {
            self.ask(f, now);
        }
    }
}
