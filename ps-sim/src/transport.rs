//! The simulated network's end in a process: a [`Transport`] the process's real van
//! sends through. Sending only queues the frames for the world (which delays, loses,
//! duplicates or cuts them, [`crate::net`]); the world hands a delivery back through
//! [`SimTransport::deliver`], which runs the van's receive path as a transport's
//! reader thread would. Links are keys to slots: the port of an address names the
//! slot listening there ([`slot_of_port`]).

use bytes::Bytes;
use parking_lot::Mutex;
use ps_core::van::{Deliver, Transport};
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

/// The port a slot's process listens on (slot = port - [`BASE_PORT`]).
pub const BASE_PORT: u16 = 1000;

/// The slot listening at `port`.
pub fn slot_of_port(port: u16) -> usize {
    port.saturating_sub(BASE_PORT) as usize
}

/// One process's end of the simulated network.
pub struct SimTransport {
    links: Mutex<BTreeMap<i32, usize>>,
    out: Mutex<Vec<(usize, Vec<Bytes>)>>,
    deliver: Mutex<Option<Deliver>>,
    closed: AtomicBool,
}

impl SimTransport {
    /// An end with no link.
    pub fn new() -> SimTransport {
        SimTransport {
            links: Mutex::new(BTreeMap::new()),
            out: Mutex::new(Vec::new()),
            deliver: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// What the process sent since the last call: (slot, frames), in order.
    pub fn take_out(&self) -> Vec<(usize, Vec<Bytes>)> {
        std::mem::take(&mut *self.out.lock())
    }

    /// A message's frames arrive: the van's receive path runs now.
    pub fn deliver(&self, frames: Vec<Bytes>) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let d = self.deliver.lock().clone();
        if let Some(d) = d {
            d(frames, None);
        }
    }
}

impl Default for SimTransport {
    fn default() -> Self {
        SimTransport::new()
    }
}

impl Transport for SimTransport {
    fn bind(&self, _host: &str, port: u16) -> io::Result<u16> {
        Ok(port)
    }

    fn start(&self, deliver: Deliver) -> io::Result<()> {
        *self.deliver.lock() = Some(deliver);
        Ok(())
    }

    fn connect(&self, peer: i32, _host: &str, port: u16) -> io::Result<()> {
        self.links.lock().insert(peer, slot_of_port(port));
        Ok(())
    }

    fn disconnect(&self, peer: i32) {
        self.links.lock().remove(&peer);
    }

    fn rekey(&self, from: i32, to: i32) -> bool {
        let mut l = self.links.lock();
        match l.remove(&from) {
            Some(slot) => {
                l.insert(to, slot);
                true
            }
            None => false,
        }
    }

    fn is_connected(&self, peer: i32) -> bool {
        self.links.lock().contains_key(&peer)
    }

    fn send(&self, peer: i32, frames: Vec<Bytes>) -> io::Result<usize> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::NotConnected, "closed"));
        }
        let to = self
            .links
            .lock()
            .get(&peer)
            .copied()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, format!("no link to {peer}")))?;
        let n = frames.iter().map(|f| f.len()).sum();
        self.out.lock().push((to, frames));
        Ok(n)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}
