//! Damaged files: the scanner and random access (index, then chunks) agree on what a
//! damaged file yields, and neither panics.

use super::chunk::{Compressor, LEGACY_MAGIC, MAGIC};
use super::reader::tests::write;
use super::reader::{index, read_all, read_chunk};
use super::scanner::Scanner;
use proptest::prelude::*;
use std::path::Path;

/// Every record a damaged file still yields must be a prefix of the original
/// records; reading must never panic.
fn check_damaged(p: &Path, original: &[Vec<u8>], must_fail: bool) {
    let scanned: Vec<_> = Scanner::open(p).unwrap().collect();
    let ok: Vec<Vec<u8>> = scanned.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    assert!(
        original.starts_with(&ok),
        "damaged file yielded records not in the original"
    );
    let scan_failed = scanned.iter().any(|r| r.is_err());
    let mut random_access_failed = false;
    match index(p) {
        Ok(idx) => {
            for c in &idx {
                match read_chunk(p, c) {
                    Ok(recs) => assert!(recs.iter().all(|r| original.contains(r))),
                    Err(_) => random_access_failed = true,
                }
            }
        }
        Err(_) => random_access_failed = true,
    }
    assert_eq!(
        scan_failed, random_access_failed,
        "scanner and index+read_chunk disagree"
    );
    if must_fail {
        assert!(scan_failed, "a changed byte went unnoticed");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn damaged_files_give_errors_or_valid_data(pos in 0usize..2000, val in any::<u8>(), cut in 0usize..2000, c in 0u32..3) {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), Compressor::from_code(c).unwrap(), 30);
        let original = read_all(&p).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        let changed = bytes[pos % n] != val;
        bytes[pos % n] = val;
        let cut = cut.min(n);
        bytes.truncate(cut);
        std::fs::write(&p, &bytes).unwrap();
        check_damaged(&p, &original, changed && pos % n < cut);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), magic in 0u8..3) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("random.rio");
        let mut bytes = bytes;
        let magic = [None, Some(MAGIC), Some(LEGACY_MAGIC)][magic as usize];
        if let (Some(m), true) = (magic, bytes.len() >= 4) {
            bytes[..4].copy_from_slice(&m.to_le_bytes());
        }
        std::fs::write(&p, &bytes).unwrap();
        check_damaged(&p, &[], false);
    }
}
