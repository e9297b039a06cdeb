//! `psrs simulate`: runs the deterministic simulator (`ps-sim`) over many seeds, each a
//! whole cluster (scheduler candidates, replicated servers, workers on the master's
//! queues) under a seeded network and clock with faults, checking the invariants after
//! every step. Stops at the first seed that breaks one, printing what broke, the run's
//! story and the command that replays it; exit status 1.

use clap::Args as ClapArgs;
use ps_sim::{Outcome, Plant, SimConfig};
use std::process::ExitCode;
use std::time::Instant;

/// Options of `psrs simulate`.
#[derive(ClapArgs)]
pub struct Args {
    /// How many seeds to run (from --first on).
    #[arg(long, default_value_t = ps_sim::DEFAULT_SEEDS)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Run this one seed only and print its whole story (every message delivered).
    #[arg(long)]
    seed: Option<u64>,
    /// Scheduler candidates, servers and workers, as `S,V,W`.
    #[arg(long, default_value = "2,2,3")]
    nodes: String,
    /// Extra copies of each key range (PS_REPLICAS).
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Tasks per pass of the simulated job.
    #[arg(long, default_value_t = 10)]
    tasks: usize,
    /// Passes of the simulated job.
    #[arg(long, default_value_t = 6)]
    passes: u64,
    /// Plant a bug the invariants must catch: no-lease (the coordinator answers
    /// around the van: no lease, no standby first), early-ack (a server answers a
    /// push before its replica applied it), forget-pending (a master resuming from
    /// its state forgets a pending task), silence-before-acting (a scheduler's
    /// liveness counts silence from before it started acting), count-every-attempt
    /// (the master counts a task's result from any attempt) or no-pre-vote
    /// (candidates campaign without asking for pre-votes).
    #[arg(long)]
    plant: Option<String>,
    /// Threads running seeds side by side (each run is one thread).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print the simulated processes' own log lines at this level (error, warn, info,
    /// debug, trace), each with the simulated time and the process's slot; for one
    /// seed (--seed), it is a lot.
    #[arg(long, env = "PS_SIM_DEBUG", value_name = "LEVEL")]
    log: Option<log::LevelFilter>,
}

/// Prints the simulated processes' log lines at `level` to stderr, each prefixed with
/// the simulated time and slot of the step that wrote it.
fn init_log(level: log::LevelFilter) {
    use std::io::Write;
    let mut b = env_logger::Builder::new();
    b.filter_level(level);
    b.format(|buf, rec| match ps_sim::context::current() {
        Some((ms, slot)) => writeln!(buf, "[{ms} ms slot {slot} {}] {}", rec.level(), rec.args()),
        None => writeln!(buf, "[{}] {}", rec.level(), rec.args()),
    });
    let _ = b.try_init();
}

fn config(a: &Args) -> Result<SimConfig, String> {
    let parts: Vec<usize> = a
        .nodes
        .split(',')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("--nodes '{}': expected three numbers S,V,W", a.nodes))?;
    let [schedulers, servers, workers] = parts[..] else {
        return Err(format!("--nodes '{}': expected three numbers S,V,W", a.nodes));
    };
    let cfg = SimConfig {
        schedulers,
        servers,
        workers,
        replicas: a.replicas,
        tasks: a.tasks,
        passes: a.passes,
        plant: match &a.plant {
            Some(p) => Plant::parse(p)?,
            None => Plant::default(),
        },
        ..SimConfig::default()
    };
    cfg.validate()?;
    Ok(cfg)
}

fn report(cfg: &SimConfig, seed: u64, outcome: &Outcome, full: bool) {
    let Outcome::Failed { violation, log } = outcome else {
        return;
    };
    let shown = if full { log.len() } else { 40 };
    if log.len() > shown {
        println!(
            "  ... ({} earlier lines; --seed {seed} prints them all)",
            log.len() - shown
        );
    }
    for l in &log[log.len().saturating_sub(shown)..] {
        println!("  {l}");
    }
    println!(
        "seed {seed}: invariant broken at {} ms: {}",
        violation.at_ms, violation.what
    );
    let args = cfg.args();
    let sep = if args.is_empty() { "" } else { " " };
    println!("replay: psrs simulate --seed {seed}{sep}{args}");
}

/// Runs `psrs simulate`: exit status 0 when every seed passed, 1 when one broke an
/// invariant, 2 on bad options.
pub fn main(a: Args) -> ExitCode {
    if let Some(level) = a.log {
        init_log(level);
    }
    let cfg = match config(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("psrs simulate: error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(seed) = a.seed {
        let out = ps_sim::run_traced(&cfg, seed, true);
        return match &out {
            Outcome::Passed { at_ms, steps } => {
                println!("seed {seed}: passed ({steps} steps, {at_ms} simulated ms)");
                ExitCode::SUCCESS
            }
            Outcome::Beyond { why, .. } => {
                println!("seed {seed}: stopped beyond the fault model: {why}");
                ExitCode::SUCCESS
            }
            Outcome::Failed { .. } => {
                report(&cfg, seed, &out, true);
                ExitCode::from(1)
            }
        };
    }
    let threads = match a.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let start = Instant::now();
    let (mut passed, mut beyond, mut steps, mut sim_ms) = (0u64, 0u64, 0u64, 0u64);
    let end = a.first.saturating_add(a.seeds);
    let mut next = a.first;
    while next < end {
        // a batch of seeds over the threads; the smallest failing seed is reported
        let batch: Vec<u64> = (next..end.min(next + threads as u64 * 4)).collect();
        next += batch.len() as u64;
        let results: Vec<(u64, Outcome)> = std::thread::scope(|s| {
            let chunks: Vec<_> = batch
                .chunks(batch.len().div_ceil(threads))
                .map(|seeds| {
                    let cfg = &cfg;
                    s.spawn(move || {
                        seeds
                            .iter()
                            .map(|&seed| (seed, ps_sim::run(cfg, seed)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            chunks
                .into_iter()
                .flat_map(|h| h.join().expect("a simulation thread"))
                .collect()
        });
        for (seed, out) in &results {
            match out {
                Outcome::Passed { at_ms, steps: n } => {
                    passed += 1;
                    steps += n;
                    sim_ms += at_ms;
                }
                Outcome::Beyond { .. } => beyond += 1,
                Outcome::Failed { .. } => {
                    report(&cfg, *seed, out, false);
                    return ExitCode::from(1);
                }
            }
        }
    }
    println!(
        "{} seeds from {}: {passed} passed, {beyond} stopped beyond the fault model (more copies of a range lost than PS_REPLICAS); {steps} steps, {:.0} simulated s, in {:.1} s",
        a.seeds,
        a.first,
        sim_ms as f64 / 1000.0,
        start.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}
