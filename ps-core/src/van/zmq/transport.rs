//! The ZMQ transport, ps-lite's socket pattern: one ROUTER socket bound for receiving,
//! one DEALER socket per peer for sending, whose identity names this node
//! ([`super::identity`]; the ROUTER puts the sender's identity first in each message
//! it receives), opened at the first send to that peer (a node learns the whole table
//! at once but talks to few of its peers: opening a socket to all of them made a
//! 1+32+96 local cluster spend seconds in 16k ZMTP handshakes before its barrier).
//! Messages are ps-lite's frames ([`super::codec`]). Data frames go out and come in
//! without copies: outgoing `Bytes` are handed to `zmq_msg_init_data` with a free
//! function that drops them, incoming `zmq::Message`s become `Bytes` that own them.

use super::codec;
use super::identity::identity;
use crate::config::Limits;
use crate::message::{Message, WireError};
use crate::node::EMPTY_ID;
use crate::van::transport::{Deliver, PeerKind, Transport};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::io;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A peer's endpoint and, once something was sent to it, its DEALER socket.
struct Peer {
    endpoint: String,
    sock: Option<Arc<Mutex<zmq::Socket>>>,
}

/// ZMQ implementation of [`Transport`].
pub struct ZmqTransport {
    ctx: zmq::Context,
    receiver: Arc<Mutex<Option<zmq::Socket>>>,
    senders: Mutex<HashMap<i32, Peer>>,
    /// Peers known to be ps-lite processes (others are shown psrs's identity).
    kinds: Mutex<HashMap<i32, PeerKind>>,
    /// This node's id ([`EMPTY_ID`] before it has one) and incarnation.
    local: RwLock<(i32, u64)>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    limits: Limits,
}

fn io_err(e: zmq::Error) -> io::Error {
    io::Error::other(e.to_string())
}

struct ZmqBytes(zmq::Message);

impl AsRef<[u8]> for ZmqBytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

unsafe extern "C" fn drop_bytes(_data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the Box<Bytes> leaked in `send_frame`; ZMQ calls this once.
    drop(unsafe { Box::from_raw(hint as *mut Bytes) });
}

/// Sends one frame without copying it.
fn send_frame(sock: &mut zmq::Socket, frame: Bytes, more: bool) -> io::Result<()> {
    let flags = if more { zmq::SNDMORE } else { 0 };
    if frame.len() < 64 {
        return sock.send(&frame[..], flags).map_err(io_err);
    }
    let len = frame.len();
    let ptr = frame.as_ptr() as *mut c_void;
    let hint = Box::into_raw(Box::new(frame)) as *mut c_void;
    let mut msg = std::mem::MaybeUninit::<zmq_sys::zmq_msg_t>::uninit();
    // SAFETY: `ptr`/`len` stay valid until ZMQ calls `drop_bytes` with `hint`, which
    // owns the Bytes. On failure of init the Box is reclaimed here.
    unsafe {
        if zmq_sys::zmq_msg_init_data(msg.as_mut_ptr(), ptr, len, Some(drop_bytes), hint) != 0 {
            drop(Box::from_raw(hint as *mut Bytes));
            return Err(io::Error::other("zmq_msg_init_data failed"));
        }
        let mut msg = msg.assume_init();
        if zmq_sys::zmq_msg_send(&mut msg, sock.as_mut_ptr(), flags) < 0 {
            let e = io::Error::last_os_error();
            zmq_sys::zmq_msg_close(&mut msg);
            return Err(e);
        }
    }
    Ok(())
}

impl ZmqTransport {
    /// A transport with its own ZMQ context and the default limits.
    pub fn new() -> ZmqTransport {
        ZmqTransport::with_limits(&Limits::default())
    }

    /// A transport with its own ZMQ context that enforces `limits` on what it
    /// receives: a frame above `PS_MAX_MESSAGE_BYTES` disconnects its sender
    /// (`ZMQ_MAXMSGSIZE`, checked by libzmq before it allocates), and a message with
    /// too many frames or bytes in all is logged and dropped.
    pub fn with_limits(limits: &Limits) -> ZmqTransport {
        ZmqTransport {
            ctx: zmq::Context::new(),
            receiver: Arc::new(Mutex::new(None)),
            senders: Mutex::new(HashMap::new()),
            kinds: Mutex::new(HashMap::new()),
            local: RwLock::new((EMPTY_ID, 0)),
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
            limits: limits.clone(),
        }
    }
}

/// Logs and drops the messages of `batch` (each led by its sender's identity, which the
/// limits do not count) that break `limits`.
fn within_limits(batch: Vec<Vec<Bytes>>, limits: &Limits) -> impl Iterator<Item = Vec<Bytes>> + '_ {
    batch.into_iter().filter(move |frames| {
        let frames = frames.get(1..).unwrap_or_default();
        let bytes = frames.iter().map(|f| f.len() as u64).sum();
        match limits.check_message(frames.len(), bytes) {
            Ok(()) => true,
            Err(e) => {
                log::warn!("dropped a message: {e}");
                false
            }
        }
    })
}

/// Waits at most `timeout` for messages and returns those ready (at most 64), each
/// as its frames, the sender's identity first.
fn recv(receiver: &Mutex<Option<zmq::Socket>>, timeout: Duration) -> io::Result<Vec<Vec<Bytes>>> {
    let guard = receiver.lock();
    let sock = guard
        .as_ref()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "transport not bound"))?;
    if sock.poll(zmq::POLLIN, timeout.as_millis() as i64).map_err(io_err)? == 0 {
        return Ok(Vec::new());
    }
    let mut batch = Vec::new();
    while batch.len() < 64 {
        let first = match sock.recv_msg(zmq::DONTWAIT) {
            Ok(m) => m,
            Err(zmq::Error::EAGAIN) => break,
            Err(e) => return Err(io_err(e)),
        };
        let mut frames = vec![Bytes::from_owner(ZmqBytes(first))];
        while sock.get_rcvmore().map_err(io_err)? {
            frames.push(Bytes::from_owner(ZmqBytes(sock.recv_msg(0).map_err(io_err)?)));
        }
        batch.push(frames);
    }
    Ok(batch)
}

impl ZmqTransport {
    /// A DEALER socket connected (asynchronously) to `endpoint`, showing the identity
    /// of this node to a peer of `kind` (none while this node has no id).
    fn open(&self, endpoint: &str, kind: PeerKind) -> io::Result<zmq::Socket> {
        let sock = self.ctx.socket(zmq::DEALER).map_err(io_err)?;
        let (id, incarnation) = *self.local.read();
        if let Some(name) = identity(id, incarnation, kind) {
            sock.set_identity(&name).map_err(io_err)?;
        }
        // Long enough for the last messages (barrier releases, acks) to leave on close.
        sock.set_linger(2000).map_err(io_err)?;
        sock.set_sndhwm(0).map_err(io_err)?;
        sock.set_sndtimeo(30_000).map_err(io_err)?;
        sock.set_ipv6(true).map_err(io_err)?;
        // A peer not listening yet (a scheduler starting with its nodes) is retried
        // after 2 ms, backing off to 1 s (ZMQ's default is a fixed 100 ms).
        sock.set_reconnect_ivl(2).map_err(io_err)?;
        sock.set_reconnect_ivl_max(1000).map_err(io_err)?;
        sock.connect(endpoint)
            .map_err(|e| io::Error::other(format!("cannot connect to {endpoint}: {e}")))?;
        Ok(sock)
    }
}

impl Default for ZmqTransport {
    fn default() -> Self {
        ZmqTransport::new()
    }
}

impl Transport for ZmqTransport {
    fn bind(&self, host: &str, port: u16) -> io::Result<u16> {
        let sock = self.ctx.socket(zmq::ROUTER).map_err(io_err)?;
        sock.set_linger(0).map_err(io_err)?;
        sock.set_rcvhwm(0).map_err(io_err)?;
        sock.set_ipv6(true).map_err(io_err)?;
        // a process connecting again under its identity (a new socket to this node
        // while its last one still lingers) takes the identity over; two processes
        // never share one (psrs identities carry the incarnation)
        sock.set_router_handover(true).map_err(io_err)?;
        sock.set_maxmsgsize(i64::try_from(self.limits.max_message_bytes).unwrap_or(i64::MAX))
            .map_err(io_err)?;
        let endpoint = if port == 0 {
            let hp = crate::addr::host_port(host, 0);
            format!("tcp://{}:*", hp.strip_suffix(":0").unwrap_or(&hp))
        } else {
            format!("tcp://{}", crate::addr::host_port(host, port))
        };
        sock.bind(&endpoint)
            .map_err(|e| io::Error::other(format!("cannot bind {endpoint}: {e}")))?;
        let last = sock
            .get_last_endpoint()
            .map_err(io_err)?
            .map_err(|_| io::Error::other("non-UTF-8 endpoint"))?;
        let bound = last
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| io::Error::other(format!("cannot read port of {last}")))?;
        *self.receiver.lock() = Some(sock);
        Ok(bound)
    }

    fn encode(&self, msg: &Message) -> Vec<Bytes> {
        codec::encode(msg)
    }

    fn decode(&self, frames: Vec<Bytes>) -> Result<Message, WireError> {
        codec::decode(frames, self.local.read().0)
    }

    fn speaks_pslite(&self) -> bool {
        true
    }

    /// Records this node's id: every socket is opened again, at its next send, with
    /// the identity naming it.
    fn set_local_node(&self, id: i32, incarnation: u64) {
        let mut local = self.local.write();
        if *local == (id, incarnation) {
            return;
        }
        *local = (id, incarnation);
        drop(local);
        for p in self.senders.lock().values_mut() {
            p.sock = None;
        }
    }

    /// Records what the peer under `key` is; an open socket to it is opened again if
    /// the identity it must show changed.
    fn set_peer_kind(&self, key: i32, kind: PeerKind) {
        let old = self.kinds.lock().insert(key, kind).unwrap_or_default();
        if old != kind {
            if let Some(p) = self.senders.lock().get_mut(&key) {
                p.sock = None;
            }
        }
    }

    /// Records where `peer` is; its socket is opened by the first send.
    fn connect(&self, peer: i32, host: &str, port: u16) -> io::Result<()> {
        let endpoint = format!("tcp://{}", crate::addr::host_port(host, port));
        self.senders.lock().insert(peer, Peer { endpoint, sock: None });
        Ok(())
    }

    fn disconnect(&self, peer: i32) {
        self.senders.lock().remove(&peer);
    }

    /// Moves the socket known as `from` to the key `to`: a scheduler that welcomed a
    /// registering node sends it the table and the barrier releases over the same
    /// socket. A second DEALER with this node's identity would make the peer's ROUTER
    /// hand the identity over to whichever connected last, dropping what was in flight
    /// on the other (a start-barrier release lost, the cluster hung). If the peer's
    /// kind under `to` asks for another identity, the socket is opened again.
    fn rekey(&self, from: i32, to: i32) -> bool {
        let mut senders = self.senders.lock();
        let Some(mut p) = senders.remove(&from) else {
            return false;
        };
        let kinds = self.kinds.lock();
        let kind = |k: i32| kinds.get(&k).copied().unwrap_or_default();
        if kind(from) != kind(to) {
            p.sock = None;
        }
        senders.insert(to, p);
        true
    }

    fn is_connected(&self, peer: i32) -> bool {
        self.senders.lock().contains_key(&peer)
    }

    fn send(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        let sock = {
            let mut senders = self.senders.lock();
            let p = senders
                .get_mut(&peer)
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, format!("no connection to node {peer}")))?;
            match &p.sock {
                Some(s) => Arc::clone(s),
                None => {
                    let kind = self.kinds.lock().get(&peer).copied().unwrap_or_default();
                    let s = Arc::new(Mutex::new(self.open(&p.endpoint, kind)?));
                    p.sock = Some(Arc::clone(&s));
                    s
                }
            }
        };
        let mut sock = sock.lock();
        let n = frames.len();
        let mut bytes = 0;
        for (i, f) in frames.into_iter().enumerate() {
            bytes += f.len();
            send_frame(&mut sock, f, i + 1 < n)?;
        }
        Ok(bytes)
    }

    fn start(&self, deliver: Deliver) -> io::Result<()> {
        let receiver = Arc::clone(&self.receiver);
        let stop = Arc::clone(&self.stop);
        let limits = self.limits.clone();
        let t = std::thread::Builder::new().name("zmq-recv".into()).spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match recv(&receiver, Duration::from_millis(50)) {
                    Ok(batch) => within_limits(batch, &limits).for_each(|frames| deliver(frames, None)),
                    Err(e) => {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        log::warn!("receive failed: {e}");
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        })?;
        *self.thread.lock() = Some(t);
        Ok(())
    }

    fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        self.senders.lock().clear();
        *self.receiver.lock() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A welcomed node's socket moves under its id: what is sent under either key goes
    /// over one DEALER (one identity, one connection at the peer), in order.
    #[test]
    fn a_rekeyed_peer_keeps_its_socket() {
        let ctx = zmq::Context::new();
        let router = ctx.socket(zmq::ROUTER).unwrap();
        router.set_rcvtimeo(5000).unwrap();
        router.bind("tcp://127.0.0.1:*").unwrap();
        let endpoint = router.get_last_endpoint().unwrap().unwrap();
        let port: u16 = endpoint.rsplit(':').next().unwrap().parse().unwrap();

        let tx = ZmqTransport::new();
        tx.set_local_node(1, 0xab);
        tx.connect(-70_001, "127.0.0.1", port).unwrap();
        tx.send(-70_001, vec![Bytes::from_static(b"welcome")]).unwrap();
        let before = tx.senders.lock()[&-70_001].sock.clone().unwrap();
        assert!(tx.rekey(-70_001, 8));
        assert!(!tx.is_connected(-70_001), "the old key is gone");
        assert!(!tx.rekey(-70_001, 9));
        let after = tx.senders.lock()[&8].sock.clone().unwrap();
        assert!(Arc::ptr_eq(&before, &after), "the same socket, not a second one");
        tx.send(8, vec![Bytes::from_static(b"table")]).unwrap();
        for want in [&b"welcome"[..], b"table"] {
            let m = router.recv_multipart(0).unwrap();
            assert_eq!((m[0].as_slice(), m[1].as_slice()), (&b"ps1:ab"[..], want));
        }
        tx.close();
    }
}
