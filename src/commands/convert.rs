//! `psrs convert`: libsvm, CSV or IDX files to RecordIO, with a progress bar.

use clap::{Args as ClapArgs, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use ps_apps::recordio::{convert_csv, convert_idx, convert_libsvm, Compressor, ConvertStats};
use std::path::PathBuf;

/// Input formats.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// `label idx:val ...` lines.
    Libsvm,
    /// Label first, then numeric features.
    Csv,
    /// MNIST-style IDX images and labels (gzip or not).
    Idx,
}

/// Arguments of `psrs convert`.
#[derive(ClapArgs)]
pub struct Args {
    /// Input format.
    #[arg(long, value_enum)]
    format: Format,
    /// Input file (libsvm, csv) or the images file (idx).
    #[arg(long)]
    input: PathBuf,
    /// Labels file (idx only).
    #[arg(long)]
    labels: Option<PathBuf>,
    /// Output RecordIO file.
    #[arg(long)]
    out: PathBuf,
    /// The CSV file starts with a header line.
    #[arg(long)]
    header: bool,
    /// Records per chunk (at least 1).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    per_chunk: u32,
    /// Chunk compression: none, snappy or gzip.
    #[arg(long, default_value = "snappy")]
    compressor: String,
}

/// Converts and prints what was written.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    crate::logging::init("convert", log::LevelFilter::Info);
    let c = Compressor::parse(&a.compressor)
        .ok_or_else(|| format!("--compressor: '{}' is not none, snappy or gzip", a.compressor))?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {percent}% ({eta})")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    bar.set_message(format!("converting {}", a.input.display()));
    let mut progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let s: ConvertStats = match a.format {
        Format::Libsvm => convert_libsvm(&a.input, &a.out, a.per_chunk, c, &mut progress)?,
        Format::Csv => convert_csv(&a.input, &a.out, a.header, a.per_chunk, c, &mut progress)?,
        Format::Idx => {
            let labels = a.labels.as_ref().ok_or("--labels is required with --format idx")?;
            convert_idx(&a.input, labels, &a.out, a.per_chunk, c, &mut progress)?
        }
    };
    bar.finish_and_clear();
    println!(
        "wrote {}: {} records in {} chunks, {} features, {} classes",
        a.out.display(),
        s.records,
        s.chunks,
        s.dim,
        s.classes
    );
    Ok(())
}
