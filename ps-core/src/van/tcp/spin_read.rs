//! The opt-in low-latency mode (`PS_SPIN_US`): the TCP van's reader threads, about to
//! sleep waiting for the next message, first poll their socket for up to that long, so
//! a message that comes quickly is handled without the cost of waking a sleeping
//! thread (tens of microseconds on an idle machine, more than a loopback round trip).
//! It costs a core per spinning thread while it spins; 0 (the default) never spins.
//! Threads waiting for a response do not spin: on two cores, a waiter spinning beside
//! the reader that would wake it made a waited request slower, not faster.
//!
//! [`SpinRead`] is a TCP stream whose reads spin before they block: the reader thread
//! polls the socket without blocking for up to the spin time, then sleeps in a
//! blocking read as usual. Busy links never block at all; an idle link pays two
//! `fcntl`s per idle period to switch modes.
//!
//! Independently of that setting, a reader in the middle of a large frame (64 KB or
//! more) polls an empty socket for up to 50 us before it sleeps
//! ([`SpinRead::read_large`]): the rest of the frame is on its way, and each time the
//! reader sleeps the writer pays a wake-up per segment it sends. Over loopback TCP this
//! raised 1 MB and 16 MB pushes and pulls 30-70%, for more of the receiver's CPU. At
//! most half the machine's CPUs' worth of a process's readers poll so at once.

use super::stream::Stream;
use std::io::{self, BufRead, BufReader, Read};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Polls `ready` until it returns true (then returns true) or `limit` has passed
/// (then returns false); never calls `ready` when `limit` is zero.
fn spin_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if limit.is_zero() {
        return false;
    }
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// A connection ([`Stream`]) read with spinning (see the module docs).
pub struct SpinRead {
    tcp: Stream,
    spin: Duration,
    nonblocking: bool,
}

impl SpinRead {
    /// Reads `tcp`, spinning up to `spin` before each blocking read (0: never).
    pub fn new(tcp: impl Into<Stream>, spin: Duration) -> SpinRead {
        SpinRead {
            tcp: tcp.into(),
            spin,
            nonblocking: false,
        }
    }

    /// Appends the next `rest` bytes (or what comes before the stream ends) to `buf`,
    /// straight from the socket. While they arrive, a reader that finds the socket
    /// empty polls it for up to [`FRAME_SPIN`] before it sleeps: the rest of a frame
    /// being written follows within microseconds, and a sleeping reader costs the
    /// writer a wake-up per segment (on a VM an interrupt to a halted CPU).
    fn read_large(&mut self, mut rest: u64, buf: &mut Vec<u8>) -> io::Result<()> {
        let mut poll = true;
        while rest > 0 {
            // polling: take what has arrived; asleep: wait for the next chunk
            self.set_nonblocking(poll)?;
            let want = if poll {
                rest
            } else {
                rest.min(DIRECT_FRAME_BYTES as u64)
            };
            let before = buf.len();
            let r = (&self.tcp).take(want).read_to_end(buf);
            let got = (buf.len() - before) as u64;
            rest -= got;
            poll = true;
            match r {
                Ok(_) if got == 0 => return Ok(()), // the stream ended
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // nothing there yet: poll for it a while, or else sleep until it comes
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => poll = self.poll_for_more(),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Polls the (non-blocking) socket for up to [`FRAME_SPIN`], unless enough of this
    /// process's readers poll already: true if data (or the stream's end) came.
    fn poll_for_more(&self) -> bool {
        let mut probe = [0u8; 1];
        let ready = || match self.tcp.peek(&mut probe) {
            Err(e) => !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted),
            Ok(_) => true, // data, or the end of the stream
        };
        spin_if_few(&FRAME_SPINNERS, frame_spinners_limit(), || {
            spin_until(FRAME_SPIN, ready)
        })
    }

    /// Reads what the socket has into `buf` (at least a byte, or 0 at its end) in the
    /// middle of a large frame: an empty socket is polled for up to [`FRAME_SPIN`]
    /// before the read sleeps, as [`SpinRead::read_large`] does (a TLS link's frames
    /// arrive as records, read into the link's buffer).
    pub fn read_in_frame(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        crate::van::cork::flush(); // the read may block
        self.set_nonblocking(true)?;
        loop {
            match self.tcp.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !self.poll_for_more() {
                        self.set_nonblocking(false)?;
                        return self.tcp.read(buf);
                    }
                }
                r => return r,
            }
        }
    }

    fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        if self.nonblocking != on {
            self.tcp.set_nonblocking(on)?;
            self.nonblocking = on;
        }
        Ok(())
    }
}

impl Read for SpinRead {
    /// Writes what this thread corked first ([`crate::van::cork`]): the read may
    /// block.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        crate::van::cork::flush();
        if self.spin.is_zero() || buf.is_empty() {
            self.set_nonblocking(false)?; // a large frame's read may have left it on
            return self.tcp.read(buf);
        }
        self.set_nonblocking(true)?;
        let mut got = None;
        spin_until(self.spin, || match self.tcp.read(buf) {
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => false,
            r => {
                got = Some(r);
                true
            }
        });
        match got {
            Some(r) => r,
            None => {
                self.set_nonblocking(false)?;
                self.tcp.read(buf)
            }
        }
    }
}

/// How long a reader in the middle of a large frame polls an empty socket before it
/// sleeps ([`SpinRead::read_large`]).
const FRAME_SPIN: Duration = Duration::from_micros(50);

/// Readers of this process polling in the middle of a large frame now.
static FRAME_SPINNERS: AtomicUsize = AtomicUsize::new(0);

/// At most this many readers of a process poll mid-frame at once: half this machine's
/// CPUs, at least one. Many concurrent large transfers into one process (a server
/// taking 16 MB pushes from 30 workers) thus never turn into a core's worth of polling
/// each.
fn frame_spinners_limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)))
}

/// Runs `spin` (which returns whether what it polled for came) if fewer than `limit`
/// others counted by `spinners` run theirs; false without running it otherwise.
fn spin_if_few(spinners: &AtomicUsize, limit: usize, spin: impl FnOnce() -> bool) -> bool {
    if spinners.fetch_add(1, Ordering::Relaxed) >= limit {
        spinners.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    let came = spin();
    spinners.fetch_sub(1, Ordering::Relaxed);
    came
}

/// A frame this long or longer is read straight from the socket into its own buffer,
/// past the read buffer (on a TLS link: read with [`SpinRead::read_in_frame`]).
pub(crate) const DIRECT_FRAME_BYTES: usize = 64 << 10;

/// A stream the TCP van reads messages from: [`FrameRead::read_frame`] reads one
/// frame's bytes into a buffer of its own.
pub trait FrameRead: Read {
    /// Reads exactly `len` bytes into a new buffer; `UnexpectedEof` if the stream ends
    /// first. The buffer grows as the bytes arrive ([`frame_buffer`]).
    fn read_frame(&mut self, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = frame_buffer(len);
        self.take(len as u64).read_to_end(&mut buf)?;
        check_len(buf, len)
    }
}

/// Bytes reserved up front for a frame: a frame's declared length is the peer's word,
/// so a buffer starts at most this large and grows as the bytes arrive (doubling: at
/// most twice what arrived), and a peer that declares gigabytes and sends a few bytes
/// holds no more than this per connection.
pub const FRAME_RESERVE: usize = 1 << 20;

/// An empty buffer for a frame of declared length `len` (see [`FRAME_RESERVE`]).
pub fn frame_buffer(len: usize) -> Vec<u8> {
    Vec::with_capacity(len.min(FRAME_RESERVE))
}

fn check_len(buf: Vec<u8>, len: usize) -> io::Result<Vec<u8>> {
    if buf.len() == len {
        Ok(buf)
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-message",
        ))
    }
}

impl FrameRead for &[u8] {}
impl FrameRead for TcpStream {}
impl FrameRead for Stream {}
impl<R: FrameRead + ?Sized> FrameRead for Box<R> {
    fn read_frame(&mut self, len: usize) -> io::Result<Vec<u8>> {
        (**self).read_frame(len)
    }
}

/// A large frame goes from the socket into its buffer without the zero-filling a
/// `read` into a new buffer needs (a 16 MB frame spent ~10% of a receiver's time in
/// `memset`): what the read buffer holds is copied, the rest read by the socket's own
/// uninitialised-buffer read.
impl FrameRead for BufReader<SpinRead> {
    fn read_frame(&mut self, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = frame_buffer(len);
        let have = self.buffer().len().min(len);
        buf.extend_from_slice(&self.buffer()[..have]);
        self.consume(have);
        let rest = (len - have) as u64;
        if rest >= DIRECT_FRAME_BYTES as u64 {
            crate::van::cork::flush(); // the read may block
            self.get_mut().read_large(rest, &mut buf)?;
        } else if rest > 0 {
            self.take(rest).read_to_end(&mut buf)?;
        }
        check_len(buf, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn frames_read_past_the_buffer_keep_their_bytes_and_a_short_stream_is_an_error() {
        for spin in [Duration::ZERO, Duration::from_millis(5)] {
            let (mut a, b) = pair();
            let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            let writer = std::thread::spawn(move || {
                a.write_all(b"small").unwrap();
                a.write_all(&big).unwrap();
                a.write_all(b"tail").unwrap();
                a.write_all(&[9u8; 70_000][..]).unwrap(); // the stream ends 10 bytes short
            });
            let mut r = BufReader::with_capacity(1 << 16, SpinRead::new(b, spin));
            assert_eq!(r.read_frame(5).unwrap(), b"small");
            let got = r.read_frame(300_000).unwrap();
            assert!(got.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8));
            assert_eq!(r.read_frame(4).unwrap(), b"tail");
            writer.join().unwrap();
            let e = r.read_frame(70_010).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        }
    }

    #[test]
    fn a_large_frame_arriving_in_pieces_with_pauses_is_read_whole_and_the_next_read_blocks() {
        for spin in [Duration::ZERO, Duration::from_millis(1)] {
            let (mut a, b) = pair();
            let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
            let expect = big.clone();
            let writer = std::thread::spawn(move || {
                // pauses far longer than FRAME_SPIN: the reader must sleep and resume
                for piece in big.chunks(300_000) {
                    a.write_all(piece).unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(Duration::from_millis(50)); // the next read blocks
                a.write_all(b"next").unwrap();
                a
            });
            let mut r = BufReader::with_capacity(1 << 16, SpinRead::new(b, spin));
            assert!(r.read_frame(1_000_000).unwrap() == expect);
            assert_eq!(r.read_frame(4).unwrap(), b"next", "the socket is blocking again");
            drop(writer.join().unwrap());
            let e = r.read_frame(100_000).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        }
    }

    #[test]
    fn no_more_than_the_limit_spin_at_once() {
        let n = AtomicUsize::new(0);
        // two may spin: the third, while both do, does not run its spin
        let third = || !spin_if_few(&n, 2, || unreachable!("over the limit"));
        assert!(spin_if_few(&n, 2, || spin_if_few(&n, 2, third)));
        assert_eq!(n.load(Ordering::Relaxed), 0, "every spinner counted out");
        assert!(!spin_if_few(&n, 2, || false), "what the spin found is returned");
        assert!(frame_spinners_limit() >= 1);
    }

    #[test]
    fn reads_what_arrives_while_spinning_and_after_blocking() {
        let (mut a, b) = pair();
        let mut r = SpinRead::new(b, Duration::from_millis(50));
        a.write_all(b"now").unwrap();
        let mut buf = [0u8; 3];
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"now");
        // nothing for longer than the spin: the read blocks, then gets the bytes
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            a.write_all(b"later").unwrap();
            a
        });
        let mut buf = [0u8; 5];
        r.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"later");
        drop(t.join().unwrap());
        // end of stream reads as 0, spinning or not
        assert_eq!(r.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn zero_spin_is_a_plain_blocking_read() {
        let (mut a, b) = pair();
        let mut r = SpinRead::new(b, Duration::ZERO);
        a.write_all(b"x").unwrap();
        let mut buf = [0u8; 1];
        r.read_exact(&mut buf).unwrap();
        assert!(!r.nonblocking);
    }

    #[test]
    fn zero_never_polls_and_a_ready_condition_ends_at_once() {
        assert!(!spin_until(Duration::ZERO, || panic!("polled")));
        let mut calls = 0;
        assert!(spin_until(Duration::from_secs(10), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
    }

    #[test]
    fn a_condition_never_ready_gives_up_after_the_limit() {
        let start = Instant::now();
        assert!(!spin_until(Duration::from_millis(5), || false));
        assert!(start.elapsed() >= Duration::from_millis(5));
    }
}
