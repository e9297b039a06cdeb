//! Test doubles (tests only): a transport that connects to nobody and delivers
//! nothing, and the config of a worker of a one-server, one-worker cluster.

use crate::config::Config;
use crate::van::transport::Deliver;
use crate::van::transport::Transport;
use bytes::Bytes;
use std::collections::HashMap;
use std::io;

/// A transport that claims every peer is connected and delivers nothing: each send
/// fails with `fail` if given, else takes the message (and nobody answers).
pub(crate) struct Void {
    /// The error of every send (`None`: every send succeeds).
    pub(crate) fail: Option<io::ErrorKind>,
}

impl Transport for Void {
    fn bind(&self, _host: &str, _port: u16) -> io::Result<u16> {
        Ok(0)
    }
    fn start(&self, _deliver: Deliver) -> io::Result<()> {
        Ok(())
    }
    fn connect(&self, _peer: i32, _host: &str, _port: u16) -> io::Result<()> {
        Ok(())
    }
    fn disconnect(&self, _peer: i32) {}
    fn is_connected(&self, _peer: i32) -> bool {
        true
    }
    fn send(&self, _peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        match self.fail {
            Some(kind) => Err(io::Error::new(kind, "failing transport")),
            None => Ok(frames.iter().map(|f| f.len()).sum()),
        }
    }
    fn close(&self) {}
}

/// A worker's config (scheduler at 127.0.0.1:9000, one server, one worker) with
/// `extra` variables added.
pub(crate) fn worker_config(extra: &[(&str, &str)]) -> Config {
    let base = [
        ("DMLC_ROLE", "worker"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", "9000"),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "1"),
    ];
    let vars: HashMap<String, String> = base
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_vars(&vars).expect("a valid config")
}
