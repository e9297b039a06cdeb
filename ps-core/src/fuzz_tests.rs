//! Fuzz-style tests (proptest) over the [`crate::fuzzing`] entry points: arbitrary bytes
//! into every decoder that reads from the wire must give an error or a value, never a
//! panic or an unbounded allocation. Every input the cargo-fuzz targets (`fuzz/`) ever
//! found crashing is kept under `fuzz/regressions/<target>/`, and their minimized corpus under
//! `fuzz/seeds/<target>/`; both are replayed here.

use crate::fuzzing;
use proptest::prelude::*;

/// One fuzz target's entry point.
type Replay = fn(&[u8]);

#[test]
fn kept_fuzz_inputs_replay_without_panic() {
    let targets: [(&str, Replay); 4] = [
        ("message_decoder", fuzzing::message_decoder),
        ("pslite_message_decoder", fuzzing::pslite_message_decoder),
        ("tcp_frame_reader", fuzzing::tcp_frame_reader),
        ("tls_accept", |b| {
            assert!(!fuzzing::tls_accept(b), "a handshake without a certificate completed")
        }),
    ];
    for (target, run) in targets {
        fuzzing::replay_kept(target, run);
    }
}

#[test]
fn a_real_client_hello_alone_does_not_complete_a_handshake() {
    let hello = fuzzing::client_hello();
    assert_eq!(&hello[..2], &[0x16, 0x03], "a TLS handshake record");
    assert!(!fuzzing::tls_accept(&hello));
    if let Ok(dir) = std::env::var("PSRS_WRITE_TLS_SEED") {
        std::fs::write(std::path::Path::new(&dir).join("client_hello"), &hello).unwrap();
    }
}

/// Real messages in ps-lite's frames, as fuzz inputs: a psrs KV push, a psrs node
/// table, a ps-lite barrier request. `PSRS_WRITE_PSLITE_SEEDS=DIR` writes them there
/// (the seeds of `pslite_message_decoder`).
#[test]
fn ps_lite_frames_of_real_messages_decode_from_fuzz_inputs() {
    use crate::message::{Command, Message, Meta};
    use crate::node::{Node, Role};
    use crate::van::zmq::codec;
    use bytes::Bytes;
    let push = Message {
        meta: Meta {
            app_id: 0,
            timestamp: 5,
            request: true,
            push: true,
            range: 1,
            incarnation: 77,
            ..Default::default()
        },
        data: vec![Bytes::from(vec![1u8; 16]), Bytes::from(vec![2u8; 8])],
    };
    let mut table = Message::control(9, Command::AddNode);
    table.meta.incarnation = 3;
    table.meta.control.nodes = vec![Node {
        role: Role::Server,
        id: 8,
        hostname: "127.0.0.1".into(),
        port: 4000,
        is_recovery: false,
        incarnation: 5,
    }];
    let mut barrier = Message::control(1, Command::Barrier);
    barrier.meta.request = true;
    barrier.meta.control.barrier_group = 7;
    let mut inputs = Vec::new();
    for (name, m, id) in [
        ("push", push, &b"ps9:4d"[..]),
        ("table", table, b"ps1:3"),
        ("barrier", barrier, b"ps9"),
    ] {
        let mut frames = vec![Bytes::from_static(id)];
        frames.extend(codec::encode(&m));
        let input = fuzzing::join_frames(&frames);
        let back = codec::decode(fuzzing::split_frames(&input), 8).expect("a real message decodes");
        assert_eq!(back.meta.control.cmd, m.meta.control.cmd);
        inputs.push((name, input));
    }
    if let Ok(dir) = std::env::var("PSRS_WRITE_PSLITE_SEEDS") {
        for (name, input) in inputs {
            std::fs::write(std::path::Path::new(&dir).join(name), input).unwrap();
        }
    }
}

#[test]
fn split_frames_shapes_frames_from_length_bytes() {
    let f = fuzzing::split_frames(&[2, b'a', b'b', 0, 5, b'c']);
    assert_eq!(f.len(), 3);
    assert_eq!(&f[0][..], b"ab");
    assert!(f[1].is_empty());
    assert_eq!(&f[2][..], b"c");
}

proptest! {
    #[test]
    fn message_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..1200)) {
        fuzzing::message_decoder(&bytes);
    }

    #[test]
    fn pslite_message_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..1200)) {
        fuzzing::pslite_message_decoder(&bytes);
    }

    #[test]
    fn tcp_frame_reader(mut head in proptest::collection::vec(any::<u8>(), 0..64), tail in proptest::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        if magic && head.len() >= 8 {
            head[..4].copy_from_slice(b"PSRS");
        }
        head.extend(tail);
        fuzzing::tcp_frame_reader(&head);
    }

    #[test]
    fn tls_accept_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert!(!fuzzing::tls_accept(&bytes));
    }

    #[test]
    fn tls_accept_a_mutated_client_hello(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8), cut in any::<prop::sample::Index>()) {
        let mut hello = fuzzing::client_hello();
        for (i, x) in flips {
            let i = i.index(hello.len());
            hello[i] ^= x;
        }
        hello.truncate(cut.index(hello.len() + 1));
        prop_assert!(!fuzzing::tls_accept(&hello));
    }
}
