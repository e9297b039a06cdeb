//! Raw-socket floors for `psrs bench --compare-raw`: the same two processes as the KV
//! benchmark (a server and a worker) talk over a plain connection with the least
//! possible protocol, so the KV figures can be read as a fraction of what the kernel
//! and the wire give. The connection is of the kind the TCP van's link between them
//! is: a Unix socket when the two are on one host and `PS_LOCAL_SOCKET` is on (see
//! [`ps_core::van::tcp::stream`]), TCP otherwise.
//!
//! Protocol, one request after another on one connection: a 9-byte header (`op`:
//! u8, `size`: u64 little-endian) and, for [`Op::Push`], `size` bytes. The server
//! answers [`Op::Ping`] with `size` bytes (a ping-pong when the client sends nothing
//! else), [`Op::Push`] with one byte once it has read the payload, and [`Op::Pull`]
//! with `size` bytes. Nodelay on both ends, as the vans set it.

use super::modes::Figure;
use ps_core::van::tcp::stream::{self, Stream};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Largest payload the raw server accepts (a bad header must not allocate without bound).
pub const MAX_RAW_SIZE: u64 = 1 << 30;

/// A raw request kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// Answer `size` bytes, nothing sent (with `size` = the request size, a ping-pong).
    Ping = 1,
    /// `size` bytes follow; answer one byte once read.
    Push = 2,
    /// Answer `size` bytes.
    Pull = 3,
}

impl Op {
    fn from_u8(b: u8) -> Option<Op> {
        match b {
            1 => Some(Op::Ping),
            2 => Some(Op::Push),
            3 => Some(Op::Pull),
            _ => None,
        }
    }
}

/// Binds an ephemeral port on `host` (and, if `local`, the Unix socket standing for
/// it) and serves every connection on its own thread until the process exits.
/// Returns the port.
pub fn spawn_server(host: &str, local: bool) -> io::Result<u16> {
    let listener = TcpListener::bind((host, 0))?;
    let addr = listener.local_addr()?;
    if local {
        let unix = stream::listen_local(addr)?;
        std::thread::Builder::new()
            .name("raw-bench-unix".into())
            .spawn(move || {
                for conn in unix.incoming().flatten() {
                    serve_on_thread(Stream::Unix(conn, stream::accepted_local()));
                }
            })?;
    }
    std::thread::Builder::new().name("raw-bench".into()).spawn(move || {
        for conn in listener.incoming().flatten() {
            serve_on_thread(Stream::Tcp(conn));
        }
    })?;
    Ok(addr.port())
}

fn serve_on_thread(conn: Stream) {
    let _ = std::thread::Builder::new()
        .name("raw-bench-conn".into())
        .spawn(move || {
            if let Err(e) = serve(conn) {
                log::debug!("raw bench connection ended: {e}");
            }
        });
}

/// Serves one connection until the peer closes it or sends a bad header.
fn serve(mut s: Stream) -> io::Result<()> {
    s.tune();
    let mut buf = Vec::new();
    let zeros = vec![0u8; 1 << 20];
    loop {
        let mut head = [0u8; 9];
        if let Err(e) = s.read_exact(&mut head) {
            return if e.kind() == io::ErrorKind::UnexpectedEof {
                Ok(())
            } else {
                Err(e)
            };
        }
        let op = Op::from_u8(head[0]).ok_or_else(|| io::Error::other(format!("bad raw op {}", head[0])))?;
        let size = u64::from_le_bytes(head[1..].try_into().expect("8 bytes"));
        if size > MAX_RAW_SIZE {
            return Err(io::Error::other(format!("raw size {size} over {MAX_RAW_SIZE}")));
        }
        let size = size as usize;
        match op {
            Op::Push => {
                buf.resize(size, 0);
                s.read_exact(&mut buf)?;
                s.write_all(&[1])?;
            }
            Op::Ping | Op::Pull => {
                let mut left = size;
                while left > 0 {
                    let n = left.min(zeros.len());
                    s.write_all(&zeros[..n])?;
                    left -= n;
                }
            }
        }
    }
}

/// A connection to a raw server.
pub struct RawClient {
    s: Stream,
    buf: Vec<u8>,
}

impl RawClient {
    /// Connects to the raw server at `addr` (host, port): through its Unix socket if
    /// `local` and it has one, over TCP otherwise.
    pub fn connect(addr: impl ToSocketAddrs, local: bool) -> io::Result<RawClient> {
        let sa: SocketAddr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let s = stream::connect(sa, local, None)?;
        Ok(RawClient { s, buf: Vec::new() })
    }

    /// True if the connection is a Unix socket.
    pub fn is_local(&self) -> bool {
        self.s.is_local()
    }

    fn send(&mut self, op: Op, size: usize, payload: &[u8]) -> io::Result<()> {
        let mut head = [0u8; 9];
        head[0] = op as u8;
        head[1..].copy_from_slice(&(size as u64).to_le_bytes());
        if payload.is_empty() {
            self.s.write_all(&head)
        } else {
            // one write for header + small payloads, as a van's vectored write would
            let bufs = [io::IoSlice::new(&head), io::IoSlice::new(payload)];
            let n = self.s.write_vectored(&bufs)?;
            if n < head.len() {
                self.s.write_all(&head[n..])?;
                self.s.write_all(payload)
            } else {
                self.s.write_all(&payload[n - head.len()..])
            }
        }
    }

    fn recv(&mut self, size: usize) -> io::Result<()> {
        self.buf.resize(size, 0);
        self.s.read_exact(&mut self.buf)
    }

    /// A waited round trip of `size` bytes each way, repeated for `duration`: the floor
    /// for the KV latency mode (which waits a push, then a pull).
    pub fn ping_pong(&mut self, size: usize, duration: Duration) -> io::Result<Figure> {
        let payload = vec![1u8; size];
        let start = Instant::now();
        let mut ops = 0u64;
        while start.elapsed() < duration {
            self.send(Op::Push, size, &payload)?;
            self.recv(1)?;
            self.send(Op::Ping, size, &[])?;
            self.recv(size)?;
            ops += 1;
        }
        Ok(figure("raw-latency", size, ops * 2, start, ops * 2 * size as u64))
    }

    /// Pushes (`pull` false) or pulls of `size` bytes with `inflight` outstanding for
    /// `duration`: the floor for the KV push-only / pull-only modes.
    pub fn stream(&mut self, pull: bool, size: usize, inflight: usize, duration: Duration) -> io::Result<Figure> {
        let payload = if pull { Vec::new() } else { vec![1u8; size] };
        let (op, answer) = if pull { (Op::Pull, size) } else { (Op::Push, 1) };
        let start = Instant::now();
        let mut window = VecDeque::new();
        let mut ops = 0u64;
        while start.elapsed() < duration || !window.is_empty() {
            if start.elapsed() < duration && window.len() < inflight.max(1) {
                self.send(op, size, &payload)?;
                window.push_back(());
                continue;
            }
            window.pop_front();
            self.recv(answer)?;
            ops += 1;
        }
        let mode = if pull { "raw-pull" } else { "raw-push" };
        Ok(figure(mode, size, ops, start, ops * size as u64))
    }
}

fn figure(mode: &'static str, size: usize, ops: u64, start: Instant, bytes: u64) -> Figure {
    Figure {
        mode,
        size,
        ops,
        secs: start.elapsed().as_secs_f64(),
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;

    #[test]
    fn raw_server_answers_each_op_with_the_promised_bytes() {
        for local in [false, true] {
            let port = spawn_server("127.0.0.1", local).expect("bind");
            let mut c = RawClient::connect(("127.0.0.1", port), local).expect("connect");
            assert_eq!(c.is_local(), local, "a Unix socket exactly when asked for");
            exercise(&mut c);
        }
    }

    fn exercise(c: &mut RawClient) {
        let d = Duration::from_millis(20);
        let f = c.ping_pong(300, d).expect("ping-pong");
        assert!(f.ops >= 2 && f.bytes == f.ops * 300);
        let f = c.stream(false, 70_000, 4, d).expect("push");
        assert!(f.ops >= 1 && f.bytes == f.ops * 70_000);
        let f = c.stream(true, 5000, 4, d).expect("pull");
        assert!(f.ops >= 1 && f.bytes == f.ops * 5000);
    }

    #[test]
    fn raw_server_drops_a_bad_header_without_answering() {
        let port = spawn_server("127.0.0.1", false).expect("bind");
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let mut head = [9u8; 9];
        s.write_all(&head).expect("write");
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).expect("read"), 0, "closed, nothing answered");
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        head[0] = Op::Push as u8;
        head[1..].copy_from_slice(&u64::MAX.to_le_bytes());
        s.write_all(&head).expect("write");
        assert_eq!(s.read(&mut b).expect("read"), 0, "oversized push refused");
    }
}
