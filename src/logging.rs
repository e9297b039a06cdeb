//! Logging set-up: `PS_VERBOSE` picks the level, `RUST_LOG` (if set) wins; every line
//! names the process's role so interleaved cluster output stays readable.

use std::io::Write;
use std::sync::OnceLock;

/// The process's role once known (`scheduler`, `server`, `worker`, or a tool's name):
/// [`error_prefix`] puts it in front of the final error line.
static ROLE: OnceLock<String> = OnceLock::new();

/// Records the process's role for [`error_prefix`] (the first call wins).
pub fn set_role(role: &str) {
    let _ = ROLE.set(role.to_string());
}

/// `psrs ROLE` once the role is known, else `psrs`: the start of the one-line error a
/// failing process prints, so that a cluster's interleaved errors say who failed.
pub fn error_prefix() -> String {
    match ROLE.get() {
        Some(r) => format!("psrs {r}"),
        None => "psrs".to_string(),
    }
}

/// Writes `line` and its newline to `w` with one write call. `eprintln!` writes each
/// formatted piece on its own (standard error is unbuffered), so whoever reads the
/// output while it is written (a supervisor, a log shipper, a test polling the file)
/// could see the start of a process's last line without the reason that follows.
pub fn write_line(w: &mut impl Write, line: &str) -> std::io::Result<()> {
    let mut whole = String::with_capacity(line.len() + 1);
    whole.push_str(line);
    whole.push('\n');
    w.write_all(whole.as_bytes())
}

/// Prints a failing process's one-line error, `psrs ROLE: error: REASON`, to standard
/// error whole ([`write_line`]).
pub fn print_error(reason: &dyn std::fmt::Display) {
    let line = format!("{}: error: {reason}", error_prefix());
    let _ = write_line(&mut std::io::stderr().lock(), &line);
}

/// Initialises `env_logger` for a node of role `role` at `level`.
pub fn init(role: &str, level: log::LevelFilter) {
    set_role(role);
    let role = role.to_string();
    let mut b = env_logger::Builder::new();
    b.filter_level(level);
    // rustls narrates every handshake at debug; psrs logs what matters about a link
    b.filter_module("rustls", level.min(log::LevelFilter::Warn));
    if let Ok(spec) = std::env::var("RUST_LOG") {
        b.parse_filters(&spec);
    }
    b.format(move |buf, rec| {
        writeln!(
            buf,
            "[{} {} {:>5} {}] {}",
            buf.timestamp_millis(),
            role,
            rec.level(),
            rec.target(),
            rec.args()
        )
    });
    let _ = b.try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each write call.
    #[derive(Default)]
    struct Calls(Vec<Vec<u8>>);

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_goes_out_in_one_write_with_its_newline() {
        let mut w = Calls::default();
        let reason = "DMLC_PS_ROOT_PORT: 'abc' is not a port number (1-65535)";
        write_line(&mut w, &format!("psrs worker: error: {reason}")).unwrap();
        assert_eq!(w.0.len(), 1, "{:?}", w.0);
        assert_eq!(w.0[0], format!("psrs worker: error: {reason}\n").into_bytes());
    }
}
