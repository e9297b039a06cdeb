//! Compatibility with PaddlePaddle's RecordIO (`github.com/PaddlePaddle/recordio`).
//!
//! The fixtures in `ps-apps/tests/fixtures/recordio/` were written by Paddle's Go
//! library (see the README there for how; `paddletool/main.go` is the program). The
//! two smallest are also spelled out here byte by byte from the documented layout.

use super::chunk::{decode_header, HEADER_LEN, LEGACY_MAGIC, MAGIC};
use super::{index, read_all, read_chunk, Compressor, Example, Features, Scanner, Writer};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recordio")
        .join(name)
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Writes `records` with psrs's writer, `per_chunk` records per chunk; the file's bytes.
fn psrs_bytes(c: Compressor, per_chunk: u32, records: &[&[u8]]) -> Vec<u8> {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("psrs.rio");
    let mut w = Writer::create(&p, c, per_chunk, 1 << 20).unwrap();
    for r in records {
        w.write(r).unwrap();
    }
    w.finish().unwrap();
    std::fs::read(&p).unwrap()
}

/// CRC-32C (Castagnoli), bit by bit, masked as snappy's framing format stores it.
fn masked_crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 { (c >> 1) ^ 0x82f6_3b78 } else { c >> 1 };
        }
    }
    let c = !c;
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

/// Paddle's `NewWriter(w, 10, NoCompression)` given "12345", "1234", "12" (its own
/// `TestWriteAndRead`): the first two fill a chunk (9 bytes), the third starts another.
#[test]
fn uncompressed_paddle_file_is_the_documented_layout_and_psrs_writes_it_identically() {
    let expected = hex("
        04030201  873a6795  00000000  11000000  02000000
        05000000 3132333435  04000000 31323334
        04030201  9a5680f2  00000000  06000000  01000000
        02000000 3132
    ");
    // Chunk 0: magic 0x01020304; CRC32-IEEE of the 17 payload bytes; compressor 0;
    // 17 = 4+5+4+4 payload bytes; 2 records; then each record's u32 length and bytes.
    // Chunk 1 at offset 37 = 20 + 17: one record of 2 bytes, 6 payload bytes.
    assert_eq!(std::fs::read(fixture("paddle-none.rio")).unwrap(), expected);
    assert_eq!(crc32fast::hash(&expected[20..37]), 0x9567_3a87);
    assert_eq!(crc32fast::hash(&expected[57..]), 0xf280_569a);

    let idx = index(&fixture("paddle-none.rio")).unwrap();
    let layout: Vec<(u64, u64, u32)> = idx.iter().map(|c| (c.offset, c.len, c.records)).collect();
    assert_eq!(layout, [(0, 17, 2), (37, 6, 1)]);
    assert_eq!(
        read_all(&fixture("paddle-none.rio")).unwrap(),
        [&b"12345"[..], b"1234", b"12"]
    );
    assert_eq!(psrs_bytes(Compressor::None, 2, &[b"12345", b"1234", b"12"]), expected);
}

/// Paddle's default writer (`NewWriter(w, -1, -1)`: snappy, 32 MiB chunks) given
/// "Hello", "World!".
#[test]
fn default_snappy_paddle_file_is_the_documented_layout_and_psrs_writes_it_identically() {
    let payload = hex("05000000 48656c6c6f  06000000 576f726c6421");
    let expected = hex("
        04030201  5c2b1953  01000000  25000000  02000000
        ff 060000 734e61507059
        01 170000 b2db730a
        05000000 48656c6c6f  06000000 576f726c6421
    ");
    // Header: magic; CRC32-IEEE of the 37 stored bytes; compressor 1 (snappy); 37
    // stored bytes; 2 records. Stored: snappy's framing format, not a raw block: the
    // stream identifier chunk (type 0xff, length 6, "sNaPpY"), then one chunk of type
    // 0x01 (uncompressed: 19 bytes do not shrink by 1/8) of length 4 + 19 = 0x17,
    // whose first 4 bytes are the masked CRC-32C of the 19 payload bytes.
    assert_eq!(std::fs::read(fixture("paddle-default.rio")).unwrap(), expected);
    assert_eq!(crc32fast::hash(&expected[20..]), 0x5319_2b5c);
    assert_eq!(masked_crc32c(&payload), 0x0a73_dbb2);
    assert_eq!(
        read_all(&fixture("paddle-default.rio")).unwrap(),
        [&b"Hello"[..], b"World!"]
    );
    assert_eq!(psrs_bytes(Compressor::Snappy, 1000, &[b"Hello", b"World!"]), expected);
}

/// The records of `paddle-snappy.rio` and `paddle-gzip.rio` (`mixed` in paddletool):
/// an empty one, two words, 70 000 compressible bytes (two snappy blocks), 3 000 noisy
/// bytes (stored uncompressed by snappy), then "record 5" .. "record 24".
fn mixed() -> Vec<Vec<u8>> {
    let mut recs = vec![b"".to_vec(), b"Hello".to_vec(), b"World!".to_vec()];
    recs.push(b"psrs ".iter().copied().cycle().take(70_000).collect());
    let mut x = 1u64;
    recs.push(
        (0..3000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect(),
    );
    recs.extend((5..25).map(|i| format!("record {i}").into_bytes()));
    recs
}

/// Paddle cut chunks of at most 4096 record bytes: [3 records], [the 70 000 bytes],
/// [the rest]. Index, random access and streaming all give the records back.
#[test]
fn compressed_paddle_files_read_back() {
    for (name, code) in [("paddle-snappy.rio", 1), ("paddle-gzip.rio", 2)] {
        let p = fixture(name);
        let idx = index(&p).unwrap();
        assert_eq!(idx.iter().map(|c| c.records).collect::<Vec<_>>(), [3, 1, 21], "{name}");
        let bytes = std::fs::read(&p).unwrap();
        for c in &idx {
            let h: [u8; HEADER_LEN] = bytes[c.offset as usize..][..HEADER_LEN].try_into().unwrap();
            assert_eq!(decode_header(&h).unwrap().compressor.code(), code);
        }
        let want = mixed();
        assert_eq!(read_chunk(&p, &idx[1]).unwrap(), [want[3].clone()]);
        assert_eq!(read_all(&p).unwrap(), want, "{name}");
        let streamed: Vec<Vec<u8>> = Scanner::open(&p).unwrap().map(Result::unwrap).collect();
        assert_eq!(streamed, want, "{name}");
    }
}

/// psrs's snappy compressor turns each of Paddle's chunk payloads into exactly the
/// bytes Paddle stored (the framing format, the same block split and the same
/// compressed-or-not choice). Gzip output differs between deflate implementations, so
/// there only the reading direction is checked here.
#[test]
fn psrs_snappy_output_matches_paddles_chunk_by_chunk() {
    let p = fixture("paddle-snappy.rio");
    let bytes = std::fs::read(&p).unwrap();
    for c in index(&p).unwrap() {
        let stored = &bytes[c.offset as usize + HEADER_LEN..][..c.len as usize];
        let raw = Compressor::Snappy.decompress(stored).unwrap();
        assert_eq!(Compressor::Snappy.compress(&raw).unwrap(), stored, "chunk {}", c.idx);
    }
}

/// A dataset of training examples written by Paddle's library (records encoded as psrs
/// encodes examples, by paddletool itself) is read the way workers read tasks: by
/// index, then chunk by chunk.
#[test]
fn paddle_written_examples_decode_as_training_data() {
    let p = fixture("paddle-examples.rio");
    let idx = index(&p).unwrap();
    assert!(idx.len() > 1, "several chunks, so tasks can be cut");
    let got: Vec<Example> = idx
        .iter()
        .flat_map(|c| read_chunk(&p, c).unwrap())
        .map(|r| Example::decode(&r).unwrap())
        .collect();
    let want: Vec<Example> = (0..64)
        .map(|i| Example {
            label: (i % 2) as f32,
            features: if i % 4 == 3 {
                Features::Sparse {
                    idx: vec![0, 2],
                    val: vec![i as f32, 0.5],
                }
            } else {
                let f = i as f32;
                Features::Dense(vec![f, f * 0.5, -f, 1.0])
            },
        })
        .collect();
    assert_eq!(got, want);
}

/// Files in psrs's former layout (magic "PRIO", otherwise the same bytes) still read.
#[test]
fn legacy_prio_files_are_still_read() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("old.rio");
    let recs: Vec<Vec<u8>> = (0..10).map(|i| format!("old {i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
    let mut bytes = psrs_bytes(Compressor::Gzip, 3, &refs);
    std::fs::write(&p, &bytes).unwrap();
    for c in index(&p).unwrap() {
        let at = c.offset as usize;
        assert_eq!(bytes[at..at + 4], MAGIC.to_le_bytes());
        bytes[at..at + 4].copy_from_slice(&LEGACY_MAGIC.to_le_bytes());
    }
    std::fs::write(&p, &bytes).unwrap();
    assert_eq!(bytes[..4], *b"PRIO");
    assert_eq!(read_all(&p).unwrap(), recs);
}

/// The compressor is a whole u32: values Paddle does not define are refused, also
/// where psrs's former layout had zero padding.
#[test]
fn unknown_compressors_are_refused() {
    let mut h: [u8; HEADER_LEN] = hex("04030201 00000000 00000000 00000000 00000000").try_into().unwrap();
    assert!(decode_header(&h).is_ok());
    for code in [3u32, 0x100, 0x0100_0001] {
        h[8..12].copy_from_slice(&code.to_le_bytes());
        let e = decode_header(&h).err().unwrap();
        assert_eq!(e.to_string(), format!("unknown compressor {code}"));
    }
}

/// Paddle's own reader opens psrs's files (every compressor, several chunks, empty and
/// large records). Needs `paddletool` (built from `tests/fixtures/recordio/paddletool`
/// with Go and Paddle's library, see the README there) on PATH.
#[test]
#[ignore = "needs Go and PaddlePaddle's recordio library: see ps-apps/tests/fixtures/recordio/README.md"]
fn paddle_reads_psrs_files() {
    let d = tempfile::tempdir().unwrap();
    let want = mixed();
    for c in [Compressor::None, Compressor::Snappy, Compressor::Gzip] {
        let p = d.path().join(format!("{c:?}.rio"));
        let mut w = Writer::create(&p, c, 4, 1 << 20).unwrap();
        for r in &want {
            w.write(r).unwrap();
        }
        assert_eq!(w.finish().unwrap(), 7);
        let out = std::process::Command::new("paddletool")
            .arg("dump")
            .arg(&p)
            .output()
            .expect("paddletool is not on PATH (see ps-apps/tests/fixtures/recordio/README.md)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got: Vec<Vec<u8>> = String::from_utf8(out.stdout).unwrap().lines().map(hex).collect();
        assert_eq!(got, want, "{c:?}");
    }
}
