//! The parameter tables' server: a KV server holding, per key range it serves, the
//! declared model's [`TableShard`] (none until a worker declares it). Pushes are
//! declarations and steps, answered at once; pulls are the dense block (held while it
//! waits for the next sync version) and rows. A ticker follows dead, idle and joining
//! workers, applies timed-out sync versions and checkpoints this server's own range.
//! With `PS_REPLICAS` the server keeps a shard per range it holds (the replication
//! layer forwards their pushes), and a replacement copies them from a live replica.

use super::error::TablesError;
use super::keys::KeySpace;
use super::shard::TableShard;
use super::spec::ModelSpec;
use super::wire::{
    decode_declaration, dump_position, CMD_DECLARE, CMD_DENSE, CMD_DUMP, CMD_IDLE, CMD_JOIN, CMD_ROWS, CMD_STEP,
    DUMP_END, DUMP_PAGE_ROWS, STATUS_NOT_YET, STATUS_REJECTED, STATUS_UNDECLARED,
};
use crate::train::checkpoint;
use crate::train::versions::{PrimaryAnswer, PushOutcome, Versioned};
use bincode::Options;
use bytes::Bytes;
use parking_lot::Mutex;
use ps_core::kv::replication::{dead_server_ranks, Holders, RangeCopy};
use ps_core::kv::{KVMeta, KVPairs, KVResponder, KVServer, KeyRange, KvError, SArray};
use ps_core::node::id_role;
use ps_core::{Postoffice, Role};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where and how often a table server checkpoints.
#[derive(Clone, Debug, Default)]
pub struct TableServerOptions {
    /// Directory of the checkpoints (None: none).
    pub checkpoint_dir: Option<PathBuf>,
    /// Checkpoint every this many versions (at least 1).
    pub checkpoint_every: u64,
}

/// One key range's model (this server's own range or, with replication, one it backs up).
#[derive(Default)]
struct RangeState {
    shard: Option<TableShard>,
    /// Dense pulls waiting for the next version.
    held: Vec<KVMeta>,
    last_checkpoint: u64,
}

struct State {
    ranges: BTreeMap<usize, RangeState>,
    /// A responder that sends (taken from a pull: a replicated push gets one that
    /// holds its answer until the other replicas applied it).
    responder: Option<KVResponder>,
}

/// What a table server holds, for its report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableStats {
    /// The own range's version (0 without a model).
    pub version: u64,
    /// Rows stored in the own range, per table.
    pub stored_rows: Vec<usize>,
}

/// A running table server; stops its ticker when dropped.
pub struct TableServer {
    _kv: KVServer<f32>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
    state: Arc<Mutex<State>>,
    rank: usize,
}

/// The checkpoint file of server `rank`'s range in `dir`.
pub fn checkpoint_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("tables-{rank}.ckpt"))
}

fn answer_dense(resp: &KVResponder, space: &KeySpace, shard: &TableShard, meta: &KVMeta) {
    let res = KVPairs {
        keys: vec![space.dense_key(shard.range)].into(),
        vals: SArray::copy_from(shard.dense()),
        lens: SArray::empty(),
    };
    if let Err(e) = resp.response_with(meta, &res, 0, shard.version()) {
        log::warn!("dense answer to {} not sent: {e}", meta.sender);
    }
}

fn status(resp: &KVResponder, meta: &KVMeta, status: i32, version: u64) {
    if let Err(e) = resp.response_with(meta, &KVPairs::<f32>::default(), status, version) {
        log::warn!("answer to {} not sent: {e}", meta.sender);
    }
}

fn refuse(resp: &KVResponder, meta: &KVMeta, why: TablesError) {
    log::warn!("refused a request from {}: {why}", meta.sender);
    // the worker sees the text alone (a refusal travels as text)
    if let Err(e) = resp.error(meta, &KvError::Transport(why.to_string())) {
        log::warn!("refusal to {} not sent: {e}", meta.sender);
    }
}

/// After range `r` moved to a new version: answers its held pulls, and checkpoints it
/// if it is this server's own range and a checkpoint is due.
fn after_apply(
    resp: Option<&KVResponder>,
    space: &KeySpace,
    rs: &mut RangeState,
    opts: &TableServerOptions,
    r: usize,
    rank: usize,
) {
    let Some(shard) = &rs.shard else { return };
    if let Some(resp) = resp {
        for meta in std::mem::take(&mut rs.held) {
            answer_dense(resp, space, shard, &meta);
        }
    }
    if let (Some(dir), true) = (&opts.checkpoint_dir, r == rank) {
        if shard.version() >= rs.last_checkpoint + opts.checkpoint_every.max(1) {
            match checkpoint::save_file(&checkpoint_path(dir, rank), shard) {
                Ok(()) => rs.last_checkpoint = shard.version(),
                Err(e) => log::error!("{e}"),
            }
        }
    }
}

/// Everything a request handle needs besides the state.
struct Ctx {
    space: KeySpace,
    opts: TableServerOptions,
    rank: usize,
    replicated: bool,
    holders: Holders,
    po: Arc<Postoffice>,
    epoch: Instant,
}

impl Ctx {
    /// The ranges this server holds whose primary is another server: a sync copy of
    /// them follows that primary's decisions.
    fn followed(&self, dead_nodes: &BTreeSet<i32>) -> BTreeSet<usize> {
        self.holders.followed(self.rank, &dead_server_ranks(dead_nodes))
    }

    fn handle(&self, st: &mut State, meta: &KVMeta, req: KVPairs<f32>, resp: &KVResponder) {
        let now = self.epoch.elapsed().as_millis() as u64;
        if !meta.push {
            st.responder.get_or_insert_with(|| resp.clone());
        }
        if meta.cmd == CMD_IDLE {
            // every copy of every range this server holds hears it (a notice is not
            // forwarded; each holder is some range's primary); a copy that follows its
            // primary applies nothing on it
            let followed = self.followed(&self.po.dead_nodes());
            for (&r, rs) in st.ranges.iter_mut() {
                let Some(shard) = rs.shard.as_mut() else { continue };
                if shard.rule.follows_primary(followed.contains(&r)) {
                    shard.rule.set_idle(meta.sender);
                } else if shard.set_idle(meta.sender, now) {
                    after_apply(st.responder.as_ref(), &self.space, rs, &self.opts, r, self.rank);
                }
            }
            status(resp, meta, 0, 0);
            return;
        }
        let r = if self.replicated {
            meta.range.max(0) as usize
        } else {
            self.rank
        };
        let Some(rs) = st.ranges.get_mut(&r) else {
            refuse(
                resp,
                meta,
                TablesError::Misfit(format!("server {} does not hold range {r}", self.rank)),
            );
            return;
        };
        match (meta.cmd, meta.push) {
            (CMD_DECLARE | CMD_JOIN, true) => self.declare(rs, r, meta, &req, resp),
            (CMD_STEP, true) => {
                let Some(shard) = rs.shard.as_mut() else {
                    status(resp, meta, STATUS_UNDECLARED, 0);
                    return;
                };
                let out = match meta.forwarded {
                    // the primary applied it first: this copy does as it did
                    Some(a) => shard.follow(
                        &self.space,
                        meta.sender,
                        meta.version,
                        (&req.keys, &req.lens, &req.vals),
                        PrimaryAnswer {
                            taken: a.status == 0,
                            version: a.version,
                        },
                        now,
                    ),
                    None => shard.push(
                        &self.space,
                        meta.sender,
                        meta.version,
                        &req.keys,
                        &req.lens,
                        &req.vals,
                        now,
                    ),
                };
                match out {
                    Ok(PushOutcome::Accepted { applied }) => {
                        status(resp, meta, 0, shard.version());
                        if applied {
                            after_apply(st.responder.as_ref(), &self.space, rs, &self.opts, r, self.rank);
                        }
                    }
                    Ok(PushOutcome::Rejected { current }) => status(resp, meta, STATUS_REJECTED, current),
                    Err(why) => refuse(resp, meta, why),
                }
            }
            (CMD_DENSE, false) => match &rs.shard {
                None => status(resp, meta, STATUS_UNDECLARED, 0),
                Some(shard) if shard.rule.pull_must_wait(meta.version.checked_sub(1)) => rs.held.push(meta.clone()),
                Some(shard) => answer_dense(resp, &self.space, shard, meta),
            },
            (CMD_ROWS, false) => match &rs.shard {
                None => status(resp, meta, STATUS_UNDECLARED, 0),
                Some(shard) => match shard.rows_wire(&self.space, &req.keys) {
                    Ok(vals) => {
                        let res = KVPairs {
                            keys: req.keys,
                            vals: vals.into(),
                            lens: SArray::empty(),
                        };
                        if let Err(e) = resp.response_with(meta, &res, 0, shard.version()) {
                            log::warn!("rows to {} not sent: {e}", meta.sender);
                        }
                    }
                    Err(why) => refuse(resp, meta, why),
                },
            },
            (CMD_DUMP, false) => match &rs.shard {
                None => status(resp, meta, STATUS_UNDECLARED, 0),
                Some(shard) => {
                    let (table, from) = dump_position(meta.version);
                    match shard.dump(table, from, DUMP_PAGE_ROWS) {
                        Ok((ids, vals, next)) => {
                            let res = KVPairs {
                                keys: ids.into(),
                                vals: vals.into(),
                                lens: SArray::empty(),
                            };
                            let next = next.map_or(DUMP_END, |n| n as u64);
                            if let Err(e) = resp.response_with(meta, &res, 0, next) {
                                log::warn!("rows to {} not sent: {e}", meta.sender);
                            }
                        }
                        Err(why) => refuse(resp, meta, why),
                    }
                }
            },
            (cmd, push) => refuse(
                resp,
                meta,
                TablesError::Misfit(format!(
                    "command {cmd} ({}) is not a parameter-table request",
                    if push { "push" } else { "pull" }
                )),
            ),
        }
    }

    /// A declaration (worker 0, with its initial block) or a join (spec only).
    fn declare(&self, rs: &mut RangeState, r: usize, meta: &KVMeta, req: &KVPairs<f32>, resp: &KVResponder) {
        let decoded = decode_declaration(&req.vals).and_then(|(bytes, block)| Ok((ModelSpec::decode(&bytes)?, block)));
        let (spec, block) = match decoded {
            Ok(d) => d,
            Err(why) => return refuse(resp, meta, why),
        };
        match &rs.shard {
            Some(shard) => match spec.difference(shard.spec()) {
                Some(why) => refuse(
                    resp,
                    meta,
                    TablesError::Misfit(format!("the model differs from the declared one: {why}")),
                ),
                None => status(resp, meta, 0, shard.version()),
            },
            None if meta.cmd == CMD_JOIN => status(resp, meta, STATUS_NOT_YET, 0),
            None => {
                let n = self.space.num_servers();
                match TableShard::new(spec, r, n, block.to_vec(), self.po.num_workers()) {
                    Ok(shard) => {
                        log::info!(
                            "server {}: range {r} holds a model of {} dense values ({} here) and {} embedding tables",
                            self.rank,
                            shard.spec().dense_len(),
                            shard.dense().len(),
                            shard.spec().tables.len()
                        );
                        rs.last_checkpoint = 0;
                        rs.shard = Some(shard);
                        status(resp, meta, 0, 0);
                    }
                    Err(why) => refuse(resp, meta, why),
                }
            }
        }
    }

    /// The ticker's pass over every range.
    fn tick(&self, st: &mut State) {
        let dead_nodes = self.po.dead_nodes();
        let followed = self.followed(&dead_nodes);
        let dead: BTreeSet<i32> = dead_nodes
            .into_iter()
            .filter(|&id| id_role(id) == Some(Role::Worker))
            .collect();
        let workers = self.po.num_workers();
        let now = self.epoch.elapsed().as_millis() as u64;
        for (&r, rs) in st.ranges.iter_mut() {
            let Some(shard) = rs.shard.as_mut() else { continue };
            shard.rule.set_num_workers(workers);
            if shard.rule.follows_primary(followed.contains(&r)) {
                // its versions are applied when the primary's are
                shard.rule.set_dead_workers(&dead);
                continue;
            }
            let applied = shard.set_dead_workers(&dead, now) | shard.tick(now);
            if applied {
                after_apply(st.responder.as_ref(), &self.space, rs, &self.opts, r, self.rank);
            }
        }
    }
}

impl TableServer {
    /// Serves app `app_id`'s parameter tables on this server node: the model arrives
    /// with the first declaration. A node that replaced a dead server restores its own
    /// range from its checkpoint if there is one (with `PS_REPLICAS` it copies every
    /// range it holds from a live replica instead). A checkpoint that cannot be read
    /// is [`TablesError::Train`], a KV server that cannot start [`TablesError::Kv`].
    pub fn start(po: &Arc<Postoffice>, app_id: i32, opts: TableServerOptions) -> Result<TableServer, TablesError> {
        let rank = po.my_rank();
        let space = KeySpace::new(po.num_servers())?;
        let holders = Holders::new(po.num_servers(), po.config().replicas);
        let mut ranges = BTreeMap::new();
        for r in holders.ranges_of(rank) {
            let mut rs = RangeState::default();
            if let (Some(dir), true) = (&opts.checkpoint_dir, po.is_recovery() && r == rank) {
                if let Some(shard) = checkpoint::load_file::<TableShard>(&checkpoint_path(dir, rank))? {
                    log::info!(
                        "server {rank}: restored version {} from its checkpoint",
                        shard.version()
                    );
                    rs.last_checkpoint = shard.version();
                    rs.shard = Some(shard);
                }
            }
            ranges.insert(r, rs);
        }
        let state = Arc::new(Mutex::new(State {
            ranges,
            responder: None,
        }));
        let ctx = Arc::new(Ctx {
            space,
            opts,
            rank,
            replicated: holders.replicas() > 0,
            holders,
            po: Arc::clone(po),
            epoch: Instant::now(),
        });
        let (st, c) = (Arc::clone(&state), Arc::clone(&ctx));
        let kv = KVServer::<f32>::with_copy(
            po,
            app_id,
            Box::new(move |meta: &KVMeta, req: KVPairs<f32>, resp: &KVResponder| {
                c.handle(&mut st.lock(), meta, req, resp);
            }),
            Some(Box::new(TablesCopy(Arc::clone(&state)))),
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st) = (Arc::clone(&stop), Arc::clone(&state));
        let ticker = std::thread::Builder::new()
            .name("tables-tick".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                    ctx.tick(&mut st.lock());
                }
            })
            .map_err(|e| TablesError::Thread(e.to_string()))?;
        Ok(TableServer {
            _kv: kv,
            stop,
            ticker: Some(ticker),
            state,
            rank,
        })
    }

    /// What this server's own range holds.
    pub fn stats(&self) -> TableStats {
        let st = self.state.lock();
        match st.ranges.get(&self.rank).and_then(|rs| rs.shard.as_ref()) {
            Some(s) => TableStats {
                version: s.version(),
                stored_rows: s.stored_rows(),
            },
            None => TableStats::default(),
        }
    }
}

impl Drop for TableServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// Largest copy of a range accepted.
const MAX_COPY_BYTES: u64 = 16 << 30;

fn copy_codec() -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(MAX_COPY_BYTES)
        .reject_trailing_bytes()
}

/// A table server's ranges as the replication layer's [`RangeCopy`]: a replacement
/// copies each range's whole model state (values, optimizer state, the sync version in
/// progress, the idle workers) from a live replica.
struct TablesCopy(Arc<Mutex<State>>);

impl RangeCopy for TablesCopy {
    fn snapshot(&mut self, range: usize, _keys: KeyRange) -> Bytes {
        let st = self.0.lock();
        let shard = st.ranges.get(&range).and_then(|rs| rs.shard.as_ref());
        let idle = shard.map(|s| s.rule.idle_workers().clone()).unwrap_or_default();
        Bytes::from(
            copy_codec()
                .serialize(&(shard, idle))
                .expect("a shard always serializes"),
        )
    }

    fn restore(&mut self, range: usize, _keys: KeyRange, data: &[u8]) -> Result<(), KvError> {
        let (shard, idle): (Option<TableShard>, BTreeSet<i32>) = copy_codec()
            .deserialize(data)
            .map_err(|e| KvError::BadCopy(format!("malformed copy of range {range}: {e}")))?;
        let mut st = self.0.lock();
        let rs = st
            .ranges
            .get_mut(&range)
            .ok_or_else(|| KvError::BadCopy(format!("range {range} is not held here")))?;
        let Some(mut shard) = shard else {
            rs.shard = None;
            return Ok(());
        };
        if shard.range != range {
            return Err(KvError::BadCopy(format!(
                "a copy of range {} offered for range {range}",
                shard.range
            )));
        }
        shard.rule.set_idle_workers(idle);
        rs.last_checkpoint = shard.version();
        rs.shard = Some(shard);
        Ok(())
    }
}
