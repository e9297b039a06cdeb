//! The opt-in low-latency mode (`PS_SPIN_US`): the TCP van's reader threads, about to
//! sleep waiting for the next message, first poll their socket for up to that long, so
//! a message that comes quickly is handled without the cost of waking a sleeping
//! thread (tens of microseconds on an idle machine, more than a loopback round trip).
//! It costs a core per spinning thread while it spins; 0 (the default) never spins.
//! Threads waiting for a response do not spin: on two cores, a waiter spinning beside
//! the reader that would wake it made a waited request slower, not faster.

use std::time::{Duration, Instant};

/// Polls `ready` until it returns true (then returns true) or `limit` has passed
/// (then returns false); never calls `ready` when `limit` is zero.
pub fn spin_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if limit.is_zero() {
        return false;
    }
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_never_polls_and_a_ready_condition_ends_at_once() {
        assert!(!spin_until(Duration::ZERO, || panic!("polled")));
        let mut calls = 0;
        assert!(spin_until(Duration::from_secs(10), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
    }

    #[test]
    fn a_condition_never_ready_gives_up_after_the_limit() {
        let start = Instant::now();
        assert!(!spin_until(Duration::from_millis(5), || false));
        assert!(start.elapsed() >= Duration::from_millis(5));
    }
}
