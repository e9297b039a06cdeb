//! Reliable delivery bookkeeping (ps-lite's Resender): the sender keeps every
//! unacknowledged message and resends it after a timeout; the receiver acknowledges
//! each message and drops duplicates by signature, so the application sees each
//! message exactly once.

use crate::message::{Command, Meta};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
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
    // a replica answering for two key ranges of one request sends two answers; and
    // the answer to a restarted process (whose timestamps start again) is not the
    // answer to its predecessor, still unacknowledged when that one died
    (
        meta.control.cmd as u8,
        meta.control.barrier_group,
        meta.range,
        meta.recver_incarnation,
    )
        .hash(&mut h);
    h.finish()
}

/// True for messages the resender tracks: everything except ACKs, heartbeats, the
/// van's own TERMINATE, the candidates' SYNC and PEER_BEAT, elections (CAMPAIGN and
/// VOTE: repeated while they matter, stale once late), and a node's ADD_NODE (a
/// joining node has no id to be acknowledged at; it repeats ADD_NODE itself until it
/// gets the node table). The scheduler's ADD_NODE (the node table, or the change of
/// one node) is tracked: a node that missed a replacement or a new scheduler would
/// keep addressing the process that was replaced.
pub fn needs_ack(meta: &Meta) -> bool {
    match meta.control.cmd {
        Command::AddNode => meta.sender == crate::node::SCHEDULER,
        cmd => !matches!(
            cmd,
            Command::Ack
                | Command::Heartbeat
                | Command::Terminate
                | Command::Sync
                | Command::PeerBeat
                | Command::Campaign
                | Command::Vote
        ),
    }
}

struct Pending<T> {
    msg: T,
    sent_ms: u64,
    retries: u32,
}

/// The resend of a message at which its receiver's link counts as stalled (after seven
/// timeouts without an ACK: 1, 2 and 4): the sender then opens a new connection to it,
/// since a TCP stream behind lost segments can stay stuck far longer than a fresh one
/// takes (its retransmission timer doubles with each loss).
pub const RECONNECT_AT: u32 = 3;

/// The longest wait between two resends of one message, in resend timeouts.
pub const MAX_BACKOFF: u64 = 8;

/// The wait after the send or resend number `retries` (0: the first send), in timeouts.
fn backoff(retries: u32) -> u64 {
    (1u64 << retries.min(3)).min(MAX_BACKOFF)
}

/// What [`Resender::due`] decided at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due<T> {
    /// Messages to send again now.
    pub resend: Vec<T>,
    /// Messages given up on (returned once).
    pub give_up: Vec<T>,
    /// Messages (also in `resend`) on their [`RECONNECT_AT`]-th resend: their
    /// receiver's link looks stalled (see [`Resender::may_reconnect`]).
    pub stalled: Vec<T>,
}

impl<T> Default for Due<T> {
    fn default() -> Self {
        Due {
            resend: Vec::new(),
            give_up: Vec::new(),
            stalled: Vec::new(),
        }
    }
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
    /// When each peer's connection was last reopened.
    reconnected: HashMap<i32, u64>,
}

impl<T: Clone> Resender<T> {
    /// Resends after `timeout_ms`, then after twice as long, and so on up to
    /// [`MAX_BACKOFF`] timeouts between resends (a stalled stream is not flooded with
    /// copies); gives up after `max_retries` resends.
    pub fn new(timeout_ms: u64, max_retries: u32) -> Resender<T> {
        Resender {
            timeout_ms,
            max_retries,
            unacked: HashMap::default(),
            seen: HashMap::default(),
            seen_order: VecDeque::new(),
            reconnected: HashMap::default(),
        }
    }

    /// True if the connection to `peer` (whose link looks stalled) may be reopened now:
    /// at most once per [`MAX_BACKOFF`] timeouts, so a link that is slow rather than
    /// stuck is not torn down again and again. Records the reconnection.
    pub fn may_reconnect(&mut self, peer: i32, now_ms: u64) -> bool {
        let every = self.timeout_ms * MAX_BACKOFF;
        match self.reconnected.get(&peer) {
            Some(&t) if now_ms.saturating_sub(t) < every => false,
            _ => {
                self.reconnected.insert(peer, now_ms);
                true
            }
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
        // A duplicate can arrive at most the whole resend schedule after the original.
        let schedule: u64 = (0..=self.max_retries).map(|r| self.timeout_ms * backoff(r)).sum();
        let horizon = (schedule + self.timeout_ms) * 2;
        while let Some(&(t, sig)) = self.seen_order.front() {
            if now_ms.saturating_sub(t) <= horizon {
                break;
            }
            self.seen_order.pop_front();
            self.seen.remove(&sig);
        }
    }

    /// What is due at `now_ms`: messages to resend, messages given up on. Messages for
    /// which `parked` is true (their receiver is declared dead and awaits a
    /// replacement) are held, and start their resend schedule afresh once the
    /// replacement is there (a new process, a new stream).
    pub fn due(&mut self, now_ms: u64, parked: impl Fn(&T) -> bool) -> Due<T> {
        let mut out = Due::default();
        let (max, timeout_ms) = (self.max_retries, self.timeout_ms);
        let mut due_sigs = Vec::new();
        for (&sig, p) in self.unacked.iter_mut() {
            if parked(&p.msg) {
                // held whether due or not, so that it goes out one timeout after the
                // replacement arrives, whatever its place in the schedule was
                p.sent_ms = now_ms;
                p.retries = 0;
            } else if now_ms.saturating_sub(p.sent_ms) >= timeout_ms * backoff(p.retries) {
                due_sigs.push(sig);
            }
        }
        for sig in due_sigs {
            let p = self.unacked.get_mut(&sig).expect("listed above");
            if p.retries >= max {
                out.give_up.push(self.unacked.remove(&sig).expect("listed above").msg);
                continue;
            }
            p.retries += 1;
            p.sent_ms = now_ms;
            out.resend.push(p.msg.clone());
            if p.retries == RECONNECT_AT {
                out.stalled.push(p.msg.clone());
            }
        }
        out
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
    fn an_answer_to_a_restarted_process_is_not_its_predecessors() {
        let mut r: Resender<i32> = Resender::new(100, 3);
        let (mut old, mut new) = (meta(1), meta(1));
        (old.recver_incarnation, new.recver_incarnation) = (3, 5);
        assert_ne!(signature(&old), signature(&new));
        r.on_send(signature(&old), 1, 0);
        r.on_send(signature(&new), 2, 0);
        assert_eq!(r.num_unacked(), 2, "the second answer is tracked on its own");
        assert_eq!(r.on_receive(&new, 10), Incoming::Fresh(signature(&new)));
        assert_eq!(r.on_receive(&old, 10), Incoming::Fresh(signature(&old)));
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
            let d = self.due(now, |_| false);
            (d.resend, d.give_up)
        }
    }

    #[test]
    fn parked_messages_start_their_schedule_afresh() {
        let mut r: Resender<i32> = Resender::new(10, 1);
        r.on_send(1, 1, 0);
        assert_eq!(r.due_all(10), (vec![1], vec![]));
        // parked before its next resend is due: its schedule restarts all the same
        assert_eq!(r.due(15, |_| true), Due::default());
        assert_eq!(r.due(1000, |_| true), Due::default());
        assert_eq!(r.due_all(1009), (vec![], vec![]));
        assert_eq!(r.due_all(1010), (vec![1], vec![]));
        assert_eq!(r.due_all(1030), (vec![], vec![1]));
    }

    #[test]
    fn backs_off_exponentially_up_to_a_cap_then_gives_up() {
        let mut r: Resender<i32> = Resender::new(10, 6);
        r.on_send(5, 5, 0);
        // resends 10, 20, 40, 80, 80, 80 ms apart (the cap: 8 timeouts), then gives up
        let mut at = Vec::new();
        let mut gave_up = None;
        for now in 0..1000 {
            let (resend, give_up) = r.due_all(now);
            if !resend.is_empty() {
                at.push(now);
            }
            if !give_up.is_empty() {
                gave_up = Some(now);
            }
        }
        assert_eq!(at, vec![10, 30, 70, 150, 230, 310]);
        assert_eq!(gave_up, Some(390));
        assert_eq!(r.num_unacked(), 0);
    }

    /// With 10% loss at each end of a link, a TCP stream stalls for
    /// seconds behind one lost segment (its retransmission timer doubles on every
    /// loss: 0.2 + 0.4 + ... + 12.8 = 25.4 s after 7 losses in a row) and every resend on it
    /// waits behind that segment. With a fixed 1 s timeout a resender gives up after
    /// 10 resends, 11 s: the message is lost on a live link and training stalls.
    /// Backing off, ten resends cover 71 s, and a 25 s stall costs 5 copies, not 10
    /// plus a loss.
    #[test]
    fn a_long_stall_on_a_live_link_is_outlasted_with_few_copies() {
        let mut r: Resender<i32> = Resender::new(1000, 10);
        r.on_send(1, 1, 0);
        let mut copies = 0;
        for now in (0..25_400).step_by(20) {
            let (resend, give_up) = r.due_all(now);
            assert!(give_up.is_empty(), "gave up at {now} ms");
            copies += resend.len();
        }
        assert_eq!(r.on_receive(&ack(1), 25_400), Incoming::Ack);
        assert_eq!(copies, 5);
        let mut r: Resender<i32> = Resender::new(1000, 10);
        r.on_send(1, 1, 0);
        let gave_up = (0..100_000).step_by(20).find(|&now| !r.due_all(now).1.is_empty());
        assert_eq!(gave_up, Some(71_000));
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
        // a node's registration is repeated by the node; the scheduler's table is resent
        let mut join = Meta::default();
        join.control.cmd = Command::AddNode;
        join.sender = crate::node::EMPTY_ID;
        assert!(!needs_ack(&join));
        join.sender = crate::node::SCHEDULER;
        assert!(needs_ack(&join));
        let mut r: Resender<i32> = Resender::new(10, 2);
        assert_eq!(r.on_receive(&hb, 0), Incoming::Untracked);
    }

    #[test]
    fn a_message_on_its_third_resend_marks_its_link_stalled_and_reconnects_are_spaced() {
        let mut r: Resender<i32> = Resender::new(10, 10);
        r.on_send(1, 42, 0);
        let mut stalled_at = Vec::new();
        for now in (0..=200).step_by(5) {
            let d = r.due(now, |_| false);
            if !d.stalled.is_empty() {
                assert_eq!(d.stalled, [42]);
                assert_eq!(d.resend, [42], "a stalled message is resent too");
                stalled_at.push(now);
            }
        }
        // resends after 10, then 20, then 40 ms: the third at 70 ms, only once
        assert_eq!(stalled_at, [70]);
        assert!(r.may_reconnect(9, 70));
        assert!(!r.may_reconnect(9, 100), "within 8 timeouts of the last reconnect");
        assert!(r.may_reconnect(8, 100), "another peer");
        assert!(r.may_reconnect(9, 150));
    }
}
