//! One scheduler candidate under the embedded election, as a pure state machine:
//! active under a lease, standby following the active one, or campaigning for a term
//! of its own. It stamps what the scheduler sends, holds the active scheduler's
//! messages to the nodes until their state is on every live standby and the lease
//! holds ([`Outbox`], [`Lease`]), streams the state to the standbys, catches a
//! standby up from whichever candidate holds newer state, and runs elections: a
//! standby that has not heard the active one for the vote timeout (plus a wait by its
//! rank), or an active one without its lease for that long, asks every node for its
//! vote ([`super::Follower::on_campaign`]) for its next own term
//! ([`super::terms::next_term`]) and takes over with a majority of the nodes.
//!
//! Why two schedulers never act at once: the active one acts only while a majority
//! of the nodes echoed a message it sent less than the lease ago; a node votes only
//! after the vote timeout (longer than the lease by a heartbeat interval) without
//! hearing the scheduler it follows, and then fences every older epoch. Any two
//! majorities share a node, so the new active one's votes come only after the old
//! one's lease ran out (a node votes at once only for a newer term of the scheduler it
//! follows, which stopped acting before it asked, and only from a node that took
//! its last message from that scheduler and did not vote since). The shared node
//! must be one process: votes and echoes count only from the process (incarnation)
//! the counting candidate's node table holds for the id, those declared dead but not
//! replaced included (campaigns ask them too: a declaration judges a silence, and a
//! scheduler that declared a majority dead must be able to win again to let their
//! replacements in). A process that took a replaced one's id counts for nothing
//! until no candidate can count the process it replaced any more: every other
//! candidate acknowledged a state naming the new process, or a majority of the
//! voters' settled processes reported holding the table that names it (the
//! fingerprint of their [`super::view`] in their heartbeats). A vote carries the
//! voter's view, and a candidate counts no id in that campaign the view names another
//! process for than its own table does: any majority a candidate gathers shares a
//! node with that reporting majority, whose vote disputes the old process, however
//! old the candidate's state and however long the partition (nodes do vote for older
//! state after [`super::follower::STALE_VOTE_TIMEOUTS`]). The set of ids not settled
//! yet travels with the state to the standbys. The epoch a
//! node follows never goes back ([`super::Follower`]): once a majority voted for a
//! newer term, the older scheduler can never hold its lease again. An active
//! scheduler holding its lease that hears a node follow a newer term (bound to a
//! campaign that did not win, it fences this scheduler's messages) runs for a newer
//! term at once, so that node follows it again. Why a node's answer is never lost with the active scheduler:
//! it leaves only once every standby heard within the standby timeout holds the state
//! it was decided on, and a standby that missed some (silent past that timeout) gets
//! no vote from a node that saw newer state (state numbers lead with the term they
//! were made under, [`term_floor`]: the states an old active scheduler made unseen
//! while cut off never outrank a newer term's), until it caught up or, after
//! [`super::follower::STALE_VOTE_TIMEOUTS`] without any scheduler, the newer state is
//! taken as lost with the scheduler that made it.

use super::epoch::{candidate_key, Epoch};
use super::error::FailoverError;
use super::lease::Lease;
use super::outbox::Outbox;
use super::terms::next_term;
use super::view::{fingerprint, View};
use crate::config::Planted;
use crate::message::{Command, Message};
use crate::node::{server_rank_to_id, worker_rank_to_id, Node};
use crate::protocol::membership::Membership;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// Voter ids whose process the node table replaced, with the state sequence that
/// named the new process first: their new process counts towards no lease or
/// campaign until settled.
type Unsettled = BTreeMap<i32, u64>;

/// The lowest state number of `term`: state numbers are term-major (the term in
/// the high 32 bits, the count of states within it in the low ones), so every state
/// of a newer term outranks every state of an older one. (Terms past 2^32 - 1, which
/// four billion elections would take, share the last floor.)
pub fn term_floor(term: u64) -> u64 {
    term.min(u64::from(u32::MAX)) << 32
}

/// The election's clock settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// `PS_HEARTBEAT_TIMEOUT`: a node that heard nothing from its scheduler this long
    /// may vote; a standby that heard nothing from the active one this long campaigns.
    pub timeout_ms: u64,
    /// `PS_HEARTBEAT_INTERVAL`: beats between candidates, and the lease's margin.
    pub beat_ms: u64,
}

impl Timing {
    /// How long an echo keeps the lease: a heartbeat interval less than the vote
    /// timeout (room for the clocks' drift over one timeout).
    pub fn lease_ms(&self) -> u64 {
        self.timeout_ms.saturating_sub(self.beat_ms)
    }

    /// A standby heard within this is waited for before the active scheduler's
    /// messages leave (longer than the lease: an active scheduler cut off from its
    /// standbys loses its lease before it stops waiting for them).
    pub fn standby_live_ms(&self) -> u64 {
        self.timeout_ms + self.beat_ms
    }
}

/// The node ids that vote: the servers and workers the cluster is configured with.
pub fn voters(num_servers: usize, num_workers: usize) -> BTreeSet<i32> {
    (0..num_servers)
        .map(server_rank_to_id)
        .chain((0..num_workers).map(worker_rank_to_id))
        .collect()
}

/// True for a scheduler message that acts (its receivers act on a decision): held
/// until its state is safe and the lease holds. Heartbeats, acknowledgements and the
/// candidates' own messages are not acts.
pub fn is_act(msg: &Message) -> bool {
    match msg.meta.control.cmd {
        Command::Empty | Command::AddNode | Command::NodeDead => true,
        Command::Barrier | Command::Leave => !msg.meta.request,
        _ => false,
    }
}

/// What the van must do after an event.
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    /// Send this message (already stamped) to its receiver: a candidate key or a node.
    Send(Message),
    /// Open a link to this node (a campaign reaches every node).
    Connect(Node),
    /// This candidate is now the active scheduler under `epoch`: adopt the node table
    /// `core` and the application state `app`, announce the table.
    TakeOver {
        /// The new epoch.
        epoch: Epoch,
        /// The node table held (`SchedulerCore::export`), possibly empty.
        core: Bytes,
        /// The application's state held, possibly empty.
        app: Bytes,
    },
    /// This active (or campaigning) scheduler heard of a better epoch: it is a
    /// standby now; what it held back is dropped.
    StepDown(Epoch),
    /// This candidate acts from now on under `epoch` (it took over, the cluster's
    /// first active started, or its lease holds again after a spell without it):
    /// nodes silent meanwhile were not heard because this scheduler could not hear a
    /// majority, so their silence starts afresh.
    Acting(Epoch),
    /// This candidate stopped acting under `epoch` at `at_ms` (its lease ran out
    /// then, or it stepped down or campaigned): from `at_ms` on it sends no act.
    Stopped {
        /// The epoch it acted under.
        epoch: Epoch,
        /// When it stopped (its clock; at or before the event that reports it).
        at_ms: u64,
    },
}

/// The yeses a pre-vote or campaign gathered, and the ids it cannot count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tally {
    grants: BTreeSet<i32>,
    /// Ids some voter's view names another process for than the table held does:
    /// their process counts for nothing in this round (see the module docs).
    disputed: BTreeSet<i32>,
}

impl Tally {
    /// Takes an answer that carried `view` (and is a yes of voter `yes`, if any)
    /// against the table's `roster`; returns how many yeses count.
    fn take(&mut self, yes: Option<i32>, view: &View, roster: &BTreeMap<i32, u64>) -> usize {
        for (id, inc) in view {
            if roster.get(id) != Some(inc) {
                self.disputed.insert(*id);
            }
        }
        self.grants.extend(yes);
        self.grants.difference(&self.disputed).count()
    }
}

/// A pre-vote in flight: the nodes asked whether they would vote for `epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PreVote {
    epoch: Epoch,
    sent_ms: u64,
    tally: Tally,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    Standby,
    Campaign { epoch: Epoch, sent_ms: u64, tally: Tally },
    Active,
}

/// A scheduler candidate's failover state under the embedded election.
#[derive(Clone, Debug)]
pub struct Candidacy {
    me: usize,
    n: usize,
    timing: Timing,
    voters: BTreeSet<i32>,
    role: Role,
    epoch: Epoch,
    state_epoch: Epoch,
    seq: u64,
    core: Bytes,
    app: Bytes,
    last_heard_ms: u64,
    known_term: u64,
    seen_seq: u64,
    lease: Lease,
    grace_until_ms: u64,
    /// Whether the last [`Candidacy::acting_change`] found it acting, and under which
    /// epoch.
    acting: Option<Epoch>,
    /// When it last started acting.
    acting_since_ms: u64,
    /// The process (incarnation) of each voter a link was opened to.
    linked: BTreeMap<i32, u64>,
    /// The process (incarnation) the node table held names for each voter id: the
    /// only one whose votes and echoes count.
    roster: BTreeMap<i32, u64>,
    /// Ids whose new process does not count yet (see the module docs).
    unsettled: Unsettled,
    /// The fingerprint of the view each voter's process last reported (active
    /// only).
    views: BTreeMap<i32, u64>,
    lease_lost_ms: u64,
    outbox: Outbox<Message>,
    next_beat_ms: u64,
    pre: Option<PreVote>,
    /// Bugs planted by the simulator's tests (none otherwise).
    pub(crate) planted: Planted,
}

impl Candidacy {
    /// Candidate `me` of `n`, active at start (under its first own term) unless
    /// `standby`, with `voters` (see [`voters`]), at `now_ms`.
    pub fn new(me: usize, n: usize, standby: bool, voters: BTreeSet<i32>, timing: Timing, now_ms: u64) -> Candidacy {
        let n = n.max(1);
        let epoch = if standby {
            Epoch::default()
        } else {
            Epoch {
                term: next_term(me, 0, n),
                candidate: me as u32,
            }
        };
        Candidacy {
            me,
            n,
            timing,
            role: if standby { Role::Standby } else { Role::Active },
            epoch,
            state_epoch: epoch,
            seq: 0,
            core: Bytes::new(),
            app: Bytes::new(),
            last_heard_ms: now_ms,
            known_term: epoch.term,
            seen_seq: 0,
            lease: Lease::new(voters.clone(), timing.lease_ms()),
            voters,
            grace_until_ms: 0,
            planted: Planted::default(),
            acting: (!standby).then_some(epoch),
            acting_since_ms: now_ms,
            linked: BTreeMap::new(),
            roster: BTreeMap::new(),
            unsettled: Unsettled::new(),
            views: BTreeMap::new(),
            lease_lost_ms: now_ms,
            outbox: Outbox::new((0..n).filter(|&i| i != me), timing.standby_live_ms(), now_ms),
            next_beat_ms: now_ms,
            pre: None,
        }
    }

    /// True while this candidate is the active scheduler (with or without its lease).
    pub fn is_active(&self) -> bool {
        self.role == Role::Active
    }

    /// True while campaigning.
    pub fn is_campaigning(&self) -> bool {
        matches!(self.role, Role::Campaign { .. })
    }

    /// The epoch followed (this candidate's own while active).
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// This candidate's index.
    pub fn me(&self) -> usize {
        self.me
    }

    /// The state sequence held.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The epoch the state held was made under: with [`Candidacy::seq`], what orders
    /// two candidates' states (sequences of different epochs do not compare).
    pub fn state_epoch(&self) -> Epoch {
        self.state_epoch
    }

    /// The node table held (own when active, followed when not).
    pub fn core(&self) -> &Bytes {
        &self.core
    }

    /// The application state held.
    pub fn app(&self) -> &Bytes {
        &self.app
    }

    fn formed(&self) -> bool {
        !self.core.is_empty()
    }

    /// True while this candidate may act: active, and (with standbys, failure
    /// detection on and a formed cluster) holding its lease.
    pub fn may_act(&self, now_ms: u64) -> bool {
        self.is_active()
            && (self.n == 1
                || self.timing.timeout_ms == 0
                || !self.formed()
                || now_ms < self.grace_until_ms
                || self.lease.holds(now_ms))
    }

    /// Until when (ms) an active candidate may act without another echo: the later of
    /// the lease and the grace after forming; `u64::MAX` when it needs no lease.
    fn acting_until(&self) -> u64 {
        if self.n == 1 || self.timing.timeout_ms == 0 || !self.formed() {
            return u64::MAX;
        }
        self.lease.until_ms().unwrap_or(0).max(self.grace_until_ms)
    }

    /// Reports whether this candidate started or stopped acting since the last call:
    /// [`Out::Acting`] at once when it may act; [`Out::Stopped`] with the time it
    /// stopped (when its lease ran out, if that was before `now_ms`).
    fn acting_change(&mut self, now_ms: u64) -> Option<Out> {
        let now_acting = self.may_act(now_ms);
        match (self.acting, now_acting) {
            (None, true) => {
                self.acting = Some(self.epoch);
                self.acting_since_ms = now_ms;
                Some(Out::Acting(self.epoch))
            }
            (Some(epoch), false) => {
                self.acting = None;
                // when its lease ran out, if before now (it may step down or campaign
                // only after that)
                let at_ms = self.acting_until().min(now_ms);
                self.lease_lost_ms = at_ms;
                Some(Out::Stopped { epoch, at_ms })
            }
            _ => None,
        }
    }

    /// Since when (ms) this candidate acts, while it may act at `now_ms`: the
    /// scheduler's liveness counts no silence from before then.
    pub fn acting_since(&self, now_ms: u64) -> Option<u64> {
        if !self.may_act(now_ms) {
            return None;
        }
        // (acting, but not reported yet: from now)
        Some(self.acting.map_or(now_ms, |_| self.acting_since_ms))
    }

    /// The newest state every live standby holds: what a message may depend on.
    pub fn committed(&self, now_ms: u64) -> u64 {
        self.outbox.committed(self.seq, now_ms)
    }

    /// Stamps a message this scheduler sends: the epoch it follows (its own when
    /// active), its index, its state sequence and its clock.
    pub fn stamp(&self, msg: &mut Message, now_ms: u64) {
        let c = &mut msg.meta.control;
        c.term = self.epoch.term;
        c.candidate = self.epoch.candidate;
        c.origin = self.me as u32;
        c.seq = self.seq;
        c.lease_ms = now_ms;
    }

    /// A message this scheduler sends to a node, stamped: `Some` to send now; `None`
    /// when it is held (an act whose state is not on every live standby yet, or
    /// without the lease: it leaves through [`Candidacy::tick`] or an ack) or dropped
    /// (an act of a candidate that is not active). Non-acts leave at once, stamped
    /// with the committed state only.
    pub fn outgoing(&mut self, mut msg: Message, now_ms: u64) -> Option<Message> {
        self.stamp(&mut msg, now_ms);
        if self.n <= 1 {
            return Some(msg);
        }
        if !is_act(&msg) {
            msg.meta.control.seq = self.committed(now_ms);
            return Some(msg);
        }
        if !self.is_active() {
            return None;
        }
        let seq = self.seq;
        if !self.outbox.waiting() && seq <= self.committed(now_ms) && self.may_act(now_ms) {
            return Some(msg);
        }
        self.outbox.hold(seq, now_ms, msg);
        None
    }

    fn release(&mut self, now_ms: u64) -> Vec<Out> {
        if !self.may_act(now_ms) {
            return Vec::new();
        }
        for p in self.outbox.give_up_on_slow(self.seq, now_ms) {
            log::warn!(
                "standby scheduler #{p} left a message waiting {} ms for its acknowledgement: \
                 no message waits for it until it holds state {}",
                self.timing.standby_live_ms(),
                self.seq
            );
        }
        let committed = self.committed(now_ms);
        self.outbox
            .release(committed)
            .into_iter()
            .map(|mut m| {
                m.meta.control.lease_ms = now_ms;
                Out::Send(m)
            })
            .collect()
    }

    /// Active only: the state changed (the node table `core`, the application's
    /// `app`; `None` keeps that part). It is streamed to the standbys (the returned
    /// messages); what is decided on it waits for their acknowledgements. Fails with
    /// [`FailoverError::NotActive`] on a candidate that is not active.
    pub fn replicate(
        &mut self,
        core: Option<Bytes>,
        app: Option<Bytes>,
        now_ms: u64,
    ) -> Result<Vec<Out>, FailoverError> {
        if !self.is_active() {
            return Err(FailoverError::NotActive(self.epoch));
        }
        if let Some(c) = core {
            if !self.formed() && !c.is_empty() {
                // the cluster just formed: no other candidate can win before every node
                // took its table and a vote timeout passed, so the lease starts now
                self.grace_until_ms = now_ms + self.timing.lease_ms();
            }
            let roster = self.roster_of(&c);
            if self.formed() {
                for (id, inc) in &roster {
                    if self.roster.get(id) != Some(inc) {
                        self.unsettled.insert(*id, self.seq + 1);
                        self.views.remove(id);
                    }
                }
            }
            self.roster = roster;
            self.core = c;
        }
        if let Some(a) = app {
            self.app = a;
        }
        self.seq += 1;
        self.state_epoch = self.epoch;
        if self.n <= 1 {
            return Ok(Vec::new());
        }
        Ok(self.others().map(|p| Out::Send(self.sync_msg(p, now_ms))).collect())
    }

    fn others(&self) -> impl Iterator<Item = usize> {
        let me = self.me;
        (0..self.n).filter(move |&i| i != me)
    }

    fn sync_msg(&self, to: usize, now_ms: u64) -> Message {
        let mut m = Message::control(candidate_key(to), Command::Sync);
        let c = &mut m.meta.control;
        c.term = self.state_epoch.term;
        c.candidate = self.state_epoch.candidate;
        c.origin = self.me as u32;
        c.seq = self.seq;
        c.lease_ms = now_ms;
        let unsettled = bincode::serialize(&self.unsettled).unwrap_or_default();
        m.data = vec![self.core.clone(), self.app.clone(), Bytes::from(unsettled)];
        m
    }

    /// The process each voter id has in node table `core`.
    fn roster_of(&self, core: &Bytes) -> BTreeMap<i32, u64> {
        let Ok(table) = bincode::deserialize::<Membership>(core) else {
            return BTreeMap::new();
        };
        table
            .table()
            .into_iter()
            .filter(|n| self.voters.contains(&n.id))
            .map(|n| (n.id, n.incarnation))
            .collect()
    }

    /// The voter id the table held names process `incarnation` for (none for a
    /// process without an incarnation).
    fn id_of(&self, incarnation: u64) -> Option<i32> {
        if incarnation == 0 {
            return None;
        }
        self.roster.iter().find(|(_, &i)| i == incarnation).map(|(&id, _)| id)
    }

    /// True when process `incarnation` of voter `id` counts towards a lease or a
    /// campaign: the table names it, and it replaced no process another candidate
    /// may still count.
    fn counts(&self, id: i32, incarnation: u64) -> bool {
        self.roster.get(&id) == Some(&incarnation) && !self.unsettled.contains_key(&id)
    }

    /// Active only: settles every replacement no candidate can count the replaced
    /// process of any more (see the module docs).
    fn settle(&mut self) {
        if self.unsettled.is_empty() || !self.is_active() {
            return;
        }
        let all = self.outbox.acked_by_all();
        let pending: BTreeSet<i32> = self.unsettled.keys().copied().collect();
        let mine = fingerprint(&self.roster);
        let holding = self
            .views
            .iter()
            .filter(|(id, v)| !pending.contains(id) && **v == mine)
            .count();
        if holding >= self.lease.need() {
            self.unsettled.clear();
        }
        self.unsettled.retain(|_, since| all < *since);
    }

    fn peer_beat(&self, to: usize, ask: bool, now_ms: u64) -> Message {
        let mut m = Message::control(candidate_key(to), Command::PeerBeat);
        self.stamp(&mut m, now_ms);
        m.meta.request = ask;
        m
    }

    /// Follows `from`, heard from candidate `origin`, if it is newer; an active or
    /// campaigning candidate that hears a newer epoch than its own stands aside, and
    /// so does a campaigning one that hears of an epoch newer than the one it
    /// followed (but older than the one it campaigns for).
    fn follow(&mut self, from: Epoch, origin: Option<usize>, now_ms: u64) -> Vec<Out> {
        self.known_term = self.known_term.max(from.term);
        let mut out = Vec::new();
        let mine = match &self.role {
            Role::Campaign { epoch, .. } => *epoch,
            _ => self.epoch,
        };
        if from > mine {
            if self.is_active() {
                let dropped = self.outbox.clear();
                log::debug!("stepping down before {from}: {dropped} held messages dropped");
            }
            if self.is_active() || self.is_campaigning() {
                out.push(Out::StepDown(from));
            }
            self.role = Role::Standby;
            out.extend(self.acting_change(now_ms));
            self.epoch = from;
            self.last_heard_ms = now_ms;
        } else if self.is_campaigning()
            && from < mine
            && (from > self.epoch || (from == self.epoch && origin == Some(from.candidate as usize)))
        {
            // a scheduler of an epoch newer than the one this candidate followed is
            // heard of (active, or campaigning with a majority's votes on the way): it
            // stands aside (a campaign against a living active one would only unseat
            // it) and campaigns again only if that one falls silent too
            self.role = Role::Standby;
            self.epoch = from;
            self.last_heard_ms = now_ms;
            out.push(Out::StepDown(from));
        } else if from > self.epoch && !self.is_active() && from != mine {
            // (a campaigning candidate does not take its own campaign, named by a
            // node that voted for it, as the epoch it follows)
            self.epoch = from;
        }
        if from == self.epoch && origin == Some(from.candidate as usize) && !self.is_active() {
            self.last_heard_ms = now_ms;
        }
        out
    }

    /// A `Sync` or `PeerBeat` from another candidate.
    pub fn on_peer(&mut self, msg: &Message, now_ms: u64) -> Vec<Out> {
        let c = &msg.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        let origin = c.origin as usize;
        if origin == self.me || origin >= self.n {
            return Vec::new();
        }
        let mut out = Vec::new();
        match c.cmd {
            Command::Sync => {
                // `from` is the epoch the state was made under; the sender may be a
                // standby passing it on
                let heard = (origin == from.candidate as usize).then_some(origin);
                out.extend(self.follow(from, heard, now_ms));
                let newer = from > self.state_epoch || (from == self.state_epoch && c.seq > self.seq);
                if !self.is_active() && newer && from <= self.epoch {
                    self.state_epoch = from;
                    self.seq = c.seq;
                    self.core = msg.data.first().cloned().unwrap_or_default();
                    self.app = msg.data.get(1).cloned().unwrap_or_default();
                    self.roster = self.roster_of(&self.core);
                    // (the ids not settled yet come with the state; a state
                    // without them settles every id)
                    self.unsettled = msg
                        .data
                        .get(2)
                        .and_then(|b| bincode::deserialize(b).ok())
                        .unwrap_or_default();
                }
                out.push(Out::Send(self.peer_beat(origin, false, now_ms)));
            }
            Command::PeerBeat => {
                out.extend(self.follow(from, Some(origin), now_ms));
                if self.is_active() && from == self.epoch {
                    self.outbox.on_ack(origin, c.seq, now_ms);
                    self.settle();
                    out.extend(self.release(now_ms));
                }
                if msg.meta.request {
                    out.push(Out::Send(self.sync_msg(origin, now_ms)));
                }
                if !self.is_active() && from == self.epoch && c.seq > self.seq {
                    // a standby behind another one: catch up from it
                    out.push(Out::Send(self.peer_beat(origin, true, now_ms)));
                }
            }
            _ => {}
        }
        out
    }

    /// A heartbeat from process `incarnation` of node `id` that follows `epoch`, saw
    /// state `seen_seq`, and took a message sent at `echo_ms` from the scheduler it
    /// follows.
    pub fn on_heartbeat(
        &mut self,
        id: i32,
        incarnation: u64,
        epoch: Epoch,
        seen_seq: u64,
        echo_ms: u64,
        now_ms: u64,
    ) -> Vec<Out> {
        self.seen_seq = self.seen_seq.max(seen_seq);
        let out = if self.is_active() && self.may_act(now_ms) {
            // a node that voted in a campaign that has not won (cut off with a
            // minority, say) does not unseat an active scheduler a majority hears:
            // only a candidate's word does, or the lease running out. It fences this
            // scheduler's messages from now on: this scheduler runs for a newer term
            // (the nodes that hear it vote at once), which that node follows again.
            self.known_term = self.known_term.max(epoch.term);
            if epoch.term > self.epoch.term {
                self.campaign(now_ms)
            } else {
                Vec::new()
            }
        } else {
            self.follow(epoch, None, now_ms)
        };
        let mut out = out;
        if self.is_active() && epoch == self.epoch && self.counts(id, incarnation) {
            // a lease that ran out since the last look is a spell without acting, even
            // if this echo makes it hold again
            out.extend(self.acting_change(now_ms));
            self.lease.on_echo(id, echo_ms);
            out.extend(self.acting_change(now_ms));
        }
        out
    }

    /// Process `incarnation` of node `id` reports the [`fingerprint`] of its view
    /// (with its heartbeats; 0: none): once a majority of the settled voters hold
    /// this scheduler's table, the replacements in it count.
    pub fn on_view(&mut self, id: i32, incarnation: u64, fingerprint: u64) {
        if self.is_active() && fingerprint != 0 && self.roster.get(&id) == Some(&incarnation) {
            self.views.insert(id, fingerprint);
            self.settle();
        }
    }

    /// The answer of process `incarnation` of node `id` to this candidate's campaign
    /// (`pre`: to its pre-vote), carrying the voter's `view`: an id it names another
    /// process for than this candidate's table counts for nothing in this round.
    #[allow(clippy::too_many_arguments)]
    pub fn on_vote(
        &mut self,
        id: i32,
        incarnation: u64,
        granted: bool,
        epoch: Epoch,
        seen_seq: u64,
        pre: bool,
        view: &View,
        now_ms: u64,
    ) -> Vec<Out> {
        self.seen_seq = self.seen_seq.max(seen_seq);
        // a process that took a dead node's id but has not heard so (the answer to its
        // registration waits for an acting scheduler) answers without an id: it is the
        // process the table names for that id
        let id = if self.voters.contains(&id) {
            id
        } else {
            self.id_of(incarnation).unwrap_or(id)
        };
        // (a yes from a process the table does not name, or from a replacement not
        // settled yet, counts for nothing; its view is news all the same)
        let yes = (granted && self.counts(id, incarnation) && self.voters.contains(&id)).then_some(id);
        if pre && granted {
            // (a yes names the term asked for, which is no term anyone took)
            return self.on_pre_grant(yes, epoch, view, now_ms);
        }
        let need = self.lease.need();
        let roster = &self.roster;
        let won = match &mut self.role {
            Role::Campaign { epoch: e, tally, .. } if !pre => {
                let yes = yes.filter(|_| epoch == *e);
                let counted = tally.take(yes, view, roster);
                yes.is_some() && counted >= need
            }
            _ => false,
        };
        if !granted {
            self.known_term = self.known_term.max(epoch.term);
            // the node follows another scheduler: a newer one makes this one stand aside
            return self.follow(epoch, None, now_ms);
        }
        if won {
            self.win(now_ms)
        } else {
            Vec::new()
        }
    }

    /// A node would vote for `epoch` (`yes`: a voter whose yes counts), with its
    /// `view`: with a majority's word, the campaign starts (if this candidate still
    /// has no active scheduler to follow).
    fn on_pre_grant(&mut self, yes: Option<i32>, epoch: Epoch, view: &View, now_ms: u64) -> Vec<Out> {
        let need = self.lease.need();
        let roster = &self.roster;
        let Some(p) = self.pre.as_mut().filter(|p| p.epoch == epoch) else {
            return Vec::new();
        };
        if yes.is_none() || p.tally.take(yes, view, roster) < need {
            return Vec::new();
        }
        self.pre = None;
        let timeout = self.timing.timeout_ms;
        let still = match &self.role {
            Role::Active => !self.may_act(now_ms),
            Role::Standby => now_ms.saturating_sub(self.last_heard_ms) > timeout,
            Role::Campaign { .. } => true,
        };
        if still {
            self.campaign(now_ms)
        } else {
            Vec::new()
        }
    }

    fn win(&mut self, now_ms: u64) -> Vec<Out> {
        let Role::Campaign { epoch, sent_ms, tally } = std::mem::replace(&mut self.role, Role::Active) else {
            return Vec::new();
        };
        self.pre = None;
        self.epoch = epoch;
        self.lease.clear();
        for g in tally.grants.difference(&tally.disputed).copied() {
            // a node that voted takes no other scheduler before the timeout after this
            self.lease.on_echo(g, sent_ms);
        }
        self.outbox = Outbox::new(self.others(), self.timing.standby_live_ms(), now_ms);
        self.views.clear();
        // nodes saw up to `seen_seq`: the states from here on are newer than anything
        // any earlier active scheduler told them. The term leads the number (its high
        // 32 bits), so no state made under an older term outranks them, however many
        // an old active scheduler went on making while cut off, unseen
        self.seq = (self.seq.max(self.seen_seq) + 1).max(term_floor(epoch.term));
        self.state_epoch = epoch;
        let mut out = vec![Out::TakeOver {
            epoch,
            core: self.core.clone(),
            app: self.app.clone(),
        }];
        out.extend(self.acting_change(now_ms));
        // every node hears the result at once, from the winner: it follows it from
        // now on (a node that voted is bound to it only for a timeout, and the table
        // may take longer to reach it). Not those declared dead: the scheduler tells
        // them so at their next heartbeat, and they stop
        for node in self.table_voters(true) {
            let mut m = Message::control(node.id, Command::Heartbeat);
            self.stamp(&mut m, now_ms);
            m.meta.control.seq = self.committed(now_ms);
            m.meta.recver_incarnation = node.incarnation;
            out.push(Out::Send(m));
        }
        let others: Vec<usize> = self.others().collect();
        for p in others {
            out.push(Out::Send(self.sync_msg(p, now_ms)));
            out.push(Out::Send(self.peer_beat(p, false, now_ms)));
        }
        out
    }

    /// How long this standby waits, beyond the timeout, before it campaigns: standbys
    /// further from the lost active one in the candidate order wait longer, so the
    /// nearest one normally wins and the others follow it.
    fn extra_wait_ms(&self) -> u64 {
        let rank = (self.me + self.n - self.epoch.candidate as usize % self.n) % self.n;
        rank.saturating_sub(1) as u64 * self.timing.timeout_ms / 2
    }

    /// The epoch this candidate would campaign for next.
    fn next_epoch(&self) -> Epoch {
        let above = match &self.role {
            Role::Campaign { epoch, .. } => epoch.term.max(self.known_term),
            _ => self.known_term.max(self.epoch.term),
        };
        Epoch {
            term: next_term(self.me, above, self.n),
            candidate: self.me as u32,
        }
    }

    /// Asks every node whether it would vote for this candidate's next epoch, without
    /// taking a term: only with a majority's yes does the campaign start (a candidate
    /// cut off with a minority never raises the term the others will hear). A pre-vote
    /// is asked again every heartbeat interval until a majority says yes: a node says
    /// no until its own scheduler has been silent for the timeout, which it reaches
    /// within an interval of this candidate (both measure from the same last words),
    /// and a pre-vote changes nothing on a node, so asking again is free; the nearest
    /// standby so keeps its lead over those that wait longer (`extra_wait_ms`: half a
    /// timeout per rank) instead of losing a whole timeout to a few milliseconds.
    fn pre_campaign(&mut self, now_ms: u64) -> Vec<Out> {
        if self
            .pre
            .as_ref()
            .is_some_and(|p| now_ms.saturating_sub(p.sent_ms) < self.timing.beat_ms.max(1))
        {
            return Vec::new();
        }
        if self.planted.no_pre_vote {
            return self.campaign(now_ms);
        }
        let epoch = self.next_epoch();
        self.pre = Some(PreVote {
            epoch,
            sent_ms: now_ms,
            tally: Tally::default(),
        });
        self.ask(epoch, true, now_ms)
    }

    /// The `Campaign` messages asking every voter of the table held for its vote
    /// (`pre`: whether it would vote) for `epoch`, those declared dead too: a
    /// declaration is this cluster's judgement of a silence (a partition, lost
    /// heartbeats), and their processes may well answer. Without them a scheduler
    /// that declared a majority dead could never be elected again, so never act to
    /// let their replacements in.
    fn ask(&mut self, epoch: Epoch, pre: bool, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        for node in self.table_voters(false) {
            let mut m = Message::control(node.id, Command::Campaign);
            m.meta.request = pre;
            let c = &mut m.meta.control;
            c.term = epoch.term;
            c.candidate = epoch.candidate;
            c.origin = self.me as u32;
            c.seq = self.seq;
            c.lease_ms = now_ms;
            if self.linked.insert(node.id, node.incarnation) != Some(node.incarnation) {
                // a link per process, opened once: reopening it every round would cut
                // a working connection (and wait for one to a node cut off)
                out.push(Out::Connect(node));
            }
            out.push(Out::Send(m));
        }
        out
    }

    /// The voters of the node table held (`alive`: only those not declared dead).
    fn table_voters(&self, alive: bool) -> Vec<Node> {
        let Ok(table) = bincode::deserialize::<Membership>(&self.core) else {
            return Vec::new();
        };
        let dead = table.dead().clone();
        table
            .table()
            .into_iter()
            .filter(|n| self.voters.contains(&n.id) && !(alive && dead.contains(&n.id)))
            .collect()
    }

    fn campaign(&mut self, now_ms: u64) -> Vec<Out> {
        let epoch = self.next_epoch();
        self.pre = None;
        self.known_term = epoch.term;
        if self.is_active() {
            let dropped = self.outbox.clear();
            log::debug!("campaigning for {epoch}: {dropped} held messages dropped");
        }
        self.role = Role::Campaign {
            epoch,
            sent_ms: now_ms,
            tally: Tally::default(),
        };
        let mut out: Vec<Out> = self.acting_change(now_ms).into_iter().collect();
        out.extend(self.ask(epoch, false, now_ms));
        out
    }

    /// The periodic step (every few ms): beats to the other candidates and the state
    /// to standbys behind; held messages released; the lease watched; campaigns
    /// started, repeated or won.
    pub fn tick(&mut self, now_ms: u64) -> Vec<Out> {
        let mut out = Vec::new();
        if self.n <= 1 {
            return out;
        }
        if now_ms >= self.next_beat_ms {
            self.next_beat_ms = now_ms + self.timing.beat_ms.max(1);
            let others: Vec<usize> = self.others().collect();
            for p in others {
                out.push(Out::Send(self.peer_beat(p, false, now_ms)));
            }
            if self.is_active() {
                for p in self.outbox.behind(self.seq) {
                    out.push(Out::Send(self.sync_msg(p, now_ms)));
                }
            }
        }
        let timeout = self.timing.timeout_ms;
        if timeout == 0 {
            out.extend(self.acting_change(now_ms));
            out.extend(self.release(now_ms));
            return out;
        }
        out.extend(self.acting_change(now_ms));
        match &self.role {
            Role::Active => {
                if self.may_act(now_ms) {
                    out.extend(self.release(now_ms));
                } else {
                    if now_ms.saturating_sub(self.lease_lost_ms) > timeout {
                        out.extend(self.pre_campaign(now_ms));
                    }
                }
            }
            Role::Standby => {
                if self.formed() && now_ms.saturating_sub(self.last_heard_ms) > timeout + self.extra_wait_ms() {
                    out.extend(self.pre_campaign(now_ms));
                }
            }
            Role::Campaign { sent_ms, .. } => {
                if now_ms.saturating_sub(*sent_ms) > timeout {
                    out.extend(self.pre_campaign(now_ms));
                }
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "candidacy_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "candidacy_safety_tests.rs"]
mod safety_tests;
