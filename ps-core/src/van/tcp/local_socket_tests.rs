//! Two TCP transports in one process on this host: their link is a Unix socket
//! ([`super::stream`]) unless either side has `PS_LOCAL_SOCKET` off, with or without a
//! cluster secret (TLS), and the same messages arrive either way.

use super::transport::TcpTransport;
use crate::auth::{Secret, SecretSource};
use crate::config::Security;
use crate::tls::CertRole;
use crate::van::transport::Transport;
use bytes::Bytes;
use crossbeam_channel::{unbounded, Receiver};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

fn security(secret: bool) -> Security {
    Security {
        secret: secret.then(|| Secret::new(vec![3; 32], SecretSource::File).unwrap()),
        ..Security::default()
    }
}

fn creds(sec: &Security, role: CertRole) -> Option<crate::tls::Credentials> {
    sec.credentials(role).unwrap()
}

/// A started receiving transport bound on `host`: its port and what it receives.
fn receiver(sec: &Security, local: bool, host: &str) -> (TcpTransport, u16, Receiver<Vec<Bytes>>) {
    let t = TcpTransport::with_security(sec, creds(sec, CertRole::Server)).with_local_socket(local);
    let port = t.bind(host, 0).unwrap();
    let (tx, rx) = unbounded();
    t.start(Arc::new(move |f, _| tx.send(f).unwrap())).unwrap();
    (t, port, rx)
}

/// Sends a small and a large message from a new transport to `port` on 127.0.0.1 and
/// checks they arrive whole and in order; returns the sender (still open).
fn exchange(sec: &Security, local: bool, port: u16, rx: &Receiver<Vec<Bytes>>) -> TcpTransport {
    let tx = TcpTransport::with_security(sec, creds(sec, CertRole::Worker)).with_local_socket(local);
    // the receiver holds a server's certificate: the dialer knows it as server 8
    tx.connect(8, "127.0.0.1", port).unwrap();
    let big: Bytes = (0..300_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into();
    tx.send(8, vec![Bytes::from_static(b"small")]).unwrap();
    tx.send(8, vec![Bytes::from_static(b"head"), big.clone()]).unwrap();
    let t = Duration::from_secs(10);
    assert_eq!(rx.recv_timeout(t).unwrap(), vec![Bytes::from_static(b"small")]);
    assert_eq!(rx.recv_timeout(t).unwrap(), vec![Bytes::from_static(b"head"), big]);
    tx
}

fn unix_links(t: &TcpTransport) -> (u64, u64) {
    let s = t.shm_stats().unwrap();
    (s.unix_out.load(Relaxed), s.unix_in.load(Relaxed))
}

#[test]
fn nodes_on_one_host_talk_over_a_unix_socket_unless_either_turns_it_off() {
    for secret in [false, true] {
        let sec = security(secret);
        for (rx_local, tx_local) in [(true, true), (true, false), (false, true), (false, false)] {
            let (rx_t, port, rx) = receiver(&sec, rx_local, "127.0.0.1");
            let tx = exchange(&sec, tx_local, port, &rx);
            let unix = rx_local && tx_local;
            let case = format!("secret {secret}, receiver local {rx_local}, sender local {tx_local}");
            assert_eq!(unix_links(&tx), (u64::from(unix), 0), "{case}");
            assert_eq!(unix_links(&rx_t), (0, u64::from(unix)), "{case}");
            tx.close();
            rx_t.close();
        }
    }
}

#[test]
fn a_node_bound_to_every_interface_is_reached_through_its_wildcard_socket() {
    let sec = Security::default();
    let (rx_t, port, rx) = receiver(&sec, true, "0.0.0.0");
    let tx = exchange(&sec, true, port, &rx);
    assert_eq!(unix_links(&tx), (1, 0));
    assert_eq!(unix_links(&rx_t), (0, 1));
    tx.close();
    rx_t.close();
    // closed: the name is gone, a new sender finds no Unix socket (and nothing at all)
    assert!(super::stream::connect_local(std::net::SocketAddr::from(([127, 0, 0, 1], port))).is_none());
}
