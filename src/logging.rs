//! Logging set-up: `PS_VERBOSE` picks the level, `RUST_LOG` (if set) wins; every line
//! names the process's role so interleaved cluster output stays readable.

use std::io::Write;

/// Initialises `env_logger` for a node of role `role` at `level`.
pub fn init(role: &str, level: log::LevelFilter) {
    let role = role.to_string();
    let mut b = env_logger::Builder::new();
    b.filter_level(level);
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
