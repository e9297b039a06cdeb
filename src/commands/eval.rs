//! `psrs eval`: a saved model on a RecordIO dataset.

use clap::Args as ClapArgs;
use ps_apps::train::worker::{evaluate, read_examples};
use std::path::PathBuf;

/// Arguments of `psrs eval`.
#[derive(ClapArgs)]
pub struct Args {
    /// The model file written by `psrs train --out`.
    #[arg(long)]
    model: PathBuf,
    /// The RecordIO dataset.
    #[arg(long)]
    data: PathBuf,
}

/// Prints accuracy, log-loss (and AUC for binary models).
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    crate::logging::set_role("eval");
    let (model, params) = ps_apps::model::load(&a.model)?;
    let examples = read_examples(&a.data)?;
    model.check_examples(&examples, &a.data.display().to_string())?;
    let ev = evaluate(&model, &params, &examples);
    print!(
        "{} on {} examples: accuracy {:.4} log-loss {:.4}",
        model.name(),
        examples.len(),
        ev.accuracy,
        ev.log_loss
    );
    if let Some(auc) = ev.auc {
        print!(" auc {auc:.4}");
    }
    println!();
    Ok(())
}
