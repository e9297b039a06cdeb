//! Reliable delivery bookkeeping (ps-lite's Resender): the sender keeps every
//! unacknowledged message and resends it after a timeout; the receiver acknowledges
//! each message and drops duplicates by signature, so the application sees each
//! message exactly once.

use crate::message::{Command, Meta};
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

/// The signature of a message: a hash of the fields that identify it.
pub fn signature(meta: &Meta) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        meta.app_id,
        meta.customer_id,
        meta.timestamp,
        meta.sender,
        meta.recver,
        meta.request,
        meta.push,
        meta.pull,
        meta.head,
        meta.incarnation,
        meta.key_sig,
        // a "send the keys again" answer and the real answer share everything else
        meta.status,
    )
        .hash(&mut h);
    // a replica answering for two key ranges of one request sends two answers
    (meta.control.cmd as u8, meta.control.barrier_group, meta.range).hash(&mut h);
    h.finish()
}

/// True for messages the resender tracks: everything except ACKs, heartbeats, the
/// van's own TERMINATE and ADD_NODE (a joining node has no id to be acknowledged at;
/// it repeats ADD_NODE itself until it gets the node table).
pub fn needs_ack(meta: &Meta) -> bool {
    !matches!(
        meta.control.cmd,
        Command::Ack | Command::Heartbeat | Command::Terminate | Command::AddNode | Command::Sync | Command::PeerBeat
    )
}

struct Pending<T> {
    msg: T,
    sent_ms: u64,
    retries: u32,
}

/// What to do with a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incoming {
    /// An ACK: nothing more to do.
    Ack,
    /// Seen before: acknowledge again, but do not deliver.
    Duplicate(u64),
    /// New: acknowledge and deliver.
    Fresh(u64),
    /// Not tracked (heartbeat, terminate): deliver without acknowledging.
    Untracked,
}

/// Sender and receiver state of the resender. `T` is the stored outgoing message.
pub struct Resender<T> {
    timeout_ms: u64,
    max_retries: u32,
    unacked: HashMap<u64, Pending<T>>,
    seen: HashMap<u64, u64>,
    seen_order: VecDeque<(u64, u64)>,
}

impl<T: Clone> Resender<T> {
    /// Resends after `timeout_ms`, gives up after `max_retries` resends.
    pub fn new(timeout_ms: u64, max_retries: u32) -> Resender<T> {
        Resender {
            timeout_ms,
            max_retries,
            unacked: HashMap::new(),
            seen: HashMap::new(),
            seen_order: VecDeque::new(),
        }
    }

    /// Records an outgoing message that needs an ACK.
    pub fn on_send(&mut self, sig: u64, msg: T, now_ms: u64) {
        self.unacked.entry(sig).or_insert(Pending {
            msg,
            sent_ms: now_ms,
            retries: 0,
        });
    }

    /// Classifies a received message, remembering fresh signatures.
    pub fn on_receive(&mut self, meta: &Meta, now_ms: u64) -> Incoming {
        if meta.control.cmd == Command::Ack {
            self.unacked.remove(&meta.control.msg_sig);
            return Incoming::Ack;
        }
        if !needs_ack(meta) {
            return Incoming::Untracked;
        }
        let sig = signature(meta);
        if self.seen.contains_key(&sig) {
            return Incoming::Duplicate(sig);
        }
        self.seen.insert(sig, now_ms);
        self.seen_order.push_back((now_ms, sig));
        self.expire_seen(now_ms);
        Incoming::Fresh(sig)
    }

    fn expire_seen(&mut self, now_ms: u64) {
        // A duplicate can arrive at most (max_retries + 1) timeouts after the original.
        let horizon = self.timeout_ms * (self.max_retries as u64 + 2) * 2;
        while let Some(&(t, sig)) = self.seen_order.front() {
            if now_ms.saturating_sub(t) <= horizon {
                break;
            }
            self.seen_order.pop_front();
            self.seen.remove(&sig);
        }
    }

    /// Messages due for resending at `now_ms`, and those given up on (returned once).
    /// Messages for which `parked` is true (their receiver is declared dead and awaits
    /// a replacement) are held without using up their retries.
    pub fn due(&mut self, now_ms: u64, parked: impl Fn(&T) -> bool) -> (Vec<T>, Vec<T>) {
        let mut resend = Vec::new();
        let mut give_up = Vec::new();
        let timeout = self.timeout_ms;
        let max = self.max_retries;
        self.unacked.retain(|_, p| {
            if now_ms.saturating_sub(p.sent_ms) < timeout {
                return true;
            }
            if parked(&p.msg) {
                p.sent_ms = now_ms;
                return true;
            }
            if p.retries >= max {
                give_up.push(p.msg.clone());
                return false;
            }
            p.retries += 1;
            p.sent_ms = now_ms;
            resend.push(p.msg.clone());
            true
        });
        (resend, give_up)
    }

    /// Number of messages awaiting an ACK.
    pub fn num_unacked(&self) -> usize {
        self.unacked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ts: i32) -> Meta {
        Meta {
            timestamp: ts,
            sender: 9,
            recver: 8,
            request: true,
            ..Default::default()
        }
    }

    fn ack(sig: u64) -> Meta {
        let mut m = Meta::default();
        m.control.cmd = Command::Ack;
        m.control.msg_sig = sig;
        m
    }

    #[test]
    fn resends_until_acked() {
        let mut r: Resender<i32> = Resender::new(100, 3);
        let sig = signature(&meta(1));
        r.on_send(sig, 1, 0);
        assert_eq!(r.due_all(99), (vec![], vec![]));
        assert_eq!(r.due_all(100), (vec![1], vec![]));
        assert_eq!(r.due_all(150), (vec![], vec![]));
        assert_eq!(r.on_receive(&ack(sig), 160), Incoming::Ack);
        assert_eq!(r.num_unacked(), 0);
        assert_eq!(r.due_all(1000), (vec![], vec![]));
    }

    impl Resender<i32> {
        fn due_all(&mut self, now: u64) -> (Vec<i32>, Vec<i32>) {
            self.due(now, |_| false)
        }
    }

    #[test]
    fn parked_messages_keep_their_retries() {
        let mut r: Resender<i32> = Resender::new(10, 1);
        r.on_send(1, 1, 0);
        assert_eq!(r.due(10, |_| true), (vec![], vec![]));
        assert_eq!(r.due(1000, |_| true), (vec![], vec![]));
        assert_eq!(r.due_all(1010), (vec![1], vec![]));
        assert_eq!(r.due_all(1020), (vec![], vec![1]));
    }

    #[test]
    fn gives_up_after_max_retries() {
        let mut r: Resender<i32> = Resender::new(10, 2);
        r.on_send(5, 5, 0);
        assert_eq!(r.due_all(10).0, vec![5]);
        assert_eq!(r.due_all(20).0, vec![5]);
        assert_eq!(r.due_all(30), (vec![], vec![5]));
        assert_eq!(r.num_unacked(), 0);
    }

    #[test]
    fn receiver_drops_duplicates_and_forgets_old_ones() {
        let mut r: Resender<i32> = Resender::new(10, 2);
        let m = meta(7);
        let sig = signature(&m);
        assert_eq!(r.on_receive(&m, 0), Incoming::Fresh(sig));
        assert_eq!(r.on_receive(&m, 5), Incoming::Duplicate(sig));
        assert_eq!(r.on_receive(&meta(8), 6), Incoming::Fresh(signature(&meta(8))));
        // far beyond any possible resend, the signature is forgotten
        assert_eq!(r.on_receive(&meta(9), 10_000), Incoming::Fresh(signature(&meta(9))));
        assert_eq!(r.on_receive(&m, 10_001), Incoming::Fresh(sig));
    }

    #[test]
    fn signature_distinguishes_incarnations_and_directions() {
        let a = meta(1);
        let mut b = meta(1);
        b.incarnation = 2;
        let mut c = meta(1);
        c.request = false;
        assert_ne!(signature(&a), signature(&b));
        assert_ne!(signature(&a), signature(&c));
        // a request resent with its full key list under a new key signature, and a
        // "send the keys again" answer followed by the real answer, are not duplicates
        let mut d = meta(1);
        d.key_sig = 5;
        assert_ne!(signature(&a), signature(&d));
        let mut again = c.clone();
        again.status = crate::customer::STATUS_NOT_COUNTED;
        assert_ne!(signature(&c), signature(&again));
        let mut hb = Meta::default();
        hb.control.cmd = Command::Heartbeat;
        assert!(!needs_ack(&hb));
        let mut r: Resender<i32> = Resender::new(10, 2);
        assert_eq!(r.on_receive(&hb, 0), Incoming::Untracked);
    }
}
