//! The active scheduler's bookkeeping of its standbys: the state sequence each one
//! acknowledged and when it was last heard, so the active knows whom to wait for
//! before it acts and whom to catch up with the full state.

use std::collections::BTreeMap;

#[derive(Clone, Debug)]
struct Peer {
    acked: u64,
    last_heard_ms: u64,
}

/// Standbys as seen by the active scheduler.
#[derive(Clone, Debug)]
pub struct Replicas {
    timeout_ms: u64,
    peers: BTreeMap<usize, Peer>,
}

impl Replicas {
    /// Standbys `peers` (candidate indices), counted as heard at `now_ms`; a standby
    /// silent for longer than `timeout_ms` is not waited for.
    pub fn new(peers: impl IntoIterator<Item = usize>, timeout_ms: u64, now_ms: u64) -> Replicas {
        Replicas {
            timeout_ms,
            peers: peers
                .into_iter()
                .map(|p| {
                    (
                        p,
                        Peer {
                            acked: 0,
                            last_heard_ms: now_ms,
                        },
                    )
                })
                .collect(),
        }
    }

    /// Standby `peer` holds the state up to `seq` (an ack, or its heartbeat) at `now_ms`.
    /// Unknown peers are ignored.
    pub fn on_ack(&mut self, peer: usize, seq: u64, now_ms: u64) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.acked = p.acked.max(seq);
            p.last_heard_ms = now_ms;
        }
    }

    fn live(&self, now_ms: u64) -> impl Iterator<Item = (&usize, &Peer)> {
        self.peers
            .iter()
            .filter(move |(_, p)| self.timeout_ms == 0 || now_ms.saturating_sub(p.last_heard_ms) <= self.timeout_ms)
    }

    /// Live standbys that have not acknowledged `seq` yet: the active waits for them
    /// (up to a bound) before it acts on that state.
    pub fn waiting_for(&self, seq: u64, now_ms: u64) -> Vec<usize> {
        self.live(now_ms)
            .filter(|(_, p)| p.acked < seq)
            .map(|(i, _)| *i)
            .collect()
    }

    /// Every standby not known to hold `seq` (live or not): the full state is sent to
    /// them again on the next tick (a standby that was cut off catches up when heard).
    pub fn behind(&self, seq: u64) -> Vec<usize> {
        self.peers
            .iter()
            .filter(|(_, p)| p.acked < seq)
            .map(|(i, _)| *i)
            .collect()
    }

    /// The standbys, for the heartbeat broadcast.
    pub fn peers(&self) -> Vec<usize> {
        self.peers.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_only_for_live_standbys() {
        let mut r = Replicas::new([1, 2], 1000, 0);
        assert_eq!(r.waiting_for(1, 0), vec![1, 2]);
        r.on_ack(1, 1, 100);
        r.on_ack(7, 9, 100);
        assert_eq!(r.waiting_for(1, 100), vec![2]);
        assert_eq!(r.behind(1), vec![2]);
        // standby 2 has been silent for over a second: not waited for, still behind
        assert_eq!(r.waiting_for(2, 1001), vec![1]);
        assert_eq!(r.behind(2), vec![1, 2]);
        // heard again: waited for again until it caught up
        r.on_ack(2, 1, 1200);
        r.on_ack(1, 1, 1150);
        assert_eq!(r.waiting_for(2, 1200), vec![1, 2]);
        r.on_ack(2, 2, 1210);
        r.on_ack(1, 2, 1210);
        assert!(r.waiting_for(2, 1210).is_empty());
        assert!(r.behind(2).is_empty());
        assert_eq!(r.peers(), vec![1, 2]);
    }
}
