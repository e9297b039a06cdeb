//! Fuzz-style tests (proptest): arbitrary bytes into every decoder that reads from the
//! wire must give an error or a value, never a panic or an unbounded allocation.
//! `scripts/fuzz.sh` runs them with many more cases (proptest reads `PROPTEST_CASES`); failing inputs
//! are kept by proptest in `proptest-regressions/` and replayed first on every run.

use crate::auth::handshake::{AfterHello, Responder, HELLO_LEN, PROOF_LEN};
use crate::auth::{Limits, Secret, SecretSource};
use crate::message::Message;
use crate::van::guard::SealedReader;
use bytes::Bytes;
use proptest::prelude::*;
use std::io::Read;

proptest! {
    #[test]
    fn message_decoder(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..6)) {
        let _ = Message::decode(frames.into_iter().map(Bytes::from).collect());
    }

    #[test]
    fn tcp_frame_reader(mut head in proptest::collection::vec(any::<u8>(), 0..64), tail in proptest::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        if magic && head.len() >= 8 {
            head[..4].copy_from_slice(b"PSRS");
        }
        head.extend(tail);
        let limits = Limits { max_message_bytes: 1 << 16, ..Limits::default() };
        let mut r = &head[..];
        for _ in 0..4 {
            match crate::van::tcp_transport::read_message(&mut r, &limits) {
                Ok(Some(_)) => {}
                _ => break,
            }
        }
    }

    #[test]
    fn sealed_reader_and_handshake(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut out = Vec::new();
        let _ = SealedReader::new(&bytes[..], &[1; 32]).read_to_end(&mut out);
        let s = Secret::new(vec![2; 32], SecretSource::File).unwrap();
        if bytes.len() >= HELLO_LEN + PROOF_LEN {
            let hello: [u8; HELLO_LEN] = bytes[..HELLO_LEN].try_into().unwrap();
            if let Ok(AfterHello::Challenge { pending, .. }) = Responder::new(Some(&s), true).on_hello(&hello, [0; 32]) {
                let proof: [u8; PROOF_LEN] = bytes[HELLO_LEN..HELLO_LEN + PROOF_LEN].try_into().unwrap();
                prop_assert!(pending.on_proof(&proof).is_err());
            }
        }
    }
}
