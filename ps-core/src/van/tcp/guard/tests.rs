use super::*;
use crate::auth::{Secret, SecretSource};
use crate::tls::{CertRole, Roles};
use std::net::{TcpListener, TcpStream};

/// What a dialer that does not know the peer's id expects: any node role.
fn any_node() -> Expect {
    Expect::of_key(-70_001)
}

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

/// Accepts one connection on `l` with `guard` in a thread and runs `then` on the
/// incoming link (or on the handshake's failure).
fn accept_then<T: Send + 'static>(
    l: TcpListener,
    guard: Arc<Guard>,
    then: impl FnOnce(Result<Incoming, HandshakeFailure>) -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        let (tcp, peer) = l.accept().unwrap();
        let permit = guard.admit(peer, crate::auth::gate::Peer::Addr(peer.ip())).unwrap();
        then(guard.accept(Stream::from(tcp), peer, permit, Duration::ZERO))
    })
}

/// Accepts one connection on `l` with `guard` in a thread and reads it to its end.
fn accept_one(l: TcpListener, guard: Arc<Guard>) -> std::thread::JoinHandle<Accepted> {
    accept_then(l, guard, |inc| {
        let mut inc = inc?;
        let mut got = Vec::new();
        let _ = inc.read_to_end(&mut got);
        Ok((inc.cert().map(|c| c.roles.clone()), got))
    })
}

#[test]
fn a_tls_link_carries_messages_and_names_the_dialers_role() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = accept_one(l, Guard::new(&limits(5000), creds(1, CertRole::Server)));
    let dialer = Guard::new(&limits(5000), creds(1, CertRole::Worker));
    let mut out = dialer
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &any_node())
        .unwrap();
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
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &any_node())
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

/// Builds a message of two frames: its number and `size` bytes of a pattern.
fn numbered(i: u32, size: usize) -> Vec<Bytes> {
    let body: Vec<u8> = (0..size)
        .map(|k| (k as u32).wrapping_mul(31).wrapping_add(i) as u8)
        .collect();
    vec![Bytes::copy_from_slice(&i.to_le_bytes()), Bytes::from(body)]
}

/// Messages from a few bytes to several records (small ones many to a record, large
/// frames past the polling threshold) arrive whole and in order over a TLS link, also
/// after the dialer refreshed its keys (the accepting side answers the key update on
/// the link's reverse direction); the accepting side's answers travel back inside TLS
/// between messages.
#[test]
fn messages_of_every_size_cross_a_tls_link_whole_and_in_order_across_a_key_update() {
    use crate::van::tcp::link::write_message;
    use crate::van::tcp::read::read_message;
    let sizes = [0usize, 1, 7, 100, 4096, 16_384, 16_385, 70_000, 300_000, 1 << 20, 3];
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = Guard::new(&limits(5000), creds(1, CertRole::Server));
    let reader = accept_then(l, server, |inc| {
        let mut inc = inc.unwrap();
        let mut got = Vec::new();
        while let Some(m) = read_message(&mut inc, &Limits::default()).unwrap() {
            // every third message is answered, as a shared-memory offer is
            if got.len() % 3 == 0 {
                inc.reply(&[got.len() as u8]).unwrap();
            }
            got.push(m);
        }
        got
    });
    let dialer = Guard::new(&limits(5000), creds(1, CertRole::Worker));
    let mut out = dialer
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &any_node())
        .unwrap();
    let mut sent = Vec::new();
    for round in 0..2u32 {
        for (k, &size) in sizes.iter().enumerate() {
            let i = round * 100 + k as u32;
            let m = numbered(i, size);
            write_message(&mut out, &m).unwrap();
            if sent.len() % 3 == 0 {
                let answer = out.read_answer(Duration::from_secs(5)).unwrap();
                assert_eq!(answer, sent.len() as u8, "the answer to message {}", sent.len());
            }
            sent.push(m);
        }
        if round == 0 {
            out.tls.as_mut().unwrap().refresh_traffic_keys().unwrap();
        }
    }
    out.shutdown(Shutdown::Write).unwrap();
    let got = reader.join().unwrap();
    assert_eq!(got.len(), sent.len());
    for (g, s) in got.iter().zip(&sent) {
        assert!(g == s, "message {:?} arrived whole", &s[0][..]);
    }
}

/// A link cut in the middle of a TLS record is an error, not the end of the stream:
/// the message it carried is not taken as whole.
#[test]
fn a_link_cut_inside_a_record_is_an_error() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = Guard::new(&limits(5000), creds(1, CertRole::Server));
    let reader = accept_then(l, server, |inc| inc.unwrap().read_frame(1000));
    let dialer = Guard::new(&limits(5000), creds(1, CertRole::Worker));
    let mut out = dialer
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &any_node())
        .unwrap();
    out.seal(&[Bytes::from(vec![5u8; 1000])]).unwrap();
    let mut sealed = Vec::new();
    while out.sealed_pending() {
        out.write_sealed(&mut sealed).unwrap();
    }
    out.stream().write_all(&sealed[..sealed.len() / 2]).unwrap();
    out.shutdown(Shutdown::Write).unwrap();
    let e = reader.join().unwrap().expect_err("half a record");
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("in the middle of a TLS record"), "{e}");
}

/// A dialer checks the certificate of the peer it dialed: a worker's where the node
/// table has a server is refused, and so is a certificate other than the one the id
/// registered with; the right one is taken.
#[test]
fn a_dialer_refuses_a_peer_of_another_role_or_certificate() {
    let serve = |role| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let g = Guard::new(&limits(5000), creds(1, role));
        let fp = g.fingerprint();
        (accept_one(l, g), addr, fp)
    };
    let dialer = Guard::new(&limits(5000), creds(1, CertRole::Worker));
    let (_peer, addr, _) = serve(CertRole::Worker);
    let e = dialer
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &Expect::of_key(8))
        .err()
        .expect("a worker where server 8 should be");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    assert!(e.to_string().contains("names worker, not server"), "{e}");
    let (_peer, addr, fp) = serve(CertRole::Server);
    let mut other = crate::node::Node {
        role: crate::node::Role::Server,
        id: 8,
        hostname: "127.0.0.1".into(),
        port: 1,
        is_recovery: false,
        incarnation: 1,
        cert: fp ^ 1,
    };
    let e = dialer
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &Expect::of_node(8, &other))
        .err()
        .expect("another certificate than server 8's");
    assert!(e.to_string().contains("not the one node 8 registered with"), "{e}");
    let (peer, addr, fp) = serve(CertRole::Server);
    other.cert = fp;
    let out = dialer
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &Expect::of_node(8, &other))
        .unwrap();
    out.shutdown(Shutdown::Both).unwrap();
    let (roles, _) = peer.join().unwrap().unwrap();
    assert_eq!(roles, Some(Roles(vec![CertRole::Worker])));
}

/// A `client` certificate (for the HTTP API) opens no node link: the accepting side
/// refuses it after the handshake, and it counts against the peer.
#[test]
fn a_client_certificate_opens_no_node_link() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = accept_one(l, Guard::new(&limits(5000), creds(1, CertRole::Server)));
    let client = Guard::new(&limits(5000), creds(1, CertRole::Client));
    let e = client
        .connect(TcpStream::connect(&addr).unwrap(), &addr, &any_node())
        .err()
        .expect("refused");
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    let why = server.join().unwrap().expect_err("refused");
    assert!(why.to_string().contains("no node role"), "{why}");
    assert!(why.counts_against_peer());
}
