//! `psrs bench`: KV benchmarks (see `ps_apps::bench`). Run it under the launcher, e.g.
//! `scripts/local.sh 1 1 target/release/psrs bench`; servers serve, workers measure and
//! print one line per configuration.

use clap::Args as ClapArgs;
use ps_apps::bench::{empty_handle, run_small_keys, run_worker, BenchConfig, Figure, Mode};
use ps_core::kv::{KVServer, KVWorker};
use ps_core::node::WORKER_GROUP;
use ps_core::Role;
use std::time::Duration;

/// Arguments of `psrs bench`.
#[derive(ClapArgs)]
pub struct Args {
    /// Bytes per key per server.
    #[arg(long, value_delimiter = ',', default_value = "256,4096,65536,1048576,16777216")]
    sizes: Vec<usize>,
    /// Modes: latency, push-only, pull-only, push-pull, small-keys.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "latency,push-only,pull-only,push-pull,small-keys"
    )]
    modes: Vec<String>,
    /// Requests in flight in the throughput modes.
    #[arg(long, default_value_t = 16)]
    inflight: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Float keys per call in the small-keys mode.
    #[arg(long, default_value_t = 100_000)]
    small_keys: usize,
}

const APP_BYTES: i32 = 0;
const APP_FLOATS: i32 = 1;

fn print(fig: &Figure, po: &ps_core::Postoffice) {
    println!(
        "bench worker={} servers={} workers={} mode={:<15} size={:>9} ops={:>7} gbps={:>8.3} msgs_per_s={:>10.0} us_per_op={:>9.1}",
        po.my_rank(),
        po.num_servers(),
        po.num_workers(),
        fig.mode,
        fig.size,
        fig.ops,
        fig.gbps(),
        fig.ops_per_sec(),
        fig.us_per_op()
    );
}

/// Serves (servers) or measures (workers), then finalizes.
pub fn run(a: Args) -> Result<(), String> {
    let po = super::start_node()?;
    match po.role() {
        Role::Server => {
            let _b = KVServer::<u8>::new(&po, APP_BYTES, empty_handle())?;
            let _f = KVServer::<f32>::new(&po, APP_FLOATS, ps_core::kv::handles::sum_handle())?;
            po.finalize(true);
        }
        Role::Scheduler => po.finalize(true),
        Role::Worker => {
            let bytes = KVWorker::<u8>::new(&po, APP_BYTES)?;
            let floats = KVWorker::<f32>::new(&po, APP_FLOATS)?;
            let salt = po.my_rank() as u64 + 1;
            let dur = Duration::from_secs_f64(a.seconds);
            for m in &a.modes {
                let mode = match m.as_str() {
                    "latency" => Mode::Latency,
                    "push-only" => Mode::PushOnly,
                    "pull-only" => Mode::PullOnly,
                    "push-pull" => Mode::PushPull,
                    "small-keys" => {
                        po.barrier(WORKER_GROUP);
                        print(&run_small_keys(&floats, a.small_keys, dur, salt, false)?, &po);
                        po.barrier(WORKER_GROUP);
                        print(&run_small_keys(&floats, a.small_keys, dur, salt, true)?, &po);
                        continue;
                    }
                    other => return Err(format!("unknown mode '{other}'")),
                };
                for &size in &a.sizes {
                    po.barrier(WORKER_GROUP);
                    let cfg = BenchConfig {
                        size,
                        inflight: if size >= 1 << 24 { a.inflight.min(4) } else { a.inflight },
                        duration: dur,
                    };
                    print(&run_worker(&bytes, mode, &cfg, salt)?, &po);
                }
            }
            drop((bytes, floats));
            po.finalize(true);
        }
    }
    Ok(())
}
