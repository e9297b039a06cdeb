//! Tests of [`Customer`]: response counting, waiting, and forgetting requests nobody
//! waits for.

use super::*;
use crate::message::Meta;

fn response(ts: i32, sender: i32, status: i32) -> Message {
    Message {
        meta: Meta {
            timestamp: ts,
            sender,
            status,
            ..Default::default()
        },
        data: Vec::new(),
    }
}

#[test]
fn a_response_counts_once_per_sender_and_not_counted_ones_never() {
    let t = Arc::new(Tracker::default());
    t.requests.lock().insert(
        3,
        Pending {
            expected: 2,
            received: 0,
            from: Vec::new(),
            forget: false,
        },
    );
    let mut seen = 0;
    let mut h = |_m: Message| seen += 1;
    accept(&t, response(3, 8, STATUS_NOT_COUNTED), &mut h);
    accept(&t, response(3, 8, 0), &mut h);
    accept(&t, response(3, 8, 0), &mut h);
    assert!(
        !t.requests.lock()[&3].done(),
        "server 8 answered twice, server 10 not at all"
    );
    accept(&t, response(3, 10, 0), &mut h);
    assert!(t.requests.lock()[&3].done());
    accept(&t, response(99, 8, 0), &mut h); // unknown request: handled, not counted
    assert_eq!(seen, 5, "the handle sees every message");
}

#[test]
fn a_reader_thread_wakes_the_waiter_when_it_has_handled_its_batch() {
    let t = Arc::new(Tracker::default());
    for ts in [1, 2] {
        t.requests.lock().insert(
            ts,
            Pending {
                expected: 1,
                received: 0,
                from: Vec::new(),
                forget: false,
            },
        );
    }
    let (woke_tx, woke_rx) = crossbeam_channel::unbounded();
    let (ready_tx, ready_rx) = crossbeam_channel::bounded(1);
    let waiter = {
        let t = Arc::clone(&t);
        std::thread::spawn(move || {
            let mut r = t.requests.lock();
            ready_tx.send(()).unwrap(); // the reader locks only once this waits
            while !r[&2].done() {
                t.cv.wait(&mut r);
                woke_tx.send(r[&2].done()).unwrap();
            }
        })
    };
    let reader = {
        let t = Arc::clone(&t);
        std::thread::spawn(move || {
            ready_rx.recv().unwrap();
            crate::van::cork::begin();
            let mut h = |_m: Message| {};
            accept(&t, response(1, 8, 0), &mut h);
            // a waiter woken now would find request 2 not done
            std::thread::sleep(Duration::from_millis(50));
            accept(&t, response(2, 8, 0), &mut h);
            crate::van::cork::flush(); // the batch is handled: wake now
        })
    };
    reader.join().unwrap();
    waiter.join().unwrap();
    let wakes: Vec<bool> = woke_rx.try_iter().collect();
    assert_eq!(wakes, vec![true], "one wake-up, with both requests done");
}

#[test]
fn a_request_to_forget_is_dropped_when_done_and_not_before() {
    let t = Arc::new(Tracker::default());
    let mut h = |_m: Message| {};
    for (ts, expected) in [(1, 2), (2, 1)] {
        t.requests.lock().insert(
            ts,
            Pending {
                expected,
                received: 0,
                from: Vec::new(),
                forget: ts == 1,
            },
        );
    }
    accept(&t, response(1, 8, 0), &mut h);
    assert!(t.requests.lock().contains_key(&1), "one of two answers: still awaited");
    accept(&t, response(1, 10, 0), &mut h);
    accept(&t, response(2, 8, 0), &mut h);
    let r = t.requests.lock();
    assert!(!r.contains_key(&1), "done and nobody waits: dropped");
    assert!(r[&2].done(), "done, kept for its waiter");
}

#[test]
fn responses_counted_without_a_message_also_drop_a_request_to_forget() {
    use crate::van::test_transport::{worker_config, Void};
    let po = Postoffice::with_transport(worker_config(&[]), Arc::new(Void { fail: None }));
    let c = Customer::new_inline(&po, 5, 5, |_m| {}).unwrap();
    let (forgotten, awaited) = (c.new_request_expecting(2), c.new_request_expecting(1));
    c.forget_when_done(forgotten);
    c.add_response(forgotten, 1);
    assert_eq!(c.num_pending(), 2, "one of two responses: still tracked");
    c.add_response(forgotten, 1);
    c.add_response(awaited, 1);
    assert_eq!(c.num_pending(), 1, "the done request nobody waits for is dropped");
    c.wait_request(awaited);
    assert_eq!(c.num_pending(), 0);
}

#[test]
fn a_response_for_a_closed_customer_is_dropped_and_a_request_is_held() {
    use crate::van::test_transport::{worker_config, Void};
    use crate::van::VanHandler;
    let po = Postoffice::with_transport(worker_config(&[]), Arc::new(Void { fail: None }));
    let to = |request: bool, ts: i32| Message {
        meta: Meta {
            app_id: 7,
            customer_id: 7,
            timestamp: ts,
            request,
            sender: 8,
            ..Default::default()
        },
        data: Vec::new(),
    };
    // a customer that sent a request and was closed before its answer came
    drop(Customer::new_inline(&po, 7, 7, |_m| {}).unwrap());
    po.on_data(to(false, 1));
    po.on_data(to(true, 2));
    let (tx, rx) = crossbeam_channel::unbounded();
    let _c = Customer::new_inline(&po, 7, 7, move |m| tx.send(m.meta.timestamp).unwrap()).unwrap();
    let got: Vec<i32> = rx.try_iter().collect();
    assert_eq!(
        got,
        vec![2],
        "the late answer is gone; the early request was held for the new customer"
    );
}

#[test]
fn a_new_customer_of_the_same_ids_goes_on_with_the_timestamps() {
    use crate::van::test_transport::{worker_config, Void};
    let po = Postoffice::with_transport(worker_config(&[]), Arc::new(Void { fail: None }));
    let c = Customer::new_inline(&po, 7, 7, |_m| {}).unwrap();
    assert_eq!((c.new_request_expecting(1), c.new_request_expecting(1)), (0, 1));
    drop(c);
    // the receivers remember the old customer's messages by signature: a repeated
    // timestamp would be dropped there as a duplicate
    let c = Customer::new(&po, 7, 7, |_m| {}).unwrap();
    assert_eq!(c.new_request_expecting(1), 2);
    let other = Customer::new_inline(&po, 8, 8, |_m| {}).unwrap();
    assert_eq!(other.new_request_expecting(1), 0, "other ids start at 0");
}
