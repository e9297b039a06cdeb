//! Fuzz-style tests (proptest) over the [`crate::fuzzing`] entry points: arbitrary bytes
//! into the RecordIO chunk reader and the master's request decoder must give an error or
//! a value, never a panic. And the cargo-fuzz targets' corpora as an ordinary test: every
//! file of every target's corpus (`fuzz/seeds/<target>/`, the minimized corpus of past
//! runs; `fuzz/regressions/<target>/`, every input that ever crashed it; and
//! `fuzz/corpus/<target>/` when a local run left one) goes through the entry point the
//! target itself calls, read from `fuzz/fuzz_targets/<target>.rs`, so a new target is
//! replayed as soon as it exists (ps-apps sees both crates' entry points).

use crate::fuzzing;
use proptest::prelude::*;

/// One fuzz target's entry point.
type Replay = fn(&[u8]);

/// The entry point a target's source calls (`ps_core::fuzzing::NAME` or
/// `ps_apps::fuzzing::NAME`), as a function.
fn entry_point(source: &str) -> Option<Replay> {
    let name = ["ps_core::fuzzing::", "ps_apps::fuzzing::"]
        .iter()
        .find_map(|p| source.split_once(p).map(|(_, rest)| (*p, rest)))
        .map(|(p, rest)| {
            (
                p,
                rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    .unwrap_or(""),
            )
        })?;
    Some(match name {
        ("ps_core::fuzzing::", "message_decoder") => ps_core::fuzzing::message_decoder,
        ("ps_core::fuzzing::", "pslite_message_decoder") => ps_core::fuzzing::pslite_message_decoder,
        ("ps_core::fuzzing::", "tcp_frame_reader") => ps_core::fuzzing::tcp_frame_reader,
        ("ps_core::fuzzing::", "tls_accept") => |b| {
            assert!(
                !ps_core::fuzzing::tls_accept(b),
                "a handshake without a certificate completed"
            )
        },
        ("ps_apps::fuzzing::", "recordio_chunk_reader") => fuzzing::recordio_chunk_reader,
        ("ps_apps::fuzzing::", "master_request_decoder") => fuzzing::master_request_decoder,
        _ => return None,
    })
}

#[test]
fn every_fuzz_targets_corpora_replay_through_its_entry_point() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/fuzz_targets");
    let mut targets: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    targets.sort();
    assert!(targets.len() >= 6, "fuzz targets in {}: {targets:?}", dir.display());
    let start = std::time::Instant::now();
    let mut inputs = 0;
    for t in &targets {
        let name = t.file_stem().unwrap().to_str().unwrap();
        let run = entry_point(&std::fs::read_to_string(t).unwrap())
            .unwrap_or_else(|| panic!("{}: no known fuzzing entry point; add it to entry_point()", t.display()));
        inputs += ps_core::fuzzing::kept_inputs(name).len();
        ps_core::fuzzing::replay_kept(name, run);
    }
    eprintln!(
        "replayed {inputs} kept inputs of {} fuzz targets in {:?}",
        targets.len(),
        start.elapsed()
    );
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
