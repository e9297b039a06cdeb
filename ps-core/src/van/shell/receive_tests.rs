//! Tests of the receive path's hold: a data message from a process this node cannot
//! answer yet waits for the table that names it, with or without the resender.

use super::*;
use crate::failover::Epoch;
use crate::message::{Command, Meta};
use crate::node::{Role, SCHEDULER};
use crate::van::test_transport::{worker_config, Void};
use bytes::Bytes;

/// Collects the data messages the van hands up.
#[derive(Default)]
struct Upper {
    data: Mutex<Vec<Message>>,
}

impl VanHandler for Upper {
    fn on_data(&self, msg: Message) {
        self.data.lock().push(msg);
    }
    fn on_barrier_released(&self, _: i32) {}
    fn on_nodes_dead(&self, _: &[i32]) {}
    fn on_nodes_left(&self, _: &[i32]) {}
    fn on_nodes_changed(&self, _: &[Node], _: &[i32]) {}
    fn on_evicted(&self, _: &str) {}
}

fn server(incarnation: u64) -> Node {
    Node {
        role: Role::Server,
        id: 8,
        hostname: "127.0.0.1".into(),
        port: 9008,
        is_recovery: false,
        incarnation,
        cert: 0,
    }
}

/// The frames of a request from server 8's process `incarnation`.
fn request_from(incarnation: u64) -> Vec<Bytes> {
    let msg = Message {
        meta: Meta {
            sender: 8,
            recver: 9,
            request: true,
            timestamp: 1,
            incarnation,
            ..Default::default()
        },
        data: vec![Bytes::from_static(b"fetch")],
    };
    vec![msg.encode_meta(), msg.data[0].clone()]
}

#[test]
fn a_request_from_a_process_newer_than_the_table_waits_for_its_entry() {
    for resend in [false, true] {
        let extra: &[(&str, &str)] = if resend { &[("PS_RESEND", "1")] } else { &[] };
        let van = Van::new(worker_config(extra), Arc::new(Void { fail: None }));
        let upper = Arc::new(Upper::default());
        let weak: Weak<dyn VanHandler> = Arc::downgrade(&upper) as Weak<dyn VanHandler>;
        van.set_handler(weak);
        van.merge_table(vec![server(100)]);

        van.on_frames(request_from(100), None);
        assert_eq!(upper.data.lock().len(), 1, "the known process is answered at once");

        // a replacement took id 8; its request overtook the table naming it
        van.on_frames(request_from(200), None);
        assert_eq!(
            upper.data.lock().len(),
            1,
            "resend {resend}: an answer now would go to the earlier process's address"
        );
        van.merge_table(vec![server(200)]);
        let data = upper.data.lock();
        assert_eq!(data.len(), 2, "resend {resend}: handed up once the table names it");
        assert_eq!(data[1].meta.incarnation, 200);
    }
}

/// The node table (or notice) the scheduler sends under `term`, naming `nodes`.
fn table_under(term: u64, nodes: Vec<Node>) -> Vec<Bytes> {
    let mut m = Message::control(9, Command::AddNode);
    m.meta.sender = SCHEDULER;
    m.meta.control.nodes = nodes;
    m.meta.control.term = term;
    vec![m.encode_meta()]
}

/// A node waiting at a barrier asks again when the scheduler's barrier counts were
/// started afresh: after a restart (a new incarnation) and after a takeover under a
/// new term, even by the same process (it lost its lease or lock and won it back); not
/// for a table notice of the same scheduler (a replacement joining).
#[test]
fn a_table_under_a_new_term_starts_a_new_scheduler_generation() {
    let van = Van::new(worker_config(&[]), Arc::new(Void { fail: None }));
    let sched = Node {
        role: Role::Scheduler,
        id: SCHEDULER,
        hostname: "127.0.0.1".into(),
        port: 9000,
        is_recovery: false,
        incarnation: 5,
        cert: 0,
    };
    let mut me = van.my_node();
    me.id = 9;
    van.on_frames(table_under(1, vec![sched.clone(), server(100), me.clone()]), None);
    let first = van.scheduler_generation();
    assert_eq!(first, (5, Epoch { term: 1, candidate: 0 }));
    // a replacement server's notice, same scheduler, same term
    van.on_frames(table_under(1, vec![server(200)]), None);
    assert_eq!(van.scheduler_generation(), first);
    // the same scheduler process took over again under term 3
    van.on_frames(table_under(3, vec![sched.clone(), server(200), me.clone()]), None);
    assert_eq!(van.scheduler_generation(), (5, Epoch { term: 3, candidate: 0 }));
    // a restarted scheduler (new incarnation)
    let restarted = Node {
        incarnation: 6,
        ..sched
    };
    van.on_frames(table_under(3, vec![restarted, server(200), me]), None);
    assert_eq!(van.scheduler_generation().0, 6);
}

#[test]
fn a_table_entry_names_this_process_by_incarnation_or_by_address_in_a_ps_lite_table() {
    let me = server(100);
    assert!(receive::names_process(&server(100), &me));
    assert!(
        receive::names_process(&server(0), &me),
        "a ps-lite scheduler's entry for this address"
    );
    assert!(
        !receive::names_process(&server(200), &me),
        "another process at this address"
    );
    let elsewhere = Node {
        port: 9009,
        ..server(0)
    };
    assert!(
        !receive::names_process(&elsewhere, &me),
        "a ps-lite entry for another address"
    );
}
