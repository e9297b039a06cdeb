//! RecordIO: a file is a sequence of chunks; a chunk is a fixed header followed by a
//! (possibly compressed) payload of length-prefixed records. A reader can index a file
//! by reading headers only, then read any chunk by offset; the master cuts a dataset
//! into tasks of chunks this way.
//!
//! The format is PaddlePaddle's RecordIO (`github.com/PaddlePaddle/recordio`), byte for
//! byte: files written by Paddle's Go/Python/C library are read here, and files written
//! here open in Paddle's reader. Chunk header (20 bytes, five little-endian u32): magic
//! `0x01020304`, CRC32 (IEEE) of the stored payload, compressor (0 none, 1 snappy in
//! the framing format, 2 gzip), stored payload size, record count. Payload before
//! compression: for each record, its length (u32 little-endian) then its bytes. Files
//! in psrs's earlier layout (magic `PRIO`, otherwise identical) are still read.
//!
//! Every size read from disk is bounded ([`MAX_CHUNK_BYTES`], [`MAX_CHUNK_RECORDS`]);
//! a damaged file gives a [`RecordIoError`] naming the file and chunk, never a panic.
//!
//! Entry points: [`Writer`] to write, [`index`] + [`read_chunk`] for random access by
//! chunk (what the master and workers use), [`Scanner`] / [`read_all`] to stream a
//! file, [`Example`] for the record encoding of training examples, and the
//! `convert_*` functions (optionally under [`convert_with_progress`]).

mod chunk;
#[cfg(test)]
mod compat_tests;
mod convert;
#[cfg(test)]
mod damage_tests;
mod example;
mod progress;
mod reader;
mod scanner;
mod writer;

pub use chunk::{
    ChunkIndex, Compressor, FileIndex, RecordIoError, RecordIoKind, LEGACY_MAGIC, MAGIC, MAX_CHUNK_BYTES,
    MAX_CHUNK_RECORDS,
};
pub use convert::{convert_csv, convert_idx, convert_libsvm, ConvertError, ConvertStats, Progress};
pub use example::{Example, Features, MalformedExample};
pub use progress::convert_with_progress;
pub use reader::{index, index_stream, read_all, read_chunk, read_chunk_stream};
pub use scanner::Scanner;
pub use writer::Writer;
