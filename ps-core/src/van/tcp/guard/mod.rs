//! The TCP van's door: the shell around [`crate::auth`]. Every connection starts with
//! the handshake ([`crate::auth::handshake`]) before any message: the opening side
//! runs [`Guard::connect`], the accepting side [`Guard::admit`] (connections per
//! address, failed-handshake rate limit) then [`Guard::accept`]. A connection that
//! fails is closed at once and logged with the peer's address; nothing it sent reaches
//! the van. A peer silent for `PS_HANDSHAKE_TIMEOUT` is timed out.

mod sealed_io;

use super::spin_read::{FrameRead, SpinRead};
use super::stream::Stream;
use crate::auth::gate::{Gate, HandshakeFailure};
use crate::auth::handshake::{AfterHello, Initiator, Refusal, Responder, CHALLENGE_LEN, HELLO_LEN, PROOF_LEN};
use crate::config::{Limits, Security};
use bytes::Bytes;
use parking_lot::Mutex;
pub use sealed_io::{SealedReader, SealedWriter};
use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FAIL_WINDOW_MS: u64 = 10_000;
const BAN_MS: u64 = 10_000;

/// The handshake and admission policy of one node.
pub struct Guard {
    sec: Security,
    gate: Mutex<Gate>,
    epoch: Instant,
}

/// An outgoing link: plain or sealed. Sealing happens in memory ([`Outgoing::encode`]),
/// so the transport can hand the socket the sealed bytes without blocking.
pub struct Outgoing {
    tcp: Stream,
    sealed: Option<SealedWriter<Vec<u8>>>,
}

/// An admitted incoming connection; its slot at the door is freed when dropped.
pub struct Permit {
    guard: Arc<Guard>,
    ip: IpAddr,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.guard.gate.lock().closed(self.ip);
    }
}

/// An authenticated incoming link: read messages from it.
pub struct Incoming {
    reader: Box<dyn FrameRead + Send>,
    _permit: Permit,
}

impl Read for Incoming {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl FrameRead for Incoming {
    fn read_frame(&mut self, len: usize) -> io::Result<Vec<u8>> {
        self.reader.read_frame(len)
    }
}

impl Outgoing {
    /// The socket under the link: the shared-memory offer's one-byte answer comes
    /// back on its reverse direction, unsealed (see [`crate::van::tcp::shm`]).
    pub fn stream(&self) -> &Stream {
        &self.tcp
    }

    /// Shuts the connection down.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.tcp.shutdown(how)
    }

    /// The bytes to put on the socket for `bufs`, a batch of whole messages: the bufs
    /// themselves on a plain link, their sealed records (the last one closed at the
    /// batch's end) on a sealed one.
    pub fn encode(&mut self, bufs: Vec<Bytes>) -> io::Result<Vec<Bytes>> {
        let Some(s) = &mut self.sealed else {
            return Ok(bufs);
        };
        for b in &bufs {
            s.write_all(b)?;
        }
        s.flush()?;
        Ok(vec![Bytes::from(std::mem::take(s.get_mut()))])
    }
}

/// Blocking writes (the shared-memory offer, tests): written to the socket at once,
/// sealed first on a sealed link.
impl Write for Outgoing {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match &mut self.sealed {
            Some(s) => s.write(b),
            None => self.tcp.write(b),
        }
    }
    fn write_vectored(&mut self, b: &[IoSlice<'_>]) -> io::Result<usize> {
        match &mut self.sealed {
            Some(s) => s.write_vectored(b),
            None => self.tcp.write_vectored(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        if let Some(s) = &mut self.sealed {
            s.flush()?;
            let sealed = std::mem::take(s.get_mut());
            self.tcp.write_all(&sealed)?;
        }
        self.tcp.flush()
    }
}

fn refused(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, e.to_string())
}

impl Guard {
    /// A guard for this node's security settings.
    pub fn new(sec: &Security) -> Arc<Guard> {
        let l = &sec.limits;
        Arc::new(Guard {
            sec: sec.clone(),
            gate: Mutex::new(Gate::new(
                l.max_conns_per_peer,
                l.max_auth_failures,
                FAIL_WINDOW_MS,
                BAN_MS,
            )),
            epoch: Instant::now(),
        })
    }

    /// The resource limits.
    pub fn limits(&self) -> &Limits {
        &self.sec.limits
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Runs the opening side of the handshake on a freshly connected `tcp` to `addr`.
    pub fn connect(&self, tcp: impl Into<Stream>, addr: &str) -> io::Result<Outgoing> {
        let mut tcp = tcp.into();
        let (init, hello) = Initiator::new(self.sec.secret.as_ref(), self.sec.encrypt, rand::random());
        tcp.write_all(&hello)?;
        if init.mode() == crate::auth::handshake::Mode::Open {
            return Ok(Outgoing { tcp, sealed: None });
        }
        tcp.set_read_timeout(Some(self.sec.limits.handshake_timeout))?;
        let mut challenge = [0u8; CHALLENGE_LEN];
        tcp.read_exact(&mut challenge).map_err(|e| {
            refused(format!(
                "{addr} did not complete the handshake ({e}): is it a psrs node with the same cluster secret?"
            ))
        })?;
        let (proof, key) = init.on_challenge(&challenge).map_err(|r| {
            log::warn!("refused the node at {addr}: {r}");
            refused(format!("{addr}: {r}"))
        })?;
        tcp.write_all(&proof)?;
        tcp.set_read_timeout(None)?;
        let sealed = key.map(|k| SealedWriter::new(Vec::new(), &k));
        Ok(Outgoing { tcp, sealed })
    }

    /// Admits a new connection from `peer` at the door, or says why not (logged).
    pub fn admit(self: &Arc<Self>, peer: SocketAddr) -> Result<Permit, String> {
        let ip = peer.ip();
        match self.gate.lock().admit(ip, self.now()) {
            Ok(()) => Ok(Permit {
                guard: Arc::clone(self),
                ip,
            }),
            Err(e) => Err(format!("refused a connection from {peer}: {e}")),
        }
    }

    /// Runs the accepting side of the handshake on `tcp` from `peer`; a failure is
    /// closed at once and counted against the address when it is the peer's doing
    /// ([`HandshakeFailure::counts_against_peer`]).
    pub fn accept(
        &self,
        tcp: impl Into<Stream>,
        peer: SocketAddr,
        permit: Permit,
    ) -> Result<Incoming, HandshakeFailure> {
        self.accept_spinning(tcp.into(), peer, permit, Duration::ZERO)
    }

    /// Like [`Guard::accept`]; the link's reads then spin up to `spin` before they
    /// block (`PS_SPIN_US`, see [`crate::van::tcp::spin_read`]).
    pub fn accept_spinning(
        &self,
        mut tcp: Stream,
        peer: SocketAddr,
        permit: Permit,
        spin: Duration,
    ) -> Result<Incoming, HandshakeFailure> {
        match self.respond(&mut tcp) {
            Ok(key) => {
                let tcp = SpinRead::new(tcp, spin);
                let reader: Box<dyn FrameRead + Send> = match key {
                    Some(k) => Box::new(SealedReader::new(BufReader::with_capacity(1 << 16, tcp), &k)),
                    None => Box::new(BufReader::with_capacity(1 << 16, tcp)),
                };
                Ok(Incoming {
                    reader,
                    _permit: permit,
                })
            }
            Err(why) => {
                let _ = tcp.shutdown(Shutdown::Both);
                if self.gate.lock().failed(peer.ip(), &why, self.now()) {
                    log::warn!(
                        "rate-limiting {}: {} failed handshakes within {} s; refused for {} s",
                        peer.ip(),
                        self.sec.limits.max_auth_failures,
                        FAIL_WINDOW_MS / 1000,
                        BAN_MS / 1000
                    );
                }
                Err(why)
            }
        }
    }

    /// The handshake's session key (None: open cluster).
    fn respond(&self, tcp: &mut Stream) -> Result<Option<[u8; 32]>, HandshakeFailure> {
        let t = self.sec.limits.handshake_timeout;
        let setup = |e: io::Error| HandshakeFailure::Local(e.to_string());
        tcp.set_read_timeout(Some(t)).map_err(setup)?;
        tcp.set_write_timeout(Some(t)).map_err(setup)?;
        let io_failure = |e: io::Error| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HandshakeFailure::Silent(t),
            _ => HandshakeFailure::CutShort(e.to_string()),
        };
        let mut hello = [0u8; HELLO_LEN];
        let first = tcp.read(&mut hello).map_err(io_failure)?;
        if first == 0 {
            return Err(HandshakeFailure::Closed);
        }
        if !Responder::could_be_hello(&hello[..first]) {
            return Err(HandshakeFailure::Refused(Refusal::NotPsrs));
        }
        tcp.read_exact(&mut hello[first..]).map_err(io_failure)?;
        let responder = Responder::new(self.sec.secret.as_ref(), self.sec.encrypt);
        let key = match responder
            .on_hello(&hello, rand::random())
            .map_err(HandshakeFailure::Refused)?
        {
            AfterHello::Open => None,
            AfterHello::Challenge { reply, pending } => {
                tcp.write_all(&reply).map_err(io_failure)?;
                let mut proof = [0u8; PROOF_LEN];
                tcp.read_exact(&mut proof).map_err(io_failure)?;
                pending.on_proof(&proof).map_err(HandshakeFailure::Refused)?
            }
        };
        tcp.set_read_timeout(None).map_err(setup)?;
        tcp.set_write_timeout(None).map_err(setup)?;
        Ok(key)
    }
}
