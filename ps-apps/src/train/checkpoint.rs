//! Server checkpoints: a shard (parameters, version, optimizer state) saved
//! atomically with a magic header and CRC, and loaded back by a replacement server.
//! `psrs train`'s shards and `psrs.torch`'s tables ([`save_file`], [`load_file`]) use
//! the same file format.

use super::error::TrainError;
use super::shard::Shard;
use crate::storage::files::write_atomic;
use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"PSRSCKP1";
const MAX_CHECKPOINT: u64 = 4 << 30;

/// The checkpoint file of server rank `rank` in `dir`.
pub fn path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("server-{rank}.ckpt"))
}

/// Saves `shard` for server `rank` in `dir` (errors as [`save_file`]'s).
pub fn save(dir: &Path, rank: usize, shard: &Shard) -> Result<(), TrainError> {
    save_file(&path(dir, rank), shard)
}

/// Loads server `rank`'s checkpoint from `dir`: `Ok(None)` if there is none, an error
/// naming the file if it is corrupt (as [`load_file`]'s).
pub fn load(dir: &Path, rank: usize) -> Result<Option<Shard>, TrainError> {
    load_file(&path(dir, rank))
}

/// Saves `value` to the checkpoint file `p` (written atomically):
/// [`TrainError::CheckpointIo`] if it cannot be written,
/// [`TrainError::CorruptCheckpoint`] if `value` cannot be encoded.
pub fn save_file<T: Serialize>(p: &Path, value: &T) -> Result<(), TrainError> {
    let body = bincode::DefaultOptions::new()
        .serialize(value)
        .map_err(|e| TrainError::CorruptCheckpoint(format!("cannot encode checkpoint: {e}")))?;
    let mut out = Vec::with_capacity(body.len() + 12);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    write_atomic(p, &out).map_err(|e| TrainError::CheckpointIo(format!("cannot write checkpoint {}: {e}", p.display())))
}

/// Loads the checkpoint file `p`: `Ok(None)` if there is none,
/// [`TrainError::CorruptCheckpoint`] naming the file if it is corrupt,
/// [`TrainError::CheckpointIo`] if it cannot be read.
pub fn load_file<T: DeserializeOwned>(p: &Path) -> Result<Option<T>, TrainError> {
    let bytes = match std::fs::read(p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(TrainError::CheckpointIo(format!(
                "cannot read checkpoint {}: {e}",
                p.display()
            )))
        }
    };
    let bad = |why: &str| TrainError::CorruptCheckpoint(format!("checkpoint {} is corrupt: {why}", p.display()));
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(bad("bad magic"));
    }
    let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let body = &bytes[12..];
    if crc32fast::hash(body) != crc {
        return Err(bad("CRC mismatch"));
    }
    bincode::DefaultOptions::new()
        .with_limit(MAX_CHECKPOINT)
        .deserialize(body)
        .map(Some)
        .map_err(|e| bad(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::shard::Sgd;
    use crate::train::versions::Mode;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), 0).unwrap().is_none());
        let sgd = Sgd {
            lr: 0.1,
            momentum: 0.9,
            weight_decay: 0.0,
        };
        let mut s = Shard::new(10, vec![1.0, 2.0], Mode::Async, sgd, 2);
        s.push(9, 0, None, &[1.0, 1.0], 0).unwrap();
        save(dir.path(), 0, &s).unwrap();
        let back = load(dir.path(), 0).unwrap().unwrap();
        assert_eq!(
            (back.version(), back.params.clone(), back.begin),
            (1, s.params.clone(), 10)
        );
        let p = path(dir.path(), 0);
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let e = load(dir.path(), 0).unwrap_err();
        assert!(matches!(e, TrainError::CorruptCheckpoint(_)));
        assert!(e.to_string().contains("CRC"));
        std::fs::write(&p, b"nonsense").unwrap();
        assert!(load(dir.path(), 0).unwrap_err().to_string().contains("corrupt"));
    }
}
