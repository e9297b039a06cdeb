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
        ("tcp_frame_reader", fuzzing::tcp_frame_reader),
        ("sealed_reader", fuzzing::sealed_reader),
        ("handshake", |b| {
            assert!(!fuzzing::handshake(b), "a forged proof was accepted")
        }),
    ];
    for (target, run) in targets {
        fuzzing::replay_kept(target, run);
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
    fn tcp_frame_reader(mut head in proptest::collection::vec(any::<u8>(), 0..64), tail in proptest::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        if magic && head.len() >= 8 {
            head[..4].copy_from_slice(b"PSRS");
        }
        head.extend(tail);
        fuzzing::tcp_frame_reader(&head);
    }

    #[test]
    fn sealed_reader_and_handshake(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzzing::sealed_reader(&bytes);
        prop_assert!(!fuzzing::handshake(&bytes));
    }
}
