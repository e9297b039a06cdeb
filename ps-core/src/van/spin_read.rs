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

use std::io::{self, Read};
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
