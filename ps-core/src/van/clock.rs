//! The clock a van reads: milliseconds since the van was created. Every rule the van
//! feeds (the resender, liveness, the election) takes its time from here, so a
//! simulator can run the van under its own clock.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of milliseconds, monotonic.
pub trait Clock: Send + Sync {
    /// Milliseconds since some fixed moment (the van's creation for [`WallClock`]).
    fn now_ms(&self) -> u64;

    /// The Unix time now, in milliseconds: what log lines name so that two
    /// processes' lines compare (the system's clock unless a simulator says).
    fn unix_ms(&self) -> u64 {
        system_unix_ms()
    }
}

/// The system's Unix time now, in milliseconds (0 before 1970).
pub fn system_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
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
