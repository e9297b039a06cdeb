use super::*;
use crate::failover::{Ballot, Follower, Heard};
use crate::node::Role as NodeRole;

pub(super) const T: Timing = Timing {
    timeout_ms: 1000,
    beat_ms: 200,
};

pub(super) fn e(term: u64, candidate: u32) -> Epoch {
    Epoch { term, candidate }
}

/// Servers 8, 10 and workers 9, 11, 13: five voters.
pub(super) fn five() -> BTreeSet<i32> {
    voters(2, 3)
}

/// A formed node table of the five voters, as `SchedulerCore::export` makes it.
pub(super) fn table() -> Bytes {
    Bytes::from(bincode::serialize(&membership(2, 3)).unwrap())
}

/// The process the table of [`table`] names for voter `id`.
pub(super) fn inc(id: i32) -> u64 {
    membership(2, 3).get(id).unwrap().incarnation
}

/// A formed membership of `servers` servers and `workers` workers, the node of
/// registration `i` (servers first) being process `100 + i`.
pub(super) fn membership(servers: usize, workers: usize) -> Membership {
    let sched = Node {
        role: NodeRole::Scheduler,
        id: 1,
        hostname: "s".into(),
        port: 1,
        is_recovery: false,
        incarnation: 1,
        cert: 0,
    };
    let mut m = Membership::new(servers, workers, sched);
    for i in 0..servers + workers {
        let role = if i < servers {
            NodeRole::Server
        } else {
            NodeRole::Worker
        };
        m.add_node(Node {
            role,
            id: crate::node::EMPTY_ID,
            hostname: "h".into(),
            port: 10 + i as u16,
            is_recovery: false,
            incarnation: 100 + i as u64,
            cert: 0,
        });
    }
    assert!(m.is_ready());
    m
}

fn data(to: i32) -> Message {
    let mut m = Message::default();
    m.meta.recver = to;
    m
}

pub(super) fn sent(out: &[Out]) -> Vec<Message> {
    out.iter()
        .filter_map(|o| match o {
            Out::Send(m) => Some(m.clone()),
            _ => None,
        })
        .collect()
}

/// The active candidate 0 of two, with a formed table, and its standby candidate 1
/// holding it.
pub(super) fn pair() -> (Candidacy, Candidacy) {
    let mut a = Candidacy::new(0, 2, false, five(), T, 0);
    let mut b = Candidacy::new(1, 2, true, five(), T, 0);
    assert_eq!(a.epoch(), e(1, 0));
    let syncs = sent(&a.replicate(Some(table()), None, 10).unwrap());
    assert_eq!(syncs.len(), 1);
    let acks = sent(&b.on_peer(&syncs[0], 11));
    assert_eq!(b.seq(), 1);
    assert_eq!(b.epoch(), e(1, 0));
    for m in acks {
        a.on_peer(&m, 12);
    }
    assert_eq!(a.committed(12), 1);
    (a, b)
}

#[test]
fn acts_wait_for_the_standby_and_the_lease_others_leave_at_once() {
    let (mut a, mut b) = pair();
    // in the grace after forming, an act whose state the standby holds leaves
    assert!(a.outgoing(data(9), 20).is_some());
    // a new state: the reply waits for the standby's ack
    let syncs = sent(&a.replicate(None, Some(Bytes::from_static(b"q")), 30).unwrap());
    assert!(a.outgoing(data(9), 31).is_none());
    // a heartbeat reply leaves, stamped with the committed state only
    let mut hb = data(11);
    hb.meta.control.cmd = Command::Heartbeat;
    let hb = a.outgoing(hb, 32).unwrap();
    assert_eq!((hb.meta.control.seq, hb.meta.control.lease_ms), (1, 32));
    let ack = sent(&b.on_peer(&syncs[0], 33));
    let out = a.on_peer(&ack[0], 34);
    let released = sent(&out);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].meta.control.seq, 2);
    assert_eq!(released[0].meta.control.lease_ms, 34, "stamped when it leaves");
    // a standby never acts
    assert!(b.outgoing(data(9), 35).is_none());
}

#[test]
fn the_lease_needs_a_majority_of_fresh_echoes() {
    let (mut a, _) = pair();
    // the grace after forming ends at 10 + 800
    assert!(a.may_act(809));
    assert!(!a.may_act(810));
    for id in [8, 9] {
        a.on_heartbeat(id, inc(id), e(1, 0), 1, 700, 750);
    }
    assert!(!a.may_act(811), "two of five");
    // an echo from a node following another epoch, or from a process the table does
    // not name, does not count
    a.on_heartbeat(10, 7, e(1, 0), 1, 700, 760);
    assert!(!a.may_act(811));
    a.on_heartbeat(10, inc(10), e(1, 0), 1, 700, 760);
    assert!(a.may_act(811) && a.may_act(1499) && !a.may_act(1500));
    // a lost lease holds acts back; regained, they leave and liveness restarts
    let out = a.tick(1500);
    assert!(out.contains(&Out::Stopped {
        epoch: e(1, 0),
        at_ms: 1500
    }));
    assert!(a.outgoing(data(9), 1501).is_none());
    let mut regained = Vec::new();
    for id in [8, 9, 10] {
        regained.extend(a.on_heartbeat(id, inc(id), e(1, 0), 1, 1600, 1650));
    }
    assert_eq!(
        regained,
        vec![Out::Acting(e(1, 0))],
        "acting again with the echo that makes the lease"
    );
    let out = a.tick(1700);
    assert_eq!(sent(&out).iter().filter(|m| m.meta.recver == 9).count(), 1);
}

/// Nodes of the five voters following term 1, last hearing it at `heard`.
fn nodes(heard: u64) -> Vec<(i32, Follower)> {
    five()
        .into_iter()
        .map(|id| {
            let mut f = Follower::new(0, 2, T.timeout_ms, 0);
            assert!(matches!(f.on_message(e(1, 0), 1, heard, heard), Heard::Switched { .. }));
            (id, f)
        })
        .collect()
}

/// Node `f`'s answer to the campaign message `m` (a pre-vote when it is marked as a
/// request) at `now`.
pub(super) fn ballot(f: &mut Follower, m: &Message, now: u64) -> Ballot {
    let ctl = &m.meta.control;
    let want = e(ctl.term, ctl.candidate);
    if m.meta.request {
        f.on_pre_campaign(want, ctl.seq, now)
    } else {
        f.on_campaign(want, ctl.seq, ctl.lease_ms, now)
    }
}

/// Delivers `out`'s campaigns (pre-votes first, then the campaign they start) and
/// their answers back to `c` at `now`: `vote` answers a message for the node process
/// it reaches (its id, incarnation, [`ballot`] and view of the voters' processes),
/// or None where none does. Returns what the real votes made.
pub(super) fn run_campaign(
    c: &mut Candidacy,
    out: &[Out],
    now: u64,
    mut vote: impl FnMut(&Message) -> Option<(i32, u64, Ballot, View)>,
) -> Vec<Out> {
    let mut result = Vec::new();
    let mut queue: Vec<Message> = sent(out)
        .into_iter()
        .filter(|m| m.meta.control.cmd == Command::Campaign)
        .collect();
    while !queue.is_empty() {
        let mut next = Vec::new();
        for m in queue {
            let Some((id, inc, b, view)) = vote(&m) else {
                continue;
            };
            let pre = m.meta.request;
            let outs = c.on_vote(id, inc, b.granted, b.epoch, b.seen_seq, pre, &view, now);
            if pre {
                // a pre-vote's majority starts the campaign: its messages go on
                next.extend(
                    sent(&outs)
                        .into_iter()
                        .filter(|m| m.meta.control.cmd == Command::Campaign),
                );
            } else {
                result.extend(outs);
            }
        }
        queue = next;
    }
    result
}

/// Delivers `out`'s campaigns to `nodes` (each of its id's incarnation, holding the
/// table of [`table`]) at `now`; returns what the real votes made.
fn elect(c: &mut Candidacy, out: &[Out], nodes: &mut [(i32, Follower)], now: u64) -> Vec<Out> {
    let view: View = five().into_iter().map(|id| (id, inc(id))).collect();
    run_campaign(c, out, now, |m| {
        let (id, f) = nodes.iter_mut().find(|(id, _)| *id == m.meta.recver)?;
        Some((*id, inc(*id), ballot(f, m, now), view.clone()))
    })
}

#[test]
fn a_standby_takes_over_with_a_majority_only_after_the_old_lease() {
    let (mut a, mut b) = pair();
    // the active echoed by everyone at 500, then cut off with no node
    for id in five() {
        a.on_heartbeat(id, inc(id), e(1, 0), 1, 500, 520);
    }
    assert!(a.may_act(1299) && !a.may_act(1300));
    let mut ns = nodes(500);
    // the standby last heard the active at 12: campaigns after the timeout
    assert!(sent(&b.tick(1000))
        .iter()
        .all(|m| m.meta.control.cmd != Command::Campaign));
    let out = b.tick(1013);
    assert!(b.pre.is_some() && !b.is_campaigning(), "a pre-vote first");
    assert!(sent(&out).iter().all(|m| m.meta.request));
    assert_eq!(out.iter().filter(|o| matches!(o, Out::Connect(_))).count(), 5);
    // the nodes heard the active at 500: no vote before 1500, so no campaign
    assert!(elect(&mut b, &out, &mut ns, 1013).is_empty());
    assert!(!b.is_active() && !b.is_campaigning());
    assert_eq!(b.known_term, 1, "a pre-vote takes no term");
    // the pre-vote is repeated every heartbeat interval, over the links opened once;
    // once the nodes would vote the campaign for the next term follows and wins
    assert!(sent(&b.tick(1212))
        .iter()
        .all(|m| m.meta.control.cmd != Command::Campaign));
    for now in [1213, 1413] {
        let out = b.tick(now);
        let asked = sent(&out)
            .iter()
            .filter(|m| m.meta.control.cmd == Command::Campaign)
            .count();
        assert_eq!(asked, 5, "asked again at {now}");
        assert!(!out.iter().any(|o| matches!(o, Out::Connect(_))));
        assert!(elect(&mut b, &out, &mut ns, now).is_empty());
    }
    let out = b.tick(1613);
    let won = elect(&mut b, &out, &mut ns, 1613);
    assert!(b.is_active() && b.epoch() == e(2, 1), "{:?}", b.epoch());
    assert!(matches!(won[0], Out::TakeOver { epoch, .. } if epoch == e(2, 1)));
    assert!(won.contains(&Out::Acting(e(2, 1))));
    assert_eq!(b.acting_since(1614), Some(1613));
    // every node hears of the win from the winner at once, and follows it
    let told: Vec<Message> = sent(&won)
        .into_iter()
        .filter(|m| m.meta.control.cmd == Command::Heartbeat)
        .collect();
    assert_eq!(told.len(), 5);
    for m in &told {
        let (id, f) = ns.iter_mut().find(|(id, _)| *id == m.meta.recver).unwrap();
        let c = &m.meta.control;
        let from = Epoch {
            term: c.term,
            candidate: c.candidate,
        };
        assert_eq!(
            f.on_message(from, c.seq, c.lease_ms, 1614),
            Heard::Switched { from: e(1, 0) },
            "node {id}"
        );
    }
    assert!(b.may_act(2015), "the votes are its lease");
    assert!(!a.may_act(1300), "the old one stopped acting long before");
    // the old active hears the new epoch: steps down, its held acts dropped
    a.outgoing(data(9), 2015);
    let beat = sent(&b.tick(2300))
        .into_iter()
        .find(|m| m.meta.control.cmd == Command::PeerBeat)
        .unwrap();
    let out = a.on_peer(&beat, 2101);
    assert_eq!(out[0], Out::StepDown(e(2, 1)));
    assert!(!a.is_active());
    assert!(a.outgoing(data(9), 2102).is_none());
}

/// The active candidate 0 of three with a formed table, and its standbys 1 and 2
/// holding it (they last heard the active at 11).
fn trio() -> (Candidacy, Candidacy, Candidacy) {
    let mut a = Candidacy::new(0, 3, false, five(), T, 0);
    let mut b = Candidacy::new(1, 3, true, five(), T, 0);
    let mut c = Candidacy::new(2, 3, true, five(), T, 0);
    let syncs = sent(&a.replicate(Some(table()), None, 10).unwrap());
    assert_eq!(syncs.len(), 2);
    for (s, m) in [&mut b, &mut c].into_iter().zip(&syncs) {
        for ack in sent(&s.on_peer(m, 11)) {
            a.on_peer(&ack, 12);
        }
        assert_eq!((s.seq(), s.epoch()), (1, e(1, 0)));
    }
    (a, b, c)
}

/// The nodes heard the lost active scheduler a little after the nearest standby did
/// (its last state reached the standby first; the replies it allowed went out after
/// the standby's ack): the standby's first pre-vote comes a few milliseconds early
/// and is refused. It asks again a heartbeat interval later and wins, before the
/// standby further away (half a timeout more to wait) asks at all.
#[test]
fn the_nearest_standby_wins_though_its_first_pre_vote_came_early() {
    let (_a, mut b, mut c) = trio();
    let mut ns = nodes(31);
    let out = b.tick(1015);
    assert!(sent(&out).iter().any(|m| m.meta.request), "a pre-vote");
    assert!(
        elect(&mut b, &out, &mut ns, 1015).is_empty(),
        "refused: the nodes heard the active at 31"
    );
    assert!(sent(&c.tick(1500))
        .iter()
        .all(|m| m.meta.control.cmd != Command::Campaign));
    let out = b.tick(1216);
    let won = elect(&mut b, &out, &mut ns, 1216);
    assert!(
        matches!(won[0], Out::TakeOver { epoch, .. } if epoch == e(2, 1)),
        "{won:?}"
    );
    // the further standby's turn comes: the nodes follow the new active one
    let out = c.tick(1512);
    assert!(sent(&out).iter().any(|m| m.meta.request), "its pre-vote");
    assert!(elect(&mut c, &out, &mut ns, 1512).is_empty());
    assert!(!c.is_campaigning() && !c.is_active());
    assert_eq!(c.epoch(), e(2, 1), "told by the nodes, it follows the new active one");
}

#[test]
fn an_active_without_its_lease_runs_again_for_a_newer_term() {
    let (mut a, _) = pair();
    let mut ns = nodes(100);
    // no echo: the lease ends with the grace at 810 (seen at the tick of 900, which
    // reports when it ended); a timeout after that it campaigns
    assert!(a.tick(900).contains(&Out::Stopped {
        epoch: e(1, 0),
        at_ms: 810
    }));
    assert!(a.is_active());
    a.tick(1810);
    assert!(a.is_active() && a.pre.is_none());
    let out = a.tick(1811);
    assert!(a.pre.is_some());
    let won = elect(&mut a, &out, &mut ns, 1811);
    assert!(
        matches!(won[0], Out::TakeOver { epoch, .. } if epoch == e(3, 0)),
        "{won:?}"
    );
}

#[test]
fn a_node_that_saw_newer_state_votes_for_the_candidate_holding_it() {
    let (mut a, mut b) = pair();
    // state 2 reaches the standby, state 3 does not (it is silent past its timeout)
    let s2 = sent(&a.replicate(None, Some(Bytes::from_static(b"2")), 20).unwrap());
    b.on_peer(&s2[0], 21);
    let mut ns = nodes(100);
    for (_, f) in ns.iter_mut() {
        f.on_message(e(1, 0), 3, 2000, 2000);
    }
    // the standby campaigns with state 2: refused by nodes that saw 3
    let out = b.tick(3500);
    assert!(elect(&mut b, &out, &mut ns, 3500).is_empty());
    // caught up from a candidate holding 3 (here the old active, now reachable)
    a.replicate(None, Some(Bytes::from_static(b"3")), 3600).unwrap();
    let ask = b.peer_beat(0, true, 3600);
    let sync = sent(&a.on_peer(&ask, 3601))
        .into_iter()
        .find(|m| m.meta.control.cmd == Command::Sync)
        .unwrap();
    b.on_peer(&sync, 3602);
    assert_eq!((b.seq(), b.app().as_ref()), (3, &b"3"[..]));
    // the old active answered, so the campaign stood aside; once it is silent for
    // the timeout again the standby campaigns, and the nodes vote for it
    assert!(!b.is_campaigning());
    let out = b.tick(4700);
    let won = elect(&mut b, &out, &mut ns, 4700);
    assert!(matches!(won[0], Out::TakeOver { .. }), "{won:?}");
    assert!(b.seq() > 3);
}

#[test]
fn a_standby_behind_another_catches_up_from_it() {
    let mut c1 = Candidacy::new(1, 3, true, five(), T, 0);
    let mut c2 = Candidacy::new(2, 3, true, five(), T, 0);
    let mut a = Candidacy::new(0, 3, false, five(), T, 0);
    let syncs = sent(&a.replicate(Some(table()), None, 10).unwrap());
    let to1 = syncs.iter().find(|m| m.meta.recver == candidate_key(1)).unwrap();
    c1.on_peer(to1, 11);
    // c2 missed it; c1's beat tells it c1 holds newer state: c2 asks, c1 answers
    let beat = c1.peer_beat(2, false, 20);
    let ask = sent(&c2.on_peer(&beat, 21));
    assert!(ask[0].meta.request);
    let answer = sent(&c1.on_peer(&ask[0], 22));
    let sync = answer.iter().find(|m| m.meta.control.cmd == Command::Sync).unwrap();
    c2.on_peer(sync, 23);
    assert_eq!(c2.seq(), 1);
    assert_eq!(c2.core(), &table());
}

#[test]
fn one_candidate_acts_without_lease_or_standbys() {
    let mut a = Candidacy::new(0, 1, false, five(), T, 0);
    a.replicate(Some(table()), None, 0).unwrap();
    assert!(a.may_act(u64::MAX / 2));
    assert!(a.outgoing(data(9), 10_000).is_some());
    assert!(a.tick(20_000).is_empty());
}

#[test]
fn a_standby_that_missed_writes_is_caught_up_by_the_active_and_may_take_over() {
    let (mut a, mut b) = pair();
    // states 2 and 3 never reach the standby
    a.replicate(None, Some(Bytes::from_static(b"2")), 20).unwrap();
    a.replicate(None, Some(Bytes::from_static(b"3")), 30).unwrap();
    assert_eq!(b.seq(), 1);
    // the active's next beat sends the whole state to the standby behind
    let out = sent(&a.tick(200));
    let sync = out
        .iter()
        .find(|m| m.meta.control.cmd == Command::Sync && m.meta.recver == candidate_key(1))
        .expect("the state again");
    let acks = sent(&b.on_peer(sync, 201));
    assert_eq!((b.seq(), b.app().as_ref()), (3, &b"3"[..]));
    for m in acks {
        a.on_peer(&m, 202);
    }
    assert_eq!(a.committed(202), 3);
    // the nodes saw state 3; the active dies: the standby holding it wins their votes
    let mut ns = nodes(300);
    for (_, f) in ns.iter_mut() {
        f.on_message(e(1, 0), 3, 300, 300);
    }
    let out = b.tick(1400);
    assert!(b.pre.is_some());
    let won = elect(&mut b, &out, &mut ns, 1400);
    assert!(
        matches!(won[0], Out::TakeOver { ref app, .. } if app.as_ref() == b"3"),
        "{won:?}"
    );
}

#[test]
fn a_campaign_stands_aside_when_a_newer_active_is_heard() {
    let (mut a, mut b) = pair();
    // the active one, cut off, loses its lease and campaigns for term 3 (its
    // pre-vote won, say)
    a.tick(900);
    a.tick(1901);
    a.campaign(1901);
    assert!(a.is_campaigning());
    // meanwhile the standby won term 2 elsewhere; its beat reaches the old active
    let mut ns = nodes(100);
    let out = b.tick(1100);
    let won = elect(&mut b, &out, &mut ns, 1200);
    assert!(
        matches!(won[0], Out::TakeOver { epoch, .. } if epoch == e(2, 1)),
        "{won:?}"
    );
    let beat = b.peer_beat(0, false, 2000);
    assert_eq!(a.on_peer(&beat, 2000)[0], Out::StepDown(e(2, 1)));
    assert!(!a.is_campaigning() && !a.is_active());
    assert_eq!(a.epoch(), e(2, 1));
    // a beat of a standby following the old epoch does not stop a campaign, nor does
    // a heartbeat of a node that voted for it; a node following term 2 does
    let (mut c, d) = pair();
    c.tick(900);
    c.campaign(1901);
    let old = d.peer_beat(0, false, 2000);
    assert!(c.on_peer(&old, 2000).iter().all(|o| !matches!(o, Out::StepDown(_))));
    assert!(c.is_campaigning());
    assert_eq!(
        c.on_heartbeat(9, inc(9), e(2, 1), 1, 0, 2010),
        vec![Out::StepDown(e(2, 1))]
    );
    assert!(!c.is_campaigning());
    let (mut f, _) = pair();
    f.tick(900);
    f.campaign(1901);
    assert!(f.on_heartbeat(8, inc(8), e(3, 0), 1, 1901, 2000).is_empty());
    assert!(f.is_campaigning());
}

#[test]
fn a_candidate_cut_off_with_a_minority_never_takes_a_term() {
    let (mut a, mut b) = pair();
    // the standby hears only node 8 (a minority); the others still hear the active
    let mut minority = nodes(100);
    minority.retain(|(id, _)| *id == 8);
    for round in 0..5u64 {
        let now = 1100 + round * 1100;
        let out = b.tick(now);
        let asks: Vec<Message> = sent(&out)
            .into_iter()
            .filter(|m| m.meta.control.cmd == Command::Campaign)
            .collect();
        assert!(
            !asks.is_empty() && asks.iter().all(|m| m.meta.request),
            "pre-votes only"
        );
        assert!(elect(&mut b, &out, &mut minority, now).is_empty());
        assert!(!b.is_campaigning() && !b.is_active());
    }
    assert_eq!(b.known_term, 1, "no term was taken");
    // so its word never unseats the active one, whose term is still the newest
    let beat = b.peer_beat(0, false, 6000);
    assert!(a.on_peer(&beat, 6000).is_empty());
    assert!(a.is_active());
    // node 8 still follows the active one and takes its messages
    assert_eq!(minority[0].1.on_message(e(1, 0), 2, 6000, 6000), Heard::Current);
}

#[test]
fn an_active_that_declared_a_majority_dead_is_elected_again_with_their_votes() {
    let (mut a, _) = pair();
    // while acting it declared 9 and 10 dead (their heartbeats were lost); 13's process
    // then crashed, and a new one at its address has no id yet: with 8 and 11 only,
    // no majority echoes its lease any more
    let mut m: Membership = bincode::deserialize(&table()).unwrap();
    assert!(m.mark_dead(9).is_some() && m.mark_dead(10).is_some());
    a.replicate(Some(Bytes::from(bincode::serialize(&m).unwrap())), None, 20)
        .unwrap();
    assert!(a.tick(900).contains(&Out::Stopped {
        epoch: e(1, 0),
        at_ms: 810
    }));
    // 8 and 11 still hear its answers to their heartbeats; 9 and 10, alive, hear
    // nothing (an act, telling them they are dead, waits for the lease)
    let mut ns: Vec<(i32, Follower)> = [(8, 1800), (9, 100), (10, 100), (11, 1800)]
        .into_iter()
        .map(|(id, heard)| {
            let mut f = Follower::new(0, 2, T.timeout_ms, 0);
            f.on_message(e(1, 0), 1, heard, heard);
            (id, f)
        })
        .collect();
    let out = a.tick(1811);
    let asked: BTreeSet<i32> = sent(&out)
        .iter()
        .filter(|m| m.meta.control.cmd == Command::Campaign)
        .map(|m| m.meta.recver)
        .collect();
    assert_eq!(asked, five(), "the dead are asked too");
    let won = elect(&mut a, &out, &mut ns, 1811);
    assert!(
        matches!(won.first(), Some(Out::TakeOver { epoch, .. }) if *epoch == e(3, 0)),
        "{won:?}"
    );
    assert!(a.may_act(1812));
}

/// State numbers order states across epochs: an active scheduler cut off with no
/// lease goes on numbering states nobody gets (here 2 to 6), while the standby that
/// took over numbers the states it commits from the votes' highest. The nodes saw the
/// new active's committed state; once it is lost too, the old active's stale states
/// must not outrank it by their higher count: the nodes vote for the standby holding
/// what they saw, never for the old active, which lacks it.
#[test]
fn states_of_an_older_epoch_never_outrank_what_a_newer_one_committed() {
    let (mut a, mut b, mut c) = trio();
    for i in 0..5u8 {
        a.replicate(None, Some(Bytes::from(vec![i])), 20 + u64::from(i))
            .unwrap();
    }
    assert_eq!(a.seq(), 6);
    // b takes over with the votes of the nodes (of three candidates; they last heard
    // a at 31) and is followed
    let mut ns: Vec<(i32, Follower)> = five()
        .into_iter()
        .map(|id| {
            let mut f = Follower::new(0, 3, T.timeout_ms, 0);
            f.on_message(e(1, 0), 1, 31, 31);
            (id, f)
        })
        .collect();
    let out = b.tick(1216);
    let won = elect(&mut b, &out, &mut ns, 1216);
    assert!(
        matches!(won[0], Out::TakeOver { epoch, .. } if epoch == e(2, 1)),
        "{won:?}"
    );
    // its first state reaches c (a is cut off); once a is silent past the standby
    // timeout, that state is committed and the nodes see it
    let syncs = sent(&b.replicate(None, Some(Bytes::from_static(b"b1")), 1300).unwrap());
    let to_c = syncs.iter().find(|m| m.meta.recver == candidate_key(2)).unwrap();
    for ack in sent(&c.on_peer(to_c, 1301)) {
        b.on_peer(&ack, 1302);
    }
    assert_eq!(c.app().as_ref(), b"b1");
    let committed = b.committed(2500);
    assert_eq!(committed, b.seq(), "committed once a is silent");
    for (_, f) in ns.iter_mut() {
        f.on_message(b.epoch(), committed, 2500, 2500);
    }
    // b is lost: a, which never heard of term 2, runs again with its six states
    a.tick(900);
    let out = a.tick(3600);
    assert!(a.pre.is_some(), "a asks for pre-votes");
    let won = elect(&mut a, &out, &mut ns, 3600);
    assert!(
        !won.iter().any(|o| matches!(o, Out::TakeOver { .. })),
        "the old active won with states of term 1 over term 2's committed state"
    );
    // c holds the committed state: it wins
    let out = c.tick(3700);
    let won = elect(&mut c, &out, &mut ns, 3700);
    assert!(
        matches!(won[0], Out::TakeOver { ref app, .. } if app.as_ref() == b"b1"),
        "{won:?}"
    );
}
