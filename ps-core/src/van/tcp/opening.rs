//! Opening a link's connection without making its sender wait. Connecting to a peer
//! that is cut off waits for the connection timeout (2 s), and a link is opened under
//! its lock: every thread sending to that peer meanwhile waited too. A van's own
//! threads (heartbeats, its ticks, the receiving threads answering) must never wait
//! so: a scheduler taking over that waited 2 s per node cut off from it took over
//! seconds late, and a node whose heartbeats waited on a connection to a scheduler cut
//! off was declared dead by the one it could reach. So a send that must not wait
//! ([`crate::van::Transport::send_nowait`]) starts the connection on a thread of its
//! own and leaves its message in the link's queue; whatever is sent to the peer
//! meanwhile queues behind it, in order, and the queue is written once the connection
//! is open. If it cannot be opened, the queued messages are lost (as a failed write
//! loses them; the resender, when on, sends them again), and for [`RETRY_AFTER`] such
//! sends fail at once with the error instead of trying again.

use super::link::{header, open, Link, Peer};
use super::wire::Wire;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// After a failed opening, sends that must not wait fail at once for this long.
pub(super) const RETRY_AFTER: Duration = Duration::from_millis(500);

/// At most this many bytes wait for a connection being opened.
const MAX_WAITING_BYTES: usize = 64 << 20;

impl Peer {
    /// The error of the last failed opening, while more recent than [`RETRY_AFTER`].
    pub(super) fn recent_failure(&self) -> Option<io::Error> {
        let (at, kind, why) = self.failed.as_ref()?;
        (at.elapsed() < RETRY_AFTER).then(|| io::Error::new(*kind, why.clone()))
    }

    /// Queues a message (its `frames`, `len` bytes) behind the others while the
    /// connection is being opened. [`io::ErrorKind::WouldBlock`] past
    /// [`MAX_WAITING_BYTES`].
    pub(super) fn wait_for_opening(&mut self, frames: Vec<bytes::Bytes>, len: usize) -> io::Result<usize> {
        if self.queued_bytes + len > MAX_WAITING_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("the connection to {} is still being opened", self.addr),
            ));
        }
        self.queued.push(header(&frames, 0));
        self.queued_bytes += len;
        self.queued.extend(frames);
        self.queued_msgs += 1;
        Ok(len)
    }
}

/// Starts opening `link`'s connection (`p` is its locked state) on a thread of its
/// own, which writes the queue once the connection is open; nothing is written after
/// `stop` is set (the transport closed).
pub(super) fn open_in_background(link: &Arc<Link>, p: &mut Peer, stop: &Arc<AtomicBool>) -> io::Result<()> {
    let (link, stop) = (Arc::clone(link), Arc::clone(stop));
    let (addr, expect, local) = (p.addr.clone(), p.expect.clone(), p.local_socket.clone());
    p.opening = true;
    let spawned = std::thread::Builder::new().name("psrs-tcp-open".into()).spawn(move || {
        let r = open(&addr, &expect, &link.guard, local.as_deref());
        let mut p = link.lock();
        p.opening = false;
        match r {
            Ok(conn) => {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                p.failed = None;
                if p.stream.is_none() {
                    p.stream = Some(Wire::new(conn));
                }
                let n = p.queued_msgs;
                if let Err(e) = link.write_out(p) {
                    log::debug!("{n} messages waiting for the connection to {addr} not sent: {e}");
                }
            }
            Err(e) => {
                log::debug!(
                    "cannot connect to {addr}: {e}; the {} messages waiting for it are dropped",
                    p.queued_msgs
                );
                p.queued.clear();
                (p.queued_bytes, p.queued_msgs) = (0, 0);
                p.failed = Some((Instant::now(), e.kind(), e.to_string()));
            }
        }
    });
    spawned.map(|_| ()).map_err(|e| {
        p.opening = false;
        io::Error::new(e.kind(), format!("cannot start opening a connection: {e}"))
    })
}
