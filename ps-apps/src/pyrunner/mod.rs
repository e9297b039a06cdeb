//! Users' own models in inference jobs: a long-lived Python process per worker (the
//! runner) that loads TorchScript files or imports `module:function`s, several jobs'
//! models at once (each in the background while it answers another job's batches), and
//! then answers batch after batch. The protocol (frames, requests, the checks on
//! replies) and which models to hold under a memory budget ([`ModelCache`]) are pure and
//! unit-tested; the shell starts the process, talks to it through two threads, and
//! kills it when it dies, hangs or breaks the protocol, so one bad batch costs that
//! batch and a restart, never the worker.

pub mod cache;
pub mod error;
pub mod process;
pub mod protocol;
pub mod slot;

pub use cache::{Action, ModelCache, WarmJob};
pub use error::RunnerError;
pub use process::{Runner, RunnerConfig};
pub use protocol::{Inputs, ModelState, ModelStatus, UserModel};
pub use slot::{RunnerSlot, RunnerStatus};

#[cfg(test)]
mod process_tests;
