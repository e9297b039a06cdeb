//! `Write` / `Read` over sealed records ([`crate::auth::seal`]): the TCP van's
//! encrypted link. The writer buffers plaintext up to one record and seals it when
//! full or on `flush` (the transport flushes after each message).

use crate::auth::seal::{Opener, Sealer, MAX_RECORD};
use std::io::{self, IoSlice, Read, Write};

/// Seals everything written into records on `inner`.
pub struct SealedWriter<W: Write> {
    inner: W,
    sealer: Sealer,
    buf: Vec<u8>,
}

impl<W: Write> SealedWriter<W> {
    /// A writer sealing with the session key.
    pub fn new(inner: W, key: &[u8; 32]) -> SealedWriter<W> {
        SealedWriter {
            inner,
            sealer: Sealer::new(key),
            buf: vec![0u8; 4],
        }
    }

    fn send_record(&mut self) -> io::Result<()> {
        if self.buf.len() > 4 {
            self.sealer.seal(&mut self.buf);
            let r = self.inner.write_all(&self.buf);
            self.buf.clear();
            self.buf.resize(4, 0);
            r?;
        }
        Ok(())
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The underlying stream, mutably (e.g. to take the records sealed into a `Vec`).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

impl<W: Write> Write for SealedWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = MAX_RECORD + 4 - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == MAX_RECORD + 4 {
            self.send_record()?;
        }
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut total = 0;
        for b in bufs {
            let mut rest: &[u8] = b;
            while !rest.is_empty() {
                let n = self.write(rest)?;
                rest = &rest[n..];
                total += n;
            }
        }
        Ok(total)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_record()?;
        self.inner.flush()
    }
}

/// Opens the records read from `inner` and yields their plaintext.
pub struct SealedReader<R: Read> {
    inner: R,
    opener: Opener,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

impl<R: Read> SealedReader<R> {
    /// A reader opening with the session key.
    pub fn new(inner: R, key: &[u8; 32]) -> SealedReader<R> {
        SealedReader {
            inner,
            opener: Opener::new(key),
            buf: Vec::new(),
            pos: 0,
            end: 0,
        }
    }

    /// Reads the next record; false at a clean end of stream.
    fn next_record(&mut self) -> io::Result<bool> {
        let mut prefix = [0u8; 4];
        match self.inner.read_exact(&mut prefix) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(e),
        }
        let bad = |e: crate::auth::seal::SealError| io::Error::new(io::ErrorKind::InvalidData, e.0);
        let n = Opener::body_len(prefix).map_err(bad)?;
        self.buf.resize(n, 0);
        self.inner.read_exact(&mut self.buf)?;
        self.end = self.opener.open(prefix, &mut self.buf).map_err(bad)?;
        self.pos = 0;
        Ok(true)
    }
}

impl<R: Read> Read for SealedReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.end {
            if out.is_empty() || !self.next_record()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Frames of a sealed link are read through the decrypting reader.
impl<R: Read> crate::van::tcp::spin_read::FrameRead for SealedReader<R> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_of_any_size_round_trips_and_tampering_is_an_error() {
        let key = [9u8; 32];
        let mut w = SealedWriter::new(Vec::new(), &key);
        let big: Vec<u8> = (0..(MAX_RECORD * 2 + 17)).map(|i| i as u8).collect();
        let n = w.write_vectored(&[IoSlice::new(b"head"), IoSlice::new(&big)]).unwrap();
        assert_eq!(n, 4 + big.len());
        w.flush().unwrap();
        w.write_all(b"tail").unwrap();
        w.flush().unwrap();
        let wire = w.inner.clone();
        let mut got = Vec::new();
        SealedReader::new(&wire[..], &key).read_to_end(&mut got).unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..4 + big.len()], &big[..]);
        assert_eq!(&got[4 + big.len()..], b"tail");
        let mut bad = wire.clone();
        bad[100] ^= 0x40;
        let mut sink = Vec::new();
        let e = SealedReader::new(&bad[..], &key).read_to_end(&mut sink).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // cut mid-record: an error, not a clean end
        assert!(SealedReader::new(&wire[..50], &key).read_to_end(&mut sink).is_err());
    }
}
