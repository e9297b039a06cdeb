//! A terminal progress bar for the converters.

use super::convert::{ConvertError, ConvertStats, Progress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Runs `convert` (one of the `convert_*` functions with its other arguments bound),
/// feeding its progress callback into a bar on stderr labelled `message`.
///
/// The bar is hidden when stderr is not a terminal (logs, pipes, CI), and cleared when
/// the conversion ends. Returns whatever `convert` returns.
pub fn convert_with_progress(
    message: &str,
    convert: impl FnOnce(Progress) -> Result<ConvertStats, ConvertError>,
) -> Result<ConvertStats, ConvertError> {
    let bar = ProgressBar::new(0);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {percent}% ({eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message.to_string());
    let mut update = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done.min(total));
    };
    let out = convert(&mut update);
    bar.finish_and_clear();
    out
}

#[cfg(test)]
mod tests {
    use super::super::{convert_csv, Compressor};
    use super::*;

    #[test]
    fn passes_the_result_through() {
        let d = tempfile::tempdir().unwrap();
        let (csv, out) = (d.path().join("a.csv"), d.path().join("a.rio"));
        std::fs::write(&csv, "1,2,3\n0,4,5\n").unwrap();
        let s = convert_with_progress("converting", |p| {
            convert_csv(&csv, &out, false, 10, Compressor::None, p)
        })
        .unwrap();
        assert_eq!((s.records, s.dim, s.classes), (2, 2, 2));
        let e = convert_with_progress("x", |_| Err(ConvertError::Io("boom".into()))).unwrap_err();
        assert_eq!(e.to_string(), "boom");
    }
}
