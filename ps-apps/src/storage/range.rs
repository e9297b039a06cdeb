//! Reading an object by byte ranges: the [`RangeGet`] trait and [`RangeReader`], a
//! `Read + Seek` over it that fetches a block ahead, so the RecordIO index (small
//! header reads with seeks past the payloads) costs one request per chunk header
//! rather than one per read call, and never fetches a payload it skips.

use super::error::StorageError;
use bytes::Bytes;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;

/// An object of known size whose byte ranges can be fetched.
pub trait RangeGet {
    /// The object's size in bytes.
    fn size(&self) -> u64;
    /// Bytes `range` of the object (`range.end <= size()`).
    fn get(&self, range: Range<u64>) -> Result<Bytes, StorageError>;
}

/// `Read + Seek` over a [`RangeGet`]: a read at a position outside the block held
/// fetches `[pos, pos + max(block, wanted))` (clipped to the object); seeking is free.
pub struct RangeReader<G> {
    src: G,
    pos: u64,
    held: Bytes,
    held_at: u64,
    block: u64,
    requests: usize,
}

impl<G: RangeGet> RangeReader<G> {
    /// A reader at offset 0 fetching at least `block` bytes per request.
    pub fn new(src: G, block: u64) -> RangeReader<G> {
        RangeReader {
            src,
            pos: 0,
            held: Bytes::new(),
            held_at: 0,
            block: block.max(1),
            requests: 0,
        }
    }

    /// Requests made so far.
    pub fn requests(&self) -> usize {
        self.requests
    }
}

impl<G: RangeGet> Read for RangeReader<G> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = self.src.size();
        if buf.is_empty() || self.pos >= size {
            return Ok(0);
        }
        let held_end = self.held_at + self.held.len() as u64;
        if self.pos < self.held_at || self.pos >= held_end {
            let end = size.min(self.pos + self.block.max(buf.len() as u64));
            self.held = self.src.get(self.pos..end)?;
            self.held_at = self.pos;
            self.requests += 1;
            if self.held.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the store returned no bytes",
                ));
            }
        }
        let from = (self.pos - self.held_at) as usize;
        let n = buf.len().min(self.held.len() - from);
        buf[..n].copy_from_slice(&self.held[from..from + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<G: RangeGet> Seek for RangeReader<G> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let base = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => self.src.size().checked_add_signed(d),
        };
        self.pos = base.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// An in-memory object that records the ranges asked for.
    struct Mem {
        data: Vec<u8>,
        asked: RefCell<Vec<Range<u64>>>,
    }

    impl RangeGet for &Mem {
        fn size(&self) -> u64 {
            self.data.len() as u64
        }
        fn get(&self, r: Range<u64>) -> Result<Bytes, StorageError> {
            assert!(r.end <= self.size(), "{r:?} past the end");
            self.asked.borrow_mut().push(r.clone());
            Ok(Bytes::copy_from_slice(&self.data[r.start as usize..r.end as usize]))
        }
    }

    #[test]
    fn reads_blocks_ahead_and_skips_what_is_seeked_over() {
        let m = Mem {
            data: (0..=255u8).cycle().take(1000).collect(),
            asked: RefCell::new(Vec::new()),
        };
        let mut r = RangeReader::new(&m, 100);
        let mut b = [0u8; 20];
        r.read_exact(&mut b).unwrap();
        assert_eq!(b[..], m.data[..20]);
        r.read_exact(&mut b).unwrap(); // from the block held
        assert_eq!(r.seek(SeekFrom::Start(500)).unwrap(), 500);
        r.read_exact(&mut b).unwrap();
        assert_eq!(b[..], m.data[500..520]);
        // a read larger than the block fetches what it needs at once
        let mut big = vec![0u8; 300];
        r.seek(SeekFrom::Start(600)).unwrap();
        r.read_exact(&mut big).unwrap();
        assert_eq!(big[..], m.data[600..900]);
        // clipped at the end, then end of file
        r.seek(SeekFrom::End(-10)).unwrap();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_eq!(rest[..], m.data[990..]);
        assert_eq!(*m.asked.borrow(), vec![0..100, 500..600, 600..900, 990..1000]);
        assert_eq!(r.requests(), 4);
        assert!(r.seek(SeekFrom::Current(-2000)).is_err());
    }
}
