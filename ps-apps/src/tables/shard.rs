//! One key range of a declared model on a server: its block of the dense parameters
//! and its rows of every embedding table, with their optimizer state, moved from
//! version to version by the same rule as `psrs train`'s shards ([`Versions`]). A
//! push is checked whole before any of it is taken, so a malformed one changes
//! nothing. No sockets, no clock.

use super::error::TablesError;
use super::halves;
use super::keys::{KeyOf, KeySpace};
use super::sparse::{RowPage, SparseTable};
use super::spec::ModelSpec;
use crate::train::layout::Layout;
use crate::train::versions::{Admit, PrimaryAnswer, PushOutcome, Versioned, Versions};
use serde::{Deserialize, Serialize};

/// The dense block of one range and its optimizer state.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct DenseBlock {
    values: Vec<f32>,
    state: Vec<f32>,
    steps: u32,
    accum: Vec<f32>,
}

/// A declared model's state in one key range.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TableShard {
    /// The key range (server rank) held.
    pub range: usize,
    /// The version number and the rule that moves it.
    pub rule: Versions,
    spec: ModelSpec,
    dense: DenseBlock,
    /// Gradients collected for the current version touched the dense block.
    dense_pending: bool,
    tables: Vec<SparseTable>,
}

/// A push, checked: the dense block's gradient and each row's.
struct Parts<'a> {
    dense: Option<&'a [f32]>,
    rows: Vec<(usize, u64, &'a [f32])>,
}

/// The dense values of range `range` when `num_servers` servers hold a model of
/// `dense_len` values: indices into the flattened dense parameters.
pub fn dense_block(dense_len: u64, num_servers: usize, range: usize) -> std::ops::Range<usize> {
    Layout::new(dense_len as usize, num_servers).params_of(range)
}

impl TableShard {
    /// Range `range` of `spec` over `num_servers` servers, its dense block starting at
    /// `values` (that block's initial values), under a rule for `num_workers` workers.
    /// A block of another length is [`TablesError::Misfit`].
    pub fn new(
        spec: ModelSpec,
        range: usize,
        num_servers: usize,
        values: Vec<f32>,
        num_workers: usize,
    ) -> Result<TableShard, TablesError> {
        let want = dense_block(spec.dense_len(), num_servers, range).len();
        if values.len() != want {
            return Err(TablesError::Misfit(format!(
                "server {range}'s block of the dense parameters holds {want} values, {} were sent",
                values.len()
            )));
        }
        let n = values.len();
        Ok(TableShard {
            range,
            rule: Versions::new(spec.mode, num_workers),
            dense: DenseBlock {
                state: spec.dense_optimizer.initial_state(n),
                accum: vec![0.0; n],
                values,
                steps: 0,
            },
            dense_pending: false,
            tables: spec.tables.iter().cloned().map(SparseTable::new).collect(),
            spec,
        })
    }

    /// The model this shard holds.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The model version.
    pub fn version(&self) -> u64 {
        self.rule.version
    }

    /// The dense block's values.
    pub fn dense(&self) -> &[f32] {
        &self.dense.values
    }

    /// Rows stored, per table.
    pub fn stored_rows(&self) -> Vec<usize> {
        self.tables.iter().map(SparseTable::stored_rows).collect()
    }

    fn check<'a>(
        &self,
        space: &KeySpace,
        keys: &[u64],
        lens: &[i32],
        vals: &'a [f32],
    ) -> Result<Parts<'a>, TablesError> {
        let misfit = TablesError::Misfit;
        if !lens.is_empty() && lens.len() != keys.len() {
            return Err(misfit(format!("{} lengths for {} keys", lens.len(), keys.len())));
        }
        let mut parts = Parts {
            dense: None,
            rows: Vec::with_capacity(keys.len()),
        };
        let mut at = 0usize;
        for (i, &k) in keys.iter().enumerate() {
            let (want, what) = match space.decode(self.range, k)? {
                KeyOf::Dense => (self.dense.values.len(), None),
                KeyOf::Row { table, id } => {
                    let t = self.spec.tables.get(table).ok_or_else(|| {
                        misfit(format!(
                            "table {table} is not declared ({} tables)",
                            self.spec.tables.len()
                        ))
                    })?;
                    if id >= t.rows {
                        return Err(misfit(format!(
                            "row {id} of embedding {}: not below num_embeddings {}",
                            t.name, t.rows
                        )));
                    }
                    (t.wire_len(), Some((table, id)))
                }
            };
            let len = match lens.get(i) {
                Some(&l) => usize::try_from(l).map_err(|_| misfit(format!("negative length {l}")))?,
                None if keys.len() == 1 => vals.len(),
                None => return Err(misfit("a push of several keys needs their lengths".into())),
            };
            if len != want {
                return Err(misfit(format!("key {k}: {len} values, {want} expected")));
            }
            let v = vals
                .get(at..at + len)
                .ok_or_else(|| misfit(format!("{} values are fewer than the lengths say", vals.len())))?;
            at += len;
            match what {
                None => parts.dense = Some(v),
                Some((table, id)) => parts.rows.push((table, id, v)),
            }
        }
        if at != vals.len() {
            return Err(misfit(format!("{} values, the lengths add up to {at}", vals.len())));
        }
        Ok(parts)
    }

    /// A push from `worker` of gradients computed on `version`: the dense block's
    /// (its key, all its values) and rows' (their keys, `dim` values each), `lens`
    /// giving each key's count (may be empty for a single key). A push that does not
    /// fit the model is [`TablesError::Misfit`] (naming the problem) and changes
    /// nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        space: &KeySpace,
        worker: i32,
        version: u64,
        keys: &[u64],
        lens: &[i32],
        vals: &[f32],
        now_ms: u64,
    ) -> Result<PushOutcome, TablesError> {
        let parts = self.check(space, keys, lens, vals)?;
        if let Admit::Rejected { current } = self.rule.admit(worker, version, now_ms) {
            return Ok(PushOutcome::Rejected { current });
        }
        self.accumulate(parts);
        Ok(PushOutcome::Accepted {
            applied: self.maybe_apply(now_ms),
        })
    }

    /// A push that the range's primary applied first, on a copy that follows it (a
    /// backup), with what the primary answered: a sync shard does what the primary
    /// did ([`Versioned::follow_primary`]); an async or bounded one applies every
    /// push it takes at once, in the order the copies share, so it pushes as the
    /// primary did. A push that does not fit is [`TablesError::Misfit`], as for
    /// [`TableShard::push`].
    pub fn follow(
        &mut self,
        space: &KeySpace,
        worker: i32,
        version: u64,
        (keys, lens, vals): (&[u64], &[i32], &[f32]),
        primary: PrimaryAnswer,
        now_ms: u64,
    ) -> Result<PushOutcome, TablesError> {
        if !self.rule.decides_by_time() {
            return self.push(space, worker, version, keys, lens, vals, now_ms);
        }
        let parts = self.check(space, keys, lens, vals)?;
        Ok(self.follow_primary(worker, version, primary, now_ms, |s| s.accumulate(parts)))
    }

    /// Adds a checked push's gradients to what the current version collects.
    fn accumulate(&mut self, parts: Parts<'_>) {
        if let Some(g) = parts.dense {
            // the first gradient of a version is copied, not added to zeros: the sum
            // is not cleared after it is applied
            if self.dense_pending {
                self.dense.accum.iter_mut().zip(g).for_each(|(a, g)| *a += g);
            } else {
                self.dense.accum.copy_from_slice(g);
            }
            self.dense_pending = true;
        }
        let mut row = Vec::new();
        for (table, id, g) in parts.rows {
            let t = &mut self.tables[table];
            if self.spec.tables[table].fp16_wire {
                row.resize(t.dim(), 0.0);
                halves::unpack(g, t.dim(), &mut row);
                t.add_pending(id, &row);
            } else {
                t.add_pending(id, g);
            }
        }
    }

    /// The stored rows of table `table` from slot `from` on (at most `max`): their
    /// ids, values and the slot to go on from (None at the end); see
    /// [`SparseTable::dump`]. An undeclared table is [`TablesError::Misfit`].
    pub fn dump(&self, table: usize, from: usize, max: usize) -> Result<RowPage, TablesError> {
        let t = self.tables.get(table).ok_or_else(|| {
            TablesError::Misfit(format!("table {table} is not declared ({} tables)", self.tables.len()))
        })?;
        Ok(t.dump(from, max))
    }

    /// The rows `keys` (all of one table) in key order as they travel: their values,
    /// or their float16 pairs for a table declared with `fp16_wire`. A key that is no
    /// declared row is [`TablesError::Misfit`].
    pub fn rows_wire(&self, space: &KeySpace, keys: &[u64]) -> Result<Vec<f32>, TablesError> {
        let rows = self.rows(space, keys)?;
        let half = keys.first().and_then(|&k| match space.decode(self.range, k) {
            Ok(KeyOf::Row { table, .. }) => self.spec.tables.get(table).filter(|t| t.fp16_wire),
            _ => None,
        });
        Ok(match half {
            Some(t) => {
                let mut out = Vec::with_capacity(keys.len() * t.wire_len());
                halves::pack(&rows, t.dim as usize, &mut out);
                out
            }
            None => rows,
        })
    }

    /// The values of the rows `keys` (all of one table) in key order; a key that is
    /// no declared row is [`TablesError::Misfit`].
    pub fn rows(&self, space: &KeySpace, keys: &[u64]) -> Result<Vec<f32>, TablesError> {
        let misfit = TablesError::Misfit;
        let mut out = Vec::new();
        let mut of = None;
        for &k in keys {
            let KeyOf::Row { table, id } = space.decode(self.range, k)? else {
                return Err(misfit(format!("key {k} is the dense block, not a row")));
            };
            let t = self
                .tables
                .get(table)
                .ok_or_else(|| misfit(format!("table {table} is not declared ({} tables)", self.tables.len())))?;
            let rows = self.spec.tables[table].rows;
            if id >= rows {
                return Err(misfit(format!(
                    "row {id} of embedding {}: not below num_embeddings {rows}",
                    self.spec.tables[table].name
                )));
            }
            let d = t.dim();
            if of.is_none() {
                out.reserve_exact(keys.len() * d);
            }
            if *of.get_or_insert(table) != table {
                return Err(misfit("one lookup takes rows of one table".into()));
            }
            let at = out.len();
            out.resize(at + d, 0.0);
            t.read(id, &mut out[at..]);
        }
        Ok(out)
    }
}

impl Versioned for TableShard {
    fn rule_mut(&mut self) -> &mut Versions {
        &mut self.rule
    }

    fn apply_collected(&mut self, n: usize) {
        let scale = 1.0 / n as f32;
        if self.dense_pending {
            let d = &mut self.dense;
            self.spec
                .dense_optimizer
                .apply(&mut d.values, &d.accum, scale, &mut d.state, &mut d.steps);
            self.dense_pending = false;
        }
        for t in &mut self.tables {
            t.apply_pending(scale);
        }
    }
}

#[cfg(test)]
#[path = "shard_tests.rs"]
mod tests;
