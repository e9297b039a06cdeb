//! Streaming over every record of a RecordIO file, one chunk in memory at a time.

use super::chunk::{decode_header, split_records, RecordIoError, RecordIoKind, HEADER_LEN};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Iterates over the records of one file in order, holding one decoded chunk at a time.
///
/// Yields `Ok(record)` for each record, then `None` at a clean end of file. A damaged
/// chunk (bad magic, CRC mismatch, truncation, oversized sizes) yields one `Err` naming
/// the file and chunk, after which the scanner is exhausted.
pub struct Scanner {
    path: PathBuf,
    file: Option<BufReader<File>>,
    chunk: usize,
    records: VecDeque<Vec<u8>>,
}

impl Scanner {
    /// Opens `path` for scanning.
    pub fn open(path: &Path) -> Result<Scanner, RecordIoError> {
        let f = File::open(path).map_err(|e| RecordIoError {
            path: path.display().to_string(),
            chunk: None,
            kind: RecordIoKind::Open,
            reason: e.to_string(),
        })?;
        Ok(Scanner {
            path: path.to_path_buf(),
            file: Some(BufReader::new(f)),
            chunk: 0,
            records: VecDeque::new(),
        })
    }

    /// Chunks fully read so far.
    pub fn chunks_read(&self) -> usize {
        self.chunk
    }

    /// The current chunk is damaged.
    fn err(&self, reason: impl Into<String>) -> RecordIoError {
        self.error(RecordIoKind::Corrupt, reason)
    }

    fn error(&self, kind: RecordIoKind, reason: impl Into<String>) -> RecordIoError {
        RecordIoError {
            path: self.path.display().to_string(),
            chunk: Some(self.chunk),
            kind,
            reason: reason.into(),
        }
    }

    /// Reads the next chunk into `records`; `Ok(false)` at a clean end of file.
    fn next_chunk(&mut self, f: &mut BufReader<File>) -> Result<bool, RecordIoError> {
        let mut h = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match f.read(&mut h[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(self.err("truncated chunk header")),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(RecordIoKind::Io, e.to_string())),
            }
        }
        let header = decode_header(&h).map_err(|e| self.err(e.0))?;
        let mut stored = Vec::with_capacity(header.len as usize);
        f.take(header.len)
            .read_to_end(&mut stored)
            .map_err(|e| self.error(RecordIoKind::Io, e.to_string()))?;
        if stored.len() as u64 != header.len {
            return Err(self.err("truncated chunk payload"));
        }
        if crc32fast::hash(&stored) != header.crc {
            return Err(self.err("CRC mismatch: the chunk is corrupt"));
        }
        let raw = header
            .compressor
            .decompress(&stored)
            .map_err(|e| self.err(format!("cannot decompress: {e}")))?;
        self.records = split_records(&raw, header.records).map_err(|e| self.err(e.0))?.into();
        self.chunk += 1;
        Ok(true)
    }
}

impl Iterator for Scanner {
    type Item = Result<Vec<u8>, RecordIoError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.records.pop_front() {
                return Some(Ok(r));
            }
            let mut f = self.file.take()?;
            match self.next_chunk(&mut f) {
                Ok(true) => self.file = Some(f),
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::chunk::Compressor;
    use super::super::reader::read_all;
    use super::super::writer::Writer;
    use super::*;

    #[test]
    fn streams_every_record_then_stops_at_damage() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.rio");
        let mut w = Writer::create(&p, Compressor::Gzip, 4, 1 << 20).unwrap();
        for i in 0..10 {
            w.write(format!("r{i}").as_bytes()).unwrap();
        }
        w.write(b"").unwrap();
        w.finish().unwrap();
        let mut s = Scanner::open(&p).unwrap();
        let got: Vec<Vec<u8>> = s.by_ref().map(Result::unwrap).collect();
        assert_eq!(got, read_all(&p).unwrap());
        assert_eq!((got.len(), s.chunks_read()), (11, 3));
        assert!(got[10].is_empty(), "empty records survive");

        let mut bytes = std::fs::read(&p).unwrap();
        bytes.truncate(bytes.len() - 1);
        std::fs::write(&p, &bytes).unwrap();
        let all: Vec<_> = Scanner::open(&p).unwrap().collect();
        assert_eq!(all.len(), 9, "8 good records, then one error");
        let e = all[8].as_ref().unwrap_err().to_string();
        assert!(e.contains("s.rio: chunk 2: truncated"), "{e}");
        assert!(Scanner::open(&d.path().join("absent")).is_err());
    }

    #[test]
    fn empty_file_has_no_records() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("e.rio");
        Writer::create(&p, Compressor::None, 4, 1024).unwrap().finish().unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
        assert_eq!(Scanner::open(&p).unwrap().count(), 0);
    }
}
