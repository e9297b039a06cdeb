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

use super::cork;
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
    /// Messages queued by a corked thread ([`cork`]), headers and frames in order.
    queued: Vec<Bytes>,
    queued_bytes: usize,
    queued_msgs: usize,
    shm: ShmLink,
}

impl Peer {
    fn new(addr: String) -> Peer {
        Peer {
            addr,
            stream: None,
            queued: Vec::new(),
            queued_bytes: 0,
            queued_msgs: 0,
            shm: ShmLink::NotOffered,
        }
    }

    /// Writes every queued message in one vectored write (opening the connection
    /// first if needed); on failure the connection is dropped, to be reopened by the
    /// next send, and the queued messages are lost (as a failed send's).
    fn write_queued(&mut self, guard: &Guard) -> io::Result<()> {
        let queued = std::mem::take(&mut self.queued);
        (self.queued_bytes, self.queued_msgs) = (0, 0);
        if queued.is_empty() {
            return Ok(());
        }
        if self.stream.is_none() {
            self.stream = Some(open(&self.addr, guard)?);
        }
        let stream = self.stream.as_mut().expect("just opened");
        let r = write_all(stream, &queued);
        if r.is_err() {
            // reconnect (and offer shared memory again) on the next send
            self.stream = None;
            self.shm = ShmLink::NotOffered;
        }
        r
    }
}

/// One outgoing link: the peer's connection and its queue.
struct Link {
    peer: Mutex<Peer>,
    guard: Arc<Guard>,
}

impl Link {
    fn new(addr: String, guard: &Arc<Guard>) -> Arc<Link> {
        Arc::new(Link {
            peer: Mutex::new(Peer::new(addr)),
            guard: Arc::clone(guard),
        })
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Peer> {
        self.peer.lock()
    }
}

impl cork::Flush for Link {
    fn flush_queued(&self) {
        let mut p = self.peer.lock();
        let n = p.queued_msgs;
        if let Err(e) = p.write_queued(&self.guard) {
            log::debug!("{n} queued messages to {} not sent: {e}", p.addr);
        }
    }
}

/// TCP implementation of [`Transport`].
pub struct TcpTransport {
    listener: Mutex<Option<TcpListener>>,
    peers: Mutex<HashMap<i32, Arc<Link>>>,
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

impl TcpTransport {
    /// Queues a message on `peer`'s link and writes the queue unless the message may
    /// wait: a corking thread's (written before its next read) or a `lazy` one
    /// (written by the link's next flush or this thread's next wait), while the queue
    /// is small.
    fn enqueue(&self, peer: i32, mut frames: Vec<Bytes>, lazy: bool) -> io::Result<usize> {
        let link = self
            .peers
            .lock()
            .get(&peer)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, format!("no connection to node {peer}")))?;
        let len: usize = frames.iter().map(|f| f.len()).sum();
        let mut p = link.lock();
        if p.stream.is_none() {
            p.stream = Some(open(&p.addr, &self.guard)?);
        }
        let Peer { stream, shm, .. } = &mut *p;
        let marks = self.shm.place(shm, stream.as_mut().expect("just opened"), &mut frames);
        p.queued.push(header(&frames, marks));
        p.queued_bytes += frames.iter().map(|f| f.len()).sum::<usize>();
        p.queued.extend(frames);
        p.queued_msgs += 1;
        if p.queued_bytes < cork::MAX_QUEUED_BYTES && p.queued_msgs < cork::MAX_QUEUED_MSGS {
            let dyn_link: Arc<dyn cork::Flush> = link.clone();
            if cork::defer(&dyn_link) {
                return Ok(len);
            }
            if lazy {
                cork::remember(&dyn_link);
                return Ok(len);
            }
        }
        p.write_queued(&self.guard).map(|()| len)
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

/// The header of a message of `frames` whose frames `i` with bit i of `marks` are
/// shared-memory descriptors.
fn header(frames: &[Bytes], marks: u128) -> Bytes {
    let mut header = Vec::with_capacity(8 + 8 * frames.len());
    header.extend_from_slice(&MAGIC.to_le_bytes());
    header.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        header.extend_from_slice(&shm::wire::mark(f.len() as u64, i < 128 && marks >> i & 1 == 1).to_le_bytes());
    }
    Bytes::from(header)
}

/// Writes `bufs` whole, in as few vectored writes as the kernel takes, then flushes.
fn write_all(stream: &mut impl Write, bufs: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = bufs.iter().filter(|b| !b.is_empty()).map(|b| IoSlice::new(b)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = stream.write_vectored(rest)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed"));
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    stream.flush()
}

#[cfg(test)]
fn write_message(stream: &mut impl Write, frames: &[Bytes]) -> io::Result<()> {
    let mut bufs = vec![header(frames, 0)];
    bufs.extend(frames.iter().cloned());
    write_all(stream, &bufs)
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
    // the handlers' sends are written when the buffer runs dry (SpinRead flushes)
    cork::begin();
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
    cork::flush();
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
        let old = self.peers.lock().insert(peer, Link::new(addr, &self.guard));
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

    /// Queues the message behind any queued before it on this link, then writes the
    /// queue, unless the calling thread corks ([`cork`]) and the queue is still small.
    fn send(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.enqueue(peer, frames, false)
    }

    fn send_lazy(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.enqueue(peer, frames, true)
    }

    fn flush_link(&self, peer: i32) {
        let Some(link) = self.peers.lock().get(&peer).cloned() else {
            return;
        };
        let dyn_link: Arc<dyn cork::Flush> = link.clone();
        if !cork::defer(&dyn_link) {
            cork::Flush::flush_queued(&*link);
        }
    }

    fn shm_stats(&self) -> Option<Arc<shm::ShmStats>> {
        Some(self.shm.stats())
    }

    fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, link) in self.peers.lock().drain() {
            let mut p = link.lock();
            if p.write_queued(&link.guard).is_ok() {
                if let Some(s) = p.stream.take() {
                    let _ = s.flush_and_close();
                }
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

    /// A lazy send waits in its link's queue until the link is flushed or the
    /// sending thread flushes before it blocks; a prompt send writes it first.
    #[test]
    fn lazy_sends_wait_for_a_flush_and_keep_their_order() {
        let rx = TcpTransport::new();
        let port = rx.bind("127.0.0.1", 0).unwrap();
        let (tx_frames, got) = crossbeam_channel::unbounded();
        rx.start(Arc::new(move |f: Vec<Bytes>| tx_frames.send(f[0].clone()).unwrap()))
            .unwrap();
        let tx = TcpTransport::new();
        tx.connect(1, "127.0.0.1", port).unwrap();
        let quiet = Duration::from_millis(200);
        tx.send_lazy(1, vec![Bytes::from_static(b"a")]).unwrap();
        assert!(got.recv_timeout(quiet).is_err(), "a lazy send is not written by itself");
        tx.flush_link(1);
        assert_eq!(got.recv_timeout(Duration::from_secs(5)).unwrap(), &b"a"[..]);
        tx.send_lazy(1, vec![Bytes::from_static(b"b")]).unwrap();
        tx.send(1, vec![Bytes::from_static(b"c")]).unwrap();
        assert_eq!(got.recv_timeout(Duration::from_secs(5)).unwrap(), &b"b"[..]);
        assert_eq!(got.recv_timeout(Duration::from_secs(5)).unwrap(), &b"c"[..]);
        tx.send_lazy(1, vec![Bytes::from_static(b"d")]).unwrap();
        assert!(got.recv_timeout(quiet).is_err());
        cork::flush(); // what a thread about to wait does
        assert_eq!(got.recv_timeout(Duration::from_secs(5)).unwrap(), &b"d"[..]);
        tx.close();
        rx.close();
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
