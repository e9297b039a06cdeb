//! Fuzz target: arbitrary HELLO + PROOF bytes into the responder's handshake; a proof
//! forged without the secret must never be accepted.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| assert!(!ps_core::fuzzing::handshake(data), "forged proof accepted"));
