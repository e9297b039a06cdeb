//! `psrs bench`: KV benchmarks (see `ps_apps::bench`). Run it under the launcher, e.g.
//! `scripts/local.sh 1 1 target/release/psrs bench`; servers serve, workers measure and
//! print one line per configuration.

use super::error::CliError;
use clap::Args as ClapArgs;
use ps_apps::bench::cpu::{percent_of_a_core, process_cpu};
use ps_apps::bench::raw::{spawn_server, RawClient};
use ps_apps::bench::{empty_handle, port_handle, run_small_keys, run_worker, BenchConfig, Figure, Mode};
use ps_core::kv::{KVServer, KVWorker};
use ps_core::node::{server_rank_to_id, WORKER_GROUP};
use ps_core::Role;
use std::time::{Duration, Instant};

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
    /// After each latency / push-only / pull-only figure, measure the same over a plain
    /// TCP connection between this worker and one server (server rank = worker rank mod
    /// servers) and print it with the ratio KV / raw. Give it to every node.
    #[arg(long)]
    compare_raw: bool,
    /// Time the TLS links' cipher (AES-128-GCM sealing and opening 16 KiB records on
    /// one core, `--seconds` each), print one line and exit: no cluster, no variables.
    #[arg(long)]
    cipher: bool,
}

const APP_BYTES: i32 = 0;
const APP_FLOATS: i32 = 1;
const APP_RAW_PORT: i32 = 2;

fn print(fig: &Figure, po: &ps_core::Postoffice) {
    print_with_cpu(fig, po, None);
}

/// Prints a figure; `cpu`, when known, is this worker process's CPU use during it (in
/// percent of one core: all its threads, e.g. spinning ones with `PS_SPIN_US`).
fn print_with_cpu(fig: &Figure, po: &ps_core::Postoffice, cpu: Option<f64>) {
    let cpu = cpu.map(|c| format!(" cpu_pct={c:.0}")).unwrap_or_default();
    println!(
        "bench worker={} servers={} workers={} mode={:<15} size={:>9} ops={:>7} gbps={:>8.3} msgs_per_s={:>10.0} us_per_op={:>9.1}{cpu}",
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

/// Runs `f`, returning its result and this process's CPU use meanwhile (percent of one
/// core; None where it cannot be read).
fn with_cpu<T>(f: impl FnOnce() -> T) -> (T, Option<f64>) {
    let (c0, t0) = (process_cpu(), Instant::now());
    let out = f();
    let wall = t0.elapsed();
    let cpu = c0
        .zip(process_cpu())
        .map(|(a, b)| percent_of_a_core(b.saturating_sub(a), wall));
    (out, cpu)
}

/// Prints KV / raw for one size: throughput ratio, and for latency the per-request time
/// ratio (KV us / raw us, so 2.0 = twice the raw round trip), and the raw floor's
/// socket (`unix` or `tcp`).
fn print_ratio(kv: &Figure, raw: &Figure, unix: bool, po: &ps_core::Postoffice) {
    let (what, ratio) = if kv.mode == Mode::Latency.name() {
        ("us_kv_over_raw", kv.us_per_op() / raw.us_per_op())
    } else {
        ("gbps_kv_over_raw", kv.gbps() / raw.gbps())
    };
    println!(
        "bench worker={} compare mode={:<15} size={:>9} {what}={ratio:.3} raw_socket={}",
        po.my_rank(),
        kv.mode,
        kv.size,
        if unix { "unix" } else { "tcp" }
    );
}

/// This node's advertised host, from the node table.
fn my_host(po: &ps_core::Postoffice) -> Result<String, String> {
    host_of(po, po.my_id())
}

fn host_of(po: &ps_core::Postoffice, id: i32) -> Result<String, String> {
    po.nodes()
        .into_iter()
        .find(|n| n.id == id)
        .map(|n| n.hostname)
        .ok_or_else(|| format!("node {id} is not in the node table"))
}

/// Whether the raw floor connects as the TCP van's links do: through a Unix socket to a
/// node on this host (`PS_LOCAL_SOCKET`, TCP van only).
fn local_socket(po: &ps_core::Postoffice) -> bool {
    po.config().local_socket && po.config().van_type == "tcp"
}

/// Asks this worker's raw server (rank = worker rank mod servers) for its raw port over
/// KV and connects to it.
fn raw_client(po: &std::sync::Arc<ps_core::Postoffice>) -> Result<RawClient, CliError> {
    let kv = KVWorker::<u64>::new(po, APP_RAW_PORT)?;
    let rank = po.my_rank() % po.num_servers().max(1);
    let key = kv.ranges()[rank].begin;
    let got = kv.wait_pull(kv.zpull(vec![key].into(), 0)?)?;
    let port = *got.vals.first().ok_or("raw bench: no port answered")? as u16;
    let host = host_of(po, server_rank_to_id(rank))?;
    RawClient::connect((host.as_str(), port), local_socket(po))
        .map_err(|e| format!("raw bench: connect {host}:{port}: {e}").into())
}

/// Serves (servers) or measures (workers), then finalizes.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    if a.cipher {
        let f = ps_apps::bench::cipher::measure(Duration::from_secs_f64(a.seconds));
        println!(
            "bench cipher=aes-128-gcm record={} seal_gbps={:.3} open_gbps={:.3}",
            ps_apps::bench::cipher::RECORD,
            f.seal_gbps,
            f.open_gbps
        );
        return Ok(());
    }
    let po = super::start_node()?;
    match po.role() {
        Role::Server => {
            let (c0, t0) = (process_cpu(), Instant::now());
            let _b = KVServer::<u8>::new(&po, APP_BYTES, empty_handle())?;
            let _f = KVServer::<f32>::new(&po, APP_FLOATS, ps_core::kv::handles::sum_handle())?;
            let _r = if a.compare_raw {
                let port =
                    spawn_server(&my_host(&po)?, local_socket(&po)).map_err(|e| format!("raw bench listener: {e}"))?;
                Some(KVServer::<u64>::new(&po, APP_RAW_PORT, port_handle(port))?)
            } else {
                None
            };
            po.finalize(true);
            if let Some((a, b)) = c0.zip(process_cpu()) {
                let pct = percent_of_a_core(b.saturating_sub(a), t0.elapsed());
                println!("bench server={} cpu_pct={pct:.0} (over its whole run)", po.my_rank());
            }
        }
        Role::Scheduler => po.finalize(true),
        Role::Worker => {
            let bytes = KVWorker::<u8>::new(&po, APP_BYTES)?;
            let floats = KVWorker::<f32>::new(&po, APP_FLOATS)?;
            let salt = po.my_rank() as u64 + 1;
            let dur = Duration::from_secs_f64(a.seconds);
            let mut raw = if a.compare_raw { Some(raw_client(&po)?) } else { None };
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
                    other => return Err(format!("unknown mode '{other}'").into()),
                };
                for &size in &a.sizes {
                    po.barrier(WORKER_GROUP);
                    let cfg = BenchConfig {
                        size,
                        inflight: if size >= 1 << 24 { a.inflight.min(4) } else { a.inflight },
                        duration: dur,
                    };
                    let (kv, cpu) = with_cpu(|| run_worker(&bytes, mode, &cfg, salt));
                    let kv = kv?;
                    print_with_cpu(&kv, &po, cpu);
                    if let Some(c) = raw.as_mut() {
                        let r = match mode {
                            Mode::Latency => c.ping_pong(size, dur),
                            Mode::PushOnly => c.stream(false, size, cfg.inflight, dur),
                            Mode::PullOnly => c.stream(true, size, cfg.inflight, dur),
                            Mode::PushPull => continue,
                        }
                        .map_err(|e| format!("raw bench: {e}"))?;
                        print(&r, &po);
                        print_ratio(&kv, &r, c.is_local(), &po);
                    }
                }
            }
            drop((bytes, floats));
            po.finalize(true);
        }
    }
    Ok(())
}
