//! Entry points for fuzzers (`fuzz/`, cargo-fuzz) and their regression tests: each
//! feeds arbitrary bytes to one decoder that reads from the wire and discards the
//! result. The contract under test is the one every decoder has: any input gives a
//! value or an error, never a panic, a hang or an allocation beyond the limits.

use crate::auth::handshake::{AfterHello, Responder, HELLO_LEN, PROOF_LEN};
use crate::auth::{Secret, SecretSource};
use crate::config::Limits;
use crate::message::Message;
use crate::van::tcp::guard::SealedReader;
use bytes::Bytes;
use std::io::Read;

/// Splits `data` into frames: each frame is a one-byte length (0..=255) followed by
/// that many bytes (fewer at the end of the input). Lets a fuzzer shape frame counts and
/// sizes from flat bytes.
pub fn split_frames(data: &[u8]) -> Vec<Bytes> {
    let mut frames = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        frames.push(Bytes::copy_from_slice(&tail[..n]));
        rest = &tail[n..];
    }
    frames
}

/// The message decoder ([`Message::decode`]) over the frames [`split_frames`] cuts.
pub fn message_decoder(data: &[u8]) {
    let _ = Message::decode(split_frames(data));
}

/// The TCP van's frame reader over a byte stream, up to four messages, with a 64 KiB
/// message limit; each message read is also decoded as a [`Message`].
pub fn tcp_frame_reader(data: &[u8]) {
    let limits = Limits {
        max_message_bytes: 1 << 16,
        ..Limits::default()
    };
    let mut r = data;
    for _ in 0..4 {
        match crate::van::tcp::transport::read_message(&mut r, &limits) {
            Ok(Some(frames)) => {
                let _ = Message::decode(frames);
            }
            _ => break,
        }
    }
}

/// The sealed-record reader (encrypted TCP links) over a byte stream, with a fixed key.
pub fn sealed_reader(data: &[u8]) {
    let mut out = Vec::new();
    let _ = SealedReader::new(data, &[1; 32]).read_to_end(&mut out);
}

/// The responder's side of the handshake: the first [`HELLO_LEN`] bytes as a HELLO, the
/// next [`PROOF_LEN`] as a PROOF. Returns `true` if the forged proof was accepted (which
/// a fuzzer must never see: the proof needs the secret).
pub fn handshake(data: &[u8]) -> bool {
    let Some(hello) = data.get(..HELLO_LEN) else {
        return false;
    };
    let secret = Secret::new(vec![2; 32], SecretSource::File).expect("a 32-byte secret is valid");
    let hello: [u8; HELLO_LEN] = hello.try_into().expect("HELLO_LEN bytes");
    let Ok(AfterHello::Challenge { pending, .. }) = Responder::new(Some(&secret), true).on_hello(&hello, [0; 32])
    else {
        return false;
    };
    let Some(proof) = data.get(HELLO_LEN..HELLO_LEN + PROOF_LEN) else {
        return false;
    };
    pending.on_proof(proof.try_into().expect("PROOF_LEN bytes")).is_ok()
}

/// The inputs kept for a fuzz target, in file-name order: the minimized corpus under
/// `fuzz/seeds/<target>/` (the inputs that reached new code in past runs) followed by
/// every crash ever found, under `fuzz/regressions/<target>/`. Tests replay them all.
///
/// # Panics
/// If a kept file cannot be read (a test helper: a broken checkout should fail loudly).
pub fn kept_inputs(target: &str) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut out = Vec::new();
    for kind in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .map(|e| e.expect("readable fuzz input directory entry").path())
            .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
            .collect();
        files.sort();
        for p in files {
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.push((p, bytes));
        }
    }
    out
}

/// Replays every input [`kept_inputs`] finds for `target` through `run`, naming each on
/// stderr first (so a panic shows which one).
///
/// # Panics
/// If no input is kept for `target`, or when `run` panics.
pub fn replay_kept(target: &str, run: fn(&[u8])) {
    let kept = kept_inputs(target);
    assert!(
        !kept.is_empty(),
        "no kept inputs for {target} under fuzz/seeds or fuzz/regressions"
    );
    for (path, bytes) in &kept {
        eprintln!("replaying {}", path.display());
        run(bytes);
    }
}
