//! Reading RecordIO files: index by headers, read chunks with CRC checks. A path may
//! be an `s3://` or `http(s)://` URL (see [`crate::storage`]): the index then reads
//! chunk headers by byte ranges, and a chunk is one range request for exactly its bytes.

use super::chunk::{decode_header, split_records, ChunkIndex, FileIndex, RecordIoError, RecordIoKind, HEADER_LEN};
use crate::storage::{Location, RangeGet, RangeReader, RemoteObject, StorageError};
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::Path;

/// Bytes fetched per request while indexing a remote file: a chunk header and, when
/// chunks are small, the next ones.
const INDEX_BLOCK: u64 = 64 << 10;

fn err(path: &Path, chunk: Option<usize>, (kind, reason): (RecordIoKind, String)) -> RecordIoError {
    RecordIoError {
        path: path.display().to_string(),
        chunk,
        kind,
        reason,
    }
}

/// A damaged file's reason.
fn corrupt(reason: impl Into<String>) -> (RecordIoKind, String) {
    (RecordIoKind::Corrupt, reason.into())
}

/// A failed read's reason.
fn io(e: impl ToString) -> (RecordIoKind, String) {
    (RecordIoKind::Io, e.to_string())
}

/// A failed open's reason.
fn open(e: std::io::Error) -> (RecordIoKind, String) {
    (RecordIoKind::Open, e.to_string())
}

/// A store's error as a kind and reason.
fn stored(e: StorageError) -> (RecordIoKind, String) {
    let kind = match e {
        StorageError::NotFound { .. } => RecordIoKind::NotFound,
        StorageError::BadLocation(_) | StorageError::Config(_) => RecordIoKind::Location,
        StorageError::Io { .. } => RecordIoKind::Io,
    };
    (kind, e.reason())
}

/// Indexes `path` by reading chunk headers only (seeking past payloads): each chunk's
/// number, offset, stored length and record count. Payloads are not read, so CRCs are
/// checked later by [`read_chunk`]; a bad header or a payload running past the end of
/// the file is an error naming the chunk.
pub fn index(path: &Path) -> Result<FileIndex, RecordIoError> {
    if let Some(obj) = remote(path, true)? {
        return index_remote(&obj, path);
    }
    let mut f = crate::storage::confined::job_files()
        .open(path)
        .map_err(|e| err(path, None, open(e)))?;
    let meta = f.metadata().map_err(|e| err(path, None, io(e)))?;
    if meta.is_dir() {
        return Err(err(path, None, corrupt("is a directory, not a RecordIO file")));
    }
    index_stream(&mut f, meta.len(), path)
}

/// [`index`] over any seekable stream of `size` bytes; errors name `path`.
pub fn index_stream(f: &mut (impl Read + Seek), size: u64, path: &Path) -> Result<FileIndex, RecordIoError> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    while offset < size {
        let idx = out.len();
        let mut h = [0u8; HEADER_LEN];
        f.read_exact(&mut h).map_err(|e| err(path, Some(idx), read_error(e)))?;
        let header = decode_header(&h).map_err(|e| err(path, Some(idx), corrupt(e.0)))?;
        let end = offset + HEADER_LEN as u64 + header.len;
        if end > size {
            return Err(err(
                path,
                Some(idx),
                corrupt(format!("payload of {} bytes runs past the end of the file", header.len)),
            ));
        }
        out.push(ChunkIndex {
            idx,
            offset,
            len: header.len,
            records: header.records,
        });
        f.seek(SeekFrom::Start(end)).map_err(|e| err(path, Some(idx), io(e)))?;
        offset = end;
    }
    Ok(out)
}

/// Reads chunk `c` of `path` (as listed by [`index`]), checks its header and CRC,
/// decompresses it and returns its records in order.
pub fn read_chunk(path: &Path, c: &ChunkIndex) -> Result<Vec<Vec<u8>>, RecordIoError> {
    if let Some(obj) = remote(path, false)? {
        return read_chunk_remote(&obj, c, path);
    }
    let mut f = crate::storage::confined::job_files()
        .open(path)
        .map_err(|x| err(path, None, open(x)))?;
    read_chunk_stream(&mut f, c, path)
}

/// [`read_chunk`] over any seekable stream; errors name `path`.
pub fn read_chunk_stream(
    f: &mut (impl Read + Seek),
    c: &ChunkIndex,
    path: &Path,
) -> Result<Vec<Vec<u8>>, RecordIoError> {
    let e = |reason: (RecordIoKind, String)| err(path, Some(c.idx), reason);
    f.seek(SeekFrom::Start(c.offset)).map_err(|x| e(io(x)))?;
    let mut h = [0u8; HEADER_LEN];
    f.read_exact(&mut h).map_err(|x| e(read_error(x)))?;
    let header = decode_header(&h).map_err(|x| e(corrupt(x.0)))?;
    // grown as the bytes arrive: the length is the file's word
    let mut stored = Vec::with_capacity((header.len as usize).min(1 << 20));
    f.take(header.len).read_to_end(&mut stored).map_err(|x| e(io(x)))?;
    if stored.len() as u64 != header.len {
        return Err(e(corrupt("truncated chunk payload")));
    }
    if crc32fast::hash(&stored) != header.crc {
        return Err(e(corrupt("CRC mismatch: the chunk is corrupt")));
    }
    let raw = header
        .compressor
        .decompress(&stored)
        .map_err(|x| e(corrupt(format!("cannot decompress: {x}"))))?;
    split_records(&raw, header.records).map_err(|x| e(corrupt(x.0)))
}

/// The remote object `path` names (its size read by a HEAD request when `sized`), or
/// `None` for a local path.
fn remote(path: &Path, sized: bool) -> Result<Option<RemoteObject>, RecordIoError> {
    let loc = Location::of_path(path).map_err(|e| err(path, None, stored(e.into())))?;
    if !loc.is_remote() {
        return Ok(None);
    }
    let obj = if sized {
        RemoteObject::open(&loc)
    } else {
        RemoteObject::without_size(&loc)
    };
    obj.map(Some).map_err(|e| err(path, None, stored(e)))
}

/// [`index`] of a remote object: chunk headers read by ranges, payloads skipped.
fn index_remote(obj: &RemoteObject, path: &Path) -> Result<FileIndex, RecordIoError> {
    index_stream(&mut RangeReader::new(obj, INDEX_BLOCK), obj.size(), path)
}

/// [`read_chunk`] of a remote object: one range request for exactly the chunk's bytes.
fn read_chunk_remote(obj: &RemoteObject, c: &ChunkIndex, path: &Path) -> Result<Vec<Vec<u8>>, RecordIoError> {
    let end = c.offset.saturating_add(HEADER_LEN as u64).saturating_add(c.len);
    let bytes = obj.get(c.offset..end).map_err(|e| err(path, Some(c.idx), stored(e)))?;
    let at_zero = ChunkIndex { offset: 0, ..c.clone() };
    read_chunk_stream(&mut Cursor::new(bytes), &at_zero, path)
}

/// A failed header read: the end of the data (a damaged file), a store's missing
/// object, or what the file or store said.
fn read_error(e: std::io::Error) -> (RecordIoKind, String) {
    let kind = match e.kind() {
        std::io::ErrorKind::UnexpectedEof => return corrupt("truncated chunk header"),
        std::io::ErrorKind::NotFound => RecordIoKind::NotFound,
        std::io::ErrorKind::InvalidInput => RecordIoKind::Location,
        _ => RecordIoKind::Io,
    };
    (kind, crate::storage::error::one_line(&e.to_string()))
}

/// Every record of `path`, in order, all in memory (see [`super::scanner::Scanner`] to stream).
pub fn read_all(path: &Path) -> Result<Vec<Vec<u8>>, RecordIoError> {
    let mut out = Vec::new();
    if let Some(obj) = remote(path, true)? {
        for c in index_remote(&obj, path)? {
            out.extend(read_chunk_remote(&obj, &c, path)?);
        }
        return Ok(out);
    }
    for c in index(path)? {
        out.extend(read_chunk(path, &c)?);
    }
    Ok(out)
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::chunk::Compressor;
    use super::super::scanner::Scanner;
    use super::super::writer::Writer;
    use super::*;

    /// Writes `n` numbered records in chunks of 7 with compressor `c`.
    pub(crate) fn write(dir: &Path, c: Compressor, n: usize) -> std::path::PathBuf {
        let p = dir.join(format!("data-{:?}.rio", c));
        let mut w = Writer::create(&p, c, 7, 1 << 20).unwrap();
        for i in 0..n {
            w.write(format!("record number {i}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
        p
    }

    #[test]
    fn round_trips_with_every_compressor() {
        let d = tempfile::tempdir().unwrap();
        for c in [Compressor::None, Compressor::Snappy, Compressor::Gzip] {
            let p = write(d.path(), c, 50);
            let idx = index(&p).unwrap();
            assert_eq!(idx.len(), 8, "50 records in chunks of 7");
            assert_eq!(idx.iter().map(|c| c.records).sum::<u32>(), 50);
            let all = read_all(&p).unwrap();
            assert_eq!(all.len(), 50);
            assert_eq!(all[49], b"record number 49");
            assert_eq!(read_chunk(&p, &idx[1]).unwrap()[0], b"record number 7");
        }
    }

    #[test]
    fn corruption_names_file_and_chunk() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), Compressor::None, 20);
        let idx = index(&p).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        let at = idx[1].offset as usize + HEADER_LEN + 3;
        bytes[at] ^= 0x55;
        std::fs::write(&p, &bytes).unwrap();
        let e = read_chunk(&p, &idx[1]).unwrap_err().to_string();
        assert!(
            e.contains("chunk 1") && e.contains("CRC") && e.contains("data-None"),
            "{e}"
        );
        bytes.truncate(bytes.len() - 5);
        std::fs::write(&p, &bytes).unwrap();
        let e = index(&p).unwrap_err().to_string();
        assert!(e.contains("chunk 2") && e.contains("past the end"), "{e}");
        let e = index(d.path()).unwrap_err().to_string();
        assert!(e.ends_with("is a directory, not a RecordIO file"), "{e}");
        std::fs::write(&p, b"definitely not recordio, but long enough").unwrap();
        assert!(index(&p).unwrap_err().to_string().contains("bad magic"));
    }

    #[test]
    fn errors_say_their_kind() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("absent.rio");
        let e = index(&missing).unwrap_err();
        assert_eq!(e.kind, RecordIoKind::Open);
        assert!(
            e.to_string()
                .starts_with(&format!("{}: cannot open: ", missing.display())),
            "{e}"
        );
        assert_eq!(e.unreachable(), Some(e.reason.as_str()));
        let p = write(d.path(), Compressor::None, 20);
        let idx = index(&p).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[idx[1].offset as usize + HEADER_LEN] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        let e = read_chunk(&p, &idx[1]).unwrap_err();
        assert_eq!((e.kind, e.unreachable()), (RecordIoKind::Corrupt, None));
        // a damaged file whose reason happens to read "not found" is still damaged
        let e = RecordIoError {
            path: "x".into(),
            chunk: Some(0),
            kind: RecordIoKind::Corrupt,
            reason: "not found".into(),
        };
        assert_eq!(
            (e.unreachable(), e.to_string().as_str()),
            (None, "x: chunk 0: not found")
        );
        let e = Scanner::open(&missing).err().map(|e| e.kind);
        assert_eq!(e, Some(RecordIoKind::Open));
    }
}
