//! ps-lite's nodes in a test cluster. ps-lite's library (`build/libps.a`) is built once
//! into the target directory, `target/ps-lite`, from ps-lite's source: `PSLITE_SRC`,
//! or `shared/peers/ps-lite` beside an ancestor directory of this checkout. With it
//! comes psrs's own program against ps-lite's public API, `tests/pslite/pslite_peer.cc`
//! (`target/ps-lite/pslite_peer`, rebuilt when its source changes), which runs every
//! role; and, only where that source has them (`tests/test_*.cc`: a full checkout of
//! ps-lite has them, the copy beside CI's checkout has not), ps-lite's own test
//! programs (`target/ps-lite/tests/`). Later runs (and `scripts/bench-vs-pslite.sh`)
//! reuse the build. A machine that cannot build what a test needs fails the test with
//! a line naming what is missing (Debian packages, or files of the source).

use super::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// ps-lite's test programs the tests run, where their sources are.
pub const PROGRAMS: [&str; 4] = [
    "test_connection",
    "test_simple_app",
    "test_kv_app",
    "test_kv_app_multi_workers",
];

/// psrs's program against ps-lite's public API, in this checkout.
const PEER_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pslite/pslite_peer.cc");

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

/// ps-lite's source directory: `PSLITE_SRC`, else `shared/peers/ps-lite` beside an
/// ancestor of this checkout.
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

/// The sources of ps-lite's test programs in `src` that are missing.
pub fn lacking_programs(src: &Path) -> Vec<String> {
    PROGRAMS
        .iter()
        .map(|p| src.join("tests").join(format!("{p}.cc")))
        .filter(|f| !f.is_file())
        .map(|f| f.display().to_string())
        .collect()
}

/// `target/ps-lite`.
fn build_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("ps-lite")
}

/// Runs `cmd`; on failure, the last lines of its stderr.
fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
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
}

/// ps-lite's library and headers in `target/ps-lite`, built on the first call (aside,
/// then moved in place: a concurrent build, another test binary or the benchmark
/// script, never sees a half-built directory).
fn library() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(build_library).clone()
}

fn build_library() -> Result<PathBuf, String> {
    let dir = build_dir();
    if dir.join("build/libps.a").is_file() {
        return Ok(dir);
    }
    let missing = missing_packages(Path::new("/"), &std::env::var_os("PATH").unwrap_or_default());
    if !missing.is_empty() {
        return Err(missing_packages_error(&missing));
    }
    let src = source()?;
    let tmp = dir.with_file_name(format!("ps-lite.build-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    run(
        Command::new("cp").arg("-r").arg(&src).arg(&tmp),
        "copying ps-lite's source",
    )?;
    run(
        Command::new("chmod").args(["-R", "u+w"]).arg(&tmp),
        "making the copy writable",
    )?;
    run(
        Command::new("make")
            .arg("-C")
            .arg(&tmp)
            .args(["-j2", "ps", "DEPS_PATH=/usr"]),
        "building ps-lite's library (make -j2 ps DEPS_PATH=/usr)",
    )?;
    if dir.join("build/libps.a").is_file() {
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).map_err(|e| format!("moving the build to {}: {e}", dir.display()))?;
    }
    Ok(dir)
}

/// Compiles the C++ program `cc` against ps-lite's library in `lib` into `out` (aside,
/// then renamed), as ps-lite's own programs are linked, optimised at `opt` (`-O3`
/// for ps-lite's, as its Makefile and `scripts/bench-vs-pslite.sh` build them).
fn compile(lib: &Path, cc: &Path, out: &Path, opt: &str) -> Result<(), String> {
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    run(
        Command::new("g++")
            .args(["-std=c++11", opt, "-Wall", "-isystem"])
            .arg(lib.join("include"))
            .arg("-isystem")
            .arg(lib.join("src"))
            .arg(cc)
            .arg(lib.join("build/libps.a"))
            .args(["-lprotobuf-lite", "-lzmq", "-pthread", "-o"])
            .arg(&tmp),
        &format!("compiling {}", cc.display()),
    )?;
    std::fs::rename(&tmp, out).map_err(|e| format!("moving {} in place: {e}", out.display()))
}

/// True when `out` exists and is newer than every one of `inputs`.
fn fresh(out: &Path, inputs: &[&Path]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match modified(out) {
        Some(t) => inputs.iter().all(|i| modified(i).is_some_and(|s| s <= t)),
        None => false,
    }
}

fn build_peer() -> Result<PathBuf, String> {
    let lib = library()?;
    let out = lib.join("pslite_peer");
    let source = Path::new(PEER_SOURCE);
    if !fresh(&out, &[source, &lib.join("build/libps.a")]) {
        compile(&lib, source, &out, "-O2")?;
    }
    Ok(out)
}

fn build_programs() -> Result<PathBuf, String> {
    let lib = library()?;
    let tests = lib.join("tests");
    if PROGRAMS.iter().all(|p| tests.join(p).is_file()) {
        return Ok(tests);
    }
    let src = source()?;
    let lacking = lacking_programs(&src);
    if !lacking.is_empty() {
        return Err(format!(
            "ps-lite's source at {} lacks its test programs' sources ({}); set PSLITE_SRC to a full checkout of github.com/dmlc/ps-lite (commit 15b8adf)",
            src.display(),
            lacking.join(", ")
        ));
    }
    std::fs::create_dir_all(&tests).map_err(|e| format!("creating {}: {e}", tests.display()))?;
    for p in PROGRAMS {
        let out = tests.join(p);
        if !out.is_file() {
            compile(&lib, &src.join("tests").join(format!("{p}.cc")), &out, "-O3")?;
        }
    }
    Ok(tests)
}

/// psrs's program against ps-lite's public API (see `tests/pslite/pslite_peer.cc`),
/// built on the first call. Panics with the reason when it cannot be built here.
pub fn peer() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_peer) {
        Ok(p) => p.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// The directory of ps-lite's own test programs, built on the first call. Panics with
/// the reason when they cannot be built here (their sources missing included).
pub fn programs() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_programs) {
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

    /// Starts `pslite_peer ARGS` (ps-lite's library under psrs's test program) as one
    /// more process of `role`.
    pub fn spawn_peer(&mut self, role: &str, args: &[&str]) -> usize {
        let mut cmd = Command::new(peer());
        cmd.args(args);
        self.spawn_command(role, cmd, &[])
    }
}
