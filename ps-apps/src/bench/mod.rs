//! KV benchmarks in the modes of ps-lite's test_benchmark: latency (push then pull,
//! each waited), throughput (push-only, pull-only, push-pull with requests in flight)
//! and many small keys per call. Servers run an "empty" handle as ps-lite's does: the
//! first push of a key is stored, later pushes are only acknowledged, and a pull
//! returns the stored values without copying them. [`raw`] gives the raw-socket floors
//! between the same two processes (`--compare-raw`).

pub mod cipher;
pub mod http_attack;
pub mod cpu;
mod error;
mod handle;
mod modes;
pub mod raw;

pub use error::BenchError;
pub use handle::{empty_handle, port_handle};
pub use modes::{run_small_keys, run_worker, BenchConfig, Figure, Mode};
