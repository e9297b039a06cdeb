//! Model files: a small self-describing file holding the model (its kind and sizes)
//! and its parameters, checked on load.
//!
//! Layout (little-endian): the magic `PSRSMODL`, the format version (u32, now 1), the
//! body length (u64), the CRC32 of the body (u32), then the body: bincode of the
//! [`Model`] followed by the parameter vector.

use super::kind::Model;
use bincode::Options;
use std::fmt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"PSRSMODL";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 4;

/// Why a model file could not be saved or loaded. Each says which file and what to
/// look at; none comes from a panic.
#[derive(Debug)]
pub enum ModelFileError {
    /// Reading or writing the file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file does not start with the model-file magic: it is something else.
    NotAModelFile {
        /// The file.
        path: PathBuf,
    },
    /// A model file of a format version this build cannot read.
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// Its format version.
        version: u32,
    },
    /// The file is shorter than its header says (an interrupted copy).
    Truncated {
        /// The file.
        path: PathBuf,
        /// Body bytes the header announces.
        expected: u64,
        /// Body bytes present.
        found: u64,
    },
    /// The body does not match its checksum: the file is damaged.
    Corrupt {
        /// The file.
        path: PathBuf,
    },
    /// The body checks out but does not describe a usable model.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for ModelFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelFileError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ModelFileError::NotAModelFile { path } => {
                write!(f, "{} is not a psrs model file (bad magic)", path.display())
            }
            ModelFileError::UnsupportedVersion { path, version } => write!(
                f,
                "{}: model file format version {version}; this psrs reads version {VERSION}",
                path.display()
            ),
            ModelFileError::Truncated { path, expected, found } => write!(
                f,
                "{}: truncated psrs model file ({found} of {expected} body bytes)",
                path.display()
            ),
            ModelFileError::Corrupt { path } => {
                write!(f, "{}: corrupt psrs model file (CRC mismatch)", path.display())
            }
            ModelFileError::Malformed { path, reason } => {
                write!(f, "{}: malformed psrs model file: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for ModelFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelFileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The file bytes of `model` with `params`.
///
/// # Panics
/// If `params.len() != model.num_params()` (a caller bug: it would never load).
pub fn encode(model: &Model, params: &[f32]) -> Vec<u8> {
    assert_eq!(params.len(), model.num_params(), "parameters of {}", model.name());
    let body = bincode::DefaultOptions::new()
        .serialize(&(model, params))
        .expect("a model and a float vector always serialize");
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Parses file bytes written by [`encode`]; `path` only names the file in errors.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<(Model, Vec<f32>), ModelFileError> {
    let path = path.to_path_buf();
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(ModelFileError::NotAModelFile { path });
    }
    let le32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let found = bytes.len().saturating_sub(HEADER) as u64;
    if bytes.len() < HEADER {
        return Err(ModelFileError::Truncated {
            path,
            expected: 0,
            found,
        });
    }
    let version = le32(8);
    if version != VERSION {
        return Err(ModelFileError::UnsupportedVersion { path, version });
    }
    let expected = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    if found < expected {
        return Err(ModelFileError::Truncated { path, expected, found });
    }
    let body = &bytes[HEADER..];
    if found > expected || crc32fast::hash(body) != le32(20) {
        return Err(ModelFileError::Corrupt { path });
    }
    let malformed = |reason: String| ModelFileError::Malformed {
        path: path.clone(),
        reason,
    };
    let (model, params): (Model, Vec<f32>) = bincode::DefaultOptions::new()
        .with_limit(body.len() as u64)
        .reject_trailing_bytes()
        .deserialize(body)
        .map_err(|e| malformed(e.to_string()))?;
    model.validate().map_err(|e| malformed(e.to_string()))?;
    if params.len() != model.num_params() {
        return Err(malformed(format!(
            "{} parameters for {}, which has {}",
            params.len(),
            model.name(),
            model.num_params()
        )));
    }
    Ok((model, params))
}

/// Saves `model` with `params` to `path` (a local path or an `s3://` URL), atomically (a reader sees the old file or
/// the new one, never half of one).
///
/// # Panics
/// If `params.len() != model.num_params()`.
pub fn save(path: &Path, model: &Model, params: &[f32]) -> Result<(), ModelFileError> {
    crate::storage::write(path, &encode(model, params)).map_err(|e| ModelFileError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

/// Loads a model saved by [`save`] from a path or an `s3://` / `http(s)://` URL. A missing, foreign, truncated, damaged or
/// inconsistent file is an error saying which.
pub fn load(path: &Path) -> Result<(Model, Vec<f32>), ModelFileError> {
    let bytes = crate::storage::read(path).map_err(|e| ModelFileError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    decode(path, &bytes)
}
