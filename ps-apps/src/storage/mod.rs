//! Where datasets and model files are read from and written to: local paths, objects in
//! S3-compatible stores (`s3://bucket/key`) and files on HTTP(S) servers, through the
//! `object_store` crate. Everything that accepts a dataset or model path accepts a URL.
//!
//! Pure: [`location`] (parsing), [`config`] (the `AWS_*` / `PS_OBJECT_*` settings),
//! [`range`] (reading by byte ranges with a block of read-ahead). Shell: [`remote`]
//! (the object store clients and their runtime), [`files`] (local files: atomic writes,
//! checking that a place is writable), [`confined`] (a jobs cluster's files, opened
//! beneath its directories), and the helpers below.

pub mod config;
pub mod confined;
pub mod error;
pub mod files;
pub mod location;
pub mod range;
pub mod remote;

pub use config::ObjectStoreConfig;
pub use error::StorageError;
pub use location::{is_url, BadLocation, Location};
pub use range::{RangeGet, RangeReader};
pub use remote::RemoteObject;

use std::path::Path;

/// Every byte of the file or object at `path` (a local file opened where this process
/// may open job files: [`confined::job_files`]).
pub fn read(path: &Path) -> Result<Vec<u8>, StorageError> {
    match Location::of_path(path)? {
        Location::Local(p) => confined::job_files().read(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StorageError::NotFound {
                location: p.display().to_string(),
            },
            _ => StorageError::io(p.display(), e),
        }),
        remote => Ok(RemoteObject::open(&remote)?.get_all()?.to_vec()),
    }
}

/// Checks, before any work, that [`write`] could write `path`: a local path as
/// [`files::check_writable`] checks it (its directory made if missing); an object
/// store location is left to its PUT (nothing is made locally: `s3://b/k`'s parent is
/// not a directory `s3:/b`); an HTTP location is refused (read-only).
pub fn check_writable(path: &Path) -> Result<(), StorageError> {
    match Location::of_path(path)? {
        Location::Local(p) => files::check_writable(&p).map_err(|e| StorageError::io(p.display(), e)),
        loc @ Location::Http { .. } => Err(StorageError::io(
            loc,
            "HTTP locations are read-only (write to s3:// or a path)",
        )),
        _ => Ok(()),
    }
}

/// Writes `bytes` to `path`: a local file atomically (see [`files::write_atomic`]),
/// where this process may write job files ([`confined::job_files`]), an object with
/// one PUT. HTTP servers are read-only.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    match Location::of_path(path)? {
        Location::Local(p) => confined::job_files()
            .write_atomic(&p, bytes)
            .map_err(|e| StorageError::io(p.display(), e)),
        loc @ Location::Http { .. } => Err(StorageError::io(
            loc,
            "HTTP locations are read-only (write to s3:// or a path)",
        )),
        loc => remote::put(&loc, bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writability_is_checked_locally_only_for_local_paths() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("new/m.bin")).unwrap();
        assert!(dir.path().join("new").is_dir(), "a local path's directory is made");
        let err = check_writable(Path::new("https://host/models/m.bin")).unwrap_err();
        assert!(err.to_string().contains("read-only"), "{err}");
        // an object store location is left to its PUT
        check_writable(Path::new("s3://bucket/models/m.bin")).unwrap();
    }
}
