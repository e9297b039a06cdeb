//! The chunk header, compression, and the errors of the format.

use std::io::{Read, Write};

/// Magic number opening every chunk: PaddlePaddle RecordIO's `0x01020304`, stored
/// little-endian (bytes `04 03 02 01`).
pub const MAGIC: u32 = 0x0102_0304;
/// Magic number of psrs's former chunk layout (`PRIO`): the same header and payload
/// under another magic. Such files are still read; new files get [`MAGIC`].
pub const LEGACY_MAGIC: u32 = u32::from_le_bytes(*b"PRIO");
/// Size of a chunk header.
pub const HEADER_LEN: usize = 20;
/// Largest stored or uncompressed chunk payload accepted.
pub const MAX_CHUNK_BYTES: u64 = 256 << 20;
/// Largest record count a chunk header may claim (every record takes at least its
/// 4-byte length prefix, so more cannot fit in [`MAX_CHUNK_BYTES`]).
pub const MAX_CHUNK_RECORDS: u32 = (MAX_CHUNK_BYTES / 4) as u32;

/// How a chunk's payload is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compressor {
    /// Stored as is.
    None,
    /// Snappy's framing format (stream identifier, then CRC-32C-checked chunks of at
    /// most 64 KiB), as Go's `snappy.NewBufferedWriter` writes and `snappy.NewReader`
    /// reads; not a raw snappy block.
    Snappy,
    /// Gzip (RFC 1952); several concatenated members are read as one stream, as Go's
    /// `gzip.Reader` does.
    Gzip,
}

impl Compressor {
    /// The code stored in the header (Paddle's `NoCompression`, `Snappy`, `Gzip`).
    pub fn code(self) -> u32 {
        match self {
            Compressor::None => 0,
            Compressor::Snappy => 1,
            Compressor::Gzip => 2,
        }
    }
    /// The compressor with this header code.
    pub fn from_code(c: u32) -> Option<Compressor> {
        match c {
            0 => Some(Compressor::None),
            1 => Some(Compressor::Snappy),
            2 => Some(Compressor::Gzip),
            _ => None,
        }
    }
    /// Parses `none`, `snappy` or `gzip`.
    pub fn parse(s: &str) -> Option<Compressor> {
        match s {
            "none" => Some(Compressor::None),
            "snappy" => Some(Compressor::Snappy),
            "gzip" => Some(Compressor::Gzip),
            _ => None,
        }
    }
    /// Compresses `raw`.
    pub fn compress(self, raw: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Compressor::None => Ok(raw.to_vec()),
            Compressor::Snappy => {
                let mut w = snap::write::FrameEncoder::new(Vec::new());
                w.write_all(raw)?;
                w.into_inner().map_err(|e| std::io::Error::other(e.to_string()))
            }
            Compressor::Gzip => {
                let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                w.write_all(raw)?;
                w.finish()
            }
        }
    }
    /// Decompresses `stored`, refusing to produce more than [`MAX_CHUNK_BYTES`].
    pub fn decompress(self, stored: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let limit = MAX_CHUNK_BYTES + 1;
        match self {
            Compressor::None => return Ok(stored.to_vec()),
            Compressor::Snappy => snap::read::FrameDecoder::new(stored)
                .take(limit)
                .read_to_end(&mut out)?,
            Compressor::Gzip => flate2::read::MultiGzDecoder::new(stored)
                .take(limit)
                .read_to_end(&mut out)?,
        };
        if out.len() as u64 > MAX_CHUNK_BYTES {
            return Err(std::io::Error::other("decompressed chunk is larger than 256 MiB"));
        }
        Ok(out)
    }
}

/// The chunks of one file, in order, as found by [`crate::recordio::index`].
pub type FileIndex = Vec<ChunkIndex>;

/// Where one chunk is in its file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkIndex {
    /// Chunk number within the file (0-based).
    pub idx: usize,
    /// Byte offset of the chunk header.
    pub offset: u64,
    /// Stored payload size.
    pub len: u64,
    /// Records in the chunk.
    pub records: u32,
}

/// What kind of RecordIO failure an error is: callers decide how to report it (a
/// path the user got wrong, a disk or network failure, a damaged file) by this kind,
/// never by the wording of the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordIoKind {
    /// A local file could not be opened (no such file, no permission); `reason` is
    /// what the operating system said.
    Open,
    /// A remote object does not exist (HTTP 404, S3 NoSuchKey/NoSuchBucket).
    NotFound,
    /// Reading failed after the file or object was opened (a disk, network or store
    /// error).
    Io,
    /// The bytes are not a readable RecordIO file: a directory, a bad or truncated
    /// header, a CRC mismatch, records that do not fit their chunk.
    Corrupt,
    /// The path is a URL psrs cannot read, or the object store's settings are invalid.
    Location,
}

/// A RecordIO error, naming the file and (when known) the chunk. Its text is
/// `PATH: [chunk N: ]REASON`, with `cannot open: ` before the reason of an
/// [`RecordIoKind::Open`] error.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {}{}{reason}", chunk_prefix(.chunk), open_prefix(.kind))]
pub struct RecordIoError {
    /// The file.
    pub path: String,
    /// The chunk number, if the error is in one.
    pub chunk: Option<usize>,
    /// The kind of failure.
    pub kind: RecordIoKind,
    /// What is wrong.
    pub reason: String,
}

fn chunk_prefix(chunk: &Option<usize>) -> String {
    chunk.map(|c| format!("chunk {c}: ")).unwrap_or_default()
}

fn open_prefix(kind: &RecordIoKind) -> &'static str {
    if *kind == RecordIoKind::Open {
        "cannot open: "
    } else {
        ""
    }
}

impl RecordIoError {
    /// What the file system or the store said when the file could not be reached at
    /// all (a local file that cannot be opened, a remote object that does not exist),
    /// or `None` when the file was reached but is damaged or failed midway.
    pub fn unreachable(&self) -> Option<&str> {
        matches!(self.kind, RecordIoKind::Open | RecordIoKind::NotFound).then_some(self.reason.as_str())
    }
}

/// Why a chunk's header or payload does not decode: the reason of a
/// [`RecordIoKind::Corrupt`] error, which the caller names with the file and chunk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Damaged(pub String);

/// A decoded chunk header.
pub(crate) struct Header {
    pub crc: u32,
    pub compressor: Compressor,
    pub len: u64,
    pub records: u32,
}

/// The 20 header bytes of a chunk, all fields little-endian u32: magic, CRC32 (IEEE)
/// of the stored payload, compressor code, stored payload size, record count.
pub(crate) fn encode_header(crc: u32, c: Compressor, len: u32, records: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    for (i, v) in [MAGIC, crc, c.code(), len, records].into_iter().enumerate() {
        h[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    h
}

/// Decodes and bounds-checks a chunk header (either magic, see [`LEGACY_MAGIC`]);
/// [`Damaged`] says what is wrong with it.
pub(crate) fn decode_header(h: &[u8; HEADER_LEN]) -> Result<Header, Damaged> {
    let u = |a: usize| u32::from_le_bytes(h[a..a + 4].try_into().expect("4 bytes"));
    if u(0) != MAGIC && u(0) != LEGACY_MAGIC {
        return Err(Damaged(format!(
            "bad magic {:#010x} (not a RecordIO chunk; expected {MAGIC:#010x})",
            u(0)
        )));
    }
    let compressor = Compressor::from_code(u(8)).ok_or_else(|| Damaged(format!("unknown compressor {}", u(8))))?;
    let len = u(12) as u64;
    if len > MAX_CHUNK_BYTES {
        return Err(Damaged(format!("chunk of {len} bytes exceeds the 256 MiB limit")));
    }
    let records = u(16);
    if records > MAX_CHUNK_RECORDS {
        return Err(Damaged(format!(
            "chunk claims {records} records, more than can fit in 256 MiB"
        )));
    }
    Ok(Header {
        crc: u(4),
        compressor,
        len,
        records,
    })
}

/// Splits an uncompressed payload into its records; [`Damaged`] when they do not fit it.
pub(crate) fn split_records(raw: &[u8], records: u32) -> Result<Vec<Vec<u8>>, Damaged> {
    let mut out = Vec::with_capacity((records as usize).min(raw.len() / 4 + 1));
    let mut at = 0usize;
    for i in 0..records {
        let len = raw
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| Damaged(format!("record {i} is cut off")))?;
        at += 4;
        let rec = raw
            .get(at..at + len)
            .ok_or_else(|| Damaged(format!("record {i} claims {len} bytes past the end")))?;
        out.push(rec.to_vec());
        at += len;
    }
    if at != raw.len() {
        return Err(Damaged(format!(
            "{} stray bytes after {records} records",
            raw.len() - at
        )));
    }
    Ok(out)
}
