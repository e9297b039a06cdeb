//! `psrs connect`: start, wait for all, finalize.

use clap::Args as ClapArgs;

/// Arguments of `psrs connect`.
#[derive(ClapArgs)]
pub struct Args {}

/// Starts the node, prints its id and how long joining took (start barrier passed),
/// finalizes.
pub fn run(_a: Args) -> Result<(), super::error::CliError> {
    let t = std::time::Instant::now();
    let po = super::start_node()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "connected {} id {} rank {} of {} servers {} workers in {ms:.1} ms",
        po.role(),
        po.my_id(),
        po.my_rank(),
        po.num_servers(),
        po.num_workers()
    );
    po.finalize(true);
    Ok(())
}
