use super::*;
use crate::message::Message;
use crate::node::Node;
use crate::tls::{CertRole, Roles};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// A node's knowledge, for the tests: registered fingerprints, requests sent, and
/// the scheduler's certificates.
#[derive(Default)]
struct Known {
    registered: BTreeMap<i32, u64>,
    asked: BTreeSet<(i32, i32, i32)>,
    active: RefCell<ActiveScheduler>,
    election: bool,
}

impl Facts for Known {
    fn registered(&self, id: i32) -> Option<u64> {
        self.registered.get(&id).copied()
    }
    fn asked(&self, peer: i32, app: i32, customer: i32) -> bool {
        self.asked.contains(&(peer, app, customer))
    }
    fn speaks_for_scheduler(&self, cmd: Command, epoch: Epoch, fp: u64) -> Result<(), Refusal> {
        self.active.borrow_mut().check(cmd, epoch, fp, self.election, false)
    }
}

fn cert(role: CertRole, fingerprint: u64) -> Origin {
    Origin::new(Some(PeerCert {
        roles: Roles(vec![role]),
        fingerprint,
    }))
}

fn msg(cmd: Command, sender: i32, request: bool) -> Meta {
    let mut m = Message::control(0, cmd).meta;
    m.sender = sender;
    m.request = request;
    m
}

fn node(role: Role, id: i32, host: &str) -> Node {
    Node {
        role,
        id,
        hostname: host.into(),
        port: 7000,
        is_recovery: false,
        incarnation: 5,
        cert: 0,
    }
}

fn registration(sender: i32, n: Node) -> Meta {
    let mut m = msg(Command::AddNode, sender, false);
    m.control.nodes = vec![n];
    m
}

fn known() -> Known {
    Known {
        registered: [(8, 80), (9, 90), (11, 110)].into(),
        asked: [(8, 0, 0), (1, 1, 0)].into(),
        ..Known::default()
    }
}

/// Every row of the table admits its senders and refuses every other role, at the
/// roles it names; a command never sent to a role is refused there.
#[test]
fn each_command_only_from_its_roles_to_its_roles() {
    let id = |r: Role| match r {
        Role::Scheduler => SCHEDULER,
        Role::Server => 8,
        Role::Worker => 9,
    };
    for rule in commands::RULES {
        for at in [Role::Scheduler, Role::Server, Role::Worker] {
            for from in [Role::Scheduler, Role::Server, Role::Worker] {
                let request = rule.request.unwrap_or(false);
                let got = commands::check(rule.cmd, request, from, id(from), at);
                assert_eq!(
                    got.is_ok(),
                    admitted(rule, request, from, at),
                    "{} from {from} at {at}",
                    rule.what
                );
            }
        }
    }
    // examples by name
    let refused = |m: Meta, at: Role| authorize(None, &m, at, &known()).unwrap_err();
    let e = refused(msg(Command::NodeDead, 9, false), Role::Worker);
    assert_eq!(
        e.to_string(),
        "NODE_DEAD from worker 9: only the scheduler may send it to a worker"
    );
    assert!(matches!(
        refused(msg(Command::Barrier, 8, false), Role::Worker),
        Refusal::Command { .. }
    ));
    assert!(matches!(
        refused(msg(Command::Campaign, 11, true), Role::Server),
        Refusal::Command { .. }
    ));
    assert!(matches!(
        refused(msg(Command::Vote, SCHEDULER, false), Role::Scheduler),
        Refusal::Command { .. }
    ));
    assert!(matches!(
        refused(msg(Command::Sync, 8, false), Role::Scheduler),
        Refusal::Command { .. }
    ));
    assert!(matches!(
        refused(msg(Command::Leave, 8, true), Role::Scheduler),
        Refusal::Command { .. }
    ));
    assert!(matches!(
        refused(msg(Command::Vote, 9, false), Role::Worker),
        Refusal::NotForThisRole { .. }
    ));
    assert!(matches!(
        refused(msg(Command::AddNode, 9, false), Role::Worker),
        Refusal::Command { .. }
    ));
    assert_eq!(
        refused(msg(Command::Terminate, SCHEDULER, false), Role::Worker),
        Refusal::Terminate
    );
    for ok in [
        (msg(Command::Heartbeat, 9, false), Role::Scheduler),
        (msg(Command::Heartbeat, SCHEDULER, false), Role::Worker),
        (msg(Command::Barrier, SCHEDULER, true), Role::Scheduler),
        (msg(Command::Barrier, SCHEDULER, false), Role::Scheduler),
        (msg(Command::NodeDead, SCHEDULER, false), Role::Server),
        (msg(Command::Vote, 8, false), Role::Scheduler),
        (msg(Command::Campaign, SCHEDULER, true), Role::Worker),
        (msg(Command::Ack, 11, false), Role::Server),
        (msg(Command::Empty, 11, true), Role::Worker),
    ] {
        assert_eq!(
            authorize(None, &ok.0, ok.1, &known()),
            Ok(()),
            "{:?} at {}",
            ok.0.control.cmd,
            ok.1
        );
    }
}

fn arrives_at(rule: &commands::Rule, at: Role) -> bool {
    match rule.at {
        commands::At::Scheduler => at == Role::Scheduler,
        commands::At::Node => at != Role::Scheduler,
        commands::At::Any => true,
    }
}

/// Whether a row with `rule`'s command and flag `request` admits `from` at `at` (the
/// table has two rows for ADD_NODE and HEARTBEAT: one per receiving role).
fn admitted(rule: &commands::Rule, request: bool, from: Role, at: Role) -> bool {
    commands::RULES
        .iter()
        .any(|r| r.cmd == rule.cmd && r.request.is_none_or(|q| q == request) && arrives_at(r, at) && r.from.admit(from))
}

#[test]
fn data_answers_only_from_nodes_asked() {
    let k = known();
    let mut answer = msg(Command::Empty, 8, false);
    assert_eq!(authorize(None, &answer, Role::Worker, &k), Ok(()));
    answer.customer_id = 3;
    assert!(matches!(
        authorize(None, &answer, Role::Worker, &k),
        Err(Refusal::Unasked {
            sender: 8,
            app: 0,
            customer: 3
        })
    ));
    let from_worker = msg(Command::Empty, 11, false);
    let e = authorize(None, &from_worker, Role::Worker, &k).unwrap_err();
    assert_eq!(
        e.to_string(),
        "data answer from node 11 (app 0, customer 0), which this node never asked"
    );
    // a request may come from anyone
    assert_eq!(
        authorize(None, &msg(Command::Empty, 11, true), Role::Worker, &k),
        Ok(())
    );
}

#[test]
fn a_link_is_bound_to_its_first_sender() {
    let k = known();
    let mut o = cert(CertRole::Worker, 90);
    // before an id: a registration and acks only
    let reg = registration(EMPTY_ID, node(Role::Worker, EMPTY_ID, "10.0.0.9"));
    assert_eq!(authorize(Some(&mut o), &reg, Role::Scheduler, &k), Ok(()));
    assert_eq!(
        authorize(Some(&mut o), &msg(Command::Ack, EMPTY_ID, false), Role::Scheduler, &k),
        Ok(())
    );
    assert!(matches!(
        authorize(
            Some(&mut o),
            &msg(Command::Heartbeat, EMPTY_ID, false),
            Role::Scheduler,
            &k
        ),
        Err(Refusal::NoSender { .. })
    ));
    assert_eq!(o.bound(), None);
    // the first id binds it
    assert_eq!(
        authorize(Some(&mut o), &msg(Command::Heartbeat, 9, false), Role::Scheduler, &k),
        Ok(())
    );
    assert_eq!(o.bound(), Some(9));
    let e = authorize(Some(&mut o), &msg(Command::Heartbeat, 11, false), Role::Scheduler, &k).unwrap_err();
    assert_eq!(e.to_string(), "HEARTBEAT from node 11 over the link of node 9");
    assert!(matches!(
        authorize(Some(&mut o), &msg(Command::Ack, EMPTY_ID, false), Role::Scheduler, &k),
        Err(Refusal::NoSender { .. })
    ));
    // the ZMQ van (no per-link state): the role table still holds
    assert_eq!(
        authorize(None, &msg(Command::Heartbeat, 11, false), Role::Scheduler, &k),
        Ok(())
    );
}

#[test]
fn the_id_must_be_of_the_certificates_role_and_its_registered_certificate() {
    let k = known();
    // a worker's certificate cannot speak as a server or as the scheduler
    let mut o = cert(CertRole::Worker, 90);
    let e = authorize(Some(&mut o), &msg(Command::Empty, 8, false), Role::Worker, &k).unwrap_err();
    assert_eq!(
        e.to_string(),
        "data message from server 8 over a link whose certificate names worker"
    );
    let mut o = cert(CertRole::Worker, 90);
    assert!(matches!(
        authorize(
            Some(&mut o),
            &msg(Command::NodeDead, SCHEDULER, false),
            Role::Worker,
            &k
        ),
        Err(Refusal::CertRole { .. })
    ));
    // a worker certificate other than the one worker 11 registered with
    let mut o = cert(CertRole::Worker, 90);
    let e = authorize(Some(&mut o), &msg(Command::Empty, 11, true), Role::Server, &k).unwrap_err();
    assert_eq!(
        e,
        Refusal::NotItsCertificate {
            cmd: Command::Empty,
            id: 11
        }
    );
    assert_eq!(o.bound(), None, "a refused message binds nothing");
    // the right one; and an id this node does not know yet binds by role alone
    let mut o = cert(CertRole::Worker, 110);
    assert_eq!(
        authorize(Some(&mut o), &msg(Command::Empty, 11, true), Role::Server, &k),
        Ok(())
    );
    let mut o = cert(CertRole::Worker, 999);
    assert_eq!(
        authorize(Some(&mut o), &msg(Command::Empty, 13, true), Role::Server, &k),
        Ok(())
    );
    // a client certificate speaks for no node
    let mut o = cert(CertRole::Client, 5);
    assert!(matches!(
        authorize(Some(&mut o), &msg(Command::Ack, 9, false), Role::Server, &k),
        Err(Refusal::CertRole { .. })
    ));
    // ids that are no node
    for bad in [0, 2, 4, 7, -3] {
        assert!(matches!(
            authorize(None, &msg(Command::Ack, bad, false), Role::Server, &k),
            Err(Refusal::NotANodeId { .. })
        ));
    }
}

#[test]
fn registrations_are_one_node_of_the_certificates_role_with_its_own_id() {
    let k = known();
    let at = Role::Scheduler;
    let w = || cert(CertRole::Worker, 90);
    let ok = registration(EMPTY_ID, node(Role::Worker, EMPTY_ID, "node-9.example"));
    assert_eq!(authorize(Some(&mut w()), &ok, at, &k), Ok(()));
    // another role than the certificate's
    let e = authorize(
        Some(&mut w()),
        &registration(EMPTY_ID, node(Role::Server, EMPTY_ID, "h")),
        at,
        &k,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "an ADD_NODE registering a server from a peer whose certificate names worker"
    );
    let e = authorize(
        Some(&mut w()),
        &registration(EMPTY_ID, node(Role::Scheduler, EMPTY_ID, "h")),
        at,
        &k,
    )
    .unwrap_err();
    assert!(matches!(
        e,
        Refusal::RegistersRole {
            registers: Role::Scheduler,
            ..
        }
    ));
    // a worker's certificate pointing server 8 at itself, in every spelling
    for bad in [
        registration(EMPTY_ID, node(Role::Worker, 8, "h")),
        registration(EMPTY_ID, node(Role::Server, 8, "h")),
        registration(9, node(Role::Worker, 8, "h")),
        registration(8, node(Role::Server, 8, "h")),
        registration(8, node(Role::Worker, 8, "h")),
        registration(9, node(Role::Server, 9, "h")),
    ] {
        assert!(
            authorize(Some(&mut w()), &bad, at, &k).is_err(),
            "{:?}",
            bad.control.nodes
        );
    }
    // re-registering under its own id
    assert_eq!(
        authorize(Some(&mut w()), &registration(9, node(Role::Worker, 9, "h")), at, &k),
        Ok(())
    );
    // several nodes
    let mut two = ok.clone();
    two.control.nodes.push(node(Role::Worker, EMPTY_ID, "h"));
    assert!(authorize(None, &two, at, &k)
        .unwrap_err()
        .to_string()
        .contains("registers 2 nodes"));
    // a host name holding HTML or control characters
    for host in ["<script>alert(1)</script>", "a\nb", "x\u{7}"] {
        let e = authorize(
            None,
            &registration(EMPTY_ID, node(Role::Worker, EMPTY_ID, host)),
            at,
            &k,
        )
        .unwrap_err();
        let line = e.to_string();
        assert!(
            line.contains("no host name or IP address") && !line.contains('\n'),
            "{line}"
        );
    }
    let long = "<".repeat(5000);
    let line = authorize(
        None,
        &registration(EMPTY_ID, node(Role::Worker, EMPTY_ID, &long)),
        at,
        &k,
    )
    .unwrap_err()
    .to_string();
    assert!(line.len() < 300 && line.contains("..."), "{line}");
}

#[test]
fn tables_file_entries_only_under_ids_of_their_role() {
    let k = known();
    let mut t = msg(Command::AddNode, SCHEDULER, false);
    t.control.nodes = vec![
        node(Role::Scheduler, SCHEDULER, "h"),
        node(Role::Server, 8, "h"),
        node(Role::Worker, 9, "h"),
    ];
    assert_eq!(authorize(None, &t, Role::Worker, &k), Ok(()));
    t.control.nodes.push(node(Role::Worker, 10, "evil"));
    assert_eq!(
        authorize(None, &t, Role::Worker, &k),
        Err(Refusal::BadTable {
            id: 10,
            role: Role::Worker
        })
    );
}

#[test]
fn only_the_active_schedulers_certificate_speaks_for_it() {
    let k = known();
    let table = |epoch: Epoch| {
        let mut m = msg(Command::AddNode, SCHEDULER, false);
        (m.control.term, m.control.candidate) = (epoch.term, epoch.candidate);
        m
    };
    let e0 = Epoch::default();
    assert_eq!(
        authorize(Some(&mut cert(CertRole::Scheduler, 1)), &table(e0), Role::Worker, &k),
        Ok(())
    );
    let e = authorize(Some(&mut cert(CertRole::Scheduler, 2)), &table(e0), Role::Worker, &k).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ADD_NODE in the scheduler's name over a link whose certificate is not the active scheduler's"
    );
    // without an election the epoch changes nothing
    let e1 = Epoch { term: 9, candidate: 0 };
    assert!(authorize(Some(&mut cert(CertRole::Scheduler, 2)), &table(e1), Role::Worker, &k).is_err());
    // at a scheduler, candidates talk to each other
    let mut sync = msg(Command::Sync, SCHEDULER, false);
    sync.control.term = 3;
    assert_eq!(
        authorize(Some(&mut cert(CertRole::Scheduler, 7)), &sync, Role::Scheduler, &k),
        Ok(())
    );

    // under an election: one certificate per epoch, new epochs are the failover's
    let k = Known {
        election: true,
        ..known()
    };
    let (a, b) = (Epoch { term: 1, candidate: 0 }, Epoch { term: 2, candidate: 1 });
    assert_eq!(
        authorize(Some(&mut cert(CertRole::Scheduler, 1)), &table(a), Role::Server, &k),
        Ok(())
    );
    assert!(authorize(Some(&mut cert(CertRole::Scheduler, 2)), &table(a), Role::Server, &k).is_err());
    assert_eq!(
        authorize(Some(&mut cert(CertRole::Scheduler, 2)), &table(b), Role::Server, &k),
        Ok(())
    );
    assert!(authorize(Some(&mut cert(CertRole::Scheduler, 1)), &table(b), Role::Server, &k).is_err());
    assert_eq!(
        authorize(Some(&mut cert(CertRole::Scheduler, 1)), &table(a), Role::Server, &k),
        Ok(())
    );
}

#[test]
fn a_node_that_lost_its_scheduler_takes_a_restarted_one() {
    let mut a = ActiveScheduler::new();
    let e = Epoch::default();
    assert_eq!(a.check(Command::AddNode, e, 1, false, false), Ok(()));
    assert!(a.check(Command::AddNode, e, 2, false, false).is_err());
    assert_eq!(
        a.check(Command::AddNode, e, 2, false, true),
        Ok(()),
        "lost: the restarted one"
    );
    assert!(
        a.check(Command::AddNode, e, 1, false, false).is_err(),
        "and the old one no more"
    );
    // epochs remembered are bounded
    for t in 0..100 {
        a.check(Command::Heartbeat, Epoch { term: t, candidate: 0 }, t, true, false)
            .unwrap();
    }
    assert!(a
        .check(Command::Heartbeat, Epoch { term: 99, candidate: 0 }, 5, true, false)
        .is_err());
}

#[test]
fn a_dialer_expects_the_role_and_certificate_the_table_gives() {
    let roles = |r: &[CertRole]| Roles(r.to_vec());
    let server = Expect::of_key(8);
    assert_eq!(server.role, Some(Role::Server));
    assert_eq!(server.check(&roles(&[CertRole::Server]), 3), Ok(()));
    let e = server.check(&roles(&[CertRole::Worker]), 3).unwrap_err();
    assert_eq!(
        e,
        "its certificate names worker, not server (the node table gives node 8 that role)"
    );
    assert!(Expect::of_key(SCHEDULER).check(&roles(&[CertRole::Worker]), 1).is_err());
    assert!(Expect::of_key(crate::failover::candidate_key(2))
        .check(&roles(&[CertRole::Scheduler]), 1)
        .is_ok());
    let client = Expect::of_key(-70_123)
        .check(&roles(&[CertRole::Client]), 1)
        .unwrap_err();
    assert!(client.contains("client certificate opens no node link"), "{client}");
    let mut n = node(Role::Worker, 9, "h");
    n.cert = 42;
    let e = Expect::of_node(9, &n);
    assert_eq!(e.check(&roles(&[CertRole::Worker]), 42), Ok(()));
    assert!(e
        .check(&roles(&[CertRole::Worker]), 43)
        .unwrap_err()
        .contains("not the one node 9 registered with"));
    // the scheduler's entry names no certificate to insist on (it moves between candidates)
    let mut s = node(Role::Scheduler, SCHEDULER, "h");
    s.cert = 42;
    assert_eq!(
        Expect::of_node(SCHEDULER, &s).check(&roles(&[CertRole::Scheduler]), 7),
        Ok(())
    );
}

#[test]
fn refusals_are_logged_a_few_times_per_interval_per_kind() {
    let mut l = LogLimit::new(1000, 2);
    assert_eq!(l.allow("a", 0), Some(0));
    assert_eq!(l.allow("a", 10), Some(0));
    assert_eq!(l.allow("a", 20), None);
    assert_eq!(l.allow("a", 999), None);
    assert_eq!(l.allow("b", 999), Some(0), "kinds are limited apart");
    assert_eq!(l.allow("a", 1000), Some(2), "the lines held back are counted");
    assert_eq!(l.allow("a", 1500), Some(0));
    assert_eq!(l.allow("a", 1600), None);
}

/// docs/security.md carries the command table exactly as the code has it.
#[test]
fn the_documented_table_is_the_codes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/security.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let table = commands::markdown();
    assert!(
        doc.contains(&table),
        "docs/security.md must contain the table:\n{table}"
    );
}
