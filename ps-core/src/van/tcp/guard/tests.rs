use super::*;
use crate::auth::{Secret, SecretSource};
use crate::tls::CertRole;
use std::net::{TcpListener, TcpStream};

fn creds(secret: u8, role: CertRole) -> Option<Credentials> {
    let s = Secret::new(vec![secret; 32], SecretSource::File).unwrap();
    Some(Credentials::from_secret(&s, role).unwrap())
}

fn limits(timeout_ms: u64) -> Limits {
    Limits {
        handshake_timeout: Duration::from_millis(timeout_ms),
        ..Limits::default()
    }
}

/// What the accepting side saw: the dialer's roles and the bytes up to the end of the
/// stream, or the failure.
type Accepted = Result<(Option<Roles>, Vec<u8>), HandshakeFailure>;

/// Accepts one connection on `l` with `guard` in a thread.
fn accept_one(l: TcpListener, guard: Arc<Guard>) -> std::thread::JoinHandle<Accepted> {
    std::thread::spawn(move || {
        let (tcp, peer) = l.accept().unwrap();
        let permit = guard.admit(peer).unwrap();
        let mut inc = guard.accept(Stream::from(tcp), peer, permit, Duration::ZERO)?;
        let mut got = Vec::new();
        let _ = inc.read_to_end(&mut got);
        Ok((inc.roles().cloned(), got))
    })
}

#[test]
fn a_tls_link_carries_messages_and_names_the_dialers_role() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = accept_one(l, Guard::new(&limits(5000), creds(1, CertRole::Server)));
    let dialer = Guard::new(&limits(5000), creds(1, CertRole::Worker));
    let mut out = dialer.connect(TcpStream::connect(&addr).unwrap(), &addr).unwrap();
    let big = Bytes::from(vec![7u8; 100_000]);
    out.seal(&[Bytes::from_static(b"hello "), big.clone()]).unwrap();
    assert!(out.sealed_pending(), "sealed records wait inside the connection");
    let mut sealed = Vec::new();
    while out.sealed_pending() {
        out.write_sealed(&mut sealed).unwrap();
    }
    assert!(sealed.len() > 100_006, "records add headers and tags");
    assert!(!sealed.windows(6).any(|w| w == b"hello "), "encrypted on the wire");
    out.stream().write_all(&sealed).unwrap();
    out.shutdown(Shutdown::Write).unwrap();
    let (roles, got) = server.join().unwrap().unwrap();
    assert_eq!(roles, Some(Roles(vec![CertRole::Worker])));
    assert_eq!(&got[..6], b"hello ");
    assert_eq!(&got[6..], &big[..]);
}

#[test]
fn a_dialer_of_another_cluster_is_refused_and_told() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = accept_one(l, Guard::new(&limits(5000), creds(1, CertRole::Server)));
    let stranger = Guard::new(&limits(5000), creds(2, CertRole::Worker));
    let e = stranger
        .connect(TcpStream::connect(&addr).unwrap(), &addr)
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    let why = server.join().unwrap().expect_err("refused");
    assert!(why.counts_against_peer(), "{why}");
}

#[test]
fn a_plaintext_peer_is_refused_with_one_line() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = accept_one(l, Guard::new(&limits(5000), creds(1, CertRole::Server)));
    let mut plain = TcpStream::connect(addr).unwrap();
    plain.write_all(b"PSRS\x01\0\0\0\x04\0\0\0\0\0\0\0meta").unwrap();
    let why = server.join().unwrap().expect_err("refused");
    assert!(why.to_string().contains("not a TLS handshake"), "{why}");
    assert!(why.counts_against_peer());
}

#[test]
fn a_slow_handshake_is_cut_at_the_deadline_whatever_it_trickles() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = accept_one(l, Guard::new(&limits(600), creds(1, CertRole::Server)));
    let hello = crate::fuzzing::client_hello();
    let start = Instant::now();
    let mut slow = TcpStream::connect(addr).unwrap();
    let writer = std::thread::spawn(move || {
        for b in hello.iter().take(40) {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let why = server.join().unwrap().expect_err("timed out");
    assert!(matches!(why, HandshakeFailure::Silent(_)), "{why}");
    assert!(start.elapsed() < Duration::from_millis(1500), "{:?}", start.elapsed());
    writer.join().unwrap();
}
