//! Writing RecordIO files.

use super::chunk::{encode_header, Compressor};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes records, cutting a chunk every `max_records` records or `max_bytes` bytes.
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
            max_bytes: max_bytes.max(1),
            buf: Vec::new(),
            records: 0,
            chunks: 0,
            total_records: 0,
        })
    }

    /// Appends one record.
    pub fn write(&mut self, record: &[u8]) -> io::Result<()> {
        let len = u32::try_from(record.len()).map_err(|_| io::Error::other("record larger than 4 GiB"))?;
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
        let len = u32::try_from(stored.len()).map_err(|_| io::Error::other("chunk larger than 4 GiB"))?;
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
