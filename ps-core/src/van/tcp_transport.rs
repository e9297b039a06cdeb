//! A plain TCP transport: one outgoing stream per peer written directly by the sending
//! thread (vectored writes of the frames, no copies, no I/O thread), and one reader
//! thread per incoming connection that hands each message straight to the van. It
//! saves ZMQ's two thread hand-offs per message.
//!
//! Wire format of a message: magic `PSRS` (u32 LE), frame count (u32 LE), one u64 LE
//! length per frame, then the frames. A connection that sends anything else is
//! logged and closed; limits bound every allocation. Every connection starts with
//! the handshake of [`super::guard`] (authentication, and encryption with a secret).
//! To a peer on this host, large frames may go through shared memory instead: see
//! [`super::shm`] for the offer that follows the handshake and the marked lengths.

use super::guard::{Guard, Incoming, Outgoing, Permit};
use super::shm::{self, Shm, ShmLink, ShmReceiver};
use super::transport::{Deliver, Transport};
use crate::auth::{Limits, Security};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const MAGIC: u32 = u32::from_le_bytes(*b"PSRS");

fn tune(s: &TcpStream) {
    let _ = s.set_nodelay(true);
}

struct Peer {
    addr: String,
    stream: Option<Outgoing>,
    shm: ShmLink,
}

/// TCP implementation of [`Transport`].
pub struct TcpTransport {
    listener: Mutex<Option<TcpListener>>,
    peers: Mutex<HashMap<i32, Arc<Mutex<Peer>>>>,
    /// The accepted connections being read, by number: closed when their reader ends
    /// (a refused or malformed stream is closed at once) or on `close`.
    incoming: Arc<Mutex<HashMap<u64, TcpStream>>>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    guard: Arc<Guard>,
    spin: Duration,
    shm: Arc<Shm>,
}

impl TcpTransport {
    /// A transport with nothing bound, for an open cluster with the default limits.
    pub fn new() -> TcpTransport {
        TcpTransport::with_security(&Security::default())
    }

    /// A transport with nothing bound that authenticates (and, with a secret and
    /// `encrypt`, seals) every connection and enforces `sec`'s limits.
    pub fn with_security(sec: &Security) -> TcpTransport {
        TcpTransport {
            guard: Guard::new(sec),
            listener: Mutex::new(None),
            peers: Mutex::new(HashMap::new()),
            incoming: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Arc::default(),
            spin: Duration::ZERO,
            shm: Shm::off(),
        }
    }

    /// The same transport with shared memory to peers on this host as `cfg` says
    /// (`PS_SHM`; see [`crate::van::shm`]).
    pub fn with_shm(mut self, cfg: &shm::ShmConfig) -> TcpTransport {
        self.shm = Shm::new(cfg.clone());
        self
    }

    /// The same transport whose reader threads spin up to `spin` before they block
    /// (`PS_SPIN_US`; see [`crate::van::spin_read`]).
    pub fn with_spin(mut self, spin: Duration) -> TcpTransport {
        self.spin = spin;
        self
    }
}

impl Default for TcpTransport {
    fn default() -> Self {
        TcpTransport::new()
    }
}

fn open(addr: &str, guard: &Guard) -> io::Result<Outgoing> {
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {addr}")))?;
    let s = TcpStream::connect_timeout(&sa, Duration::from_secs(2))?;
    tune(&s);
    s.set_write_timeout(Some(Duration::from_secs(60)))?;
    guard.connect(s, addr)
}

#[cfg(test)]
fn write_message(stream: &mut impl Write, frames: &[Bytes]) -> io::Result<()> {
    write_marked(stream, frames, 0)
}

/// Writes a message whose frames `i` with bit i of `marks` are shared-memory descriptors.
fn write_marked(stream: &mut impl Write, frames: &[Bytes], marks: u128) -> io::Result<()> {
    let mut header = Vec::with_capacity(8 + 8 * frames.len());
    header.extend_from_slice(&MAGIC.to_le_bytes());
    header.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        header.extend_from_slice(&shm::wire::mark(f.len() as u64, i < 128 && marks >> i & 1 == 1).to_le_bytes());
    }
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(frames.len() + 1);
    slices.push(IoSlice::new(&header));
    slices.extend(frames.iter().filter(|f| !f.is_empty()).map(|f| IoSlice::new(f)));
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        let n = stream.write_vectored(bufs)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed"));
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    stream.flush()
}

/// Reads one message; `Ok(None)` at a clean end of stream.
pub(crate) fn read_message(r: &mut impl Read, limits: &Limits) -> io::Result<Option<Vec<Bytes>>> {
    read_message_shm(r, limits, &mut ShmReceiver::none())
}

/// Reads one message, answering a shared-memory offer and resolving descriptor frames
/// through `shm` on the way; a message with a bad descriptor is dropped (logged by
/// `shm`) and the next one read.
fn read_message_shm(r: &mut impl Read, limits: &Limits, shm: &mut ShmReceiver) -> io::Result<Option<Vec<Bytes>>> {
    loop {
        let mut head = [0u8; 8];
        match r.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        let magic = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let n = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        if magic == shm::wire::OFFER_MAGIC {
            shm.on_offer(r, n)?;
            continue;
        }
        if magic != MAGIC {
            return Err(bad(format!("not a psrs stream (magic {magic:#x})")));
        }
        limits.check_message(n as usize, 0).map_err(bad)?;
        let mut lens = vec![0u8; 8 * n as usize];
        r.read_exact(&mut lens)?;
        let mut lens: Vec<u64> = lens
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let marks = shm::wire::unmark(&mut lens);
        let total = lens.iter().try_fold(0u64, |a, &l| a.checked_add(l)).unwrap_or(u64::MAX);
        limits.check_message(n as usize, total).map_err(bad)?;
        let mut frames = Vec::with_capacity(n as usize);
        for len in lens {
            let mut buf = Vec::with_capacity(len as usize);
            r.take(len).read_to_end(&mut buf)?;
            if buf.len() as u64 != len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed mid-message",
                ));
            }
            frames.push(Bytes::from(buf));
        }
        if shm.resolve(&mut frames, marks) {
            return Ok(Some(frames));
        }
    }
}

/// Reads the accepted connection number `id` until it ends, then closes it.
fn serve(id: u64, incoming: Arc<Mutex<HashMap<u64, TcpStream>>>, stream: TcpStream, ctx: Serve) {
    read_all(stream, ctx);
    if let Some(s) = incoming.lock().remove(&id) {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// What a reader thread needs besides its stream.
struct Serve {
    deliver: Deliver,
    stop: Arc<AtomicBool>,
    guard: Arc<Guard>,
    permit: Permit,
    spin: Duration,
    shm: Arc<Shm>,
}

fn read_all(stream: TcpStream, ctx: Serve) {
    let Serve {
        deliver,
        stop,
        guard,
        permit,
        spin,
        shm,
    } = ctx;
    let Ok(addr) = stream.peer_addr() else { return };
    let peer = addr.to_string();
    let mut shm = shm.incoming(stream.try_clone().ok(), addr);
    let mut r: Incoming = match guard.accept_spinning(stream, addr, permit, spin) {
        Ok(r) => r,
        Err(e) if !e.counts_against_peer() => {
            // a probe, or a peer that gave up: not worth a warning
            log::debug!("connection from {peer}: {e}");
            return;
        }
        Err(e) => {
            log::warn!("refused a connection from {peer}: {e}");
            return;
        }
    };
    let limits = guard.limits().clone();
    while !stop.load(Ordering::Relaxed) {
        match read_message_shm(&mut r, &limits, &mut shm) {
            Ok(Some(frames)) => deliver(frames),
            Ok(None) => break,
            Err(e) => {
                if !stop.load(Ordering::Relaxed) && e.kind() != io::ErrorKind::ConnectionReset {
                    log::warn!("dropped a malformed message from {peer} and closed the connection: {e}");
                }
                break;
            }
        }
    }
}

impl Transport for TcpTransport {
    fn bind(&self, host: &str, port: u16) -> io::Result<u16> {
        let l = TcpListener::bind((host, port))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {host}:{port}: {e}")))?;
        let bound = l.local_addr()?.port();
        *self.listener.lock() = Some(l);
        Ok(bound)
    }

    fn start(&self, deliver: Deliver) -> io::Result<()> {
        let l = self
            .listener
            .lock()
            .as_ref()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "transport not bound"))?
            .try_clone()?;
        l.set_nonblocking(true)?;
        let (stop, incoming, threads) = (
            Arc::clone(&self.stop),
            Arc::clone(&self.incoming),
            Arc::clone(&self.threads),
        );
        let (guard, spin, shm) = (Arc::clone(&self.guard), self.spin, Arc::clone(&self.shm));
        let t = std::thread::Builder::new().name("tcp-accept".into()).spawn(move || {
            let mut next_id = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, from)) => {
                        let permit = match guard.admit(from) {
                            Ok(p) => p,
                            Err(e) => {
                                log::warn!("{e}");
                                continue;
                            }
                        };
                        let _ = s.set_nonblocking(false);
                        tune(&s);
                        next_id += 1;
                        let id = next_id;
                        if let Ok(c) = s.try_clone() {
                            incoming.lock().insert(id, c);
                        }
                        let ctx = Serve {
                            deliver: Arc::clone(&deliver),
                            stop: Arc::clone(&stop),
                            guard: Arc::clone(&guard),
                            permit,
                            spin,
                            shm: Arc::clone(&shm),
                        };
                        let inc = Arc::clone(&incoming);
                        match std::thread::Builder::new()
                            .name("tcp-recv".into())
                            .spawn(move || serve(id, inc, s, ctx))
                        {
                            Ok(h) => {
                                let mut t = threads.lock();
                                t.retain(|h| !h.is_finished());
                                t.push(h);
                            }
                            Err(e) => log::error!("cannot start a reader thread: {e}"),
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                    Err(e) => {
                        log::warn!("accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        })?;
        self.threads.lock().push(t);
        Ok(())
    }

    /// Records where `peer` is; the connection (and its handshake) is opened by the
    /// first send. Opening here made the scheduler, which connects to itself before it
    /// accepts, wait the whole handshake timeout for its own answer while every node's
    /// connection queued behind it.
    fn connect(&self, peer: i32, host: &str, port: u16) -> io::Result<()> {
        let addr = crate::addr::host_port(host, port);
        let old = self.peers.lock().insert(
            peer,
            Arc::new(Mutex::new(Peer {
                addr,
                stream: None,
                shm: ShmLink::NotOffered,
            })),
        );
        if let Some(old) = old {
            if let Some(s) = old.lock().stream.take() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        Ok(())
    }

    fn disconnect(&self, peer: i32) {
        if let Some(p) = self.peers.lock().remove(&peer) {
            if let Some(s) = p.lock().stream.take() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    fn is_connected(&self, peer: i32) -> bool {
        self.peers.lock().contains_key(&peer)
    }

    fn send(&self, peer: i32, mut frames: Vec<Bytes>) -> io::Result<usize> {
        let p = self
            .peers
            .lock()
            .get(&peer)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, format!("no connection to node {peer}")))?;
        let mut p = p.lock();
        if p.stream.is_none() {
            p.stream = Some(open(&p.addr, &self.guard)?);
        }
        let n = frames.iter().map(|f| f.len()).sum();
        let Peer { stream, shm, .. } = &mut *p;
        let stream = stream.as_mut().expect("just opened");
        let marks = self.shm.place(shm, stream, &mut frames);
        match write_marked(stream, &frames, marks) {
            Ok(()) => Ok(n),
            Err(e) => {
                // reconnect (and offer shared memory again) on the next send
                p.stream = None;
                p.shm = ShmLink::NotOffered;
                Err(e)
            }
        }
    }

    fn shm_stats(&self) -> Option<Arc<shm::ShmStats>> {
        Some(self.shm.stats())
    }

    fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, p) in self.peers.lock().drain() {
            if let Some(s) = p.lock().stream.take() {
                let _ = s.flush_and_close();
            }
        }
        for (_, s) in self.incoming.lock().drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let _ = t.join();
        }
        *self.listener.lock() = None;
    }
}

trait FlushClose {
    fn flush_and_close(self) -> io::Result<()>;
}

impl FlushClose for Outgoing {
    /// Flushes and half-closes, so the last messages reach the peer before it sees EOF.
    fn flush_and_close(mut self) -> io::Result<()> {
        self.flush()?;
        self.shutdown(Shutdown::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// connect() opens nothing: a node (the scheduler itself) may connect to a port
    /// whose accept loop is not running yet without blocking on the handshake.
    #[test]
    fn connect_opens_nothing_until_the_first_send() {
        let sec = Security {
            secret: Some(crate::auth::Secret::new(vec![7; 32], crate::auth::SecretSource::File).unwrap()),
            ..Security::default()
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = TcpTransport::with_security(&sec);
        t.connect(1, "127.0.0.1", port).unwrap();
        assert!(t.is_connected(1));
        l.set_nonblocking(true).unwrap();
        let e = l.accept().expect_err("no connection was opened");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn frames_round_trip_and_garbage_is_an_error() {
        let frames = vec![
            Bytes::from_static(b"meta"),
            Bytes::new(),
            Bytes::from(vec![7u8; 100_000]),
        ];
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut r, _) = l.accept().unwrap();
        write_message(&mut w, &frames).unwrap();
        assert_eq!(read_message(&mut r, &Limits::default()).unwrap().unwrap(), frames);
        w.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(read_message(&mut r, &Limits::default()).is_err());
        let mut huge = Vec::new();
        huge.extend_from_slice(&MAGIC.to_le_bytes());
        huge.extend_from_slice(&1u32.to_le_bytes());
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_message(&mut &huge[..], &Limits::default()).is_err());
        let mut many = Vec::new();
        many.extend_from_slice(&MAGIC.to_le_bytes());
        many.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_message(&mut &many[..], &Limits::default()).is_err());
        assert!(read_message(&mut &b""[..], &Limits::default()).unwrap().is_none());
    }
}
