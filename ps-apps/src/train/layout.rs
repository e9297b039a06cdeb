//! Where each parameter lives: the parameter vector is cut into one contiguous block
//! per server, and parameter `i` of server `s`'s block is the key `range(s).begin + o`,
//! so sorted parameter indices map to sorted keys and every server gets one block.

use ps_core::kv::{server_key_ranges, KeyRange};

/// The mapping between parameter indices and KV keys.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Parameters in the model.
    pub num_params: usize,
    /// Parameters per server block (the last may be shorter).
    pub block: usize,
    ranges: Vec<KeyRange>,
}

impl Layout {
    /// A layout of `num_params` parameters over `num_servers` servers.
    pub fn new(num_params: usize, num_servers: usize) -> Layout {
        let n = num_servers.max(1);
        Layout {
            num_params,
            block: num_params.div_ceil(n).max(1),
            ranges: server_key_ranges(n),
        }
    }

    /// The parameter indices server `rank` holds.
    pub fn params_of(&self, rank: usize) -> std::ops::Range<usize> {
        let a = (rank * self.block).min(self.num_params);
        a..((rank + 1) * self.block).min(self.num_params)
    }

    /// The key of parameter `i`.
    pub fn key(&self, i: u64) -> u64 {
        let s = i as usize / self.block;
        self.ranges[s].begin + (i - (s * self.block) as u64)
    }

    /// The keys of every parameter, in order.
    pub fn all_keys(&self) -> Vec<u64> {
        (0..self.num_params as u64).map(|i| self.key(i)).collect()
    }

    /// The first key of server `rank`'s range (key of its first parameter).
    pub fn range_begin(&self, rank: usize) -> u64 {
        self.ranges[rank].begin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_and_blocks_cover_everything() {
        let l = Layout::new(10, 3);
        assert_eq!((l.params_of(0), l.params_of(1), l.params_of(2)), (0..4, 4..8, 8..10));
        let k = l.all_keys();
        assert!(k.windows(2).all(|w| w[0] < w[1]));
        let r = server_key_ranges(3);
        assert_eq!(k[4], r[1].begin);
        assert!(r[2].contains(k[9]));
        let one = Layout::new(5, 8);
        assert_eq!(one.params_of(7), 5..5);
    }
}
