//! Entry points for fuzzers (`fuzz/`, cargo-fuzz) and their regression tests: each
//! feeds arbitrary bytes to one decoder that reads from the wire and discards the
//! result. The contract under test is the one every decoder has: any input gives a
//! value or an error, never a panic, a hang or an allocation beyond the limits.

use crate::auth::{Secret, SecretSource};
use crate::config::Limits;
use crate::message::Message;
use crate::tls::{CertRole, Credentials};
use bytes::Bytes;
use std::sync::OnceLock;

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

/// The ZMQ van's decoder (ps-lite's frames: the sender's identity, a `PBMeta` header,
/// the data frames) over the frames [`split_frames`] cuts, as node 8 receives them.
pub fn pslite_message_decoder(data: &[u8]) {
    let _ = crate::van::zmq::codec::decode(split_frames(data), 8);
}

/// `frames` as [`split_frames`] reads them back (frames longer than 255 bytes are cut):
/// the shape of a fuzz input made from a real message.
pub fn join_frames(frames: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        let n = f.len().min(255);
        out.push(n as u8);
        out.extend_from_slice(&f[..n]);
    }
    out
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

/// Credentials of a fixed test cluster (made once: issuing costs a key generation).
fn test_creds(role: CertRole) -> &'static Credentials {
    static SERVER: OnceLock<Credentials> = OnceLock::new();
    static WORKER: OnceLock<Credentials> = OnceLock::new();
    let cell = if role == CertRole::Server { &SERVER } else { &WORKER };
    cell.get_or_init(|| {
        let secret = Secret::new(vec![2; 32], SecretSource::File).expect("a 32-byte secret is valid");
        Credentials::from_secret(&secret, role).expect("test credentials")
    })
}

/// The first bytes a psrs node sends when it dials a secured node (its TLS
/// ClientHello): a starting point for [`tls_accept`]'s inputs.
pub fn client_hello() -> Vec<u8> {
    let creds = test_creds(CertRole::Worker);
    let mut c = rustls::ClientConnection::new(creds.client_config(), crate::tls::server_name("127.0.0.1"))
        .expect("a client connection");
    let mut out = Vec::new();
    while c.wants_write() {
        c.write_tls(&mut out).expect("writes to a Vec");
    }
    out
}

/// The accepting side of a secured link (a TLS 1.3 server requiring a client
/// certificate of the cluster's CA) fed `data` as everything the dialer sends.
/// Returns `true` if the handshake completed (which a fuzzer must never see: it needs
/// a certificate and key of the cluster's CA).
pub fn tls_accept(data: &[u8]) -> bool {
    let creds = test_creds(CertRole::Server);
    let Ok(mut s) = rustls::ServerConnection::new(creds.server_config()) else {
        return false;
    };
    let mut rest = data;
    while !rest.is_empty() {
        match s.read_tls(&mut rest) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        if s.process_new_packets().is_err() {
            return false;
        }
        let mut sink = Vec::new();
        while s.wants_write() {
            if s.write_tls(&mut sink).is_err() {
                return false;
            }
        }
    }
    !s.is_handshaking()
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
