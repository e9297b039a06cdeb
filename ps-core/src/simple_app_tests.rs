//! Tests of [`SimpleApp`]: who is asked again after a death or a scheduler restart,
//! and what a call that timed out leaves behind.

use super::*;
use crate::van::test_transport::{worker_config, Void};

#[test]
fn a_dead_node_is_asked_again_only_what_it_has_not_answered() {
    let reply = |sender| SimpleData {
        head: 5,
        body: Bytes::new(),
        sender,
        timestamp: 3,
        customer_id: 0,
        incarnation: 1,
    };
    let mut calls = HashMap::new();
    calls.insert(
        3,
        Call {
            head: 5,
            body: Bytes::from_static(b"q"),
            recvers: vec![8, 9, 11],
            got: vec![reply(8), reply(9)],
        },
    );
    calls.insert(
        4,
        Call {
            head: 6,
            body: Bytes::from_static(b"r"),
            recvers: vec![8, 9],
            got: vec![],
        },
    );
    let again = to_ask_again(0, &calls, &[9, 11]);
    let mut asked: Vec<(i32, i32)> = again.iter().map(|m| (m.meta.timestamp, m.meta.recver)).collect();
    asked.sort();
    assert_eq!(asked, vec![(3, 11), (4, 9)], "9 answered call 3; call 4 never asked 11");
    let m = again.iter().find(|m| m.meta.timestamp == 3).unwrap();
    assert!(m.meta.request && m.meta.simple_app && m.meta.head == 5);
    assert_eq!(m.data, vec![Bytes::from_static(b"q")], "the same request again");
}

#[test]
fn a_restarted_scheduler_is_asked_again_only_if_it_was_asked_and_did_not_answer() {
    let call = |recvers: Vec<i32>, answered: Vec<i32>| Call {
        head: 2,
        body: Bytes::new(),
        recvers,
        got: answered
            .into_iter()
            .map(|sender| SimpleData {
                head: 2,
                body: Bytes::new(),
                sender,
                timestamp: 7,
                customer_id: 0,
                incarnation: 1,
            })
            .collect(),
    };
    let m = unanswered(0, 7, &call(vec![SCHEDULER, 8, 9], vec![8]), SCHEDULER).expect("asked again");
    assert_eq!((m.meta.recver, m.meta.timestamp, m.meta.head), (SCHEDULER, 7, 2));
    assert!(unanswered(0, 7, &call(vec![SCHEDULER, 8], vec![SCHEDULER]), SCHEDULER).is_none());
    assert!(
        unanswered(0, 7, &call(vec![8, 9], vec![]), SCHEDULER).is_none(),
        "never asked"
    );
}

#[test]
fn a_call_that_timed_out_is_forgotten() {
    let po = Postoffice::with_transport(worker_config(&[]), Arc::new(Void { fail: None }));
    let app = SimpleApp::new(&po, 3, None, None).unwrap();
    for _ in 0..3 {
        let e = app.call(1, Bytes::from_static(b"x"), SCHEDULER, Duration::from_millis(50));
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::TimedOut);
    }
    assert_eq!(app.customer().num_pending(), 0, "timed-out calls are not kept");
}
