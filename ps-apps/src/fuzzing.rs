//! Entry points for fuzzers (`fuzz/`, cargo-fuzz) and their regression tests: arbitrary
//! bytes into the RecordIO chunk reader and the master's and jobs' request decoders.
//! Any input must give a value or an error, never a panic, a hang or a huge allocation.

use crate::master::MasterRequest;
use crate::recordio::{index_stream, read_chunk_stream};
use std::io::Cursor;
use std::path::Path;

/// `data` as a whole RecordIO file: index its chunk headers, then read (CRC-check,
/// decompress, split) every chunk the index lists.
pub fn recordio_chunk_reader(data: &[u8]) {
    let path = Path::new("fuzz-input.rio");
    let mut f = Cursor::new(data);
    if let Ok(ix) = index_stream(&mut f, data.len() as u64, path) {
        for c in &ix {
            let _ = read_chunk_stream(&mut f, c, path);
        }
    }
}

/// `data` as a request to the master (task queues) and as a request to the jobs
/// scheduler, decoded the way their handles decode them.
pub fn master_request_decoder(data: &[u8]) {
    let _ = crate::train::coordinator::decode::<MasterRequest>(data);
    let _ = crate::train::coordinator::decode::<crate::jobs::wire::JobsRequest>(data);
}
