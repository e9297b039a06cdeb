//! A TCP stream whose reads spin (`PS_SPIN_US`) before they block: the reader thread
//! polls the socket without blocking for up to the spin time, then sleeps in a
//! blocking read as usual. Busy links never block at all; an idle link pays two
//! `fcntl`s per idle period to switch modes.

use crate::spin::spin_until;
use std::io::{self, Read};
use std::net::TcpStream;
use std::time::Duration;

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
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
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
}
