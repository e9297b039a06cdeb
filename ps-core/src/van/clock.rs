//! The clock a van reads: milliseconds since the van was created. Every rule the van
//! feeds (the resender, liveness, the election) takes its time from here, so a
//! simulator can run the van under its own clock.

use std::time::Instant;

/// A source of milliseconds, monotonic.
pub trait Clock: Send + Sync {
    /// Milliseconds since some fixed moment (the van's creation for [`WallClock`]).
    fn now_ms(&self) -> u64;
}

/// The real clock: milliseconds since it was made.
#[derive(Debug)]
pub struct WallClock(Instant);

impl WallClock {
    /// A clock reading 0 now.
    pub fn new() -> WallClock {
        WallClock(Instant::now())
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new()
    }
}

impl Clock for WallClock {
    fn now_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}
