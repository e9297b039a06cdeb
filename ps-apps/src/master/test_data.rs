//! Test datasets: RecordIO files whose records name themselves ("file:record").

use super::Task;
use crate::recordio::{self, Compressor, Writer};
use std::path::Path;

/// Writes `files` files of `records` records each in `dir`, `per_chunk` records per
/// chunk; returns their paths.
pub fn dataset(dir: &Path, files: usize, records: usize, comp: Compressor, per_chunk: u32) -> Vec<String> {
    (0..files)
        .map(|f| {
            let p = dir.join(format!("part-{f}.rio"));
            let mut w = Writer::create(&p, comp, per_chunk, 1 << 20).unwrap();
            for r in 0..records {
                w.write(format!("{f}:{r}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
            p.display().to_string()
        })
        .collect()
}

/// The records of task `t`'s chunks, as text.
pub fn records_of(t: &Task) -> Vec<String> {
    t.chunks
        .iter()
        .flat_map(|c| recordio::read_chunk(Path::new(&c.path), &c.index).unwrap())
        .map(|r| String::from_utf8(r).unwrap())
        .collect()
}
