//! A deterministic simulator of a whole psrs cluster: scheduler candidates, replicated
//! servers and workers training through the master's task queues, all in one thread
//! under a simulated clock and network (loss, duplication, delays and reordering,
//! partitions of any subset, crashes and restarts), every choice drawn from one
//! seeded generator. Every process is psrs's own postoffice and van (its receive
//! path, resender, failover and election, and on a scheduler the node table,
//! barriers and liveness) over a simulated transport and clock, with no thread: the
//! world runs the steps the van's threads run ([`process`]). On top runs each role's
//! application as `psrs train` runs it: on the scheduler candidates psrs's own
//! training coordinator ([`scheduler`]); on the workers psrs's own task loop and
//! master client, training a summing job through psrs's own `KVWorker` ([`worker`]);
//! on the servers psrs's own `KVServer` with its replication, over the summing
//! job's handle ([`server`]). What the simulator itself holds is the world (network,
//! clock, timers, faults: [`world`], [`net`], [`faults`]), the summing job, and the
//! checker: after every step the invariants of [`check`] are checked; the first one
//! broken ends the run with the seed that replays it exactly.

pub mod check;
pub mod config;
pub mod context;
pub mod events;
pub mod fault;
pub mod faults;
pub mod net;
pub mod process;
pub mod rng;
pub mod scheduler;
pub mod server;
pub mod transport;
pub mod worker;
pub mod world;

pub use check::Violation;
pub use config::{Plant, SimConfig};

use world::World;

/// Seeds `psrs simulate` runs unless told otherwise; each planted bug is found
/// within this many (the simulator's own tests check it).
pub const DEFAULT_SEEDS: u64 = 1000;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The job finished and every invariant held.
    Passed {
        /// Simulated ms the run took.
        at_ms: u64,
        /// Steps run.
        steps: u64,
    },
    /// More copies of a key range were out at once than `PS_REPLICAS` allows (the
    /// scheduler declared alive servers dead): beyond what the invariants assume, so
    /// the run stopped there.
    Beyond {
        /// What went out.
        why: String,
        /// The run's last events.
        log: Vec<String>,
    },
    /// An invariant broke.
    Failed {
        /// The broken invariant.
        violation: Violation,
        /// The run's last events (faults, restarts), oldest first.
        log: Vec<String>,
    },
}

/// The total number of tasks of the job, and how many the active master has done.
fn progress(w: &World) -> Option<(u64, u64)> {
    let a = w.scheduler(w.active()?)?.lock();
    let done = a.coordinator.as_ref()?.master().queues().total_done;
    Some((done, w.cfg.tasks as u64 * w.cfg.passes))
}

/// Runs seed `seed` of `cfg` to its end.
pub fn run(cfg: &SimConfig, seed: u64) -> Outcome {
    run_traced(cfg, seed, false)
}

/// [`run`], with every delivery in the log when `trace` is set.
pub fn run_traced(cfg: &SimConfig, seed: u64, trace: bool) -> Outcome {
    let mut w = World::new(cfg.clone(), seed);
    w.trace = trace;
    faults::plan(&mut w);
    let mut checker = check::Checker::new(cfg.timeout_ms);
    let mut steps = 0u64;
    let mut faults_over = false;
    let mut deadline = u64::MAX;
    let failed = |violation: Violation, w: &World| {
        let mut log = w.log.clone();
        log.extend(w.describe());
        Outcome::Failed { violation, log }
    };
    while let Some(mut fx) = w.step() {
        steps += 1;
        if let Some(f) = fx.fault.take() {
            faults::apply(&mut w, f);
        }
        if let Err(v) = checker.on_effects(fx, w.now).and_then(|_| checker.check(&w)) {
            return failed(v, &w);
        }
        if let Some(why) = checker.beyond.take() {
            let mut log = w.log.clone();
            log.extend(w.describe());
            return Outcome::Beyond { why, log };
        }
        if !faults_over {
            // the faults stop before the job can end: most of it runs under them
            let late = progress(&w).is_some_and(|(done, total)| done * 10 >= total * 6);
            if w.now >= cfg.fault_ms || late {
                faults_over = true;
                deadline = w.now + cfg.finish_ms;
                faults::apply(&mut w, faults::Fault::End);
                checker.healed(w.now);
            }
            continue;
        }
        match checker.finished(&w) {
            Ok(true) => return Outcome::Passed { at_ms: w.now, steps },
            Ok(false) => {}
            Err(v) => return failed(v, &w),
        }
        if w.now > deadline {
            break;
        }
    }
    let what = match progress(&w) {
        Some((done, total)) => format!(
            "the job did not finish within {} s after the faults stopped ({done} of {total} tasks done)",
            cfg.finish_ms / 1000
        ),
        None => format!(
            "the job did not finish within {} s after the faults stopped (no active scheduler with a master)",
            cfg.finish_ms / 1000
        ),
    };
    failed(Violation { at_ms: w.now, what }, &w)
}
