//! Tests of [`Van::send`]'s failures: a broken link loses a message the resender
//! tracks (it is sent again) instead of failing the send.

use super::*;
use crate::message::Meta;
use crate::van::test_transport::{worker_config, Void};
use bytes::Bytes;

fn van(resend: bool, kind: io::ErrorKind) -> Arc<Van> {
    let extra: &[(&str, &str)] = if resend { &[("PS_RESEND", "1")] } else { &[] };
    Van::new(worker_config(extra), Arc::new(Void { fail: Some(kind) }))
}

fn request() -> Message {
    Message {
        meta: Meta {
            recver: 8,
            request: true,
            timestamp: 3,
            ..Default::default()
        },
        data: vec![Bytes::from_static(b"body")],
    }
}

#[test]
fn a_broken_link_loses_a_tracked_message_and_fails_an_untracked_one() {
    for kind in [io::ErrorKind::BrokenPipe, io::ErrorKind::ConnectionReset] {
        assert_eq!(
            van(true, kind).send(request()).unwrap(),
            0,
            "the resender has it: {kind:?} is a loss, not a failure"
        );
        assert_eq!(van(false, kind).send(request()).unwrap_err().kind(), kind);
    }
    let unknown = van(true, io::ErrorKind::NotConnected).send(request());
    assert_eq!(
        unknown.unwrap_err().kind(),
        io::ErrorKind::NotConnected,
        "no link to that node at all: the caller is told"
    );
}

/// An ADD_NODE registering `van`'s node under `id`.
fn registration(van: &Van, id: i32) -> Message {
    let mut m = Message::control(SCHEDULER, Command::AddNode);
    m.meta.control.nodes = vec![Node { id, ..van.my_node() }];
    m
}

#[test]
fn a_registration_without_an_id_is_not_sent_once_this_node_has_one() {
    let van = Van::new(worker_config(&[]), Arc::new(Void { fail: None }));
    assert!(van.send(registration(&van, EMPTY_ID)).unwrap() > 0, "joining: sent");
    // the table arrived while a join attempt was on its way to the standbys: that
    // attempt would name node 9 as its sender and register a node without an id
    van.me.write().id = 9;
    let sent = van.stats.sent_msgs.load(Ordering::Relaxed);
    assert_eq!(van.send(registration(&van, EMPTY_ID)).unwrap(), 0);
    assert_eq!(van.stats.sent_msgs.load(Ordering::Relaxed), sent, "nothing went out");
    // a registration under its id (the scheduler fell silent) still goes
    assert!(van.send(registration(&van, 9)).unwrap() > 0);
}
