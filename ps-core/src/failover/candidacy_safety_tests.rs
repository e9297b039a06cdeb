//! At most one scheduler acts at any moment: candidates and nodes driven through
//! partitions, stalled streams and replaced processes, with explicit times and
//! messages; at every step no two candidates may act.

use super::tests::{ballot, e, inc, membership, pair, run_campaign, sent, table, T};
use super::*;
use crate::failover::{Follower, Heard};
use crate::node::{Role as NodeRole, EMPTY_ID};
use crate::protocol::membership::Join;

/// A node process: its id, its incarnation, its side of the election and its view
/// of the voters' processes (from the node tables it took).
struct N {
    id: i32,
    inc: u64,
    f: Follower,
    view: View,
}

/// The processes holding `ids` in `m`, each following nothing heard yet, holding
/// the table `m`.
fn procs(m: &Membership, ids: &[i32]) -> Vec<N> {
    ids.iter()
        .map(|&id| N {
            id,
            inc: m.get(id).unwrap().incarnation,
            f: Follower::new(0, 2, T.timeout_ms, 0),
            view: view_of(m),
        })
        .collect()
}

/// The view of the voters' processes a node holding the table `m` has.
fn view_of(m: &Membership) -> View {
    m.table()
        .into_iter()
        .filter(|n| n.id != crate::node::SCHEDULER)
        .map(|n| (n.id, n.incarnation))
        .collect()
}

fn core(m: &Membership) -> Bytes {
    Bytes::from(bincode::serialize(m).unwrap())
}

/// Node `n`'s heartbeat (with its view's fingerprint) reaches candidate `c` at `now`.
fn heartbeat(c: &mut Candidacy, n: &N, now: u64) -> Vec<Out> {
    c.on_view(n.id, n.inc, fingerprint(&n.view));
    c.on_heartbeat(n.id, n.inc, n.f.epoch(), n.f.seen_seq(), n.f.echo_ms(), now)
}

/// Node `n` heartbeats to the scheduler its link points to; if that one is the
/// active one, its answer (a heartbeat, sent at once) comes back at `now`.
fn beat(cs: &mut [Candidacy], n: &mut N, now: u64) {
    let c = &mut cs[n.f.heard_active()];
    heartbeat(c, n, now);
    if c.is_active() {
        n.f.on_message(c.epoch(), c.committed(now), now, now);
    }
}

/// Delivers `out`'s campaign messages (pre-votes first, then the campaign they
/// start) to the processes of `nodes` that `c`'s table names, and their answers
/// back to `c`, at `now`; returns what the real votes made.
fn campaign(c: &mut Candidacy, out: &[Out], nodes: &mut [N], now: u64) -> Vec<Out> {
    let table: Membership = bincode::deserialize(c.core()).unwrap();
    run_campaign(c, out, now, |m| {
        let to = table.get(m.meta.recver).map(|n| n.incarnation);
        let n = nodes.iter_mut().find(|n| n.id == m.meta.recver && Some(n.inc) == to)?;
        Some((n.id, n.inc, ballot(&mut n.f, m, now), n.view.clone()))
    })
}

/// A new worker process (incarnation 999) registering without an id.
fn newcomer() -> Node {
    Node {
        role: NodeRole::Worker,
        id: EMPTY_ID,
        hostname: "h".into(),
        port: 99,
        is_recovery: false,
        incarnation: 999,
        cert: 0,
    }
}

fn assert_one_acts(cs: &[&Candidacy], t: u64) {
    let acting: Vec<Epoch> = cs.iter().filter(|c| c.may_act(t)).map(|c| c.epoch()).collect();
    assert!(acting.len() <= 1, "at {t} ms the schedulers of {acting:?} act at once");
}

/// The active S and its standby C over five voters a = 8, b = 9, c = 10, d = 11 and
/// X = 13, every node having heard S at 50: S declared X dead (state 2) and C took
/// that table. Returns the candidates, the table, the node processes and the
/// incarnation of X's process.
fn x_declared_dead() -> ([Candidacy; 2], Membership, Vec<N>, u64) {
    let (s, c) = pair();
    let mut cs = [s, c];
    let mut m: Membership = bincode::deserialize(&table()).unwrap();
    let mut ns = procs(&m, &[8, 9, 10, 11, 13]);
    let x_old = m.get(13).unwrap().incarnation;
    for n in ns.iter_mut() {
        n.f.on_message(e(1, 0), 1, 50, 50);
    }
    assert!(m.mark_dead(13).is_some());
    let sync = sent(&cs[0].replicate(Some(core(&m)), None, 100).unwrap());
    for ack in sent(&cs[1].on_peer(&sync[0], 101)) {
        cs[0].on_peer(&ack, 102);
    }
    (cs, m, ns, x_old)
}

/// Five voters; X (13) is declared dead and its id handed to a new process X'
/// while the standby C, cut off, still holds the table naming X's old process. The
/// active S must not count X' towards its lease while C may count X's old process
/// towards a majority: the two majorities would share the id but no process.
#[test]
fn a_replacement_is_not_counted_while_a_candidate_may_count_the_process_it_replaced() {
    // (1) X's process is cut off from S alone; S declares it dead (state 2) and C,
    // which still hears S, acknowledges that table
    let (mut cs, mut m, mut ns, x_old) = x_declared_dead();
    assert_eq!((cs[1].seq(), cs[0].committed(102)), (2, 2));
    // (2) C is cut off from S; the nodes but X hear S until 1200
    for t in (200..=1200).step_by(200) {
        for n in ns.iter_mut().filter(|n| n.id != 13) {
            beat(&mut cs, n, t);
        }
        assert_one_acts(&[&cs[0], &cs[1]], t);
    }
    // past the standby timeout S goes on without C: a new process takes X's id
    // (state 3, which never reaches C)
    let x2 = newcomer();
    assert!(matches!(m.add_node(x2), Join::Replaced { ref node, .. } if node.id == 13));
    cs[0].replicate(Some(core(&m)), None, 1400).unwrap();
    assert_eq!(cs[0].committed(1400), 3, "C, silent since 102, is not waited for");
    let x2 = N {
        id: 13,
        inc: 999,
        f: Follower::new(0, 2, T.timeout_ms, 1400),
        view: view_of(&m),
    };
    ns.push(x2);
    // (3) nothing stamped with state 3 reaches a or b (their streams from S stall),
    // while c and d take the table naming X'; then the network splits
    // {S, X', c, d} | {C, X, a, b}: S keeps hearing X', c, d
    for n in ns.iter_mut().filter(|n| [10, 11].contains(&n.id)) {
        n.view = view_of(&m);
    }
    for t in (1400..=2200).step_by(100) {
        for n in ns.iter_mut().filter(|n| [10, 11].contains(&n.id) || n.inc == 999) {
            beat(&mut cs, n, t);
        }
        assert_one_acts(&[&cs[0], &cs[1]], t);
    }
    // (4) C, silent from S past the timeout, campaigns on its side: X's old process,
    // a and b heard S last at 1200 and saw no state newer than C's
    let out = cs[1].tick(2300);
    let mut c_side: Vec<N> = ns
        .drain(..)
        .filter(|n| [8, 9].contains(&n.id) || n.inc == x_old)
        .collect();
    let won = campaign(&mut cs[1], &out, &mut c_side, 2300);
    assert!(
        matches!(won.first(), Some(Out::TakeOver { epoch, .. }) if *epoch == e(2, 1)),
        "C wins on its side: {won:?}"
    );
    for t in 2300..2500 {
        assert_one_acts(&[&cs[0], &cs[1]], t);
    }
}

/// Voters 8, 9, 10; B (#1) active under term 2, cut off; its answers to 8 and 9
/// stall in their streams. A (#0) wins term 3, but its win heartbeats to 8 and 9
/// stall too. B's old answers then reach 8 and 9, and A's later: a node that voted
/// for a newer term never takes an older one back, so B never holds its lease again
/// once A's votes were cast.
#[test]
fn a_stale_message_never_takes_a_node_back_to_an_older_term() {
    let m3 = membership(2, 1);
    let v3 = voters(2, 1);
    let a = Candidacy::new(0, 2, true, v3.clone(), T, 0);
    let b = Candidacy::new(1, 2, false, v3, T, 0);
    let mut cs = [a, b];
    assert_eq!(cs[1].epoch(), e(2, 1));
    let sync = sent(&cs[1].replicate(Some(core(&m3)), None, 10).unwrap());
    for ack in sent(&cs[0].on_peer(&sync[0], 11)) {
        cs[1].on_peer(&ack, 12);
    }
    let mut ns = procs(&m3, &[8, 9, 10]);
    for n in ns.iter_mut() {
        n.f.on_message(e(2, 1), 1, 20, 20);
    }
    // B acts: every node exchanges with it, A hears its beats, until 1990
    for t in (200..=1800).step_by(200).chain([1990]) {
        for n in ns.iter_mut() {
            beat(&mut cs, n, t);
        }
        let pb = cs[1].peer_beat(0, false, t);
        cs[0].on_peer(&pb, t);
    }
    // its answers to 8 and 9 sent at 1995 stall; from now on B is cut off
    let stalled_b = (e(2, 1), cs[1].committed(1995), 1995);
    // A, silent from B for the timeout, wins term 3 with every node's vote
    let out = cs[0].tick(3000);
    let won = campaign(&mut cs[0], &out, &mut ns, 3000);
    assert!(
        matches!(won.first(), Some(Out::TakeOver { epoch, .. }) if *epoch == e(3, 0)),
        "{won:?}"
    );
    // its win heartbeats to 8 and 9 stall; 10 takes its own
    let told: Vec<Message> = sent(&won)
        .into_iter()
        .filter(|m| m.meta.control.cmd == Command::Heartbeat)
        .collect();
    let stalled_a = {
        let m = told.iter().find(|m| m.meta.recver == 8).unwrap();
        let c = &m.meta.control;
        (e(c.term, c.candidate), c.seq, c.lease_ms)
    };
    ns[2].f.on_message(stalled_a.0, stalled_a.1, stalled_a.2, 3001);
    for t in (3000..6000).step_by(10) {
        if t == 4100 {
            // B's stalled answers reach 8 and 9
            for n in ns.iter_mut().take(2) {
                n.f.on_message(stalled_b.0, stalled_b.1, stalled_b.2, t);
            }
        }
        if t == 4500 {
            // and A's, later
            for n in ns.iter_mut().take(2) {
                n.f.on_message(stalled_a.0, stalled_a.1, stalled_a.2, t);
            }
        }
        if t % 50 == 0 {
            // 10 heartbeats to A throughout; 8 and 9 from 4110 on (to B before
            // they heard A, lost while B was cut off)
            for n in ns.iter_mut().filter(|n| n.id == 10 || t >= 4110) {
                beat(&mut cs, n, t);
            }
        }
        assert_one_acts(&[&cs[0], &cs[1]], t);
    }
    assert!(cs[0].may_act(5990), "A holds its lease once 8 and 9 heard it");
}

/// The active replaces X (13) by a new process: that process counts towards the
/// lease only once the standby holds the table naming it, or once a majority of the
/// settled nodes reported seeing that table's state; the set of ids not settled yet
/// travels to the standby with the state.
#[test]
fn a_replacement_counts_once_every_standby_or_a_majority_holds_its_table() {
    for by_reports in [false, true] {
        let (mut s, mut c) = pair();
        let mut m: Membership = bincode::deserialize(&table()).unwrap();
        assert!(m.mark_dead(13).is_some());
        let x2 = newcomer();
        assert!(matches!(m.add_node(x2), Join::Replaced { .. }));
        let sync = sent(&s.replicate(Some(core(&m)), None, 100).unwrap());
        assert_eq!(s.unsettled.get(&13), Some(&2));
        // 8, 9 and the new process echo a message sent at 850: not a lease yet
        let echo = |s: &mut Candidacy, id, inc, seen| s.on_heartbeat(id, inc, e(1, 0), seen, 850, 900);
        echo(&mut s, 8, inc(8), 1);
        echo(&mut s, 9, inc(9), 1);
        echo(&mut s, 13, 999, 2);
        assert!(!s.may_act(900), "the new process does not count yet");
        if by_reports {
            // 8 and 9 hold the new table; 10 holds the old one, then the new one
            // (its echo is old)
            let (old, new) = (fingerprint(&view_of(&membership(2, 3))), fingerprint(&view_of(&m)));
            s.on_view(8, inc(8), new);
            s.on_view(9, inc(9), new);
            s.on_view(13, 999, new);
            s.on_view(10, inc(10), old);
            assert!(!s.unsettled.is_empty(), "two of the settled voters hold the new table");
            s.on_view(10, inc(10), new);
            s.on_heartbeat(10, inc(10), e(1, 0), 2, 100, 900);
        } else {
            for ack in sent(&c.on_peer(&sync[0], 901)) {
                s.on_peer(&ack, 902);
            }
            assert_eq!(c.unsettled.get(&13), Some(&2), "the standby holds the set");
        }
        assert!(s.unsettled.is_empty(), "settled ({by_reports})");
        echo(&mut s, 13, 999, 2);
        assert!(s.may_act(903), "8, 9 and the new process hold the lease ({by_reports})");
        // the process it replaced counts for nothing now
        assert!(s.counts(13, 999) && !s.counts(13, inc(13)));
    }
}

/// A node that voted for a campaign that did not win fences the active scheduler's
/// messages for good; the active one, holding its lease, hears its heartbeat name
/// the newer term and runs again: the nodes that hear it vote at once, and that
/// node follows it again.
#[test]
fn an_active_holding_its_lease_runs_again_when_a_node_follows_a_newer_term() {
    let (s, c) = pair();
    let mut cs = [s, c];
    let m: Membership = bincode::deserialize(&table()).unwrap();
    let mut ns = procs(&m, &[8, 9, 10, 11, 13]);
    for t in [300, 500] {
        for n in ns.iter_mut() {
            beat(&mut cs, n, t);
        }
    }
    // node 8 hears the active no more; the others do
    for t in (700..=1500).step_by(200) {
        for n in ns.iter_mut().skip(1) {
            beat(&mut cs, n, t);
        }
    }
    // 8 votes for the standby's term 2, whose campaign gets no majority
    assert!(ns[0].f.on_campaign(e(2, 1), 1, 1505, 1510).granted);
    assert_eq!(ns[0].f.on_message(e(1, 0), 1, 1510, 1515), Heard::Fenced);
    assert!(cs[0].may_act(1520));
    let out = heartbeat(&mut cs[0], &ns[0], 1520);
    assert!(cs[0].is_campaigning(), "{out:?}");
    let won = campaign(&mut cs[0], &out, &mut ns[1..], 1520);
    assert!(
        matches!(won.first(), Some(Out::TakeOver { epoch, .. }) if *epoch == e(3, 0)),
        "{won:?}"
    );
    let told = sent(&won)
        .into_iter()
        .find(|m| m.meta.control.cmd == Command::Heartbeat && m.meta.recver == 8)
        .unwrap();
    let ctl = &told.meta.control;
    assert!(matches!(
        ns[0]
            .f
            .on_message(e(ctl.term, ctl.candidate), ctl.seq, ctl.lease_ms, 1525),
        Heard::Switched { .. }
    ));
    assert_eq!((ns[0].f.epoch(), ns[0].f.heard_active()), (e(3, 0), 0));
    assert!(cs[0].may_act(1530));
}

/// X (13) is declared dead and replaced by X' while the standby C is cut off; a
/// majority of the settled nodes report holding the table naming X', so the active S
/// counts X'. Then the network splits {S, X', a, b} | {C, X, c, d}. c and d saw
/// newer state than C holds and refuse it, but only for [`STALE_VOTE_TIMEOUTS`];
/// after that they vote for C, and so does X's old process, but their votes name X'
/// for 13: C counts neither of 13's processes, and its two votes are no majority
/// while S holds its lease through X', a and b. Once S is gone, a and b vote for C
/// too (after the same wait), and C takes over without 13.
#[test]
fn a_replaced_id_is_not_counted_twice_after_the_stale_vote_escape() {
    use crate::failover::STALE_VOTE_TIMEOUTS;
    // X's process is cut off from S alone; S declares it dead (state 2), which C takes
    let (mut cs, mut m, mut ns, x_old) = x_declared_dead();
    // C is cut off from S; past the standby timeout a new process takes X's id
    // (state 3, which C never gets)
    for t in (200..=1400).step_by(200) {
        for n in ns.iter_mut().filter(|n| n.id != 13) {
            beat(&mut cs, n, t);
        }
    }
    assert!(matches!(m.add_node(newcomer()), Join::Replaced { ref node, .. } if node.id == 13));
    cs[0].replicate(Some(core(&m)), None, 1400).unwrap();
    ns.push(N {
        id: 13,
        inc: 999,
        f: Follower::new(0, 2, T.timeout_ms, 1400),
        view: view_of(&m),
    });
    // every node but X's old process hears S and takes the table naming X': X'
    // settles
    for n in ns.iter_mut().filter(|n| n.inc != x_old) {
        n.view = view_of(&m);
    }
    for t in (1500..=2000).step_by(100) {
        for n in ns.iter_mut().filter(|n| n.inc != x_old) {
            beat(&mut cs, n, t);
        }
    }
    assert!(cs[0].counts(13, 999), "X' counts for S");
    // the split: S goes on with X', a and b
    let (mut s_side, mut c_side): (Vec<N>, Vec<N>) =
        ns.into_iter().partition(|n| [8, 9].contains(&n.id) || n.inc == 999);
    let escape = 2000 + (STALE_VOTE_TIMEOUTS + 1) * T.timeout_ms;
    let mut t = 2100;
    while t <= escape + 1000 {
        for n in s_side.iter_mut() {
            beat(&mut cs, n, t);
        }
        if t % 1000 == 0 {
            let out = cs[1].tick(t);
            campaign(&mut cs[1], &out, &mut c_side, t);
        }
        assert_one_acts(&[&cs[0], &cs[1]], t);
        t += 100;
    }
    assert!(!cs[1].is_active(), "C never won while S held its lease");
    // S is gone: every node reaches C, which wins once a and b wait out the stale
    // timeout too, counting 13 for nothing
    let [_, mut c] = cs;
    let mut all: Vec<N> = s_side.into_iter().chain(c_side).collect();
    let gone = t;
    while !c.is_active() {
        assert!(
            t <= gone + (STALE_VOTE_TIMEOUTS + 3) * T.timeout_ms,
            "C never took over"
        );
        let out = c.tick(t);
        campaign(&mut c, &out, &mut all, t);
        t += 100;
    }
}
