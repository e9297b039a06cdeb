//! Job files opened confined beneath the jobs cluster's directories, by the process
//! that opens them. With `psrs cluster --data-dir D --outputs-dir O`, every process of
//! the cluster (the scheduler reading a dataset's index or joining an inference job's
//! outputs, a worker reading a task's chunks, a model or a test set, or saving a
//! model) opens a job's local file through [`Roots`]: relative to a directory handle of
//! D or O (the `cap-std` crate: `openat` beneath the handle, every component of the
//! path resolved inside it, `..` and symbolic links that lead out refused, and so is
//! an absolute symbolic link, even to a place inside: links within D or O must be
//! relative), reading beneath D or O and writing beneath O. The check is the open itself, so a file or a
//! directory swapped for a symbolic link after the job was submitted (the scheduler
//! checks the paths then, [`crate::jobs::paths`]) cannot lead a later open out.
//!
//! The roots are set once, when `psrs cluster` starts ([`confine`]); a process
//! without them (`psrs train`, tools) opens paths as they are ([`job_files`] is then
//! [`Roots::anywhere`]). Object-store and HTTP locations are not files and never come
//! here.

use cap_std::fs::{Dir, OpenOptions};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// One directory jobs may use: the flag that named it, its path as given (made
/// absolute) and resolved, and a handle to it.
#[derive(Debug)]
struct Root {
    flag: &'static str,
    given: PathBuf,
    real: PathBuf,
    dir: Dir,
    writable: bool,
}

/// Where job files may be opened: beneath the roots, or (without roots) anywhere.
#[derive(Debug)]
pub struct Roots {
    roots: Vec<Root>,
}

static ROOTS: OnceLock<Roots> = OnceLock::new();

/// Confines every job file this process opens from now on to `roots` (the first call
/// wins; `psrs cluster` calls it once at start).
pub fn confine(roots: Roots) {
    if ROOTS.set(roots).is_err() {
        log::debug!("job files were confined already");
    }
}

/// The roots job files are opened under in this process ([`Roots::anywhere`] until
/// [`confine`]).
pub fn job_files() -> &'static Roots {
    static ANYWHERE: Roots = Roots { roots: Vec::new() };
    ROOTS.get().unwrap_or(&ANYWHERE)
}

fn outside(path: &Path, flags: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("'{}' is outside {flags}", path.display()),
    )
}

/// What cap-std says when a path leads out of its directory, said for `path`.
fn escaped(path: &Path, root: &Root, e: io::Error) -> io::Error {
    let text = e.to_string();
    if text.contains("outside of the filesystem") || text.contains("escape") || text.contains("symlink") {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "'{}' leads outside {} (a symbolic link or '..')",
                path.display(),
                root.flag
            ),
        )
    } else {
        e
    }
}

impl Root {
    /// Makes directory `rel` and its missing parents beneath the root; a component
    /// that is a link out is refused as leading out of it.
    fn make_dirs(&self, rel: &Path, path: &Path) -> io::Result<Dir> {
        if rel != Path::new(".") {
            if let Err(e) = self.dir.create_dir_all(rel) {
                // something is there already (a directory, or a link): opening it says
                // which
                if e.kind() != io::ErrorKind::AlreadyExists {
                    return Err(escaped(path, self, e));
                }
            }
        }
        self.dir.open_dir(rel).map_err(|e| escaped(path, self, e))
    }
}

impl Roots {
    /// No roots: paths are opened as they are.
    pub fn anywhere() -> Roots {
        Roots { roots: Vec::new() }
    }

    /// Reads beneath `data` or `outputs`, writes beneath `outputs` (made if missing).
    pub fn new(data: &Path, outputs: &Path) -> io::Result<Roots> {
        std::fs::create_dir_all(outputs)?;
        let root = |flag, p: &Path, writable| -> io::Result<Root> {
            let named = |e: io::Error| io::Error::new(e.kind(), format!("{flag} '{}': {e}", p.display()));
            Ok(Root {
                flag,
                given: std::path::absolute(p).map_err(named)?,
                real: p.canonicalize().map_err(named)?,
                dir: Dir::open_ambient_dir(p, cap_std::ambient_authority()).map_err(named)?,
                writable,
            })
        };
        // outputs first: a path under both (outputs inside data) is written there
        Ok(Roots {
            roots: vec![root("--outputs-dir", outputs, true)?, root("--data-dir", data, false)?],
        })
    }

    /// True when job files are confined.
    pub fn confined(&self) -> bool {
        !self.roots.is_empty()
    }

    /// The root `path` lies under (as given or resolved) and the path relative to it;
    /// a path under none, or with `..`, is refused.
    fn locate(&self, path: &Path, write: bool) -> io::Result<(&Root, PathBuf)> {
        let names = |w: bool| {
            self.roots
                .iter()
                .filter(|r| r.writable || !w)
                .map(|r| r.flag)
                .collect::<Vec<_>>()
                .join(" or ")
        };
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(outside(path, &names(write)));
        }
        let abs = std::path::absolute(path)?;
        for r in self.roots.iter().filter(|r| r.writable || !write) {
            for base in [&r.given, &r.real] {
                if let Ok(rel) = abs.strip_prefix(base) {
                    let rel = if rel.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        rel.to_path_buf()
                    };
                    return Ok((r, rel));
                }
            }
        }
        Err(outside(path, &names(write)))
    }

    /// Opens the file at `path` for reading.
    pub fn open(&self, path: &Path) -> io::Result<File> {
        if !self.confined() {
            return File::open(path);
        }
        let (r, rel) = self.locate(path, false)?;
        Ok(r.dir.open(&rel).map_err(|e| escaped(path, r, e))?.into_std())
    }

    /// Every byte of the file at `path`.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.open(path)?.read_to_end(&mut out)?;
        Ok(out)
    }

    /// True if `path` is a directory (beneath the roots, when confined).
    pub fn is_dir(&self, path: &Path) -> bool {
        if !self.confined() {
            return path.is_dir();
        }
        self.locate(path, false)
            .and_then(|(r, rel)| r.dir.metadata(&rel))
            .is_ok_and(|m| m.is_dir())
    }

    /// The regular files directly in directory `dir` whose names do not start with
    /// `.`, in sorted order (symbolic links followed, beneath the roots when
    /// confined: a link that leads out is an error naming it).
    pub fn list_files(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        if !self.confined() {
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                let hidden = entry.file_name().to_string_lossy().starts_with('.');
                if !hidden && entry.path().is_file() {
                    files.push(entry.path());
                }
            }
        } else {
            let (r, rel) = self.locate(dir, false)?;
            let d = r.dir.open_dir(&rel).map_err(|e| escaped(dir, r, e))?;
            for entry in d.entries()? {
                let name = entry?.file_name();
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                let path = dir.join(&name);
                if d.metadata(&name).map_err(|e| escaped(&path, r, e))?.is_file() {
                    files.push(path);
                }
            }
        }
        files.sort();
        Ok(files)
    }

    /// Makes directory `dir` and its missing parents (beneath `--outputs-dir` when
    /// confined).
    pub fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        if !self.confined() {
            return std::fs::create_dir_all(dir);
        }
        let (r, rel) = self.locate(dir, true)?;
        r.make_dirs(&rel, dir).map(drop)
    }

    /// Creates (or truncates) the file at `path` for writing, its directory made if
    /// missing (beneath `--outputs-dir` when confined; a symbolic link at `path` is
    /// not followed out).
    pub fn create(&self, path: &Path) -> io::Result<File> {
        if !self.confined() {
            if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(d)?;
            }
            return File::create(path);
        }
        let (r, d, name) = self.parent_of(path)?;
        let mut o = OpenOptions::new();
        o.write(true).create(true).truncate(true);
        Ok(d.open_with(&name, &o).map_err(|e| escaped(path, r, e))?.into_std())
    }

    /// The root `path` is beneath, its parent directory (made where missing, opened
    /// beneath the root) and its file name: where a confined write creates it.
    fn parent_of(&self, path: &Path) -> io::Result<(&Root, Dir, PathBuf)> {
        let (r, rel) = self.locate(path, true)?;
        let name = rel.file_name().map(PathBuf::from).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} has no file name", path.display()),
            )
        })?;
        let parent = rel
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let d = r.make_dirs(parent, path)?;
        Ok((r, d, name))
    }

    /// Writes `bytes` to `path` atomically (see
    /// [`super::files::write_atomic`]): a temporary file beside it, fsynced, renamed
    /// over it, the directory fsynced; beneath `--outputs-dir` when confined.
    pub fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        if !self.confined() {
            return super::files::write_atomic(path, bytes);
        }
        let (_, d, name) = self.parent_of(path)?;
        let name = name.as_os_str();
        let tmp = format!(".{}.tmp.{}", name.to_string_lossy(), std::process::id());
        {
            let mut o = OpenOptions::new();
            o.write(true).create(true).truncate(true);
            let mut f = d.open_with(&tmp, &o)?;
            f.write_all(bytes)?;
            f.sync_all()?;
        }
        d.rename(&tmp, &d, name).inspect_err(|_| {
            let _ = d.remove_file(&tmp);
        })?;
        if let Ok(here) = d.open(".") {
            let _ = here.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "confined_tests.rs"]
mod tests;
