//! RecordIO: a file is a sequence of chunks; a chunk is a fixed header followed by a
//! (possibly compressed) payload of length-prefixed records. A reader can index a file
//! by reading headers only, then read any chunk by offset; the master cuts a dataset
//! into tasks of chunks this way.
//!
//! Chunk header (20 bytes, little-endian): magic `PRIO`, CRC32 of the stored payload,
//! compressor (0 none, 1 snappy, 2 gzip) and 3 zero bytes, stored payload size, record
//! count. Payload before compression: for each record, its length (u32) then its bytes.

mod chunk;
mod convert;
mod example;
mod reader;
mod writer;

pub use chunk::{ChunkIndex, Compressor, RecordIoError, MAX_CHUNK_BYTES};
pub use convert::{convert_csv, convert_idx, convert_libsvm, ConvertStats, Progress};
pub use example::{Example, Features};
pub use reader::{index, read_all, read_chunk};
pub use writer::Writer;
