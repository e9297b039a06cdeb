//! Saving and loading a trained model: magic, CRC32, then the model and its
//! parameters (bincode).

use super::Model;
use crate::fsutil::write_atomic;
use bincode::Options;
use std::path::Path;

const MAGIC: &[u8; 8] = b"PSRSMDL1";

/// Saves `model` with `params` to `path` (atomically).
pub fn save(path: &Path, model: &Model, params: &[f32]) -> Result<(), String> {
    let body = bincode::DefaultOptions::new()
        .serialize(&(model, params))
        .map_err(|e| format!("cannot encode the model: {e}"))?;
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    write_atomic(path, &out).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Loads a model saved by [`save`]; a corrupt file is a clear error.
pub fn load(path: &Path) -> Result<(Model, Vec<f32>), String> {
    let b = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let bad = |w: &str| format!("{} is not a psrs model file: {w}", path.display());
    if b.len() < 12 || &b[..8] != MAGIC {
        return Err(bad("bad magic"));
    }
    if crc32fast::hash(&b[12..]) != u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) {
        return Err(bad("CRC mismatch (the file is corrupt)"));
    }
    let (model, params): (Model, Vec<f32>) = bincode::DefaultOptions::new()
        .with_limit(4 << 30)
        .deserialize(&b[12..])
        .map_err(|e| bad(&e.to_string()))?;
    if params.len() != model.num_params() {
        return Err(bad(&format!(
            "{} parameters for a model of {}",
            params.len(),
            model.num_params()
        )));
    }
    Ok((model, params))
}
