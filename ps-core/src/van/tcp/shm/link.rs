//! The shell around one link: [`Shm`] (a transport's settings and counters) makes the
//! offer on an outgoing link before its first large frame ([`Shm::place`], keeping
//! the link's [`ShmLink`]; an accepted offer gives a [`ShmSender`], which moves large
//! frames into the region) and answers offers on incoming ones ([`ShmReceiver`], which
//! turns descriptors back into frames). Any failure means "no shared memory on this
//! link": the messages go over TCP as before, with a debug log.

use super::alloc::SpanAllocator;
use super::error::ShmError;
use super::region::{boot_id, Region};
use super::wire::{Descriptor, Layout, Offer, ACCEPT, REFUSE};
use crate::config::ShmConfig;
use crate::van::stats::ShmStats;
use crate::van::tcp::guard::Outgoing;
use crate::van::tcp::stream::is_local;
use bytes::Bytes;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

/// How long the connecting side waits for the one-byte answer to its offer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest offer body read (a longer one closes the connection).
const MAX_OFFER_BODY: u32 = 4096;

/// One transport's shared-memory settings, this host's boot id and the counters.
pub struct Shm {
    cfg: ShmConfig,
    boot_id: Option<[u8; 36]>,
    stats: Arc<ShmStats>,
}

impl Shm {
    /// The settings `cfg`; disabled when the boot id cannot be read (no `/proc`).
    pub fn new(cfg: ShmConfig) -> Arc<Shm> {
        let boot_id = if cfg.enabled { boot_id() } else { None };
        if cfg.enabled && boot_id.is_none() {
            log::debug!("shared memory off: cannot read /proc/sys/kernel/random/boot_id");
        }
        Arc::new(Shm {
            cfg,
            boot_id,
            stats: Arc::default(),
        })
    }

    /// Shared memory off (`PS_SHM=0`): no offers made, every offer refused.
    pub fn off() -> Arc<Shm> {
        Shm::new(ShmConfig {
            enabled: false,
            ..ShmConfig::default()
        })
    }

    /// The counters, shared with the van's [`crate::van::VanStats`].
    pub fn stats(&self) -> Arc<ShmStats> {
        Arc::clone(&self.stats)
    }

    /// Before `frames` are written to `out`: on a link that has not offered yet and a
    /// message with a frame of at least `PS_SHM_MIN_BYTES`, makes the offer
    /// ([`Shm::offer`]); on a link whose peer accepted, places the large frames
    /// ([`ShmSender::place`]). Returns the marks for the header (0: plain message).
    pub fn place(&self, link: &mut ShmLink, out: &mut Outgoing, frames: &mut [Bytes]) -> u128 {
        if matches!(link, ShmLink::NotOffered) {
            if !frames.iter().any(|f| f.len() >= self.cfg.min_bytes) {
                return 0;
            }
            *link = match self.offer(out) {
                Some(s) => ShmLink::Accepted(s),
                None => ShmLink::Declined,
            };
        }
        match link {
            ShmLink::Accepted(s) => s.place(frames),
            _ => 0,
        }
    }

    /// On an outgoing link: if shared memory is on and the peer's address is this
    /// host's, offers a new region and waits for the answer. `Some` only when the peer
    /// accepted; a remote peer costs nothing (no bytes sent).
    pub fn offer(&self, out: &mut Outgoing) -> Option<ShmSender> {
        let boot_id = self.boot_id.filter(|_| self.cfg.enabled)?;
        let peer = out.stream().peer_addr().ok()?;
        if !out.stream().is_local() && !is_local(peer.ip()) {
            return None;
        }
        match self.try_offer(out, boot_id) {
            Ok(Some(s)) => {
                self.stats.links_out.fetch_add(1, Relaxed);
                log::debug!("shared memory to {peer}: {} MiB region accepted", self.cfg.region_mb);
                Some(s)
            }
            Ok(None) => {
                log::debug!("shared memory to {peer}: refused, using TCP");
                None
            }
            Err(e) => {
                log::debug!("shared memory to {peer}: {e}; using TCP");
                None
            }
        }
    }

    fn try_offer(&self, out: &mut Outgoing, boot_id: [u8; 36]) -> io::Result<Option<ShmSender>> {
        let layout = Layout::new(self.cfg.region_bytes()).map_err(io::Error::other)?;
        let token: [u8; 16] = rand::random();
        let (region, fd) = Region::create(layout, token)?;
        let offer = Offer {
            boot_id,
            pid: std::process::id(),
            fd: fd.as_file().as_raw_fd() as u32,
            size: layout.total,
            token,
        };
        crate::van::cork::wake_now(); // waiting for the answer may block
        out.write_all(&offer.encode())?;
        out.flush()?;
        // the answer comes back on the link's reverse direction, inside TLS when on
        let answer = out.read_answer(ANSWER_TIMEOUT)?;
        drop(fd); // the peer opened its own descriptor, or refused
        Ok((answer == ACCEPT).then(|| ShmSender {
            alloc: SpanAllocator::new(layout.data_len, layout.slots),
            region,
            min_bytes: self.cfg.min_bytes,
            stats: Arc::clone(&self.stats),
        }))
    }

    /// The receiving state of a new incoming link from `peer`.
    pub fn incoming(self: &Arc<Self>, peer: SocketAddr) -> ShmReceiver {
        ShmReceiver {
            shm: Arc::clone(self),
            peer,
            region: None,
            offered: false,
        }
    }
}

/// The sending side's shared-memory state of one link (a new link starts at
/// `NotOffered`; a reconnect starts over).
#[derive(Default)]
pub enum ShmLink {
    /// No large frame sent yet: no offer made.
    #[default]
    NotOffered,
    /// The peer mapped the region.
    Accepted(ShmSender),
    /// Offered and refused, failed, shared memory off, or a remote peer: plain TCP.
    Declined,
}

/// The sending side of a link whose peer mapped the region.
pub struct ShmSender {
    region: Region,
    alloc: SpanAllocator,
    min_bytes: usize,
    stats: Arc<ShmStats>,
}

impl ShmSender {
    /// Copies each frame of at least `PS_SHM_MIN_BYTES` into a free span and replaces
    /// it by its descriptor; returns the marks for the header (bit i: frame i is a
    /// descriptor). A frame that finds no free span stays as it is (sent over TCP).
    pub fn place(&mut self, frames: &mut [Bytes]) -> u128 {
        let mut marks = 0u128;
        let mut reclaimed = false;
        for (i, f) in frames.iter_mut().enumerate().take(128) {
            if f.len() < self.min_bytes {
                continue;
            }
            if !reclaimed {
                self.alloc.reclaim(|s| self.region.released(s));
                reclaimed = true;
            }
            let Some(g) = self.alloc.alloc(f.len() as u64) else {
                self.stats.fallback_frames.fetch_add(1, Relaxed);
                continue;
            };
            self.region.fill(g.slot, g.offset, f);
            let d = Descriptor {
                slot: g.slot,
                offset: g.offset,
                len: f.len() as u64,
            };
            self.stats.sent_frames.fetch_add(1, Relaxed);
            self.stats.sent_bytes.fetch_add(d.len, Relaxed);
            *f = Bytes::copy_from_slice(&d.encode());
            marks |= 1 << i;
        }
        marks
    }
}

/// The receiving side of one incoming link: answers the offer, resolves descriptors.
pub struct ShmReceiver {
    shm: Arc<Shm>,
    peer: SocketAddr,
    region: Option<Arc<Region>>,
    offered: bool,
}

impl ShmReceiver {
    /// A receiver that refuses offers and has no region (plain TCP reads).
    pub fn none() -> ShmReceiver {
        Shm::off().incoming(SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// Reads an offer's body of `body_len` bytes from `r` (its magic and length were
    /// read) and decides: accept after mapping the region, refuse otherwise. Returns
    /// the one-byte answer, which the caller sends back on the link (inside TLS when
    /// on). An oversized body is an error (the connection is closed).
    pub fn on_offer(&mut self, r: &mut impl Read, body_len: u32) -> io::Result<u8> {
        if body_len > MAX_OFFER_BODY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("shared-memory offer of {body_len} bytes"),
            ));
        }
        let mut body = vec![0u8; body_len as usize];
        r.read_exact(&mut body)?;
        let verdict = self.consider(&body);
        self.offered = true;
        let byte = match verdict {
            Ok(region) => {
                self.region = Some(Arc::new(region));
                self.shm.stats.links_in.fetch_add(1, Relaxed);
                log::debug!("shared memory from {}: accepted", self.peer);
                ACCEPT
            }
            Err(why) => {
                log::debug!("shared memory from {}: refused ({why})", self.peer);
                REFUSE
            }
        };
        Ok(byte)
    }

    fn consider(&self, body: &[u8]) -> Result<Region, ShmError> {
        let mine = self
            .shm
            .boot_id
            .filter(|_| self.shm.cfg.enabled)
            .ok_or(ShmError::Refused("shared memory is off".into()))?;
        if self.offered {
            return Err(ShmError::Refused("a second offer on one link".into()));
        }
        let offer = Offer::decode(body)?;
        if offer.boot_id != mine {
            return Err(ShmError::Refused("another host (boot id differs)".into()));
        }
        if !is_local(self.peer.ip()) {
            return Err(ShmError::Refused(format!(
                "{} is not an address of this host",
                self.peer.ip()
            )));
        }
        Region::open(&offer)
    }

    /// Replaces each marked frame (bit i of `marks`) by the span its descriptor names.
    /// False if a descriptor is invalid or the link has no region: the message is then
    /// dropped (logged, counted); spans already resolved are released with it.
    pub fn resolve(&self, frames: &mut [Bytes], marks: u128) -> bool {
        if marks == 0 {
            return true;
        }
        match self.try_resolve(frames, marks) {
            Ok(()) => true,
            Err(e) => {
                self.shm.stats.bad_messages.fetch_add(1, Relaxed);
                log::warn!("dropped a message from {}: {e}", self.peer);
                false
            }
        }
    }

    fn try_resolve(&self, frames: &mut [Bytes], marks: u128) -> Result<(), super::wire::DescError> {
        let region = self.region.as_ref().ok_or(super::wire::DescError::NoRegion)?;
        for (i, f) in frames.iter_mut().enumerate().take(128) {
            if marks >> i & 1 == 1 {
                let d = Descriptor::decode(f, region.layout())?;
                *f = region.span(d);
                self.shm.stats.recv_frames.fetch_add(1, Relaxed);
                self.shm.stats.recv_bytes.fetch_add(d.len, Relaxed);
            }
        }
        Ok(())
    }
}
