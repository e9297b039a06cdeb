//! The TCP van's door: every link of a node with security on (certificates or a
//! cluster secret, see [`crate::tls`]) runs TLS 1.3 with rustls before any message,
//! both sides authenticated by certificates of the cluster's CA. The dialing side
//! runs [`Guard::connect`]; the accepting side [`Guard::admit`] (connections per
//! address, failed-handshake rate limit) then [`Guard::accept`] (handshakes in
//! progress per address, all within `PS_HANDSHAKE_TIMEOUT`), and confirms the link
//! with one byte inside TLS ([`handshake::ACCEPTED`]), so a dialer whose certificate was
//! refused learns it ([`io::ErrorKind::PermissionDenied`]). A connection that fails is
//! closed at once and logged with the peer's address; nothing it sent reaches the van.
//! The dialer seals and writes with rustls's buffered API ([`dialer`]); the accepting
//! side, which reads a link's messages, uses its unbuffered API ([`acceptor`]):
//! records are decrypted where they were read. Without security, links are plain TCP
//! (no handshake).

mod acceptor;
mod dialer;
mod handshake;

use super::spin_read::{FrameRead, SpinRead};
use super::stream::Stream;
use crate::auth::gate::{Gate, GateRefusal, HandshakeFailure, Peer};
use crate::config::Limits;
use crate::tls::{peer, Credentials};
use crate::van::authz::{Expect, PeerCert};
use acceptor::Acceptor;
use bytes::Bytes;
use handshake::Failed;
use parking_lot::Mutex;
use rustls::ClientConnection;
use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FAIL_WINDOW_MS: u64 = 10_000;
const BAN_MS: u64 = 10_000;

/// The TLS credentials and admission policy of one node.
pub struct Guard {
    limits: Limits,
    creds: Option<Credentials>,
    gate: Mutex<Gate>,
    epoch: Instant,
}

/// An outgoing link: plain, or TLS. Sealing happens in memory ([`Outgoing::seal`]),
/// so the transport can hand the socket the ciphertext without blocking
/// ([`Outgoing::write_sealed`]).
pub struct Outgoing {
    tcp: Stream,
    tls: Option<ClientConnection>,
}

/// An admitted incoming connection; its slot at the door is freed when dropped.
pub struct Permit {
    guard: Arc<Guard>,
    ip: IpAddr,
    who: Peer,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.guard.gate.lock().closed(self.ip);
    }
}

/// A connection's handshake slot at the door, freed when dropped.
struct Handshaking<'a>(&'a Guard, IpAddr);

impl Drop for Handshaking<'_> {
    fn drop(&mut self) {
        self.0.gate.lock().handshake_done(self.1);
    }
}

/// How an incoming link's bytes are read.
enum Reading {
    /// A plain link, buffered (large frames straight from the socket).
    Plain(BufReader<SpinRead>),
    /// A TLS link: the connection's own ciphertext buffer over the socket.
    Tls(Box<Acceptor>, SpinRead),
}

/// An incoming link, authenticated when security is on: read messages from it.
pub struct Incoming {
    reading: Reading,
    /// The socket's reverse direction (the shared-memory answer).
    back: Stream,
    cert: Option<PeerCert>,
    _permit: Permit,
}

impl Read for Incoming {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.reading {
            Reading::Tls(conn, src) => conn.read(src, &mut self.back, buf),
            Reading::Plain(reader) => reader.read(buf),
        }
    }
}

impl FrameRead for Incoming {
    fn read_frame(&mut self, len: usize) -> io::Result<Vec<u8>> {
        match &mut self.reading {
            Reading::Tls(conn, src) => conn.read_frame(src, &mut self.back, len),
            // a plain link reads large frames straight from the socket
            Reading::Plain(reader) => reader.read_frame(len),
        }
    }
}

impl Incoming {
    /// What the peer's certificate says (None: no security).
    pub fn cert(&self) -> Option<&PeerCert> {
        self.cert.as_ref()
    }

    /// Sends `bytes` back to the dialer (inside TLS when on): the answer to a
    /// shared-memory offer.
    pub fn reply(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.reading {
            Reading::Tls(conn, _) => conn.write(&mut self.back, bytes),
            Reading::Plain(_) => self.back.write_all(bytes),
        }
    }
}

impl Outgoing {
    /// The socket under the link.
    pub fn stream(&self) -> &Stream {
        &self.tcp
    }

    /// Shuts the connection down.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.tcp.shutdown(how)
    }

    /// Whether the link runs TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Seals `bufs` (the next bytes of whole messages) into TLS records that wait
    /// inside the connection for [`Outgoing::write_sealed`]; nothing on a plain link.
    pub fn seal(&mut self, bufs: &[Bytes]) -> io::Result<()> {
        match &mut self.tls {
            Some(conn) => dialer::seal(conn, bufs),
            None => Ok(()),
        }
    }

    /// True while sealed TLS records wait to be written.
    pub fn sealed_pending(&self) -> bool {
        self.tls.as_ref().is_some_and(|c| c.wants_write())
    }

    /// Writes waiting TLS records to `to` (the socket, never blocking): the bytes it
    /// took, or its error (`WouldBlock` when full).
    pub fn write_sealed(&mut self, to: &mut impl Write) -> io::Result<usize> {
        match &mut self.tls {
            Some(conn) => conn.write_tls(to),
            None => Ok(0),
        }
    }

    /// Reads the peer's one-byte answer within `timeout` (inside TLS when on): the
    /// answer to a shared-memory offer.
    pub fn read_answer(&mut self, timeout: Duration) -> io::Result<u8> {
        let deadline = Instant::now() + timeout;
        let got = match &mut self.tls {
            Some(conn) => dialer::read_byte(conn, &mut self.tcp, deadline).map_err(|f| match f {
                Failed::Io(e) => e,
                other => io::Error::other(format!("{other:?}")),
            }),
            None => {
                self.tcp.set_read_timeout(Some(timeout))?;
                let mut b = [0u8; 1];
                self.tcp.read_exact(&mut b).map(|()| b[0])
            }
        };
        self.tcp.set_read_timeout(None)?;
        got
    }
}

/// Blocking writes (the shared-memory offer, tests): written to the socket at once,
/// sealed first on a TLS link.
impl Write for Outgoing {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.write_all(b).map(|()| b.len())
    }
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        self.write_vectored(&[IoSlice::new(b)]).map(|_| ())
    }
    fn write_vectored(&mut self, b: &[IoSlice<'_>]) -> io::Result<usize> {
        let n = b.iter().map(|s| s.len()).sum();
        match &mut self.tls {
            Some(conn) => {
                dialer::seal(conn, &b.iter().map(|s| Bytes::copy_from_slice(s)).collect::<Vec<_>>())?;
                while conn.wants_write() {
                    conn.write_tls(&mut self.tcp)?;
                }
            }
            None => {
                for s in b {
                    self.tcp.write_all(s)?;
                }
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

fn refused_us(addr: &str, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{addr} refused this node's certificate ({why}): check PS_TLS_CA/PS_TLS_CERT/PS_TLS_KEY or PS_SECRET_FILE"
        ),
    )
}

impl Guard {
    /// A guard with these limits and credentials (None: no security, plain links).
    pub fn new(limits: &Limits, creds: Option<Credentials>) -> Arc<Guard> {
        Arc::new(Guard {
            limits: limits.clone(),
            creds,
            gate: Mutex::new(Gate::new(
                limits.max_conns_per_peer,
                limits.max_auth_failures,
                FAIL_WINDOW_MS,
                BAN_MS,
            )),
            epoch: Instant::now(),
        })
    }

    /// The resource limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The fingerprint of this node's certificate (0: no security).
    pub fn fingerprint(&self) -> u64 {
        self.creds.as_ref().map_or(0, Credentials::fingerprint)
    }

    /// Runs the dialing side's TLS handshake on a freshly connected `tcp` to `addr`,
    /// checks the peer's certificate against `expect` (the role the node table gives
    /// the id dialed, and the certificate it registered with), and waits for the peer
    /// to confirm the link. An error of kind `PermissionDenied` means the peer refused
    /// this node's credentials, or this node refused the peer's.
    pub fn connect(&self, tcp: impl Into<Stream>, addr: &str, expect: &Expect) -> io::Result<Outgoing> {
        let mut tcp = tcp.into();
        let Some(creds) = &self.creds else {
            return Ok(Outgoing { tcp, tls: None });
        };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        let mut conn =
            ClientConnection::new(creds.client_config(), crate::tls::server_name(host)).map_err(io::Error::other)?;
        let deadline = Instant::now() + self.limits.handshake_timeout;
        let failed = |f: Failed| {
            match f {
            Failed::RefusedUs(a) => refused_us(addr, format!("{a:?}")),
            Failed::Refused(why) => {
                log::warn!("refused the node at {addr}: {why}");
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{addr}: {why}: this node does not trust it (check PS_TLS_CA or PS_SECRET_FILE)"),
                )
            }
            Failed::Silent => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{addr} did not complete the TLS handshake within {:?}", self.limits.handshake_timeout),
            ),
            Failed::Closed(e) => io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("{addr} closed the connection during the TLS handshake ({e}): is it a psrs node with security on and the same CA?"),
            ),
            Failed::Io(e) => e,
        }
        };
        dialer::handshake(&mut conn, &mut tcp, deadline).map_err(failed)?;
        let verdict = match conn.peer_certificates().and_then(|c| c.first()) {
            Some(leaf) => expect.check(&peer::roles(leaf).unwrap_or_default(), peer::fingerprint(leaf)),
            None => Err("it presented no certificate".to_string()),
        };
        if let Err(why) = verdict {
            let _ = tcp.shutdown(Shutdown::Both);
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("refused the node at {addr}: {why}"),
            ));
        }
        conn.set_buffer_limit(None);
        match dialer::read_byte(&mut conn, &mut tcp, deadline) {
            Ok(handshake::ACCEPTED) => {}
            Ok(b) => return Err(io::Error::other(format!("{addr}: unexpected confirmation byte {b}"))),
            // closed right after the handshake: it refused the certificate it checked last
            Err(Failed::Closed(_)) => return Err(refused_us(addr, "the link was closed")),
            Err(f) => return Err(failed(f)),
        }
        tcp.set_read_timeout(None)?;
        tcp.set_write_timeout(None)?;
        Ok(Outgoing { tcp, tls: Some(conn) })
    }

    /// Admits a new connection from `peer`, made by `who` (whom its failures count
    /// against), at the door, or says why not.
    pub fn admit(self: &Arc<Self>, peer: SocketAddr, who: Peer) -> Result<Permit, GateRefusal> {
        let ip = peer.ip();
        self.gate.lock().admit(ip, who, self.now())?;
        Ok(Permit {
            guard: Arc::clone(self),
            ip,
            who,
        })
    }

    /// Runs the accepting side's handshake on `tcp` from `peer`; the link's reads then
    /// spin up to `spin` before they block (`PS_SPIN_US`, see
    /// [`crate::van::tcp::spin_read`]). A failure is closed at once and counted against
    /// the peer that made the connection (the permit's) when it is the peer's doing
    /// ([`HandshakeFailure::counts_against_peer`]).
    pub fn accept(
        &self,
        mut tcp: Stream,
        peer: SocketAddr,
        permit: Permit,
        spin: Duration,
    ) -> Result<Incoming, HandshakeFailure> {
        let back = tcp.try_clone().map_err(|e| HandshakeFailure::Local(e.to_string()))?;
        let Some(creds) = &self.creds else {
            return Ok(Incoming {
                reading: Reading::Plain(BufReader::with_capacity(1 << 16, SpinRead::new(tcp, spin))),
                back,
                cert: None,
                _permit: permit,
            });
        };
        match self.respond(creds, &mut tcp, peer) {
            Ok((conn, cert)) => {
                let _ = tcp.set_read_timeout(None);
                let _ = tcp.set_write_timeout(None);
                Ok(Incoming {
                    reading: Reading::Tls(conn, SpinRead::new(tcp, spin)),
                    back,
                    cert: Some(cert),
                    _permit: permit,
                })
            }
            Err(why) => {
                let _ = tcp.shutdown(Shutdown::Both);
                let who = permit.who;
                if self.gate.lock().failed(who, &why, self.now()) {
                    log::warn!(
                        "rate-limiting {who}: {} failed handshakes within {} s; refused for {} s",
                        self.limits.max_auth_failures,
                        FAIL_WINDOW_MS / 1000,
                        BAN_MS / 1000
                    );
                }
                Err(why)
            }
        }
    }

    /// The server side of the handshake, its confirmation, and what the dialer's
    /// certificate says.
    fn respond(
        &self,
        creds: &Credentials,
        tcp: &mut Stream,
        peer: SocketAddr,
    ) -> Result<(Box<Acceptor>, PeerCert), HandshakeFailure> {
        let _slot = {
            let mut g = self.gate.lock();
            g.handshake_started(peer.ip())
                .map_err(|e| HandshakeFailure::Refused(e.to_string()))?;
            Handshaking(self, peer.ip())
        };
        let mut first = [0u8; 1];
        let t = self.limits.handshake_timeout;
        tcp.set_read_timeout(Some(t))
            .map_err(|e| HandshakeFailure::Local(e.to_string()))?;
        match tcp.peek(&mut first) {
            Ok(0) => return Err(HandshakeFailure::Closed),
            Ok(_) if first[0] != 0x16 => {
                return Err(HandshakeFailure::Refused(
                    "not a TLS handshake (a node without security? every node needs PS_TLS_* or PS_SECRET_FILE)".into(),
                ))
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(HandshakeFailure::Silent(t))
            }
            Err(e) => return Err(HandshakeFailure::CutShort(e.to_string())),
        }
        let mut conn =
            Box::new(Acceptor::new(creds.server_config()).map_err(|e| HandshakeFailure::Local(e.to_string()))?);
        let deadline = Instant::now() + t;
        conn.handshake(tcp, deadline).map_err(|f| match f {
            Failed::Refused(why) => HandshakeFailure::Refused(format!("TLS handshake refused: {why}")),
            Failed::RefusedUs(a) => {
                HandshakeFailure::Refused(format!("the peer refused this node's certificate ({a:?})"))
            }
            Failed::Silent => HandshakeFailure::Silent(t),
            Failed::Closed(e) => HandshakeFailure::CutShort(e),
            Failed::Io(e) => HandshakeFailure::CutShort(e.to_string()),
        })?;
        let leaf = conn
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| HandshakeFailure::Refused("it presented no certificate".into()))?;
        let roles = peer::roles(leaf).map_err(|e| HandshakeFailure::Refused(e.to_string()))?;
        if roles.0.is_empty() {
            return Err(HandshakeFailure::Refused("its certificate names no psrs role".into()));
        }
        if !roles.names_node_role() {
            return Err(HandshakeFailure::Refused(format!(
                "its certificate names {roles}: no node role (a client certificate opens no node link)"
            )));
        }
        let fingerprint = peer::fingerprint(leaf);
        conn.write(tcp, &[handshake::ACCEPTED])
            .map_err(|e| HandshakeFailure::CutShort(e.to_string()))?;
        Ok((conn, PeerCert { roles, fingerprint }))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
