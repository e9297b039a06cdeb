//! A training server: one [`Shard`] behind a KV server. Pushes are gradients tagged
//! with a version and answered accepted / rejected; pulls that wait for the next
//! version are held and answered when it is applied. A worker's idle notice (it holds
//! no task) stops sync versions waiting for it. A ticker applies timed-out sync
//! versions, follows the dead workers, and checkpoints the shard.

use super::checkpoint;
use super::kv_exchange::{CMD_IDLE, STATUS_REJECTED};
use super::layout::Layout;
use super::shard::{Mode, PushOutcome, Sgd, Shard};
use parking_lot::Mutex;
use ps_core::kv::{KVMeta, KVPairs, KVResponder, KVServer, SArray};
use ps_core::node::id_role;
use ps_core::{Postoffice, Role};
use std::collections::BTreeSet;
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

struct State {
    shard: Shard,
    held: Vec<(KVMeta, SArray<u64>)>,
    last_checkpoint: u64,
}

/// A running training server; stops its ticker when dropped.
pub struct TrainServer {
    _kv: KVServer<f32>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
    state: Arc<Mutex<State>>,
}

fn values(shard: &Shard, keys: &[u64]) -> Result<Vec<f32>, String> {
    let begin = shard.begin;
    let offs: Vec<u64> = keys.iter().map(|k| k - begin).collect();
    shard.values(Some(&offs)).map_err(|e| format!("{e:?}"))
}

fn answer_pull(resp: &KVResponder, st: &State, meta: &KVMeta, keys: SArray<u64>) {
    match values(&st.shard, &keys) {
        Ok(vals) => {
            let res = KVPairs {
                keys,
                vals: vals.into(),
                lens: SArray::empty(),
            };
            if let Err(e) = resp.response_with(meta, &res, 0, st.shard.version) {
                log::warn!("pull answer to {} not sent: {e}", meta.sender);
            }
        }
        Err(e) => log::warn!("bad pull from {}: {e}", meta.sender),
    }
}

/// After an update: answers the held pulls and checkpoints if due.
fn after_apply(resp: &KVResponder, st: &mut State, opts: &ServerOptions, rank: usize) {
    for (meta, keys) in std::mem::take(&mut st.held) {
        answer_pull(resp, st, &meta, keys);
    }
    if let Some(dir) = &opts.checkpoint_dir {
        if st.shard.version >= st.last_checkpoint + opts.checkpoint_every {
            match checkpoint::save(dir, rank, &st.shard) {
                Ok(()) => st.last_checkpoint = st.shard.version,
                Err(e) => log::error!("{e}"),
            }
        }
    }
}

impl TrainServer {
    /// Serves the shard of this server's rank: restored from its checkpoint if this
    /// node replaced a dead server and one exists, else `init`'s block.
    pub fn start(
        po: &Arc<Postoffice>,
        app_id: i32,
        layout: &Layout,
        init: &[f32],
        opts: ServerOptions,
    ) -> Result<TrainServer, String> {
        let rank = po.my_rank();
        let range = layout.params_of(rank);
        let begin = layout.range_begin(rank);
        let restored = match (&opts.checkpoint_dir, po.is_recovery()) {
            (Some(dir), true) => checkpoint::load(dir, rank)?,
            _ => None,
        };
        let shard = match restored {
            Some(mut s) => {
                log::info!("server {rank}: restored version {} from its checkpoint", s.version);
                s.mode = opts.mode;
                s
            }
            None => Shard::new(
                begin,
                init[range.clone()].to_vec(),
                opts.mode,
                opts.sgd,
                po.num_workers(),
            ),
        };
        let last_checkpoint = shard.version;
        let state = Arc::new(Mutex::new(State {
            shard,
            held: Vec::new(),
            last_checkpoint,
        }));
        let epoch = Instant::now();
        let st = Arc::clone(&state);
        let o = opts.clone();
        let responder: Arc<Mutex<Option<KVResponder>>> = Arc::default();
        let r2 = Arc::clone(&responder);
        let kv = KVServer::<f32>::new(
            po,
            app_id,
            Box::new(move |meta: &KVMeta, req: KVPairs<f32>, resp: &KVResponder| {
                r2.lock().get_or_insert_with(|| resp.clone());
                let now = epoch.elapsed().as_millis() as u64;
                let mut st = st.lock();
                if meta.cmd == CMD_IDLE {
                    let applied = st.shard.set_idle(meta.sender, now);
                    if let Err(e) = resp.response(meta, &KVPairs::<f32>::default()) {
                        log::warn!("idle answer to {} not sent: {e}", meta.sender);
                    }
                    if applied {
                        after_apply(resp, &mut st, &o, rank);
                    }
                } else if meta.push {
                    let offs: Vec<u64> = req.keys.iter().map(|k| k - begin).collect();
                    let full = offs.len() == st.shard.len();
                    let outcome = st.shard.push(
                        meta.sender,
                        meta.version,
                        if full { None } else { Some(&offs) },
                        &req.vals,
                        now,
                    );
                    let (status, applied) = match outcome {
                        Ok(PushOutcome::Accepted { applied }) => (0, applied),
                        Ok(PushOutcome::Rejected { .. }) => (STATUS_REJECTED, false),
                        Err(e) => {
                            log::warn!("bad push from {}: {e:?}", meta.sender);
                            let _ = resp.error(meta, &ps_core::kv::KvError::BadLength(format!("{e:?}")));
                            return;
                        }
                    };
                    if let Err(e) = resp.response_with(meta, &KVPairs::<f32>::default(), status, st.shard.version) {
                        log::warn!("push answer to {} not sent: {e}", meta.sender);
                    }
                    if applied {
                        after_apply(resp, &mut st, &o, rank);
                    }
                } else {
                    let after = meta.version.checked_sub(1);
                    if st.shard.pull_must_wait(after) {
                        st.held.push((meta.clone(), req.keys));
                    } else {
                        answer_pull(resp, &st, meta, req.keys);
                    }
                }
            }),
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st, po2) = (Arc::clone(&stop), Arc::clone(&state), Arc::clone(po));
        let ticker = std::thread::Builder::new()
            .name("train-tick".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                    let dead: BTreeSet<i32> = po2
                        .dead_nodes()
                        .into_iter()
                        .filter(|&id| id_role(id) == Some(Role::Worker))
                        .collect();
                    let now = epoch.elapsed().as_millis() as u64;
                    let mut st = st.lock();
                    if let (Some(q), Mode::Sync { timeout_ms, .. }) = (&opts.quorum, st.shard.mode) {
                        let grads_per_version = q.load(Ordering::Relaxed).max(1);
                        st.shard.mode = Mode::Sync {
                            grads_per_version,
                            timeout_ms,
                        };
                    }
                    let applied = st.shard.set_dead_workers(&dead, now) | st.shard.tick(now);
                    if applied {
                        if let Some(resp) = responder.lock().clone() {
                            after_apply(&resp, &mut st, &opts, rank);
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(TrainServer {
            _kv: kv,
            stop,
            ticker: Some(ticker),
            state,
        })
    }

    /// The shard's version.
    pub fn version(&self) -> u64 {
        self.state.lock().shard.version
    }
}

impl Drop for TrainServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
