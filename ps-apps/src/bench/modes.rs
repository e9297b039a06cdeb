//! The benchmark modes, run on a worker.

use super::error::BenchError;
use ps_core::kv::{KVPairs, KVWorker, SArray};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A benchmark mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Push then pull one key per server, waiting for each.
    Latency,
    /// Pushes only, `inflight` outstanding.
    PushOnly,
    /// Pulls only, `inflight` outstanding.
    PullOnly,
    /// Push-pull round trips, `inflight` outstanding.
    PushPull,
}

impl Mode {
    /// The mode's name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Latency => "latency",
            Mode::PushOnly => "push-only",
            Mode::PullOnly => "pull-only",
            Mode::PushPull => "push-pull",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Bytes per key.
    pub size: usize,
    /// Requests in flight for the throughput modes.
    pub inflight: usize,
    /// Run each measurement this long.
    pub duration: Duration,
}

/// One measured figure.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The mode.
    pub mode: &'static str,
    /// Bytes per key per server (or values per call for small keys).
    pub size: usize,
    /// Requests completed.
    pub ops: u64,
    /// Elapsed seconds.
    pub secs: f64,
    /// Payload bytes moved (both directions for push-pull).
    pub bytes: u64,
}

impl Figure {
    /// Payload gigabits per second.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e9
    }
    /// Requests per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs
    }
    /// Microseconds per request.
    pub fn us_per_op(&self) -> f64 {
        self.secs * 1e6 / self.ops.max(1) as f64
    }
}

/// One key per server (its range's first key, offset by `salt`), `size` bytes each.
fn one_key_per_server(kv: &KVWorker<u8>, size: usize, salt: u64) -> KVPairs<u8> {
    let keys: Vec<u64> = kv.ranges().iter().map(|r| r.begin + salt).collect();
    let vals = vec![1u8; size * keys.len()];
    KVPairs::new(keys, vals, Vec::new())
}

/// Runs `mode` at `cfg` on this worker (`salt` keeps workers' keys apart). A failed
/// request is [`BenchError::Kv`], a pull of the wrong size [`BenchError::WrongSize`].
pub fn run_worker(kv: &KVWorker<u8>, mode: Mode, cfg: &BenchConfig, salt: u64) -> Result<Figure, BenchError> {
    // a key per size, so each size's first push is the one the server stores
    let kvs = one_key_per_server(kv, cfg.size, salt * 64 + cfg.size.trailing_zeros() as u64);
    let payload = kvs.vals.len() as u64;
    kv.wait(kv.zpush(kvs.clone(), 0)?)?; // warm up, store the key
    let keys: SArray<u64> = kvs.keys.clone();
    let start = Instant::now();
    let mut ops = 0u64;
    let mut bytes = 0u64;
    let inflight = if mode == Mode::Latency { 1 } else { cfg.inflight.max(1) };
    let mut window: VecDeque<(i32, bool)> = VecDeque::new();
    let mut phase = false;
    while start.elapsed() < cfg.duration || !window.is_empty() {
        if start.elapsed() < cfg.duration && window.len() < inflight {
            let (ts, pull) = match mode {
                Mode::PushOnly => (kv.zpush(kvs.clone(), 0)?, false),
                Mode::PullOnly => (kv.zpull(keys.clone(), 0)?, true),
                Mode::PushPull => (kv.push_pull(kvs.clone(), 0)?, true),
                Mode::Latency => {
                    phase = !phase;
                    if phase {
                        (kv.zpush(kvs.clone(), 0)?, false)
                    } else {
                        (kv.zpull(keys.clone(), 0)?, true)
                    }
                }
            };
            window.push_back((ts, pull));
            continue;
        }
        let (ts, pull) = window.pop_front().expect("non-empty");
        if pull {
            let got = kv.wait_pull(ts)?;
            if got.vals.len() as u64 != payload {
                return Err(BenchError::WrongSize {
                    got: got.vals.len() as u64,
                    want: payload,
                });
            }
        } else {
            kv.wait(ts)?;
        }
        ops += 1;
        bytes += match mode {
            Mode::PushPull => 2 * payload,
            _ => payload,
        };
    }
    Ok(Figure {
        mode: mode.name(),
        size: cfg.size,
        ops,
        secs: start.elapsed().as_secs_f64(),
        bytes,
    })
}

/// Pushes `n` float keys per call (spread over all servers) for `duration`, waiting
/// for each; the figure's `size` is `n`. A failed request is [`BenchError::Kv`].
pub fn run_small_keys(
    kv: &KVWorker<f32>,
    n: usize,
    duration: Duration,
    salt: u64,
    pull: bool,
) -> Result<Figure, BenchError> {
    let step = u64::MAX / n as u64;
    let keys: Vec<u64> = (0..n as u64).map(|i| i * step + salt).collect();
    let kvs = KVPairs::new(keys, vec![1.0f32; n], Vec::new());
    kv.wait(kv.zpush(kvs.clone(), 0)?)?;
    let start = Instant::now();
    let mut ops = 0;
    while start.elapsed() < duration {
        if pull {
            kv.wait_pull(kv.zpull(kvs.keys.clone(), 0)?)?;
        } else {
            kv.wait(kv.zpush(kvs.clone(), 0)?)?;
        }
        ops += 1;
    }
    Ok(Figure {
        mode: if pull { "small-keys-pull" } else { "small-keys-push" },
        size: n,
        ops,
        secs: start.elapsed().as_secs_f64(),
        bytes: ops * n as u64 * 12,
    })
}
