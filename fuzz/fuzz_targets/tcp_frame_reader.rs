//! Fuzz target: arbitrary bytes into `ps_core::fuzzing::tcp_frame_reader`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ps_core::fuzzing::tcp_frame_reader(data));
