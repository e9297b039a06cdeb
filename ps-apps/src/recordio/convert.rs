//! Converting libsvm, CSV and IDX (MNIST-style) files into RecordIO datasets.

use super::chunk::Compressor;
use super::example::{Example, Features};
use super::writer::Writer;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Reports progress: (units done, units in all).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

/// What a conversion produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConvertStats {
    /// Records written.
    pub records: u64,
    /// Chunks written.
    pub chunks: usize,
    /// One past the largest feature index.
    pub dim: usize,
    /// Number of distinct labels.
    pub classes: usize,
}

/// Why a conversion failed, by kind (its text names the file, and the line where
/// there is one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// Opening, reading or writing a file failed.
    #[error("{0}")]
    Io(String),
    /// The input is not what its format says: a bad line or value, a bad IDX header,
    /// images and labels that do not match.
    #[error("{0}")]
    BadInput(String),
}

use ConvertError::{BadInput, Io};

struct Sink {
    w: Writer,
    stats: ConvertStats,
    labels: std::collections::BTreeSet<i64>,
}

impl Sink {
    fn new(out: &Path, per_chunk: u32, c: Compressor) -> Result<Sink, ConvertError> {
        Ok(Sink {
            w: Writer::create(out, c, per_chunk, 64 << 20)
                .map_err(|e| Io(format!("cannot create {}: {e}", out.display())))?,
            stats: ConvertStats::default(),
            labels: Default::default(),
        })
    }
    fn push(&mut self, e: &Example) -> Result<(), ConvertError> {
        self.stats.dim = self.stats.dim.max(e.dim());
        self.labels.insert(e.label as i64);
        self.w.write(&e.encode()).map_err(|e| Io(e.to_string()))
    }
    fn finish(self) -> Result<ConvertStats, ConvertError> {
        let mut s = self.stats;
        s.records = self.w.total_records;
        s.classes = self.labels.len();
        s.chunks = self.w.finish().map_err(|e| Io(e.to_string()))?;
        Ok(s)
    }
}

fn lines(input: &Path) -> Result<(impl Iterator<Item = std::io::Result<String>>, u64), ConvertError> {
    let f = File::open(input).map_err(|e| Io(format!("cannot open {}: {e}", input.display())))?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    Ok((BufReader::new(f).lines(), size))
}

/// Converts a libsvm file (`label idx:val idx:val ...`, indices kept as written).
pub fn convert_libsvm(
    input: &Path,
    out: &Path,
    per_chunk: u32,
    c: Compressor,
    progress: Progress,
) -> Result<ConvertStats, ConvertError> {
    let (it, size) = lines(input)?;
    let mut sink = Sink::new(out, per_chunk, c)?;
    let mut done = 0u64;
    for (n, line) in it.enumerate() {
        let line = line.map_err(|e| Io(format!("{}: {e}", input.display())))?;
        done += line.len() as u64 + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: &str| BadInput(format!("{}:{}: {what}", input.display(), n + 1));
        let mut parts = line.split_whitespace();
        let label: f32 = parts
            .next()
            .and_then(|l| l.parse().ok())
            .ok_or_else(|| bad("bad label"))?;
        let mut feats: Vec<(u32, f32)> = Vec::new();
        for p in parts {
            let (i, v) = p.split_once(':').ok_or_else(|| bad(&format!("'{p}' is not idx:val")))?;
            let i: u32 = i.parse().map_err(|_| bad(&format!("bad index '{i}'")))?;
            let v: f32 = v.parse().map_err(|_| bad(&format!("bad value '{v}'")))?;
            feats.push((i, v));
        }
        feats.sort_by_key(|f| f.0);
        feats.dedup_by_key(|f| f.0);
        sink.push(&Example {
            label,
            features: Features::Sparse {
                idx: feats.iter().map(|f| f.0).collect(),
                val: feats.iter().map(|f| f.1).collect(),
            },
        })?;
        if n % 1024 == 0 {
            progress(done.min(size), size);
        }
    }
    progress(size, size);
    sink.finish()
}

/// Converts a CSV file whose first column is the label and the rest numeric features.
pub fn convert_csv(
    input: &Path,
    out: &Path,
    header: bool,
    per_chunk: u32,
    c: Compressor,
    progress: Progress,
) -> Result<ConvertStats, ConvertError> {
    let (it, size) = lines(input)?;
    let mut sink = Sink::new(out, per_chunk, c)?;
    let mut done = 0u64;
    let mut width = None;
    for (n, line) in it.enumerate() {
        let line = line.map_err(|e| Io(format!("{}: {e}", input.display())))?;
        done += line.len() as u64 + 1;
        if (n == 0 && header) || line.trim().is_empty() {
            continue;
        }
        let vals = csv_row(&line, n == 0).map_err(|e| BadInput(format!("{}:{}: {e}", input.display(), n + 1)))?;
        if vals.len() < 2 {
            return Err(BadInput(format!(
                "{}:{}: need a label and at least one feature",
                input.display(),
                n + 1
            )));
        }
        if *width.get_or_insert(vals.len()) != vals.len() {
            return Err(BadInput(format!(
                "{}:{}: {} columns, earlier rows have {}",
                input.display(),
                n + 1,
                vals.len(),
                width.unwrap_or(0)
            )));
        }
        sink.push(&Example {
            label: vals[0],
            features: Features::Dense(vals[1..].to_vec()),
        })?;
        if n % 1024 == 0 {
            progress(done.min(size), size);
        }
    }
    progress(size, size);
    sink.finish()
}

/// The numbers of one CSV row, or which column is not a number (with a hint to pass
/// `--header` when it is the first line).
fn csv_row(line: &str, first: bool) -> Result<Vec<f32>, String> {
    let mut out = Vec::new();
    for (i, field) in line.split(',').enumerate() {
        match field.trim().parse::<f32>() {
            Ok(v) => out.push(v),
            Err(_) => {
                let mut e = format!("column {}: '{}' is not a number", i + 1, field.trim());
                if first {
                    e += " (if the first line is a header, pass --header)";
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

fn read_idx(path: &Path, want_dims: usize) -> Result<(Vec<usize>, Vec<u8>), ConvertError> {
    let f = File::open(path).map_err(|e| Io(format!("cannot open {}: {e}", path.display())))?;
    let mut raw = Vec::new();
    let gz = path.extension().is_some_and(|e| e == "gz");
    let limit = 1u64 << 31;
    if gz {
        flate2::read::GzDecoder::new(f).take(limit).read_to_end(&mut raw)
    } else {
        f.take(limit).read_to_end(&mut raw)
    }
    .map_err(|e| Io(format!("{}: {e}", path.display())))?;
    let bad = |w: &str| BadInput(format!("{}: not an IDX file: {w}", path.display()));
    if raw.len() < 4 || raw[0] != 0 || raw[1] != 0 || raw[2] != 0x08 {
        return Err(bad("bad magic (expected unsigned bytes)"));
    }
    let ndims = raw[3] as usize;
    if ndims != want_dims || raw.len() < 4 + 4 * ndims {
        return Err(bad(&format!("{ndims} dimensions, expected {want_dims}")));
    }
    let dims: Vec<usize> = (0..ndims)
        .map(|i| u32::from_be_bytes(raw[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize)
        .collect();
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(&format!("dimensions {dims:?} overflow")))?;
    let data = raw.split_off(4 + 4 * ndims);
    if data.len() != n {
        return Err(bad(&format!("{} data bytes, header says {n}", data.len())));
    }
    Ok((dims, data))
}

/// Converts IDX images (`idx3-ubyte`, optionally `.gz`) and labels (`idx1-ubyte`)
/// into dense examples with pixels scaled to [0, 1].
pub fn convert_idx(
    images: &Path,
    labels: &Path,
    out: &Path,
    per_chunk: u32,
    c: Compressor,
    progress: Progress,
) -> Result<ConvertStats, ConvertError> {
    let (idims, pixels) = read_idx(images, 3)?;
    let (ldims, labs) = read_idx(labels, 1)?;
    if idims[0] != ldims[0] {
        return Err(BadInput(format!("{} images but {} labels", idims[0], ldims[0])));
    }
    let dim = idims[1] * idims[2];
    let mut sink = Sink::new(out, per_chunk, c)?;
    let n = idims[0] as u64;
    for i in 0..idims[0] {
        let px = &pixels[i * dim..(i + 1) * dim];
        sink.push(&Example {
            label: labs[i] as f32,
            features: Features::Dense(px.iter().map(|&p| p as f32 / 255.0).collect()),
        })?;
        if i % 1024 == 0 {
            progress(i as u64, n);
        }
    }
    progress(n, n);
    sink.finish()
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
