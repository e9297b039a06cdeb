//! Fuzz target: arbitrary bytes into `ps_core::fuzzing::message_decoder`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ps_core::fuzzing::message_decoder(data));
