//! Two TCP transports whose reader threads answer each other's messages while both
//! application threads keep sending: the pattern of a worker and a server under a
//! slow network (pushes one way, pull answers and acknowledgements the other). A
//! reader thread that blocked on a full socket while writing its answer would stop
//! reading, and two such readers would wait on each other for ever.

use super::transport::TcpTransport;
use crate::van::transport::Transport;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const QUESTION: u8 = b'q';
const ANSWER: u8 = b'a';

/// A transport bound on 127.0.0.1 whose readers answer each question with `answer`
/// (to node `peer`) and count the answers they get.
fn answering(peer: i32, answer: Bytes) -> (Arc<TcpTransport>, u16, Arc<AtomicUsize>) {
    let t = Arc::new(TcpTransport::new());
    let port = t.bind("127.0.0.1", 0).unwrap();
    let me: Arc<OnceLock<std::sync::Weak<TcpTransport>>> = Arc::default();
    let answers: Arc<AtomicUsize> = Arc::default();
    let (me2, answers2) = (Arc::clone(&me), Arc::clone(&answers));
    t.start(Arc::new(move |frames: Vec<Bytes>, _| match frames[0][0] {
        QUESTION => {
            if let Some(t) = me2.get().and_then(|w| w.upgrade()) {
                t.send(peer, vec![Bytes::from_static(&[ANSWER]), answer.clone()])
                    .unwrap();
            }
        }
        _ => {
            answers2.fetch_add(1, Ordering::SeqCst);
        }
    }))
    .unwrap();
    me.set(Arc::downgrade(&t)).unwrap();
    (t, port, answers)
}

#[test]
fn readers_answering_each_other_under_full_sockets_never_deadlock() {
    const N: usize = 150;
    let big = Bytes::from(vec![7u8; 256 << 10]);
    let (a, pa, a_got) = answering(2, big.clone());
    let (b, pb, b_got) = answering(1, big.clone());
    a.connect(2, "127.0.0.1", pb).unwrap();
    b.connect(1, "127.0.0.1", pa).unwrap();
    let senders: Vec<_> = [(Arc::clone(&a), 2), (Arc::clone(&b), 1)]
        .into_iter()
        .map(|(t, to)| {
            let big = big.clone();
            std::thread::spawn(move || {
                for _ in 0..N {
                    t.send(to, vec![Bytes::from_static(&[QUESTION]), big.clone()]).unwrap();
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while (a_got.load(Ordering::SeqCst) < N || b_got.load(Ordering::SeqCst) < N) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = (a_got.load(Ordering::SeqCst), b_got.load(Ordering::SeqCst));
    assert_eq!(got, (N, N), "answers each side got within 30 s (a deadlock stops both)");
    for s in senders {
        s.join().unwrap();
    }
    a.close();
    b.close();
}
