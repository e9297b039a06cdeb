//! Fuzz-style tests (proptest) over the [`crate::fuzzing`] entry points: arbitrary bytes
//! into the RecordIO chunk reader and the master's request decoder must give an error or
//! a value, never a panic. Every input the cargo-fuzz targets (`fuzz/`) ever found
//! crashing is kept under `fuzz/regressions/<target>/`, and their minimized corpus under
//! `fuzz/seeds/<target>/`; both are replayed here.

use crate::fuzzing;
use proptest::prelude::*;

/// One fuzz target's entry point.
type Replay = fn(&[u8]);

#[test]
fn kept_fuzz_inputs_replay_without_panic() {
    let targets: [(&str, Replay); 2] = [
        ("recordio_chunk_reader", fuzzing::recordio_chunk_reader),
        ("master_request_decoder", fuzzing::master_request_decoder),
    ];
    for (target, run) in targets {
        ps_core::fuzzing::replay_kept(target, run);
    }
}

proptest! {
    #[test]
    fn recordio_chunk_reader(mut bytes in proptest::collection::vec(any::<u8>(), 0..400), header in any::<bool>(), comp in 0u32..3) {
        if header && bytes.len() >= 20 {
            // a plausible header: right magic and compressor, arbitrary CRC and sizes
            bytes[..4].copy_from_slice(&0x0102_0304u32.to_le_bytes());
            bytes[8..12].copy_from_slice(&comp.to_le_bytes());
        }
        fuzzing::recordio_chunk_reader(&bytes);
    }

    #[test]
    fn master_request_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        fuzzing::master_request_decoder(&bytes);
    }
}
