//! A step's gradients as one push: every server's dense block and the rows it holds,
//! in key order, with each key's value count. A dense-only model's push shares the
//! caller's gradient buffer (no copy); rows are gathered in key order, and a row
//! looked up twice in one step gets the sum of its gradients.

use super::error::TablesError;
use super::halves;
use super::keys::KeySpace;
use super::shard::dense_block;
use ps_core::kv::{KVPairs, SArray};

/// The gradients of one lookup's rows: sorted, unique `keys` and `dim` values each.
#[derive(Clone, Copy, Debug)]
pub struct RowGrads<'a> {
    /// Row keys, sorted and unique.
    pub keys: &'a [u64],
    /// `keys.len() * dim` gradient values, in key order.
    pub grads: &'a [f32],
    /// Values per row.
    pub dim: usize,
    /// The table's rows travel as float16 pairs ([`super::halves`]).
    pub fp16: bool,
}

/// The push of one step: each server's block of `dense` (the flattened dense
/// gradient) under its dense key, then its rows from `rows`. Rows whose gradients do
/// not match their keys and width are [`TablesError::Misfit`].
pub fn step_pairs(space: &KeySpace, dense: SArray<f32>, rows: &[RowGrads<'_>]) -> Result<KVPairs<f32>, TablesError> {
    let n = space.num_servers();
    let blocks: Vec<_> = (0..n).map(|s| dense_block(dense.len() as u64, n, s)).collect();
    for r in rows {
        if r.grads.len() != r.keys.len() * r.dim {
            return Err(TablesError::Misfit(format!(
                "{} gradient values for {} rows of {}",
                r.grads.len(),
                r.keys.len(),
                r.dim
            )));
        }
    }
    let dense_keys: Vec<u64> = (0..n).map(|s| space.dense_key(s)).collect();
    let dense_lens: Vec<i32> = blocks.iter().map(|b| b.len() as i32).collect();
    if rows.iter().all(|r| r.keys.is_empty()) {
        return Ok(KVPairs {
            keys: dense_keys.into(),
            vals: dense,
            lens: dense_lens.into(),
        });
    }
    // every row: (key, lookup, index in it), in key order; equal keys are adjacent
    let mut order: Vec<(u64, usize, usize)> = rows
        .iter()
        .enumerate()
        .flat_map(|(l, r)| r.keys.iter().enumerate().map(move |(i, &k)| (k, l, i)))
        .collect();
    order.sort_unstable();
    let total_rows: usize = rows.iter().map(|r| r.grads.len()).sum();
    let mut keys = Vec::with_capacity(n + order.len());
    let mut lens = Vec::with_capacity(n + order.len());
    let mut vals = Vec::with_capacity(dense.len() + total_rows);
    // one row's gradient (summed over the lookups that hold it) goes out as it travels
    let put = |row: &[f32], r: &RowGrads<'_>, lens: &mut Vec<i32>, vals: &mut Vec<f32>| {
        if r.fp16 {
            halves::pack(row, r.dim, vals);
            lens.push(halves::words(r.dim) as i32);
        } else {
            vals.extend_from_slice(row);
            lens.push(r.dim as i32);
        }
    };
    let mut row: Vec<f32> = Vec::new();
    let mut next = order.iter().peekable();
    for s in 0..n {
        keys.push(dense_keys[s]);
        lens.push(dense_lens[s]);
        vals.extend_from_slice(&dense[blocks[s].clone()]);
        let end = space.ranges()[s].end;
        while let Some(&&(k, l, i)) = next.peek() {
            if k >= end && s + 1 < n {
                break;
            }
            next.next();
            let r = &rows[l];
            row.clear();
            row.extend_from_slice(&r.grads[i * r.dim..(i + 1) * r.dim]);
            // the same row from other lookups of this step comes right after
            while let Some(&&(k2, l2, i2)) = next.peek() {
                if k2 != k {
                    break;
                }
                next.next();
                let r2 = &rows[l2];
                if r2.dim != r.dim || r2.fp16 != r.fp16 {
                    return Err(TablesError::Misfit(format!("row key {k} looked up with two widths")));
                }
                let g = &r2.grads[i2 * r2.dim..(i2 + 1) * r2.dim];
                row.iter_mut().zip(g).for_each(|(a, b)| *a += b);
            }
            keys.push(k);
            put(&row, r, &mut lens, &mut vals);
        }
    }
    Ok(KVPairs::new(keys, vals, lens))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::keys::KeyOf;

    #[test]
    fn a_dense_only_push_shares_the_buffer() {
        let ks = KeySpace::new(3).unwrap();
        let dense: SArray<f32> = vec![1.0f32; 10].into();
        let p = step_pairs(&ks, dense.clone(), &[]).unwrap();
        assert_eq!(&p.lens[..], &[4, 4, 2]);
        assert_eq!(p.vals.bytes().as_ptr(), dense.bytes().as_ptr(), "no copy");
        p.validate(true).unwrap();
    }

    #[test]
    fn rows_go_to_their_servers_after_the_blocks_and_repeats_add_up() {
        let ks = KeySpace::new(2).unwrap();
        let dense: SArray<f32> = (0..5).map(|i| i as f32).collect::<Vec<_>>().into();
        let ids = [3u64, 10, 11, 12, 13];
        let (k1, _) = ks.sorted_row_keys(0, &ids);
        let g1: Vec<f32> = (0..10).map(|i| i as f32).collect();
        // a second lookup of table 0 repeating the first id, and one of table 1
        let (k2, _) = ks.sorted_row_keys(0, &[3]);
        let (k3, _) = ks.sorted_row_keys(1, &[3]);
        let rows = [
            RowGrads {
                keys: &k1,
                grads: &g1,
                dim: 2,
                fp16: false,
            },
            RowGrads {
                keys: &k2,
                grads: &[100.0, 100.0],
                dim: 2,
                fp16: false,
            },
            RowGrads {
                keys: &k3,
                grads: &[7.0, 7.0, 7.0],
                dim: 3,
                fp16: true,
            },
        ];
        let p = step_pairs(&ks, dense, &rows).unwrap();
        p.validate(true).unwrap();
        assert_eq!(
            p.keys.len(),
            2 + 5 + 1,
            "two blocks, five rows of table 0, one of table 1"
        );
        let parts = p.slice(ks.ranges(), true);
        let mut seen = 0;
        for (s, part) in parts.iter().enumerate() {
            assert_eq!(ks.decode(s, part.keys[0]).unwrap(), KeyOf::Dense);
            let block = dense_block(5, 2, s);
            assert_eq!(part.lens[0] as usize, block.len());
            let mut at = block.len();
            for (j, &k) in part.keys.iter().enumerate().skip(1) {
                let KeyOf::Row { table, id } = ks.decode(s, k).unwrap() else {
                    panic!("a row key")
                };
                let v = &part.vals[at..at + part.lens[j] as usize];
                at += v.len();
                seen += 1;
                let want: Vec<f32> = if table == 1 {
                    // table 1's rows travel as float16 pairs
                    let mut packed = Vec::new();
                    halves::pack(&[7.0; 3], 3, &mut packed);
                    packed
                } else {
                    let i = k1.iter().position(|&x| x == k).unwrap();
                    let extra = if id == 3 { 100.0 } else { 0.0 };
                    vec![g1[2 * i] + extra, g1[2 * i + 1] + extra]
                };
                assert_eq!(v, &want[..], "table {table} row {id}");
            }
        }
        assert_eq!(seen, 6);
        let bad = [RowGrads {
            keys: &k1,
            grads: &g1[..9],
            dim: 2,
            fp16: false,
        }];
        assert!(step_pairs(&ks, vec![0.0f32; 5].into(), &bad).is_err());
    }
}
