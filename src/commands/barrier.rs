//! `psrs barrier`: rounds of barriers with random delays; each node prints the wall
//! time it entered and left each round, so a test can check that no node leaves a
//! round before every node entered it.

use clap::Args as ClapArgs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Arguments of `psrs barrier`.
#[derive(ClapArgs)]
pub struct Args {
    /// Number of barrier rounds.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Group to synchronise: 7 = all, 2 = servers, 4 = workers, 6 = servers+workers.
    #[arg(long, default_value_t = 7)]
    group: i32,
    /// Up to this many milliseconds of random delay before each round.
    #[arg(long, default_value_t = 50)]
    max_delay_ms: u64,
}

fn micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// Runs the rounds (only nodes in the group take part) and finalizes.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    let po = super::start_node()?;
    let me = po.my_id();
    if po.node_ids(a.group).contains(&me) {
        for r in 0..a.rounds {
            std::thread::sleep(Duration::from_millis(rand_delay(a.max_delay_ms, me, r)));
            println!("barrier enter {r} node {me} at {}", micros());
            po.barrier(a.group);
            println!("barrier leave {r} node {me} at {}", micros());
        }
    }
    po.finalize(true);
    Ok(())
}

fn rand_delay(max: u64, me: i32, r: usize) -> u64 {
    if max == 0 {
        return 0;
    }
    let x = (me as u64).wrapping_mul(2654435761).wrapping_add(r as u64 * 40503) ^ (micros() as u64);
    x % max
}
