//! `psrs connect`: start, wait for all, finalize.

use clap::Args as ClapArgs;

/// Arguments of `psrs connect`.
#[derive(ClapArgs)]
pub struct Args {}

/// Starts the node, prints its id, finalizes.
pub fn run(_a: Args) -> Result<(), String> {
    let po = super::start_node()?;
    println!(
        "connected {} id {} rank {} of {} servers {} workers",
        po.role(),
        po.my_id(),
        po.my_rank(),
        po.num_servers(),
        po.num_workers()
    );
    po.finalize(true);
    Ok(())
}
