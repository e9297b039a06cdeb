//! Writing RecordIO files.

use super::chunk::{encode_header, Compressor, MAX_CHUNK_BYTES};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Largest uncompressed chunk the writer builds: the format's limit less a margin for
/// compressor overhead on incompressible data, so every chunk written can be read back.
const MAX_RAW_CHUNK: usize = (MAX_CHUNK_BYTES - (1 << 20)) as usize;

/// Writes records, cutting a chunk every `max_records` records or `max_bytes` bytes
/// (uncompressed, capped just below [`MAX_CHUNK_BYTES`]). Nothing is visible at the
/// target path until [`Writer::finish`]; dropping an unfinished writer discards it.
pub struct Writer {
    out: BufWriter<File>,
    path: PathBuf,
    tmp: PathBuf,
    compressor: Compressor,
    max_records: u32,
    max_bytes: usize,
    buf: Vec<u8>,
    records: u32,
    /// Chunks written so far.
    pub chunks: usize,
    /// Records written so far.
    pub total_records: u64,
}

impl Writer {
    /// Creates `path` (written to a temporary file, renamed into place by
    /// [`Writer::finish`], so a crash never leaves a half-written dataset).
    pub fn create(path: &Path, compressor: Compressor, max_records: u32, max_bytes: usize) -> io::Result<Writer> {
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        Ok(Writer {
            out: BufWriter::new(File::create(&tmp)?),
            path: path.to_path_buf(),
            tmp,
            compressor,
            max_records: max_records.max(1),
            max_bytes: max_bytes.clamp(1, MAX_RAW_CHUNK),
            buf: Vec::new(),
            records: 0,
            chunks: 0,
            total_records: 0,
        })
    }

    /// Appends one record. A record too large to fit in a chunk by itself is refused.
    pub fn write(&mut self, record: &[u8]) -> io::Result<()> {
        if record.len() + 4 > MAX_RAW_CHUNK {
            return Err(io::Error::other(format!(
                "a record of {} bytes cannot fit in a chunk",
                record.len()
            )));
        }
        if self.buf.len() + 4 + record.len() > MAX_RAW_CHUNK {
            self.flush_chunk()?;
        }
        let len = record.len() as u32;
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(record);
        self.records += 1;
        self.total_records += 1;
        if self.records >= self.max_records || self.buf.len() >= self.max_bytes {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> io::Result<()> {
        if self.records == 0 {
            return Ok(());
        }
        let stored = self.compressor.compress(&self.buf)?;
        if stored.len() as u64 > MAX_CHUNK_BYTES {
            return Err(io::Error::other("compressed chunk is larger than 256 MiB"));
        }
        let len = stored.len() as u32;
        self.out.write_all(&encode_header(
            crc32fast::hash(&stored),
            self.compressor,
            len,
            self.records,
        ))?;
        self.out.write_all(&stored)?;
        self.buf.clear();
        self.records = 0;
        self.chunks += 1;
        Ok(())
    }

    /// Writes the last chunk, syncs and moves the file into place; returns the number
    /// of chunks.
    pub fn finish(mut self) -> io::Result<usize> {
        self.flush_chunk()?;
        self.out.flush()?;
        self.out.get_ref().sync_all()?;
        std::fs::rename(&self.tmp, &self.path)?;
        Ok(self.chunks)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}
