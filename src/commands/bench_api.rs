//! `psrs bench-api`: the HTTP API of a running cluster under honest load, and under
//! attack. Honest clients (each on its own kept-alive connection, one request at a
//! time, with the token or certificate `psrs job` would use) request `--path` for
//! `--secs`; with `--mode header-flood` strangers meanwhile send header lines without
//! end (`--conns` connections, each up to `--flood-bytes`, opened again 100 ms after
//! the server refuses it), with `--mode slow`
//! `--conns` strangers send a byte every 2 s (reopened when closed). One line of
//! figures: requests per second, latency percentiles, errors, and the scheduler's
//! resident memory (`--pid`) at the start and at most. `scripts/bench-api.sh` runs it
//! against two builds side by side.

use super::api_client::ApiClient;
use clap::{Args as ClapArgs, ValueEnum};
use ps_apps::bench::http_attack::{flood, percentiles, rss_kb, slow_connections, Conn};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What runs beside the honest clients.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
pub enum Mode {
    /// Nothing: the honest clients alone.
    Load,
    /// Strangers sending a header line without end.
    HeaderFlood,
    /// Strangers sending a byte every 2 s.
    Slow,
}

/// Arguments of `psrs bench-api`.
#[derive(ClapArgs)]
pub struct Args {
    /// The API (a cluster's --stats-addr URL).
    #[arg(long, env = "PSRS_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    /// What runs beside the honest clients.
    #[arg(long, value_enum, default_value = "load")]
    mode: Mode,
    /// Honest clients.
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// Seconds measured.
    #[arg(long, default_value_t = 10.0)]
    secs: f64,
    /// What the honest clients request.
    #[arg(long, default_value = "/jobs")]
    path: String,
    /// Attacking connections (header-flood, slow).
    #[arg(long, default_value_t = 1000)]
    conns: usize,
    /// Bytes each flooding connection sends at most.
    #[arg(long, default_value_t = 64 << 20)]
    flood_bytes: usize,
    /// The scheduler's pid: its resident memory is sampled every 100 ms.
    #[arg(long)]
    pid: Option<u32>,
    /// A label printed on the line (e.g. which build).
    #[arg(long, default_value = "")]
    label: String,
}

/// Runs the benchmark and prints its line.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    let probe = ApiClient::from_env(&a.api)?;
    let url = format!("{}{}", probe.base, a.path);
    probe
        .call("GET", &url, None)
        .map_err(|e| format!("the API does not answer {url}: {e}"))?;
    let addr = ps_apps::stats::token_file::authority(&probe.base)
        .map(|(h, p)| if h.contains(':') { format!("[{h}]:{p}") } else { format!("{h}:{p}") })
        .ok_or_else(|| format!("--api {}: no host and port", a.api))?;
    let stop = Arc::new(AtomicBool::new(false));
    let rss_max = Arc::new(AtomicU64::new(0));
    let rss_start = a.pid.and_then(rss_kb).unwrap_or(0);
    let sampler = a.pid.map(|pid| {
        let (stop, max) = (Arc::clone(&stop), Arc::clone(&rss_max));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kb) = rss_kb(pid) {
                    max.fetch_max(kb, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    });
    let anon = probe.anonymous_tls.clone();
    let mut attackers = Vec::new();
    match a.mode {
        Mode::Load => {}
        Mode::HeaderFlood => {
            for _ in 0..a.conns {
                let (addr, anon, stop, most) = (addr.clone(), anon.clone(), Arc::clone(&stop), a.flood_bytes);
                attackers.push(std::thread::spawn(move || {
                    let mut opened = 0;
                    while !stop.load(Ordering::Relaxed) {
                        opened += 1;
                        if let Ok(mut c) = Conn::open(&addr, anon.as_ref()) {
                            if flood(&mut c, 64 << 10, Duration::ZERO, most).is_none() {
                                // everything sent and still open: hold it
                                while !stop.load(Ordering::Relaxed) {
                                    std::thread::sleep(Duration::from_millis(100));
                                }
                            }
                        }
                        // refused: flood again a moment later (a header flood, not a
                        // flood of connections)
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    opened
                }));
            }
        }
        Mode::Slow => {
            let (addr, anon, stop, n) = (addr.clone(), anon.clone(), Arc::clone(&stop), a.conns);
            attackers.push(std::thread::spawn(move || slow_connections(&addr, anon.as_ref(), n, &stop)));
        }
    }
    if a.mode != Mode::Load {
        // the strangers are at the door before the honest clients start
        std::thread::sleep(Duration::from_secs(2));
    }
    let deadline = Instant::now() + Duration::from_secs_f64(a.secs);
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let mut clients = Vec::new();
    for _ in 0..a.clients.max(1) {
        let c = ApiClient::from_env(&a.api)?;
        let (url, errors, first_error) = (url.clone(), Arc::clone(&errors), Arc::clone(&first_error));
        clients.push(std::thread::spawn(move || {
            let mut micros = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                match c.call("GET", &url, None) {
                    Ok(_) => micros.push(t.elapsed().as_micros() as u64),
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            micros
        }));
    }
    let start = Instant::now();
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.join().map_err(|_| "an honest client panicked".to_string())?);
    }
    let took = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let opened: usize = attackers.into_iter().map(|t| t.join().unwrap_or(0)).sum();
    if let Some(s) = sampler {
        let _ = s.join();
    }
    let p = percentiles(all);
    let mb = |kb: u64| kb as f64 / 1024.0;
    println!(
        "bench-api label={} mode={:?} clients={} path={} secs={took:.1} requests={} req_per_s={:.0} p50_ms={:.3} p99_ms={:.3} max_ms={:.1} errors={} attackers_opened={opened} rss_start_mb={:.1} rss_max_mb={:.1}",
        if a.label.is_empty() { "-" } else { &a.label },
        a.mode,
        a.clients.max(1),
        a.path,
        p.n,
        p.n as f64 / took,
        p.p50_ms,
        p.p99_ms,
        p.max_ms,
        errors.load(Ordering::Relaxed),
        mb(rss_start),
        mb(rss_max.load(Ordering::Relaxed).max(rss_start)),
    );
    if let Some(e) = first_error.lock().ok().and_then(|mut f| f.take()) {
        eprintln!("bench-api: first error: {e}");
    }
    Ok(())
}
