//! ps-lite's own programs as nodes of a test cluster. ps-lite (its library and test
//! programs) is built once into the target directory, `target/ps-lite`, from its
//! source: `PSLITE_SRC`, or `shared/peers/ps-lite` beside an ancestor directory of
//! this checkout. Later runs (and `scripts/bench-vs-pslite.sh`) reuse the build. A
//! machine that cannot build it fails the test with a line naming what is missing
//! (Debian packages, or files of the source).

use super::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// ps-lite's test programs the tests run.
pub const PROGRAMS: [&str; 5] = [
    "test_connection",
    "test_simple_app",
    "test_kv_app",
    "test_kv_app_multi_workers",
    "test_kv_app_benchmark",
];

/// What building ps-lite needs: (Debian package, a command it provides or a file it
/// installs under the root directory).
const NEEDS: [(&str, &str); 5] = [
    ("g++", "g++"),
    ("make", "make"),
    ("protobuf-compiler", "protoc"),
    ("libprotobuf-dev", "usr/include/google/protobuf/message_lite.h"),
    ("libzmq3-dev", "usr/include/zmq.h"),
];

/// The Debian packages missing for building ps-lite on a machine whose root directory
/// is `root` and whose commands are found on `path` (a `PATH` value).
pub fn missing_packages(root: &Path, path: &std::ffi::OsStr) -> Vec<&'static str> {
    let on_path = |cmd: &str| std::env::split_paths(path).any(|d| d.join(cmd).is_file());
    NEEDS
        .iter()
        .filter(|(_, what)| {
            if what.contains('/') {
                !root.join(what).is_file()
            } else {
                !on_path(what)
            }
        })
        .map(|(pkg, _)| *pkg)
        .collect()
}

/// The one-line error for a machine missing `packages`.
pub fn missing_packages_error(packages: &[&str]) -> String {
    format!(
        "ps-lite cannot be built on this machine: the Debian packages {} are missing (scripts/install-deps.sh installs them)",
        packages.join(", ")
    )
}

/// ps-lite's source directory.
fn source() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PSLITE_SRC") {
        return Ok(PathBuf::from(p));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("shared/peers/ps-lite"))
        .find(|p| p.join("Makefile").is_file())
        .ok_or_else(|| {
            "ps-lite's source is not found: set PSLITE_SRC to a checkout of github.com/dmlc/ps-lite (commit 15b8adf), or put one at shared/peers/ps-lite beside this checkout".to_string()
        })
}

fn build() -> Result<PathBuf, String> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .to_path_buf();
    let dir = target.join("ps-lite");
    let built = |d: &Path| PROGRAMS.iter().all(|p| d.join("tests").join(p).is_file());
    if built(&dir) {
        return Ok(dir.join("tests"));
    }
    let missing = missing_packages(Path::new("/"), &std::env::var_os("PATH").unwrap_or_default());
    if !missing.is_empty() {
        return Err(missing_packages_error(&missing));
    }
    let src = source()?;
    let lacking: Vec<String> = PROGRAMS
        .iter()
        .map(|p| src.join("tests").join(format!("{p}.cc")))
        .filter(|f| !f.is_file())
        .map(|f| f.display().to_string())
        .collect();
    if !lacking.is_empty() {
        return Err(format!(
            "ps-lite's source at {} lacks its test programs ({}); set PSLITE_SRC to a full checkout of github.com/dmlc/ps-lite (commit 15b8adf)",
            src.display(),
            lacking.join(", ")
        ));
    }
    // built aside, then moved in place: a concurrent build (another test binary, the
    // benchmark script) never sees a half-built directory
    let tmp = target.join(format!("ps-lite.build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        Err(format!(
            "{what} failed ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    };
    run(
        Command::new("cp").arg("-r").arg(&src).arg(&tmp),
        "copying ps-lite's source",
    )?;
    run(
        Command::new("chmod").args(["-R", "u+w"]).arg(&tmp),
        "making the copy writable",
    )?;
    run(
        Command::new("make").arg("-C").arg(&tmp).args(["-j2", "DEPS_PATH=/usr"]),
        "building ps-lite (make -j2 DEPS_PATH=/usr)",
    )?;
    if !built(&tmp) {
        return Err(format!("ps-lite built in {} without its test programs", tmp.display()));
    }
    if built(&dir) {
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).map_err(|e| format!("moving the build to {}: {e}", dir.display()))?;
    }
    Ok(dir.join("tests"))
}

/// The directory of ps-lite's test programs, built on the first call. Panics with the
/// reason when ps-lite cannot be built here.
pub fn programs() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build) {
        Ok(p) => p.clone(),
        Err(e) => panic!("{e}"),
    }
}

impl Cluster {
    /// Starts ps-lite's test program `program` (one of [`PROGRAMS`]) with `args` as
    /// one more process of `role`.
    pub fn spawn_pslite(&mut self, role: &str, program: &str, args: &[&str]) -> usize {
        let mut cmd = Command::new(programs().join(program));
        cmd.args(args);
        self.spawn_command(role, cmd, &[])
    }
}
