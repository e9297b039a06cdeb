//! The README's test command keeps going: `scripts/lib/phases.sh`, the phase runner of
//! `scripts/test.sh`, runs every phase whatever an earlier one returned, ends with a
//! table of each phase's outcome and time, and fails the script if any phase failed.

use std::process::Command;

/// Runs `body` in bash with the phase runner sourced; returns (exit code, stderr). The
/// phases' logs go to a directory of this call's own (removed after), not among the
/// real run's in target/test-logs, unless `body` sets `PHASE_LOG_DIR` itself.
fn run(body: &str) -> (i32, String) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let root = env!("CARGO_MANIFEST_DIR");
    let logs = std::env::temp_dir().join(format!(
        "psrs-phase-logs-{}-{}",
        std::process::id(),
        CALLS.fetch_add(1, Ordering::Relaxed)
    ));
    let script = format!(
        "set -uo pipefail\ncd {root}\nexport PHASE_LOG_DIR={}\n. scripts/lib/phases.sh\n{body}\nsummary",
        logs.display()
    );
    let out = Command::new("bash").arg("-c").arg(script).output().expect("bash");
    let _ = std::fs::remove_dir_all(&logs);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_failing_early_phase_lets_the_later_ones_run_and_fails_the_script() {
    let (code, log) =
        run("phase early-tests false\nphase later-tests bash -c 'echo later ran >&2'\nskipped root-tests 'needs root'");
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("later ran"), "the later phase did not run:\n{log}");
    let table = &log[log.find("summary").expect("no summary")..];
    let line = |name: &str| table.lines().find(|l| l.contains(name)).unwrap_or_default().to_string();
    assert!(line("early-tests").starts_with("FAILED"), "{table}");
    assert!(line("early-tests").contains("(exit 1)"), "{table}");
    assert!(line("later-tests").starts_with("passed"), "{table}");
    assert!(line("root-tests").starts_with("skipped"), "{table}");
    assert!(table.contains("FAILED (a phase above failed)"), "{table}");
}

#[test]
fn every_phase_passing_passes_the_script() {
    let (code, log) = run("phase one true\nphase two true");
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("every phase passed"), "{log}");
}

#[test]
fn a_failed_phase_output_is_told_again_after_the_table() {
    let dir = std::env::temp_dir().join(format!("psrs-phases-{}", std::process::id()));
    let (code, log) = run(&format!(
        "export PHASE_LOG_DIR={}\nphase noisy bash -c 'for i in $(seq 1 100); do echo line $i; done; echo the reason >&2; exit 3'\nphase quiet true",
        dir.display()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1, "{log}");
    let after = &log[log.find("summary").expect("no summary")..];
    assert!(after.contains("noisy (exit 3)"), "{after}");
    let tail = &after[after
        .find("the last 40 lines of 'noisy'")
        .expect("no tail of the failed phase")..];
    assert!(tail.contains("line 100") && tail.contains("the reason"), "{tail}");
    assert!(!tail.contains("line 60\n"), "more than the last 40 lines:\n{tail}");
    assert!(
        !after.contains("lines of 'quiet'"),
        "a passed phase was repeated:\n{after}"
    );
}
