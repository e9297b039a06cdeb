//! The shared-memory settings of the TCP van's links to peers on this host.

use super::error::{err, ConfigError};

/// Default `PS_SHM_MB`: region size per link, MiB. Pages are only allocated when
/// written, and the allocator reuses the lowest spans first.
pub const DEFAULT_REGION_MB: u64 = 128;
/// Default `PS_SHM_MIN_BYTES`: smaller frames go over TCP.
pub const DEFAULT_MIN_BYTES: usize = 64 << 10;
/// The bounds of `PS_SHM_MB`.
pub const REGION_MB_RANGE: std::ops::RangeInclusive<u64> = 1..=4096;

/// The shared-memory settings (`PS_SHM`, `PS_SHM_MB`, `PS_SHM_MIN_BYTES`), read by
/// [`crate::Config`]. Only the TCP van uses them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShmConfig {
    /// `PS_SHM`: 1 (default) offers and accepts shared memory with peers on this host.
    pub enabled: bool,
    /// `PS_SHM_MB`: the region each outgoing link offers, MiB (1-4096, default 128).
    pub region_mb: u64,
    /// `PS_SHM_MIN_BYTES`: frames of at least this many bytes go through the region
    /// (default 64 KiB; 256 up to the region's size).
    pub min_bytes: usize,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            enabled: true,
            region_mb: DEFAULT_REGION_MB,
            min_bytes: DEFAULT_MIN_BYTES,
        }
    }
}

impl ShmConfig {
    /// The region's size in bytes.
    pub fn region_bytes(&self) -> u64 {
        self.region_mb << 20
    }

    /// Checks the bounds; the [`ConfigError`] names the variable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !REGION_MB_RANGE.contains(&self.region_mb) {
            return Err(err("PS_SHM_MB", format!("{} is outside 1..=4096 MiB", self.region_mb)));
        }
        if self.min_bytes < 256 || self.min_bytes as u64 > self.region_bytes() {
            return Err(err(
                "PS_SHM_MIN_BYTES",
                format!(
                    "{} is outside 256..={} (the region, PS_SHM_MB)",
                    self.min_bytes,
                    self.region_bytes()
                ),
            ));
        }
        Ok(())
    }
}
