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

use super::accept::Acceptor;
use super::drain::Drain;
use super::guard::Guard;
use super::link::Link;
use super::opening;
pub(crate) use super::read::read_message;
use super::shm::Shm;
use super::stream::{self, Stream};
use super::wire::Wire;
use crate::config::Security;
use crate::node::Node;
use crate::van::authz::Expect;
use crate::van::cork;
use crate::van::transport::{Deliver, Transport};
use bytes::Bytes;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, TcpListener};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// TCP implementation of [`Transport`].
pub struct TcpTransport {
    listener: Mutex<Option<TcpListener>>,
    /// The Unix socket standing for the TCP listener, for nodes on this host
    /// ([`super::stream`]); none with `PS_LOCAL_SOCKET=0`.
    local_listener: Mutex<Option<UnixListener>>,
    /// Whether to listen on, and connect through, Unix sockets to nodes on this host.
    local_socket: bool,
    peers: Mutex<FxHashMap<i32, Arc<Link>>>,
    /// The accepted connections being read, by number: closed when their reader ends
    /// (a refused or malformed stream is closed at once) or on `close`.
    incoming: Arc<Mutex<HashMap<u64, Stream>>>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    guard: Arc<Guard>,
    spin: Duration,
    shm: Arc<Shm>,
    /// Finishes the writes reader threads left to it.
    drain: Arc<Drain>,
}

impl TcpTransport {
    /// A transport with nothing bound, for an open cluster with the default limits.
    pub fn new() -> TcpTransport {
        TcpTransport::with_security(&Security::default(), None)
    }

    /// A transport with nothing bound that enforces `sec`'s limits and, with
    /// credentials (see [`Security::credentials`]), runs TLS on every link.
    pub fn with_security(sec: &Security, creds: Option<crate::tls::Credentials>) -> TcpTransport {
        TcpTransport {
            guard: Guard::new(&sec.limits, creds),
            listener: Mutex::new(None),
            local_listener: Mutex::new(None),
            local_socket: true,
            peers: Mutex::new(FxHashMap::default()),
            incoming: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Arc::default(),
            spin: Duration::ZERO,
            shm: Shm::off(),
            drain: Drain::new(),
        }
    }

    /// The same transport with shared memory to peers on this host as `cfg` says
    /// (`PS_SHM`; see [`crate::van::tcp::shm`]).
    pub fn with_shm(mut self, cfg: &crate::config::ShmConfig) -> TcpTransport {
        self.shm = Shm::new(cfg.clone());
        self
    }

    /// The same transport with links to nodes on this host over Unix sockets (`on`,
    /// the default) or loopback TCP (`PS_LOCAL_SOCKET`; see [`super::stream`]).
    pub fn with_local_socket(mut self, on: bool) -> TcpTransport {
        self.local_socket = on;
        self
    }

    /// The same transport whose reader threads spin up to `spin` before they block
    /// (`PS_SPIN_US`; see [`crate::van::tcp::spin_read`]).
    pub fn with_spin(mut self, spin: Duration) -> TcpTransport {
        self.spin = spin;
        self
    }
}

/// How a send treats a link that cannot take its message at once (one per
/// [`Transport`] send method).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SendMode {
    /// [`Transport::send`]: opens a missing connection on the calling thread and
    /// waits for room.
    Wait,
    /// [`Transport::send_nowait`]: opens a missing connection in the background.
    NoWait,
    /// [`Transport::send_lazy`]: as `NoWait`, and a small queue waits for the link's
    /// next flush.
    Lazy,
    /// [`Transport::send_if_room`]: as `NoWait`, but dropped rather than waiting
    /// behind bytes the link holds back.
    IfRoom,
}

impl TcpTransport {
    /// Records where `peer` is and what its certificate must show; the connection is
    /// opened by the first send (see `connect`).
    fn open_link(&self, peer: i32, host: &str, port: u16, expect: Expect) -> io::Result<()> {
        let addr = crate::addr::host_port(host, port);
        let old = self.peers.lock().insert(
            peer,
            Link::new(
                addr,
                expect,
                self.local_socket.then(|| self.shm.stats()),
                &self.guard,
                &self.drain,
            ),
        );
        if let Some(old) = old {
            old.lock().drop_stream();
        }
        Ok(())
    }

    /// Queues a message on `peer`'s link and writes the queue unless the message may
    /// wait: a corking thread's (written before its next read, or after the message
    /// being handled once the queue is full) or a [`SendMode::Lazy`] one (written by the
    /// link's next flush or this thread's next wait, while the queue is small).
    ///
    /// A link without a connection opens it first: on this thread for a
    /// [`SendMode::Wait`], otherwise in the background while the message waits in the
    /// queue ([`super::opening`]). While a connection is being opened every message
    /// queues behind the first, up to a bound in bytes; past it the sender waits for
    /// the opening to end (back-pressure, as a full socket's), but for a
    /// [`SendMode::IfRoom`], which is dropped (see [`Transport::send_if_room`]).
    fn enqueue(&self, peer: i32, frames: Vec<Bytes>, mode: SendMode) -> io::Result<usize> {
        let (lazy, nowait, if_room) = (mode == SendMode::Lazy, mode != SendMode::Wait, mode == SendMode::IfRoom);
        let backed_up = || {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("the link to node {peer} is backed up: message dropped"),
            )
        };
        let link = self
            .peers
            .lock()
            .get(&peer)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, format!("no connection to node {peer}")))?;
        let len: usize = frames.iter().map(|f| f.len()).sum();
        let mut p = link.lock();
        loop {
            if p.stream.is_none() && !p.opening {
                if !nowait {
                    p.stream = Some(Wire::new(p.open_now(&self.guard)?));
                } else if let Some(e) = p.recent_failure() {
                    return Err(e);
                } else {
                    opening::open_in_background(&link, &mut p, &self.shm, &self.stop)?;
                }
            }
            if !p.opening {
                break;
            }
            if p.room_while_opening(len) {
                return Ok(p.wait_for_opening(frames, len));
            }
            if if_room {
                return Err(backed_up());
            }
            drop(p);
            cork::wake_now(); // waiting for the opening: nobody waits on this thread meanwhile
            std::thread::sleep(opening::LOOK_AGAIN);
            p = link.lock();
        }
        if if_room {
            if p.pending() || p.queue_full() {
                return Err(backed_up());
            }
            p.queue(&self.shm, frames);
            return link.write_or_hand_over(p).map(|()| len);
        }
        p.queue(&self.shm, frames);
        let dyn_link: Arc<dyn cork::Flush> = link.clone();
        if !p.queue_full() {
            if cork::defer(&dyn_link) {
                return Ok(len);
            }
            if lazy {
                cork::remember(&dyn_link);
                return Ok(len);
            }
        } else if cork::defer_full(&dyn_link) {
            // written once the message being handled is done, outside its handler
            return Ok(len);
        }
        link.write_out(p).map(|()| len)
    }
}

impl Default for TcpTransport {
    fn default() -> Self {
        TcpTransport::new()
    }
}

impl Transport for TcpTransport {
    fn bind(&self, host: &str, port: u16) -> io::Result<u16> {
        let l = TcpListener::bind((host, port))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {host}:{port}: {e}")))?;
        let bound = l.local_addr()?;
        *self.listener.lock() = Some(l);
        if self.local_socket {
            // only a node in this network namespace can reach it; without it, TCP
            match stream::listen_local(bound) {
                Ok(u) => *self.local_listener.lock() = Some(u),
                Err(e) => log::debug!("no Unix socket for {bound}, nodes on this host connect over TCP: {e}"),
            }
        }
        Ok(bound.port())
    }

    fn start(&self, deliver: Deliver) -> io::Result<()> {
        let l = self
            .listener
            .lock()
            .as_ref()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "transport not bound"))?
            .try_clone()?;
        l.set_nonblocking(true)?;
        let local = match self.local_listener.lock().as_ref() {
            Some(u) => Some(u.try_clone()?),
            None => None,
        };
        if let Some(u) = &local {
            u.set_nonblocking(true)?;
        }
        let acceptor = Acceptor {
            deliver,
            stop: Arc::clone(&self.stop),
            incoming: Arc::clone(&self.incoming),
            threads: Arc::clone(&self.threads),
            guard: Arc::clone(&self.guard),
            spin: self.spin,
            shm: Arc::clone(&self.shm),
            next_id: 0,
        };
        let t = std::thread::Builder::new()
            .name("tcp-accept".into())
            .spawn(move || acceptor.run(l, local))?;
        self.threads.lock().push(t);
        Ok(())
    }

    /// Records where `peer` is; the connection (and its handshake) is opened by the
    /// first send. Opening here made the scheduler, which connects to itself before it
    /// accepts, wait the whole handshake timeout for its own answer while every node's
    /// connection queued behind it.
    fn connect(&self, peer: i32, host: &str, port: u16) -> io::Result<()> {
        self.open_link(peer, host, port, Expect::of_key(peer))
    }

    /// Like `connect`, the peer's certificate checked against node `n`'s table entry.
    fn connect_node(&self, peer: i32, n: &Node) -> io::Result<()> {
        self.open_link(peer, &n.hostname, n.port, Expect::of_node(peer, n))
    }

    fn fingerprint(&self) -> u64 {
        self.guard.fingerprint()
    }

    fn rekey(&self, from: i32, to: i32) -> bool {
        let mut peers = self.peers.lock();
        let Some(link) = peers.remove(&from) else {
            return false;
        };
        if let Some(old) = peers.insert(to, link) {
            old.lock().drop_stream();
        }
        true
    }

    fn disconnect(&self, peer: i32) {
        if let Some(p) = self.peers.lock().remove(&peer) {
            p.lock().drop_stream();
        }
    }

    fn is_connected(&self, peer: i32) -> bool {
        self.peers.lock().contains_key(&peer)
    }

    /// Queues the message behind any queued before it on this link, then writes the
    /// queue, unless the calling thread corks ([`cork`]) and the queue is still small.
    fn send(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.enqueue(peer, frames, SendMode::Wait)
    }

    fn send_nowait(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.enqueue(peer, frames, SendMode::NoWait)
    }

    fn send_lazy(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.enqueue(peer, frames, SendMode::Lazy)
    }

    fn send_if_room(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        self.enqueue(peer, frames, SendMode::IfRoom)
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

    fn shm_stats(&self) -> Option<Arc<crate::van::stats::ShmStats>> {
        Some(self.shm.stats())
    }

    fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.drain.stop();
        let links: Vec<_> = self.peers.lock().drain().map(|(_, l)| l).collect();
        for link in links {
            // everything queued, then a half-close: the last messages reach the peer
            // before it sees the end of the stream
            if link.write_out(link.lock()).is_ok() {
                if let Some(w) = link.lock().stream.take() {
                    let _ = w.shutdown(Shutdown::Write);
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
        *self.local_listener.lock() = None;
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
        let creds = sec.credentials(crate::tls::CertRole::Worker).unwrap();
        let t = TcpTransport::with_security(&sec, creds);
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
        rx.start(Arc::new(move |f: Vec<Bytes>, _| tx_frames.send(f[0].clone()).unwrap()))
            .unwrap();
        let tx = TcpTransport::new();
        tx.connect(1, "127.0.0.1", port).unwrap();
        // (the connection open: a lazy message waiting for one is written with it)
        tx.send(1, vec![Bytes::from_static(b"0")]).unwrap();
        assert_eq!(got.recv_timeout(Duration::from_secs(5)).unwrap(), &b"0"[..]);
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

    /// A receiving transport handing each message's first frame to the channel, and a
    /// sending one whose node 1 is the receiver (TCP only, no Unix socket).
    fn linked_pair() -> (TcpTransport, TcpTransport, crossbeam_channel::Receiver<Bytes>) {
        let rx = TcpTransport::new().with_local_socket(false);
        let port = rx.bind("127.0.0.1", 0).unwrap();
        let (tx_frames, got) = crossbeam_channel::unbounded();
        rx.start(Arc::new(move |f: Vec<Bytes>, _| tx_frames.send(f[0].clone()).unwrap()))
            .unwrap();
        let tx = TcpTransport::new().with_local_socket(false);
        tx.connect(1, "127.0.0.1", port).unwrap();
        (rx, tx, got)
    }

    /// A send that must not wait returns at once, even to a peer that takes long to
    /// connect to; what is sent meanwhile waits, in order, and is written once the
    /// connection is open. A peer that cannot be reached loses what waited, and for a
    /// while such sends fail at once with the error.
    #[test]
    fn sends_that_must_not_wait_queue_while_the_connection_opens() {
        let (rx, tx, got) = linked_pair();
        for m in [&b"a"[..], b"b", b"c"] {
            tx.send_nowait(1, vec![Bytes::from_static(m)]).unwrap();
        }
        tx.send(1, vec![Bytes::from_static(b"d")]).unwrap();
        for m in [&b"a"[..], b"b", b"c", b"d"] {
            assert_eq!(got.recv_timeout(Duration::from_secs(5)).unwrap(), m);
        }
        // nobody listens there: the messages are lost, then sends fail at once
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_port = dead.local_addr().unwrap().port();
        drop(dead);
        tx.connect(2, "127.0.0.1", dead_port).unwrap();
        let t = std::time::Instant::now();
        tx.send_nowait(2, vec![Bytes::from_static(b"x")]).unwrap();
        assert!(t.elapsed() < Duration::from_millis(100), "did not wait");
        let failed = (0..100).find_map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            tx.send_nowait(2, vec![Bytes::from_static(b"y")]).err()
        });
        assert_eq!(failed.map(|e| e.kind()), Some(io::ErrorKind::ConnectionRefused));
        tx.close();
        rx.close();
    }

    /// A send that must not wait for the peer never does: to a peer that stopped
    /// reading it is dropped (`WouldBlock`) once the socket holds bytes back; what was
    /// taken arrives, in order, once the peer reads again, and sends go through again.
    #[test]
    fn sends_if_room_are_dropped_not_held_behind_a_peer_that_stopped_reading() {
        let rx = TcpTransport::new().with_local_socket(false);
        let port = rx.bind("127.0.0.1", 0).unwrap();
        let (tx_frames, got) = crossbeam_channel::unbounded();
        let gate = Arc::new(parking_lot::Mutex::new(()));
        let closed = gate.lock();
        let g = Arc::clone(&gate);
        rx.start(Arc::new(move |f: Vec<Bytes>, _| {
            let _open = g.lock();
            tx_frames.send(f[0].clone()).unwrap();
        }))
        .unwrap();
        let tx = Arc::new(TcpTransport::new().with_local_socket(false));
        tx.connect(1, "127.0.0.1", port).unwrap();
        let frame = |i: u8| Bytes::from(vec![i; 256 << 10]);
        // the first message opens the connection; the reader stops at it
        tx.send(1, vec![frame(0)]).unwrap();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        let t = Arc::clone(&tx);
        std::thread::spawn(move || {
            let mut taken = Vec::new();
            for i in 1..=250u8 {
                match t.send_if_room(1, vec![frame(i)]) {
                    Ok(_) => taken.push(i),
                    Err(e) => {
                        let _ = done_tx.send(Ok((taken, e.kind())));
                        return;
                    }
                }
            }
            let _ = done_tx.send(Err(taken.len()));
        });
        let (taken, kind) = done
            .recv_timeout(Duration::from_secs(30))
            .expect("a send waited for the peer")
            .unwrap_or_else(|n| panic!("{n} sends of 256 KB all taken by a peer that reads nothing"));
        assert_eq!(kind, io::ErrorKind::WouldBlock);
        drop(closed);
        for i in std::iter::once(0).chain(taken) {
            assert_eq!(got.recv_timeout(Duration::from_secs(10)).unwrap()[0], i);
        }
        let again = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            tx.send_if_room(1, vec![frame(251)]).is_ok()
        });
        assert!(again, "the link never took sends again");
        assert_eq!(got.recv_timeout(Duration::from_secs(10)).unwrap()[0], 251);
        tx.close();
        rx.close();
    }

    /// More than the bound of bytes sent while the connection opens: the sender past
    /// it waits for the opening instead of losing its message, and all arrive in order.
    #[test]
    fn a_burst_past_the_opening_bound_waits_and_loses_nothing() {
        let (rx, tx, got) = linked_pair();
        let bursts: Vec<Bytes> = (1..=3u8).map(|b| Bytes::from(vec![b; 40 << 20])).collect();
        for f in bursts {
            tx.send_nowait(1, vec![f]).unwrap();
        }
        for b in 1..=3u8 {
            let f = got.recv_timeout(Duration::from_secs(20)).unwrap();
            assert_eq!((f.len(), f[0], f[f.len() - 1]), (40 << 20, b, b));
        }
        tx.close();
        rx.close();
    }

    /// A link moved to another key keeps its open connection: what is sent under the
    /// new key goes over it (no second connection, so no second handshake), and the old
    /// key is gone.
    #[test]
    fn a_rekeyed_link_keeps_its_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let tx = TcpTransport::new().with_local_socket(false);
        tx.connect(-70_001, "127.0.0.1", port).unwrap();
        tx.send(-70_001, vec![Bytes::from_static(b"welcome")]).unwrap();
        let (mut conn, _) = l.accept().unwrap();
        assert!(tx.rekey(-70_001, 8));
        assert!(!tx.is_connected(-70_001) && tx.is_connected(8));
        assert!(!tx.rekey(-70_001, 9), "the old key is gone");
        tx.send(8, vec![Bytes::from_static(b"table")]).unwrap();
        let limits = crate::config::Limits::default();
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let first = super::super::read::read_message(&mut conn, &limits).unwrap().unwrap();
        let second = super::super::read::read_message(&mut conn, &limits).unwrap().unwrap();
        assert_eq!((&first[0][..], &second[0][..]), (&b"welcome"[..], &b"table"[..]));
        l.set_nonblocking(true).unwrap();
        let e = l.accept().expect_err("no second connection");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        tx.close();
    }
}
