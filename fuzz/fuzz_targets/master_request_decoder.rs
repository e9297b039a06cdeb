//! Fuzz target: arbitrary bytes into `ps_apps::fuzzing::master_request_decoder`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ps_apps::fuzzing::master_request_decoder(data));
