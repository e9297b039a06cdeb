//! A training server: one [`Shard`] behind a KV server. Pushes are gradients tagged
//! with a version and answered accepted / rejected; pulls that wait for the next
//! version are held and answered when it is applied. A worker's idle notice (it holds
//! no task) stops sync versions waiting for it. A ticker applies timed-out sync
//! versions, follows the dead (or departed) workers and the workers joining the job,
//! and checkpoints the shard. With `PS_REPLICAS`
//! the server keeps one shard per key range it holds.

use super::checkpoint;
use super::error::TrainError;
use super::kv_exchange::{CMD_IDLE, STATUS_REJECTED};
use super::layout::Layout;
use super::server_state::{RangeState, State};
use super::shard::{PrimaryAnswer, PushOutcome, Sgd, Shard};
use super::versions::Mode;
use super::versions::Versioned;
use parking_lot::Mutex;
use ps_core::kv::replication::{dead_server_ranks, Holders};
use ps_core::kv::{KVMeta, KVPairs, KVResponder, KVServer, KvError, SArray};
use ps_core::node::id_role;
use ps_core::{Postoffice, Role};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a server trains.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Update rule.
    pub mode: Mode,
    /// Optimizer.
    pub sgd: Sgd,
    /// Where checkpoints go (None: no checkpoints).
    pub checkpoint_dir: Option<PathBuf>,
    /// Checkpoint every this many versions.
    pub checkpoint_every: u64,
    /// Sync mode: the gradients a version waits for, when someone else decides it (a
    /// cluster's job gets a share of the workers, which changes); read every tick and
    /// replaces the mode's `grads_per_version`. None: the mode's own value.
    pub quorum: Option<Arc<AtomicUsize>>,
}

/// A running training server; stops its ticker when dropped.
pub struct TrainServer {
    _kv: KVServer<f32>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
    state: Arc<Mutex<State>>,
    rank: usize,
}

fn values(shard: &Shard, keys: &[u64]) -> Result<Vec<f32>, String> {
    let begin = shard.begin;
    let offs: Vec<u64> = keys.iter().map(|k| k - begin).collect();
    shard.values(Some(&offs)).map_err(|e| format!("{e:?}"))
}

fn answer_pull(resp: &KVResponder, rs: &RangeState, meta: &KVMeta, keys: SArray<u64>) {
    match values(&rs.shard, &keys) {
        Ok(vals) => {
            let res = KVPairs {
                keys,
                vals: vals.into(),
                lens: SArray::empty(),
            };
            if let Err(e) = resp.response_with(meta, &res, 0, rs.shard.version()) {
                log::warn!("pull answer to {} not sent: {e}", meta.sender);
            }
        }
        Err(e) => log::warn!("bad pull from {}: {e}", meta.sender),
    }
}

/// The key ranges this server holds whose first live holder is another server: their
/// copies here follow that primary.
fn followed_ranges(dead_nodes: &BTreeSet<i32>, holders: &Holders, rank: usize) -> BTreeSet<usize> {
    holders.followed(rank, &dead_server_ranks(dead_nodes))
}

/// After an update of range `r`: answers its held pulls, and checkpoints it if it is
/// this server's own range and a checkpoint is due.
fn after_apply(resp: Option<&KVResponder>, rs: &mut RangeState, opts: &ServerOptions, r: usize, rank: usize) {
    if let Some(resp) = resp {
        for (meta, keys) in std::mem::take(&mut rs.held) {
            answer_pull(resp, rs, &meta, keys);
        }
    }
    if let (Some(dir), true) = (&opts.checkpoint_dir, r == rank) {
        if rs.shard.version() >= rs.last_checkpoint + opts.checkpoint_every {
            match checkpoint::save(dir, rank, &rs.shard) {
                Ok(()) => rs.last_checkpoint = rs.shard.version(),
                Err(e) => log::error!("{e}"),
            }
        }
    }
}

impl TrainServer {
    /// Serves the shard of this server's rank: restored from its checkpoint if this
    /// node replaced a dead server and one exists, else `init`'s block. With
    /// `PS_REPLICAS` > 0 it also holds (from `init`) the shards of the ranges it backs
    /// up: the replication layer forwards their pushes here. A checkpoint that cannot
    /// be read is [`TrainError::CheckpointIo`] or [`TrainError::CorruptCheckpoint`],
    /// a KV server that cannot start [`TrainError::Kv`].
    pub fn start(
        po: &Arc<Postoffice>,
        app_id: i32,
        layout: &Layout,
        init: &[f32],
        opts: ServerOptions,
    ) -> Result<TrainServer, TrainError> {
        let rank = po.my_rank();
        let holders = Holders::new(po.num_servers(), po.config().replicas);
        let replicated = holders.replicas() > 0;
        let mut ranges = BTreeMap::new();
        for r in holders.ranges_of(rank) {
            let restored = match (&opts.checkpoint_dir, po.is_recovery() && r == rank) {
                (Some(dir), true) => checkpoint::load(dir, rank)?,
                _ => None,
            };
            let shard = match restored {
                Some(mut s) => {
                    log::info!("server {rank}: restored version {} from its checkpoint", s.version());
                    s.rule.mode = opts.mode;
                    s
                }
                None => Shard::new(
                    layout.range_begin(r),
                    init[layout.params_of(r)].to_vec(),
                    opts.mode,
                    opts.sgd,
                    po.num_workers(),
                ),
            };
            let last_checkpoint = shard.version();
            let rs = RangeState {
                shard,
                held: Vec::new(),
                last_checkpoint,
            };
            ranges.insert(r, rs);
        }
        let state = Arc::new(Mutex::new(State {
            ranges,
            responder: None,
        }));
        let epoch = Instant::now();
        let st = Arc::clone(&state);
        // (weak: the postoffice holds this handle)
        let po_h = Arc::downgrade(po);
        let o = opts.clone();
        let copy = Box::new(super::range_copy::ShardCopy(Arc::clone(&state)));
        let kv = KVServer::<f32>::with_copy(
            po,
            app_id,
            Box::new(move |meta: &KVMeta, req: KVPairs<f32>, resp: &KVResponder| {
                let now = epoch.elapsed().as_millis() as u64;
                // (read before the state is locked: the postoffice's locks come first)
                let followed = match (meta.cmd == CMD_IDLE, po_h.upgrade()) {
                    (true, Some(po)) => followed_ranges(&po.dead_nodes(), &holders, rank),
                    _ => BTreeSet::new(),
                };
                let mut guard = st.lock();
                let st = &mut *guard;
                if !meta.push {
                    st.responder.get_or_insert_with(|| resp.clone());
                }
                if meta.cmd == CMD_IDLE {
                    // every copy of every range this server holds hears it (a notice
                    // is not forwarded; each holder is some range's primary); a copy
                    // that follows its primary applies nothing on it
                    for (&r, rs) in st.ranges.iter_mut() {
                        if rs.shard.rule.follows_primary(followed.contains(&r)) {
                            rs.shard.rule.set_idle(meta.sender);
                        } else if rs.shard.set_idle(meta.sender, now) {
                            after_apply(st.responder.as_ref(), rs, &o, r, rank);
                        }
                    }
                    if let Err(e) = resp.response(meta, &KVPairs::<f32>::default()) {
                        log::warn!("idle answer to {} not sent: {e}", meta.sender);
                    }
                    return;
                }
                let r = if replicated { meta.range.max(0) as usize } else { rank };
                let Some(rs) = st.ranges.get_mut(&r) else {
                    let _ = resp.error(
                        meta,
                        &KvError::Transport(format!("server {rank} does not hold range {r}")),
                    );
                    return;
                };
                if meta.push {
                    let begin = rs.shard.begin;
                    let offs: Vec<u64> = req.keys.iter().map(|k| k - begin).collect();
                    let full = offs.len() == rs.shard.len();
                    let offs = if full { None } else { Some(&offs[..]) };
                    let outcome = match meta.forwarded {
                        // the primary applied it first: this copy does as it did
                        Some(a) => rs.shard.follow(
                            meta.sender,
                            meta.version,
                            offs,
                            &req.vals,
                            PrimaryAnswer {
                                taken: a.status == 0,
                                version: a.version,
                            },
                            now,
                        ),
                        None => rs.shard.push(meta.sender, meta.version, offs, &req.vals, now),
                    };
                    let (status, applied) = match outcome {
                        Ok(PushOutcome::Accepted { applied }) => (0, applied),
                        Ok(PushOutcome::Rejected { .. }) => (STATUS_REJECTED, false),
                        Err(e) => {
                            log::warn!("bad push from {}: {e:?}", meta.sender);
                            let _ = resp.error(meta, &KvError::BadLength(format!("{e:?}")));
                            return;
                        }
                    };
                    if let Err(e) = resp.response_with(meta, &KVPairs::<f32>::default(), status, rs.shard.version()) {
                        log::warn!("push answer to {} not sent: {e}", meta.sender);
                    }
                    if applied {
                        after_apply(st.responder.as_ref(), rs, &o, r, rank);
                    }
                } else {
                    let after = meta.version.checked_sub(1);
                    if rs.shard.pull_must_wait(after) {
                        rs.held.push((meta.clone(), req.keys));
                    } else {
                        answer_pull(resp, rs, meta, req.keys);
                    }
                }
            }),
            Some(copy),
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st, po2) = (Arc::clone(&stop), Arc::clone(&state), Arc::clone(po));
        let ticker = std::thread::Builder::new()
            .name("train-tick".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                    let dead_nodes = po2.dead_nodes();
                    let followed = followed_ranges(&dead_nodes, &holders, rank);
                    let dead: BTreeSet<i32> = dead_nodes
                        .into_iter()
                        .filter(|&id| id_role(id) == Some(Role::Worker))
                        .collect();
                    let workers = po2.num_workers();
                    let now = epoch.elapsed().as_millis() as u64;
                    let mut guard = st.lock();
                    let st = &mut *guard;
                    for (&r, rs) in st.ranges.iter_mut() {
                        if let (Some(q), Mode::Sync { timeout_ms, .. }) = (&opts.quorum, rs.shard.rule.mode) {
                            let grads_per_version = q.load(Ordering::Relaxed).max(1);
                            rs.shard.rule.mode = Mode::Sync {
                                grads_per_version,
                                timeout_ms,
                            };
                        }
                        rs.shard.rule.set_num_workers(workers);
                        if rs.shard.rule.follows_primary(followed.contains(&r)) {
                            // its versions are applied when the primary's are
                            rs.shard.rule.set_dead_workers(&dead);
                            continue;
                        }
                        let applied = rs.shard.set_dead_workers(&dead, now) | rs.shard.tick(now);
                        if applied {
                            after_apply(st.responder.as_ref(), rs, &opts, r, rank);
                        }
                    }
                }
            })
            .map_err(|e| TrainError::Thread(e.to_string()))?;
        Ok(TrainServer {
            _kv: kv,
            stop,
            ticker: Some(ticker),
            state,
            rank,
        })
    }

    /// Every key range this server holds (its own and those it backs up), in range
    /// order, with its version and a fingerprint of its parameters, each as it stands
    /// once the version it collects is applied ([`Shard::settled`]): once the pushes
    /// stop, every copy of a range must show the same.
    pub fn copies(&self) -> Vec<RangeCopy> {
        self.state
            .lock()
            .ranges
            .iter()
            .map(|(&range, rs)| {
                let shard = rs.shard.settled();
                let mut h = crc32fast::Hasher::new();
                for v in &shard.params {
                    h.update(&v.to_le_bytes());
                }
                RangeCopy {
                    range,
                    version: shard.version(),
                    fingerprint: h.finalize(),
                }
            })
            .collect()
    }

    /// The version of this server's own shard.
    pub fn version(&self) -> u64 {
        self.state
            .lock()
            .ranges
            .get(&self.rank)
            .map_or(0, |rs| rs.shard.version())
    }
}

/// One copy of a key range a server holds: what the copies of one range must agree
/// on once the pushes stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeCopy {
    /// The key range (the rank of its primary server).
    pub range: usize,
    /// Its version: the updates applied.
    pub version: u64,
    /// CRC-32 of its parameters' little-endian bytes.
    pub fingerprint: u32,
}

impl Drop for TrainServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
