//! Strangers at the HTTP API's door, for its benchmark (`psrs bench-api`) and its
//! tests: a connection that sends a header line without end, and many slow
//! connections (a byte every 2 s, at the TLS handshake and after it) reopened as soon
//! as the server closes them. Plus the figures both report: a process's resident
//! memory and latency percentiles.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A connection to the API: plain TCP, or TLS without a client certificate.
pub enum Conn {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS, the handshake done.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    /// Opens a connection to `addr` (`HOST:PORT`); with `tls`, runs the handshake
    /// (the server checked as `tls` says; no client certificate unless it has one).
    pub fn open(addr: &str, tls: Option<&Arc<rustls::ClientConfig>>) -> io::Result<Conn> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(20)))?;
        let Some(cfg) = tls else {
            return Ok(Conn::Plain(tcp));
        };
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
        let conn = rustls::ClientConnection::new(Arc::clone(cfg), ps_core::tls::server_name(host))
            .map_err(io::Error::other)?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        while s.conn.is_handshaking() {
            s.conn.complete_io(&mut s.sock)?;
        }
        Ok(Conn::Tls(Box::new(s)))
    }

    fn socket(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }

    /// Sets the socket's write timeout.
    pub fn set_write_timeout(&self, d: Duration) -> io::Result<()> {
        self.socket().set_write_timeout(Some(d))
    }

    /// Whatever the server answered (until it closed, an error, or the read timeout).
    pub fn answer(&mut self) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// Sends `GET / HTTP/1.1`, a Host, then one header value without end in writes of
/// `chunk` bytes `pause` apart, until the server refuses (a write fails because the
/// server closed or reset the connection) or `most` bytes were sent. The bytes the
/// client's kernel took before the refusal (these include what sat in the two
/// kernels' socket buffers when the server closed), or None: never refused, because
/// all `most` bytes went out or a write stalled for 5 s on a connection still open.
pub fn flood(c: &mut Conn, chunk: usize, pause: Duration, most: usize) -> Option<usize> {
    let _ = c.set_write_timeout(Duration::from_secs(5));
    let refused = |e: io::Error| !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut);
    let head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: ";
    if let Err(e) = c.write_all(head).and_then(|()| c.flush()) {
        return refused(e).then_some(0);
    }
    let data = vec![b'a'; chunk.max(1)];
    let mut sent = head.len();
    while sent < most {
        if let Err(e) = c.write_all(&data).and_then(|()| c.flush()) {
            return refused(e).then_some(sent);
        }
        sent += data.len();
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    None
}

/// Keeps `n` slow connections open to `addr` until `stop`, each sending one byte every
/// 2 s and opened again as soon as the server closes it. With `tls`, half are stuck in
/// the handshake (a ClientHello's first bytes) and half have finished it and send an
/// HTTP header; without, all send a header. Returns the connections opened in all.
pub fn slow_connections(addr: &str, tls: Option<&Arc<rustls::ClientConfig>>, n: usize, stop: &AtomicBool) -> usize {
    enum Slow {
        Raw(TcpStream, usize),
        Open(Box<Conn>, usize),
        Closed(bool),
    }
    // the start of a real ClientHello record, sent slowly (never finished)
    let hello = [0x16u8, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    let header = b"GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let open = |raw: bool| -> Slow {
        if raw {
            match TcpStream::connect(addr) {
                Ok(s) => Slow::Raw(s, 0),
                Err(_) => Slow::Closed(true),
            }
        } else {
            match Conn::open(addr, tls) {
                Ok(c) => Slow::Open(Box::new(c), 0),
                Err(_) => Slow::Closed(false),
            }
        }
    };
    let mut conns: Vec<Slow> = (0..n).map(|i| open(tls.is_some() && i % 2 == 0)).collect();
    let mut opened = n;
    while !stop.load(Ordering::Relaxed) {
        for c in conns.iter_mut() {
            let raw = match c {
                Slow::Raw(s, i) => {
                    let ok = s.write_all(&hello[*i % hello.len()..][..1]).is_ok();
                    *i += 1;
                    if ok {
                        continue;
                    }
                    true
                }
                Slow::Open(s, i) => {
                    let ok = s
                        .write_all(&header[*i % header.len()..][..1])
                        .and_then(|()| s.flush())
                        .is_ok();
                    *i += 1;
                    if ok {
                        continue;
                    }
                    false
                }
                Slow::Closed(raw) => *raw,
            };
            *c = open(raw);
            opened += 1;
        }
        for _ in 0..20 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    opened
}

/// A process's resident memory in KB (`VmRSS` of /proc/PID/status).
pub fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Latency percentiles of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    /// Requests measured.
    pub n: usize,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
}

/// The percentiles of `micros` (each request's latency in microseconds; nearest
/// rank); zeros for none.
pub fn percentiles(mut micros: Vec<u64>) -> Percentiles {
    micros.sort_unstable();
    let n = micros.len();
    let at = |q: f64| {
        if n == 0 {
            return 0.0;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        micros[rank - 1] as f64 / 1000.0
    };
    Percentiles {
        n,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let p = percentiles((1..=100).map(|ms| ms * 1000).rev().collect());
        assert_eq!((p.n, p.p50_ms, p.p99_ms, p.max_ms), (100, 50.0, 99.0, 100.0));
        let p = percentiles(vec![1500]);
        assert_eq!((p.p50_ms, p.p99_ms, p.max_ms), (1.5, 1.5, 1.5));
        assert_eq!(percentiles(Vec::new()).n, 0);
    }

    #[test]
    fn this_process_has_a_resident_size() {
        assert!(rss_kb(std::process::id()).is_some_and(|kb| kb > 0));
        assert_eq!(rss_kb(u32::MAX), None);
    }
}
