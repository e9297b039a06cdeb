//! Fuzz target: arbitrary bytes into `ps_core::fuzzing::sealed_reader`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ps_core::fuzzing::sealed_reader(data));
