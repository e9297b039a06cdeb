//! Reading rows without the client: lookups of a batch's rows (several at once, and
//! beside a step in flight on the client: a prefetch of the next batch's rows) and a
//! table's stored rows page by page (an export).

use super::client_error::{kv_failure, undeclared, ClientError};
use super::halves;
use super::keys::KeySpace;
use super::spec::TableSpec;
use super::wire::{dump_cursor, CMD_DUMP, CMD_ROWS, DUMP_END};
use crate::train::resend::{exchange_all, Outgoing};
use ps_core::kv::{KVPairs, KVWorker, KvRequest, SArray, ServerReply};
use std::sync::Arc;
use std::time::Duration;

/// Looks rows up (and reads whole tables) without the client: several can run at
/// once, beside a step in flight on the client's thread (a prefetch of the next
/// batch's rows while this batch computes).
#[derive(Clone)]
pub struct RowReader {
    kv: Arc<KVWorker<f32>>,
    tables: Vec<TableSpec>,
    timeout: Duration,
}

impl RowReader {
    /// A reader over `kv` of a model with these tables; a request unanswered after
    /// `timeout` fails.
    pub fn new(kv: Arc<KVWorker<f32>>, tables: Vec<TableSpec>, timeout: Duration) -> RowReader {
        RowReader { kv, tables, timeout }
    }

    fn run(&self, reqs: &[Outgoing<'_, f32>]) -> Result<Vec<Vec<ServerReply<f32>>>, ClientError> {
        exchange_all(&self.kv, self.timeout, reqs, &|| false).map_err(kv_failure)
    }

    fn table(&self, table: usize) -> Result<&TableSpec, ClientError> {
        self.tables
            .get(table)
            .ok_or_else(|| ClientError::Refused(format!("no embedding table {table}")))
    }

    /// The values of the rows `keys` (sorted, unique row keys of table `table`, from
    /// [`KeySpace::sorted_row_keys`]) into `out` (`keys.len() * dim`).
    pub fn lookup(&self, table: usize, keys: SArray<u64>, out: &mut [f32]) -> Result<(), ClientError> {
        let spec = self.table(table)?;
        let dim = spec.dim as usize;
        if out.len() != keys.len() * dim {
            return Err(ClientError::Refused(format!(
                "{} values for {} rows of {dim}",
                out.len(),
                keys.len()
            )));
        }
        if keys.is_empty() {
            return Ok(());
        }
        let make = || {
            KvRequest::new(
                KVPairs {
                    keys: keys.clone(),
                    ..Default::default()
                },
                CMD_ROWS,
                false,
                true,
            )
        };
        let replies = self.run(&[Outgoing {
            idempotent: true,
            make: &make,
        }])?;
        let replies = &replies[0];
        undeclared(replies)?;
        let wire = spec.wire_len();
        let mut at = 0;
        for r in replies {
            let v = &r.data.vals;
            let rows = v.len() / wire;
            let dst = out
                .get_mut(at..at + rows * dim)
                .filter(|_| v.len() % wire == 0)
                .ok_or_else(|| ClientError::Cluster("the servers sent more row values than asked".into()))?;
            if spec.fp16_wire {
                halves::unpack(v, dim, dst);
            } else {
                dst.copy_from_slice(v);
            }
            at += rows * dim;
        }
        if at != out.len() {
            return Err(ClientError::Cluster(format!(
                "the servers sent {at} row values, {} were asked",
                out.len()
            )));
        }
        Ok(())
    }

    /// Every row of table `table` the servers store (updated at least once, not
    /// expired), page by page from each server: their ids (in no order) and values
    /// (`dim` each). Run it when no worker trains: a page is a run of a server's
    /// slots, which move while gradients are applied.
    pub fn dump(&self, table: usize) -> Result<(Vec<u64>, Vec<f32>), ClientError> {
        let dim = self.table(table)?.dim as usize;
        let n = self.kv.ranges().len();
        let space = KeySpace::new(n).map_err(|e| ClientError::Refused(e.to_string()))?;
        let (mut ids, mut vals) = (Vec::new(), Vec::new());
        for s in 0..n {
            let mut from = 0u64;
            loop {
                let make = || {
                    let mut req = KvRequest::new(
                        KVPairs {
                            keys: vec![space.dense_key(s)].into(),
                            ..Default::default()
                        },
                        CMD_DUMP,
                        false,
                        true,
                    );
                    req.versions = (0..n).map(|_| dump_cursor(table, from)).collect();
                    req
                };
                let replies = self.run(&[Outgoing {
                    idempotent: true,
                    make: &make,
                }])?;
                let r = replies[0]
                    .first()
                    .ok_or_else(|| ClientError::Cluster(format!("server {s} sent no rows")))?;
                undeclared(&replies[0])?;
                if r.data.vals.len() != r.data.keys.len() * dim {
                    return Err(ClientError::Cluster(format!(
                        "server {s} sent {} values for {} rows of {dim}",
                        r.data.vals.len(),
                        r.data.keys.len()
                    )));
                }
                ids.extend_from_slice(&r.data.keys);
                vals.extend_from_slice(&r.data.vals);
                if r.version == DUMP_END || r.version <= from {
                    break;
                }
                from = r.version;
            }
        }
        Ok((ids, vals))
    }
}
