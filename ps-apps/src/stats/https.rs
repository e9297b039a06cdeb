//! HTTPS in front of tiny_http (whose own TLS support is an old rustls without client
//! certificates): a listener on the public address runs each connection's TLS 1.3
//! handshake with rustls, then relays the plaintext to one of two tiny_http servers
//! listening on Unix sockets in a directory only this user can enter: one for
//! callers that presented a client certificate of the cluster's CA naming `client` or
//! `scheduler` (certified), one for the rest (who need the bearer token). So the
//! request handlers know how the caller authenticated without parsing HTTP here.
//!
//! Limits: a handshake must finish within the handshake timeout (`PS_HANDSHAKE_TIMEOUT`,
//! a byte at a time does not extend it), at most [`MAX_HANDSHAKES_PER_IP`] handshakes
//! run at once per address and [`MAX_CONNECTIONS`] connections in all; an idle
//! connection is closed after [`IDLE`].

use parking_lot::Mutex;
use rustls::{ServerConfig, ServerConnection};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Handshakes in progress at once from one address.
pub const MAX_HANDSHAKES_PER_IP: usize = 8;
/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 256;
/// An established connection silent this long is closed.
pub const IDLE: Duration = Duration::from_secs(120);
/// A write to a client that takes nothing for this long fails.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the front relays to.
#[derive(Clone)]
pub struct Backends {
    /// The tiny_http socket for certified callers.
    pub certified: PathBuf,
    /// The tiny_http socket for the others.
    pub anonymous: PathBuf,
}

/// A running HTTPS front; stops accepting when dropped (connections being served end
/// on their own).
pub struct Front {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    cfg: Arc<ServerConfig>,
    backends: Backends,
    handshake_timeout: Duration,
    handshaking: Mutex<HashMap<IpAddr, usize>>,
    open: AtomicUsize,
}

impl Front {
    /// Serves HTTPS on `listener` with `cfg`, relaying to `backends`.
    pub fn start(
        listener: TcpListener,
        cfg: Arc<ServerConfig>,
        backends: Backends,
        handshake_timeout: Duration,
    ) -> io::Result<Front> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            cfg,
            backends,
            handshake_timeout,
            handshaking: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
        });
        let s2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("https-accept".into())
            .spawn(move || accept_loop(listener, shared, s2))?;
        Ok(Front {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let (sock, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                log::warn!("HTTPS accept: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if shared.open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            log::warn!("HTTPS connection from {peer} refused: {MAX_CONNECTIONS} connections are open");
            continue;
        }
        {
            let mut h = shared.handshaking.lock();
            let n = h.entry(peer.ip()).or_insert(0);
            if *n >= MAX_HANDSHAKES_PER_IP {
                log::warn!(
                    "HTTPS connection from {peer} refused: {MAX_HANDSHAKES_PER_IP} handshakes from it are under way"
                );
                continue;
            }
            *n += 1;
        }
        shared.open.fetch_add(1, Ordering::Relaxed);
        let sh = Arc::clone(&shared);
        let spawned = std::thread::Builder::new().name("https-conn".into()).spawn(move || {
            if let Err(e) = serve(&sh, sock, peer) {
                log::warn!("HTTPS connection from {peer}: {e}");
            }
            sh.open.fetch_sub(1, Ordering::Relaxed);
        });
        if let Err(e) = spawned {
            log::warn!("HTTPS connection from {peer} dropped: {e}");
            shared.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Frees the connection's handshake slot when dropped.
struct Slot<'a>(&'a Shared, IpAddr);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut h = self.0.handshaking.lock();
        if let Some(n) = h.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                h.remove(&self.1);
            }
        }
    }
}

fn serve(sh: &Shared, sock: TcpStream, peer: SocketAddr) -> io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_nodelay(true)?;
    let slot = Slot(sh, peer.ip());
    let mut conn = ServerConnection::new(Arc::clone(&sh.cfg)).map_err(io::Error::other)?;
    handshake(&mut conn, &sock, sh.handshake_timeout)?;
    drop(slot);
    let roles = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| ps_core::tls::peer::roles(c).unwrap_or_default());
    let certified = roles.as_ref().is_some_and(super::access::certified);
    let path = if certified {
        &sh.backends.certified
    } else {
        &sh.backends.anonymous
    };
    let local = UnixStream::connect(path)?;
    relay(conn, sock, local)
}

/// Runs the handshake to its end within `limit` in all.
fn handshake(conn: &mut ServerConnection, mut sock: &TcpStream, limit: Duration) -> io::Result<()> {
    let deadline = Instant::now() + limit;
    while conn.is_handshaking() {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, format!("no TLS handshake within {limit:?}")))?;
        sock.set_read_timeout(Some(left))?;
        sock.set_write_timeout(Some(left))?;
        if conn.wants_write() {
            conn.write_tls(&mut sock)?;
            continue;
        }
        if conn.read_tls(&mut sock)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed during the TLS handshake",
            ));
        }
        if let Err(e) = conn.process_new_packets() {
            // the alert rustls queued tells the peer why
            let _ = conn.write_tls(&mut sock);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS handshake refused: {e}"),
            ));
        }
    }
    while conn.wants_write() {
        conn.write_tls(&mut sock)?;
    }
    Ok(())
}

/// Relays plaintext between the TLS connection and the local server until either
/// side ends. Records are written to the socket under the connection's lock, so
/// they leave in the order rustls sealed them.
fn relay(conn: ServerConnection, sock: TcpStream, local: UnixStream) -> io::Result<()> {
    sock.set_read_timeout(Some(IDLE))?;
    sock.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let conn = Arc::new(Mutex::new(conn));
    let (c2, mut sock_w, mut local_r) = (Arc::clone(&conn), sock.try_clone()?, local.try_clone()?);
    let back = std::thread::Builder::new().name("https-back".into()).spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = local_r.read(&mut buf).unwrap_or(0);
            let mut c = c2.lock();
            if n == 0 {
                c.send_close_notify();
            } else if c.writer().write_all(&buf[..n]).is_err() {
                break;
            }
            let mut failed = false;
            while c.wants_write() && !failed {
                failed = c.write_tls(&mut sock_w).is_err();
            }
            if n == 0 || failed {
                let _ = sock_w.shutdown(Shutdown::Write);
                break;
            }
        }
    })?;
    let result = forward(&conn, &sock, &local);
    let _ = local.shutdown(Shutdown::Both);
    let _ = back.join();
    let _ = sock.shutdown(Shutdown::Both);
    result
}

/// Client → local server. Records that came with the client's last handshake message
/// (a request sent at once) are already decrypted in `conn`: they go first.
fn forward(conn: &Mutex<ServerConnection>, mut sock: &TcpStream, mut local: &UnixStream) -> io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut plain = Vec::new();
    {
        let mut c = conn.lock();
        let state = c
            .process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let mut chunk = vec![0u8; state.plaintext_bytes_to_read()];
        c.reader().read_exact(&mut chunk)?;
        local.write_all(&chunk)?;
        if state.peer_has_closed() {
            return Ok(());
        }
    }
    loop {
        let n = match sock.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut closed = false;
        {
            let mut c = conn.lock();
            let mut rd = &buf[..n];
            while !rd.is_empty() {
                c.read_tls(&mut rd)?;
                let state = c.process_new_packets().map_err(|e| {
                    let _ = c.write_tls(&mut sock);
                    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
                })?;
                closed |= state.peer_has_closed();
                let mut chunk = vec![0u8; state.plaintext_bytes_to_read()];
                c.reader().read_exact(&mut chunk)?;
                plain.extend_from_slice(&chunk);
            }
            while c.wants_write() {
                c.write_tls(&mut sock)?;
            }
        }
        local.write_all(&plain)?;
        plain.clear();
        if closed {
            return Ok(());
        }
    }
}
