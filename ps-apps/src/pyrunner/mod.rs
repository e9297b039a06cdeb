//! Users' own models in inference jobs: a long-lived Python process per worker (the
//! runner) that loads a TorchScript file or imports `module:function` once per job and
//! then answers batch after batch. The protocol (frames, requests, the checks on
//! replies) is pure and unit-tested; the shell starts the process, talks to it through
//! two threads, and kills it when it dies, hangs or breaks the protocol, so one bad
//! batch costs that batch and a restart, never the worker.

pub mod error;
pub mod process;
pub mod protocol;
pub mod slot;

pub use error::RunnerError;
pub use process::{Runner, RunnerConfig};
pub use protocol::{Inputs, UserModel};
pub use slot::RunnerSlot;

#[cfg(test)]
mod process_tests;
