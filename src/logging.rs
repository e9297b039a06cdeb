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
