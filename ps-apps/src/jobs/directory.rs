//! A directory dataset (an inference job's inputs given as one directory): its files in
//! sorted order, each one of the master's chunks holding one input.

use super::error::JobsError;
use crate::master::Chunk;
use crate::recordio::ChunkIndex;
use std::path::Path;

/// The files of a directory dataset, in sorted order (by name, bytewise): regular files
/// directly in it (symbolic links followed, beneath the cluster's directories when job
/// files are confined: [`crate::storage::confined`]), names starting with `.` left out.
/// An empty or unreadable directory, or one holding a link that leads out, is
/// [`JobsError::BadRequest`] (the job's dataset).
pub fn list_directory(dir: &Path) -> Result<Vec<String>, JobsError> {
    let files = crate::storage::confined::job_files()
        .list_files(dir)
        .map_err(|e| JobsError::BadRequest(format!("{}: {e}", dir.display())))?;
    if files.is_empty() {
        return Err(JobsError::BadRequest(format!(
            "{}: no input files in the directory",
            dir.display()
        )));
    }
    Ok(files.into_iter().map(|p| p.display().to_string()).collect())
}

/// The master's chunks of a directory dataset: one per file, holding one input
/// (chunk number = the file's place in sorted order).
pub fn file_chunks(files: &[String]) -> Vec<Chunk> {
    files
        .iter()
        .enumerate()
        .map(|(idx, path)| Chunk {
            path: path.clone(),
            index: ChunkIndex {
                idx,
                offset: 0,
                len: 0,
                records: 1,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_its_visible_files_in_order() {
        let d = tempfile::tempdir().unwrap();
        for f in ["b.txt", "a.txt", ".hidden", "c10.jpg", "c9.jpg"] {
            std::fs::write(d.path().join(f), f).unwrap();
        }
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let files = list_directory(d.path()).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.rsplit('/').next().unwrap()).collect();
        assert_eq!(names, ["a.txt", "b.txt", "c10.jpg", "c9.jpg"]);
        let chunks = file_chunks(&files);
        assert_eq!((chunks[2].index.idx, chunks[2].index.records), (2, 1));
        assert_eq!(chunks[3].path, files[3]);
        let empty = tempfile::tempdir().unwrap();
        assert!(list_directory(empty.path())
            .unwrap_err()
            .to_string()
            .contains("no input files"));
        assert!(list_directory(&d.path().join("none")).is_err());
    }
}
