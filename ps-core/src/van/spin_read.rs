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

use std::io::{self, BufRead, BufReader, Read};
use std::net::TcpStream;
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

/// A [`TcpStream`] read with spinning (see the module docs).
pub struct SpinRead {
    tcp: TcpStream,
    spin: Duration,
    nonblocking: bool,
}

impl SpinRead {
    /// Reads `tcp`, spinning up to `spin` before each blocking read (0: never).
    pub fn new(tcp: TcpStream, spin: Duration) -> SpinRead {
        SpinRead {
            tcp,
            spin,
            nonblocking: false,
        }
    }

    /// The stream in blocking mode, to read a large frame straight into its buffer.
    fn blocking(&mut self) -> io::Result<&TcpStream> {
        self.set_nonblocking(false)?;
        Ok(&self.tcp)
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

/// A frame this long or longer is read straight from the socket into its own buffer,
/// past the read buffer.
const DIRECT_FRAME_BYTES: usize = 64 << 10;

/// A stream the TCP van reads messages from: [`FrameRead::read_frame`] reads one
/// frame's bytes into a buffer of its own.
pub trait FrameRead: Read {
    /// Reads exactly `len` bytes into a new buffer; `UnexpectedEof` if the stream ends
    /// first.
    fn read_frame(&mut self, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(len);
        self.take(len as u64).read_to_end(&mut buf)?;
        check_len(buf, len)
    }
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
        let mut buf = Vec::with_capacity(len);
        let have = self.buffer().len().min(len);
        buf.extend_from_slice(&self.buffer()[..have]);
        self.consume(have);
        let rest = (len - have) as u64;
        if rest >= DIRECT_FRAME_BYTES as u64 {
            crate::van::cork::flush(); // the read may block
            self.get_mut().blocking()?.take(rest).read_to_end(&mut buf)?;
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
