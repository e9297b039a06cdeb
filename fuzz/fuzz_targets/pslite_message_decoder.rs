//! Fuzz target: arbitrary bytes into `ps_core::fuzzing::pslite_message_decoder`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| ps_core::fuzzing::pslite_message_decoder(data));
