//! Fuzz-style tests (proptest) over the [`crate::fuzzing`] entry points: arbitrary bytes
//! into every decoder that reads from the wire must give an error or a value, never a
//! panic or an unbounded allocation. The cargo-fuzz targets' corpora (`fuzz/`) are
//! replayed through the same entry points by ps-apps's `fuzz_tests`, which sees every
//! target's.

use crate::fuzzing;
use proptest::prelude::*;

#[test]
fn a_real_client_hello_alone_does_not_complete_a_handshake() {
    let hello = fuzzing::client_hello();
    assert_eq!(&hello[..2], &[0x16, 0x03], "a TLS handshake record");
    assert!(!fuzzing::tls_accept(&hello));
    if let Ok(dir) = std::env::var("PSRS_WRITE_TLS_SEED") {
        std::fs::write(std::path::Path::new(&dir).join("client_hello"), &hello).unwrap();
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
