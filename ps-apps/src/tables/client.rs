//! A worker's side of the parameter tables over a `KVWorker<f32>`: declaring (or
//! joining) the model, pulling the dense parameters, looking rows up, and a training
//! step (one push of every gradient per server, and behind it the pull of the new
//! dense values, which under sync waits for the version the push contributed to, as
//! `psrs train --mode sync` does). Requests survive a server's replacement
//! ([`exchange_all`]).

use super::client_error::kv_failure;
pub use super::client_error::ClientError;
use super::error::TablesError;
use super::keys::KeySpace;
use super::pack::{step_pairs, RowGrads};
use super::reader::RowReader;
use super::shard::dense_block;
use super::spec::ModelSpec;
use super::wire::{
    encode_declaration, CMD_DECLARE, CMD_DENSE, CMD_IDLE, CMD_JOIN, CMD_STEP, STATUS_NOT_YET, STATUS_UNDECLARED,
};
use crate::train::resend::{exchange_all, IdleNotice, Outgoing};
use crate::train::versions::Mode;
use ps_core::kv::{KVPairs, KVWorker, KvRequest, SArray, ServerReply};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a step did on each server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepOutcome {
    /// Per server: its gradients were taken.
    pub accepted: Vec<bool>,
}

impl StepOutcome {
    /// The servers that rejected the gradients (computed on a version they left).
    pub fn rejected(&self) -> Vec<usize> {
        (0..self.accepted.len()).filter(|&s| !self.accepted[s]).collect()
    }
}

/// A worker's connection to the parameter tables of one declared model.
pub struct TableClient {
    kv: Arc<KVWorker<f32>>,
    space: KeySpace,
    spec: ModelSpec,
    spec_bytes: Vec<u8>,
    blocks: Vec<Range<usize>>,
    timeout: Duration,
    /// Per server: the version of the dense values held (from the last pull).
    versions: Vec<u64>,
    idle: IdleNotice,
    interrupted: Box<dyn Fn() -> bool + Send>,
}

impl TableClient {
    /// A client for `spec` (validated) over `kv`; a request unanswered after
    /// `timeout` fails. An invalid spec, or more servers than the key layout holds, is
    /// [`TablesError::Invalid`].
    pub fn new(kv: KVWorker<f32>, spec: ModelSpec, timeout: Duration) -> Result<TableClient, TablesError> {
        spec.validate()?;
        let space = KeySpace::new(kv.ranges().len())?;
        let n = space.num_servers();
        let blocks = (0..n).map(|s| dense_block(spec.dense_len(), n, s)).collect();
        Ok(TableClient {
            spec_bytes: spec.encode(),
            kv: Arc::new(kv),
            space,
            spec,
            blocks,
            timeout,
            versions: vec![0; n],
            idle: IdleNotice::default(),
            interrupted: Box::new(|| false),
        })
    }

    /// Makes every wait end (with [`ClientError::Cluster`]) as soon as `f` returns
    /// true; `f` is called every 50 ms while waiting.
    pub fn set_interrupt(&mut self, f: Box<dyn Fn() -> bool + Send>) {
        self.interrupted = f;
    }

    /// A reader of rows that works beside this client (see [`RowReader`]).
    pub fn reader(&self) -> RowReader {
        RowReader::new(Arc::clone(&self.kv), self.spec.tables.clone(), self.timeout)
    }

    /// The key layout.
    pub fn space(&self) -> &KeySpace {
        &self.space
    }

    /// The model.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Per server: the version of the dense values last pulled.
    pub fn versions(&self) -> &[u64] {
        &self.versions
    }

    fn run(&self, reqs: &[Outgoing<'_, f32>]) -> Result<Vec<Vec<ServerReply<f32>>>, ClientError> {
        exchange_all(&self.kv, self.timeout, reqs, &*self.interrupted).map_err(kv_failure)
    }

    fn declaration(&self, cmd: i32, servers: &[usize], values: &[f32]) -> KvRequest<f32> {
        let n = self.space.num_servers();
        let mut keys = Vec::new();
        let mut lens = Vec::new();
        let mut vals = Vec::new();
        for &s in servers {
            let block = if cmd == CMD_DECLARE {
                &values[self.blocks[s].clone()]
            } else {
                &[][..]
            };
            let v = encode_declaration(&self.spec_bytes, block);
            keys.push(self.space.dense_key(s));
            lens.push(v.len() as i32);
            vals.extend(v);
        }
        let mut req = KvRequest::new(KVPairs::new(keys, vals, lens), cmd, true, false);
        req.only = (0..n).map(|s| servers.contains(&s)).collect();
        req
    }

    /// Declares the model to `servers` with the dense values `values` (all of them,
    /// flattened): worker 0's initial values, or a worker's current ones for a
    /// replacement server that holds nothing. A server holding the same model already
    /// keeps its own values; one holding another model refuses.
    pub fn redeclare(&mut self, servers: &[usize], values: &[f32]) -> Result<(), ClientError> {
        if values.len() as u64 != self.spec.dense_len() {
            return Err(ClientError::Refused(format!(
                "{} dense values for a model of {}",
                values.len(),
                self.spec.dense_len()
            )));
        }
        let make = || self.declaration(CMD_DECLARE, servers, values);
        self.run(&[Outgoing {
            idempotent: false,
            make: &make,
        }])?;
        Ok(())
    }

    /// Declares the model to every server (worker 0, with its initial values).
    pub fn declare(&mut self, values: &[f32]) -> Result<(), ClientError> {
        let all: Vec<usize> = (0..self.space.num_servers()).collect();
        self.redeclare(&all, values)
    }

    /// Checks this worker's model against the declared one, waiting (at most
    /// `patience`) until worker 0 declared it.
    pub fn join(&mut self, patience: Duration) -> Result<(), ClientError> {
        let start = Instant::now();
        let mut waiting: Vec<usize> = (0..self.space.num_servers()).collect();
        loop {
            let make = || self.declaration(CMD_JOIN, &waiting, &[]);
            let replies = self.run(&[Outgoing {
                idempotent: false,
                make: &make,
            }])?;
            waiting = replies[0]
                .iter()
                .filter(|r| r.status == STATUS_NOT_YET)
                .map(|r| r.rank)
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            if (self.interrupted)() {
                return Err(ClientError::Cluster("interrupted".into()));
            }
            if start.elapsed() >= patience {
                return Err(ClientError::Cluster(format!(
                    "worker 0 did not declare the model within {patience:?} (servers {waiting:?} still wait for it)"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn dense_request(&self, after: &[Option<u64>]) -> KvRequest<f32> {
        let n = self.space.num_servers();
        let keys: Vec<u64> = (0..n).map(|s| self.space.dense_key(s)).collect();
        let mut req = KvRequest::new(
            KVPairs {
                keys: keys.into(),
                ..Default::default()
            },
            CMD_DENSE,
            false,
            true,
        );
        req.versions = after.iter().map(|a| a.map_or(0, |v| v + 1)).collect();
        req
    }

    /// Copies the dense answers into `out` (all the dense values) and notes each
    /// server's version; the servers that hold no model (their blocks of `out` are
    /// left as they were).
    fn take_dense(&mut self, replies: &[ServerReply<f32>], out: &mut [f32]) -> Result<Vec<usize>, ClientError> {
        let mut undeclared = Vec::new();
        for r in replies {
            if r.status == STATUS_UNDECLARED {
                undeclared.push(r.rank);
                continue;
            }
            let block = self.blocks[r.rank].clone();
            if r.data.vals.len() != block.len() {
                return Err(ClientError::Cluster(format!(
                    "server {} sent {} dense values, its block holds {}",
                    r.rank,
                    r.data.vals.len(),
                    block.len()
                )));
            }
            out[block].copy_from_slice(&r.data.vals);
            self.versions[r.rank] = r.version;
        }
        Ok(undeclared)
    }

    /// Servers replaced with nothing to restore: declares the model to them again
    /// with this worker's values of their blocks (in `out`), and pulls what they then
    /// hold (the same model declared meanwhile by another worker keeps its values).
    fn recover(&mut self, mut servers: Vec<usize>, out: &mut [f32]) -> Result<(), ClientError> {
        servers.sort_unstable();
        servers.dedup();
        if servers.is_empty() {
            return Ok(());
        }
        log::warn!("servers {servers:?} hold no model: declaring it again from this worker's values");
        self.redeclare(&servers, out)?;
        let n = self.space.num_servers();
        let after = vec![None; n];
        let make = || {
            let mut req = self.dense_request(&after);
            req.only = (0..n).map(|s| servers.contains(&s)).collect();
            req
        };
        let replies = self.run(&[Outgoing {
            idempotent: true,
            make: &make,
        }])?;
        let still = self.take_dense(&replies[0], out)?;
        if still.is_empty() {
            Ok(())
        } else {
            Err(ClientError::Cluster(format!(
                "servers {still:?} hold no model right after it was declared to them"
            )))
        }
    }

    /// Pulls every dense value into `out` (the servers' current values).
    pub fn pull_dense(&mut self, out: &mut [f32]) -> Result<(), ClientError> {
        self.check_len(out.len())?;
        let after = vec![None; self.space.num_servers()];
        let make = || self.dense_request(&after);
        let replies = self.run(&[Outgoing {
            idempotent: true,
            make: &make,
        }])?;
        let undeclared = self.take_dense(&replies[0], out)?;
        self.recover(undeclared, out)
    }

    fn check_len(&self, n: usize) -> Result<(), ClientError> {
        if n as u64 == self.spec.dense_len() {
            Ok(())
        } else {
            Err(ClientError::Refused(format!(
                "{n} dense values for a model of {}",
                self.spec.dense_len()
            )))
        }
    }

    /// The values of the rows `keys` (sorted, unique row keys of table `table`, from
    /// [`KeySpace::sorted_row_keys`]) into `out` (`keys.len() * dim`).
    pub fn lookup(&mut self, table: usize, keys: SArray<u64>, out: &mut [f32]) -> Result<(), ClientError> {
        self.reader().lookup(table, keys, out)
    }

    /// One training step: pushes the dense gradient `dense` (all values, flattened)
    /// and the rows' gradients to the servers with `send[s]` (every server if empty),
    /// each tagged with the version its values came from, then pulls the new dense
    /// values into `out`. Under sync, a server that took the gradients answers the pull
    /// once that version is applied. A server that rejected them (the model moved on)
    /// answers with its current values: see [`StepOutcome::rejected`]. A server that
    /// holds no model (replaced, nothing to restore) drops them too, and gets the
    /// model again from this worker's values ([`TableClient::redeclare`]).
    pub fn step(
        &mut self,
        dense: SArray<f32>,
        rows: &[RowGrads<'_>],
        send: &[bool],
        out: &mut [f32],
    ) -> Result<StepOutcome, ClientError> {
        let kvs = self.step_request(dense, rows)?;
        self.send_step(kvs, send, out)
    }

    /// A step's push ([`step_pairs`]): the dense gradient `dense` (all values) and the
    /// rows' gradients, checked; it no longer refers to `rows`' memory (a dense-only
    /// model's still shares `dense`).
    pub fn step_request(&self, dense: SArray<f32>, rows: &[RowGrads<'_>]) -> Result<KVPairs<f32>, ClientError> {
        self.check_len(dense.len())?;
        step_pairs(&self.space, dense, rows).map_err(|e| ClientError::Refused(e.to_string()))
    }

    /// Sends a step's push from [`TableClient::step_request`] and pulls the new dense
    /// values into `out`: the rest of [`TableClient::step`].
    pub fn send_step(&mut self, kvs: KVPairs<f32>, send: &[bool], out: &mut [f32]) -> Result<StepOutcome, ClientError> {
        self.check_len(out.len())?;
        let n = self.space.num_servers();
        let to = |s: usize| send.get(s).copied().unwrap_or(true);
        self.idle.end();
        let sync = matches!(self.spec.mode, Mode::Sync { .. });
        let versions = self.versions.clone();
        let push = || {
            let mut req = KvRequest::new(kvs.clone(), CMD_STEP, true, false);
            req.versions = versions.clone();
            req.only = (0..n).map(to).collect();
            req
        };
        // a pull behind the push: under sync it waits for the version pushed to
        let after: Vec<Option<u64>> = (0..n).map(|s| (sync && to(s)).then_some(versions[s])).collect();
        let pull = || self.dense_request(&after);
        let replies = self.run(&[
            Outgoing {
                idempotent: false,
                make: &push,
            },
            Outgoing {
                idempotent: true,
                make: &pull,
            },
        ])?;
        let mut accepted = vec![true; n];
        let mut undeclared = Vec::new();
        for r in &replies[0] {
            accepted[r.rank] = r.status == 0;
            if r.status == STATUS_UNDECLARED {
                undeclared.push(r.rank);
            }
        }
        undeclared.extend(self.take_dense(&replies[1], out)?);
        self.recover(undeclared, out)?;
        Ok(StepOutcome { accepted })
    }

    /// Tells the servers this worker holds no task: sync versions stop waiting for its
    /// gradients until its next step.
    pub fn idle(&mut self) -> Result<(), ClientError> {
        self.idle
            .send(&self.kv, CMD_IDLE)
            .map_err(|e| ClientError::Cluster(e.to_string()))
    }
}
