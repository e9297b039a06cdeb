//! Tests of the converters.

use super::super::reader::read_all;
use super::*;

fn nop() -> impl FnMut(u64, u64) {
    |_, _| {}
}

#[test]
fn libsvm_and_csv() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("a.svm");
    std::fs::write(&src, "1 3:0.5 1:2\n0 2:1\n\n# comment\n1 7:1\n").unwrap();
    let out = d.path().join("a.rio");
    let s = convert_libsvm(&src, &out, 2, Compressor::Snappy, &mut nop()).unwrap();
    assert_eq!((s.records, s.dim, s.classes), (3, 8, 2));
    let recs = read_all(&out).unwrap();
    let e = Example::decode(&recs[0]).unwrap();
    assert_eq!(
        e.features,
        Features::Sparse {
            idx: vec![1, 3],
            val: vec![2.0, 0.5]
        }
    );
    std::fs::write(&src, "1 3:x\n").unwrap();
    let err = convert_libsvm(&src, &out, 2, Compressor::None, &mut nop())
        .unwrap_err()
        .to_string();
    assert!(err.contains("a.svm:1") && err.contains("bad value"), "{err}");

    let csv = d.path().join("b.csv");
    std::fs::write(&csv, "y,a,b\n1,0.5,1\n0,1,2\n").unwrap();
    let s = convert_csv(&csv, &out, true, 10, Compressor::Gzip, &mut nop()).unwrap();
    assert_eq!((s.records, s.dim), (2, 2));
    std::fs::write(&csv, "1,0.5,1\n0,1\n").unwrap();
    assert!(convert_csv(&csv, &out, false, 10, Compressor::Gzip, &mut nop())
        .unwrap_err()
        .to_string()
        .contains("columns"));
}

#[test]
fn idx_images() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("i-idx3-ubyte");
    let lab = d.path().join("l-idx1-ubyte");
    let mut b = vec![0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2];
    b.extend([0, 255, 51, 0, 255, 255, 255, 255]);
    std::fs::write(&img, &b).unwrap();
    std::fs::write(&lab, [0, 0, 8, 1, 0, 0, 0, 2, 7, 3]).unwrap();
    let out = d.path().join("m.rio");
    let s = convert_idx(&img, &lab, &out, 1, Compressor::None, &mut nop()).unwrap();
    assert_eq!((s.records, s.dim, s.classes), (2, 4, 2));
    let e = Example::decode(&read_all(&out).unwrap()[0]).unwrap();
    assert_eq!(e.label, 7.0);
    assert_eq!(e.features, Features::Dense(vec![0.0, 1.0, 0.2, 0.0]));
    std::fs::write(&lab, [0, 0, 8, 1, 0, 0, 0, 3, 7, 3, 1]).unwrap();
    assert!(convert_idx(&img, &lab, &out, 1, Compressor::None, &mut nop())
        .unwrap_err()
        .to_string()
        .contains("2 images but 3 labels"));
}

#[test]
fn fashion_mnist_test_set() {
    let dir = Path::new("/usr/share/datasets/fashion-mnist");
    assert!(
        dir.exists(),
        "{} is absent: apt-get install dataset-fashion-mnist (scripts/install-deps.sh does)",
        dir.display()
    );
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("t10k.rio");
    let s = convert_idx(
        &dir.join("t10k-images-idx3-ubyte.gz"),
        &dir.join("t10k-labels-idx1-ubyte.gz"),
        &out,
        1000,
        Compressor::Snappy,
        &mut nop(),
    )
    .unwrap();
    assert_eq!((s.records, s.dim, s.classes, s.chunks), (10_000, 784, 10, 10));
}

#[test]
fn libsvm_keeps_index_base_and_signed_labels() {
    let d = tempfile::tempdir().unwrap();
    let (src, out) = (d.path().join("z.svm"), d.path().join("z.rio"));
    std::fs::write(&src, "+1 0:1.5 4:2\n-1 2:1\n").unwrap();
    let mut calls = Vec::new();
    let s = convert_libsvm(&src, &out, 1, Compressor::None, &mut |a, b| calls.push((a, b))).unwrap();
    assert_eq!((s.records, s.chunks, s.dim, s.classes), (2, 2, 5, 2));
    let size = std::fs::metadata(&src).unwrap().len();
    assert_eq!(calls.last(), Some(&(size, size)), "progress ends at 100%");
    let e = Example::decode(&read_all(&out).unwrap()[0]).unwrap();
    assert_eq!(e.label, 1.0);
    assert_eq!(
        e.features,
        Features::Sparse {
            idx: vec![0, 4],
            val: vec![1.5, 2.0]
        }
    );
}

#[test]
fn gzipped_and_hostile_idx_files() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let gz = |name: &str, bytes: &[u8]| {
        let p = d.path().join(name);
        let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        w.write_all(bytes).unwrap();
        std::fs::write(&p, w.finish().unwrap()).unwrap();
        p
    };
    let img = gz("i.gz", &[0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 255, 0]);
    let lab = gz("l.gz", &[0, 0, 8, 1, 0, 0, 0, 1, 4]);
    let out = d.path().join("g.rio");
    let s = convert_idx(&img, &lab, &out, 8, Compressor::Gzip, &mut nop()).unwrap();
    assert_eq!((s.records, s.dim, s.classes), (1, 2, 1));
    // dimensions whose product overflows, and a labels file given as images
    let huge = d.path().join("huge");
    std::fs::write(
        &huge,
        [0, 0, 8, 3, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255],
    )
    .unwrap();
    let e = convert_idx(&huge, &lab, &out, 8, Compressor::None, &mut nop())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not an IDX file"), "{e}");
    let e = convert_idx(&lab, &lab, &out, 8, Compressor::None, &mut nop())
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 dimensions, expected 3"), "{e}");
}

#[test]
fn csv_errors_name_the_column_and_hint_at_the_header() {
    let d = tempfile::tempdir().unwrap();
    let (csv, out) = (d.path().join("h.csv"), d.path().join("h.rio"));
    std::fs::write(&csv, "label,f1,f2\n1,0.5,1\n").unwrap();
    let e = convert_csv(&csv, &out, false, 10, Compressor::None, &mut nop())
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("h.csv:1: column 1: 'label' is not a number (if the first line is a header, pass --header)"),
        "{e}"
    );
    std::fs::write(&csv, "1,0.5,1\n0,x,2\n").unwrap();
    let e = convert_csv(&csv, &out, false, 10, Compressor::None, &mut nop())
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("h.csv:2: column 2: 'x' is not a number"), "{e}");
}

#[test]
fn errors_say_their_kind() {
    let d = tempfile::tempdir().unwrap();
    let (csv, out) = (d.path().join("k.csv"), d.path().join("k.rio"));
    let missing = convert_csv(&csv, &out, false, 10, Compressor::None, &mut nop()).unwrap_err();
    assert!(matches!(missing, ConvertError::Io(_)), "{missing:?}");
    std::fs::write(&csv, "1,x\n").unwrap();
    let bad = convert_csv(&csv, &out, false, 10, Compressor::None, &mut nop()).unwrap_err();
    assert!(matches!(bad, ConvertError::BadInput(_)), "{bad:?}");
}
