//! Fuzz target: arbitrary bytes as everything a dialer sends to a secured node's TLS
//! server; a handshake without a certificate of the cluster's CA must never complete.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| assert!(!ps_core::fuzzing::tls_accept(data), "a handshake completed"));
