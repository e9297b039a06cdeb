//! Fuzz-style tests (proptest): arbitrary bytes into the RecordIO chunk reader and the
//! master's request decoder must give an error or a value, never a panic.
//! `scripts/fuzz.sh` runs them with many more cases; failing inputs are kept by
//! proptest in `proptest-regressions/` and replayed first on every run.

use crate::master::MasterRequest;
use crate::recordio::{index, read_all, read_chunk};
use proptest::prelude::*;

proptest! {
    #[test]
    fn recordio_chunk_reader(mut bytes in proptest::collection::vec(any::<u8>(), 0..400), header in any::<bool>(), comp in 0u32..3) {
        if header && bytes.len() >= 20 {
            // a plausible header: right magic and compressor, arbitrary CRC and sizes
            bytes[..4].copy_from_slice(&0x0102_0304u32.to_le_bytes());
            bytes[8..12].copy_from_slice(&comp.to_le_bytes());
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.rio");
        std::fs::write(&p, &bytes).unwrap();
        let _ = read_all(&p);
        if let Ok(ix) = index(&p) {
            for c in &ix {
                let _ = read_chunk(&p, c);
            }
        }
    }

    #[test]
    fn master_request_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = crate::train::coordinator::decode::<MasterRequest>(&bytes);
        let _ = crate::train::coordinator::decode::<crate::jobs::wire::JobsRequest>(&bytes);
    }
}
