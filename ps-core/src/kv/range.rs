//! Key ranges: server rank `r` owns one contiguous range of the u64 key space, the
//! space split evenly as ps-lite's `GetServerKeyRanges` does.

use std::fmt;

/// Keys `begin..end` (end exclusive; the last range ends at `u64::MAX` inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// First key.
    pub begin: u64,
    /// One past the last key (`u64::MAX` for the last range, which includes it).
    pub end: u64,
}

impl KeyRange {
    /// True if `key` lies in the range.
    pub fn contains(&self, key: u64) -> bool {
        key >= self.begin && (key < self.end || (self.end == u64::MAX && key == u64::MAX))
    }

    /// Number of keys (saturating).
    pub fn size(&self) -> u64 {
        self.end - self.begin
    }
}

impl fmt::Display for KeyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.begin, self.end)
    }
}

/// The ranges of `num_servers` servers, in rank order, covering every key.
pub fn server_key_ranges(num_servers: usize) -> Vec<KeyRange> {
    let n = num_servers.max(1) as u64;
    let step = u64::MAX / n;
    (0..n)
        .map(|r| KeyRange {
            begin: r * step,
            end: if r + 1 == n { u64::MAX } else { (r + 1) * step },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_key_space_without_gaps() {
        for n in 1..6 {
            let r = server_key_ranges(n);
            assert_eq!(r.len(), n);
            assert_eq!(r[0].begin, 0);
            assert_eq!(r[n - 1].end, u64::MAX);
            assert!(r[n - 1].contains(u64::MAX));
            for w in r.windows(2) {
                assert_eq!(w[0].end, w[1].begin);
                assert!(!w[0].contains(w[1].begin));
            }
        }
    }
}
