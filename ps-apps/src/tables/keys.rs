//! Where each value of a model lives: the KV key of each server's dense block and of
//! each embedding row.
//!
//! - Server `s`'s block of the dense parameters is one key, the first key of its
//!   range (`range(s).begin`), whose values are the block.
//! - Row `id` of table `t` is packed as `p = t << 40 | id` and lives on server
//!   `mix64(p) % n`, under the key `range(s).begin + 1 + p`. The hash spreads rows
//!   whatever their ids: Zipf-distributed ids, whose hot rows are the small ones, still
//!   land evenly on the servers; and the keys of one server sort by table, then id.
//!
//! A key is decoded back (by the server holding it) into the dense block or
//! `(table, id)`, and a row key on the wrong server is refused.

use super::error::TablesError;
use ps_core::kv::{server_key_ranges, KeyRange};

/// Bits of the row id in a packed row.
pub const ID_BITS: u32 = 40;

/// Rows per table at most (`num_embeddings` up to 2^40, about 1.1 * 10^12).
pub const MAX_ROWS: u64 = 1 << ID_BITS;

/// Embedding tables per model at most.
pub const MAX_TABLES: usize = 256;

/// Servers at most: each range must hold the dense key and every packed row after it.
pub const MAX_SERVERS: usize = 1 << 15;

/// The splitmix64 finalizer: a bijection of u64 mixing every input bit into every
/// output bit. Fixed forever: workers and servers of every version must agree.
pub fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOf {
    /// The server's dense block.
    Dense,
    /// Row `id` of table `table`.
    Row {
        /// Table index.
        table: usize,
        /// Row id.
        id: u64,
    },
}

/// The key layout over `n` servers.
#[derive(Clone, Debug)]
pub struct KeySpace {
    ranges: Vec<KeyRange>,
}

impl KeySpace {
    /// The layout over `num_servers` servers (their ranges as `server_key_ranges`);
    /// [`TablesError::Invalid`] for a count it cannot hold.
    pub fn new(num_servers: usize) -> Result<KeySpace, TablesError> {
        if num_servers == 0 || num_servers > MAX_SERVERS {
            return Err(TablesError::Invalid(format!(
                "{num_servers} servers: psrs.torch works with 1 to {MAX_SERVERS}"
            )));
        }
        Ok(KeySpace {
            ranges: server_key_ranges(num_servers),
        })
    }

    /// Number of servers.
    pub fn num_servers(&self) -> usize {
        self.ranges.len()
    }

    /// The servers' key ranges, in rank order.
    pub fn ranges(&self) -> &[KeyRange] {
        &self.ranges
    }

    /// The key of server `s`'s dense block.
    pub fn dense_key(&self, s: usize) -> u64 {
        self.ranges[s].begin
    }

    /// The server holding row `id` of table `table`.
    pub fn row_server(&self, table: usize, id: u64) -> usize {
        (mix64(packed(table, id)) % self.ranges.len() as u64) as usize
    }

    /// The key of row `id` of table `table` (`table < MAX_TABLES`, `id < MAX_ROWS`).
    pub fn row_key(&self, table: usize, id: u64) -> u64 {
        let p = packed(table, id);
        let s = (mix64(p) % self.ranges.len() as u64) as usize;
        self.ranges[s].begin + 1 + p
    }

    /// What `key` names on server `s`: [`TablesError::Misfit`] if it is not a key of
    /// that server.
    pub fn decode(&self, s: usize, key: u64) -> Result<KeyOf, TablesError> {
        let r = self
            .ranges
            .get(s)
            .ok_or_else(|| TablesError::Misfit(format!("no server {s}")))?;
        if key == r.begin {
            return Ok(KeyOf::Dense);
        }
        let p = key
            .checked_sub(r.begin + 1)
            .filter(|&p| p < (MAX_TABLES as u64) << ID_BITS)
            .ok_or_else(|| TablesError::Misfit(format!("key {key} is not a psrs.torch key of server {s}")))?;
        let (table, id) = ((p >> ID_BITS) as usize, p & (MAX_ROWS - 1));
        if self.row_server(table, id) != s {
            return Err(TablesError::Misfit(format!(
                "key {key} (table {table}, row {id}) belongs to server {}, not {s}",
                self.row_server(table, id)
            )));
        }
        Ok(KeyOf::Row { table, id })
    }

    /// The keys of rows `ids` of table `table`, sorted, and where each id's key went:
    /// `keys[order[i]]` is the key of `ids[i]`. Ids must be unique.
    pub fn sorted_row_keys(&self, table: usize, ids: &[u64]) -> (Vec<u64>, Vec<usize>) {
        let mut pairs: Vec<(u64, usize)> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| (self.row_key(table, id), i))
            .collect();
        pairs.sort_unstable();
        let mut order = vec![0; ids.len()];
        for (at, &(_, i)) in pairs.iter().enumerate() {
            order[i] = at;
        }
        (pairs.into_iter().map(|(k, _)| k).collect(), order)
    }
}

fn packed(table: usize, id: u64) -> u64 {
    debug_assert!(table < MAX_TABLES && id < MAX_ROWS);
    ((table as u64) << ID_BITS) | id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_back_on_their_server_only() {
        let ks = KeySpace::new(3).unwrap();
        for s in 0..3 {
            assert_eq!(ks.decode(s, ks.dense_key(s)).unwrap(), KeyOf::Dense);
        }
        for (table, id) in [(0, 0), (0, MAX_ROWS - 1), (255, 12345), (7, 1_000_000_000)] {
            let k = ks.row_key(table, id);
            let s = ks.row_server(table, id);
            assert!(ks.ranges()[s].contains(k));
            assert_eq!(ks.decode(s, k).unwrap(), KeyOf::Row { table, id });
            let other = (s + 1) % 3;
            assert!(matches!(ks.decode(other, k), Err(TablesError::Misfit(_))));
        }
        assert!(ks
            .decode(0, ks.dense_key(0) + 1 + ((MAX_TABLES as u64) << ID_BITS))
            .is_err());
        assert!(KeySpace::new(0).is_err() && KeySpace::new(MAX_SERVERS + 1).is_err());
        // the largest layout still fits each range
        let big = KeySpace::new(MAX_SERVERS).unwrap();
        let last = big.ranges()[0];
        assert!(last.contains(last.begin + ((MAX_TABLES as u64) << ID_BITS)));
    }

    #[test]
    fn zipf_hot_ids_spread_over_the_servers() {
        // the 1000 smallest ids (a Zipf distribution's hot rows) of one table
        let ks = KeySpace::new(4).unwrap();
        let mut per = [0usize; 4];
        for id in 0..1000 {
            per[ks.row_server(3, id)] += 1;
        }
        assert!(per.iter().all(|&c| (200..300).contains(&c)), "{per:?}");
    }

    #[test]
    fn sorted_row_keys_reports_where_each_id_went() {
        let ks = KeySpace::new(2).unwrap();
        let ids = [5, 900, 3, 77];
        let (keys, order) = ks.sorted_row_keys(1, &ids);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(keys[order[i]], ks.row_key(1, id));
        }
    }
}
