//! psrs applications: the master (task queues over a RecordIO dataset), datasets,
//! training and benchmarks. Built on `ps-core`; `ps-core` knows nothing of this crate.
pub mod bench;
pub mod fuzzing;
pub mod jobs;
pub mod master;
pub mod model;
pub mod pyrunner;
pub mod recordio;
pub mod stats;
pub mod storage;
pub mod tables;
pub mod train;

#[cfg(test)]
mod fuzz_tests;
