//! One outgoing connection's bytes on their way out, handed to the socket without
//! ever blocking: what the kernel does not take now stays here, in order, for the
//! next attempt (by the sending thread once the socket is writable, or by the
//! transport's drain thread, [`super::drain`]). No thread that reads a socket may
//! block on a write: two nodes whose reader threads each waited for the other to read
//! would wait for ever (a worker's pushes one way, a server's answers and
//! acknowledgements the other, on a slow network).

use super::guard::Outgoing;
use bytes::{Buf, Bytes};
use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

/// A connection that takes no byte for this long while bytes wait is given up (its
/// messages are lost; the resender, when on, sends them again on a new connection).
const WRITE_STALL: Duration = Duration::from_secs(60);

/// At most this many buffers go to one `sendmsg`.
const MAX_IOV: usize = 128;

/// A TLS link seals at most this many bytes ahead of what the socket took: four full
/// records.
const SEAL_BYTES: usize = 64 << 10;

/// An open outgoing connection and the bytes it has not taken yet.
pub(super) struct Wire {
    conn: Outgoing,
    out: VecDeque<Bytes>,
    /// Since when the socket has taken nothing while bytes wait (None: it took the
    /// last bytes offered). No clock is read while the socket takes everything.
    full_since: Option<Instant>,
}

impl Wire {
    /// A connection with nothing waiting.
    pub(super) fn new(conn: Outgoing) -> Wire {
        Wire {
            conn,
            out: VecDeque::new(),
            full_since: None,
        }
    }

    /// The connection, for blocking use while nothing waits (the shared-memory offer).
    pub(super) fn conn(&mut self) -> &mut Outgoing {
        &mut self.conn
    }

    /// True while bytes wait for the socket (here, or as TLS records sealed inside
    /// the connection).
    pub(super) fn pending(&self) -> bool {
        !self.out.is_empty() || self.conn.sealed_pending()
    }

    /// The socket, to wait until it is writable.
    pub(super) fn fd(&self) -> RawFd {
        self.conn.stream().as_raw_fd()
    }

    /// Puts a batch of whole messages (headers and frames, in order) behind what
    /// waits. On a TLS link they are sealed as the socket takes them, at most
    /// [`SEAL_BYTES`] ahead ([`Wire::seal_next`]).
    pub(super) fn push(&mut self, bufs: Vec<Bytes>) -> io::Result<()> {
        self.out.extend(bufs.into_iter().filter(|b| !b.is_empty()));
        Ok(())
    }

    /// Seals the next [`SEAL_BYTES`] (at most) of what waits into TLS records, which
    /// wait inside the connection until written. Sealing a large message whole kept
    /// all its records allocated at once: the heap grew and was given back to the
    /// system for every message (a page fault per 4 KiB, more than the cipher's cost).
    fn seal_next(&mut self) -> io::Result<()> {
        let mut batch = Vec::new();
        let mut n = 0;
        while n < SEAL_BYTES {
            let Some(front) = self.out.front_mut() else { break };
            let take = front.len().min(SEAL_BYTES - n);
            batch.push(front.split_to(take));
            n += take;
            if front.is_empty() {
                self.out.pop_front();
            }
        }
        self.conn.seal(&batch)
    }

    /// Hands the socket what it takes now, without blocking: true when nothing waits
    /// any more, false when the socket is full. An error means the connection is
    /// broken (or took nothing for [`WRITE_STALL`]); drop it.
    pub(super) fn write_now(&mut self) -> io::Result<bool> {
        let tls = self.conn.is_tls();
        while self.pending() {
            if tls && !self.conn.sealed_pending() {
                self.seal_next()?;
            }
            let fd = self.fd();
            let sent = match tls {
                true => self.conn.write_sealed(&mut DontWait(fd)),
                false => send_some(fd, self.out.iter().map(|b| &b[..])),
            };
            match sent {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed")),
                Ok(n) => {
                    self.full_since = None;
                    if !tls {
                        self.advance(n);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let since = *self.full_since.get_or_insert_with(Instant::now);
                    return match since.elapsed() {
                        t if t > WRITE_STALL => Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("the peer took no bytes for {t:?}"),
                        )),
                        _ => Ok(false),
                    };
                }
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Drops the first `n` bytes waiting (the socket took them).
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let front = self.out.front_mut().expect("the socket took no more than was offered");
            if front.len() <= n {
                n -= front.len();
                self.out.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }

    /// Shuts the connection down (what waits is lost).
    pub(super) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.conn.shutdown(how)
    }
}

/// The socket `fd` as a writer that never blocks: a write the socket cannot take now
/// fails with [`io::ErrorKind::WouldBlock`] (what rustls writes its records to).
struct DontWait(RawFd);

impl io::Write for DontWait {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        send_some(self.0, std::iter::once(b))
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        send_some(self.0, bufs.iter().map(|b| &b[..]))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One non-blocking vectored send of the first buffers of `out` (at most [`MAX_IOV`]).
fn send_some<'a>(fd: RawFd, out: impl Iterator<Item = &'a [u8]>) -> io::Result<usize> {
    let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_IOV];
    let mut n = 0;
    for (slot, b) in iov.iter_mut().zip(out) {
        slot.write(libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        });
        n += 1;
    }
    // SAFETY: a zeroed msghdr is valid (no address, no control data); its first `n`
    // iovecs are initialised and point into buffers borrowed for the call, which only
    // reads them.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr().cast::<libc::iovec>();
    msg.msg_iovlen = n as _;
    // SAFETY: `fd` is the open socket of the connection; `msg` is valid.
    let sent = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// Waits up to `timeout` (rounded up to a millisecond) until one of `fds` is writable
/// (or broken): Ok(false) on timeout. An error is `poll`'s own (e.g. interrupted).
pub(super) fn wait_writable(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    wait_for(fds, libc::POLLOUT, timeout)
}

/// Waits until one of `fds` has one of `events` (`libc::POLLIN`, `libc::POLLOUT`) or
/// `timeout` passes; false on timeout.
pub(super) fn wait_for(fds: &[RawFd], events: libc::c_short, timeout: Duration) -> io::Result<bool> {
    let mut polled: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events, revents: 0 }).collect();
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: `polled` is a valid array of pollfds of its length.
    let r = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Security;
    use crate::van::tcp::guard::Guard;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    fn pair() -> (Wire, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (peer, _) = l.accept().unwrap();
        let out = Guard::new(&Security::default().limits, None)
            .connect(tcp, "test", &crate::van::authz::Expect::of_key(-70_001))
            .unwrap();
        (Wire::new(out), peer)
    }

    /// Pushes 16 MB (more than the socket's buffers hold) and writes what the socket
    /// takes, checking that the write does not wait for the peer; returns what was pushed.
    fn push_more_than_fits(w: &mut Wire) -> Vec<Bytes> {
        let chunks: Vec<Bytes> = (0..64u8).map(|i| Bytes::from(vec![i; 256 << 10])).collect();
        w.push(chunks.clone()).unwrap();
        let t = Instant::now();
        assert!(!w.write_now().unwrap(), "16 MB do not fit in the socket's buffers");
        assert!(w.pending());
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "write_now never waits for the peer"
        );
        chunks
    }

    #[test]
    fn a_full_socket_keeps_the_rest_in_order_without_blocking() {
        let (mut w, mut peer) = pair();
        let chunks = push_more_than_fits(&mut w);
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; 64 * (256 << 10)];
            peer.read_exact(&mut got).unwrap();
            got
        });
        while !w.write_now().unwrap() {
            assert!(wait_writable(&[w.fd()], Duration::from_secs(10)).unwrap());
        }
        assert!(!w.pending());
        let got = reader.join().unwrap();
        assert_eq!(got, chunks.concat(), "every byte once, in order");
    }

    /// The same over TLS: the sealed records wait inside the connection, the writes
    /// never block, and the receiver reads the frame back whole.
    #[test]
    fn a_full_socket_keeps_sealed_records_in_order_without_blocking() {
        use crate::auth::{Secret, SecretSource};
        use crate::tls::{CertRole, Credentials};
        use crate::van::tcp::spin_read::FrameRead;
        use crate::van::tcp::stream::Stream;
        let creds = |role| {
            let s = Secret::new(vec![3; 32], SecretSource::File).unwrap();
            Some(Credentials::from_secret(&s, role).unwrap())
        };
        let limits = Security::default().limits;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = Guard::new(&limits, creds(CertRole::Server));
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let n = 64 * (256 << 10);
        let reader = std::thread::spawn(move || {
            let (tcp, peer) = l.accept().unwrap();
            let permit = server.admit(peer, crate::auth::gate::Peer::Addr(peer.ip())).unwrap();
            let mut inc = server.accept(Stream::from(tcp), peer, permit, Duration::ZERO).unwrap();
            wait.recv().unwrap();
            let frame = inc.read_frame(n).unwrap();
            let e = inc.read_frame(1).expect_err("nothing after the frame");
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
            frame
        });
        let out = Guard::new(&limits, creds(CertRole::Worker))
            .connect(
                TcpStream::connect(addr).unwrap(),
                "test",
                &crate::van::authz::Expect::of_key(-70_001),
            )
            .unwrap();
        let mut w = Wire::new(out);
        let chunks = push_more_than_fits(&mut w);
        go.send(()).unwrap();
        while !w.write_now().unwrap() {
            assert!(wait_writable(&[w.fd()], Duration::from_secs(10)).unwrap());
        }
        assert!(!w.pending());
        w.shutdown(Shutdown::Write).unwrap();
        let got = reader.join().unwrap();
        assert!(got == chunks.concat(), "every byte once, in order");
    }

    #[test]
    fn a_closed_peer_is_an_error_not_a_signal() {
        let (mut w, peer) = pair();
        drop(peer);
        w.push(vec![Bytes::from(vec![1u8; 1 << 20])]).unwrap();
        let mut r = w.write_now();
        for _ in 0..100 {
            if r.is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            r = w.write_now();
        }
        assert!(
            r.is_err(),
            "writing to a closed peer fails (EPIPE or reset), without SIGPIPE"
        );
    }
}
