//! Opening a link's connection without making its sender wait. Connecting to a peer
//! that is cut off waits for the connection timeout (2 s), and a link is opened under
//! its lock: every thread sending to that peer meanwhile waited too. A van's own
//! threads (heartbeats, its ticks, the receiving threads answering) must never wait
//! so: a scheduler taking over that waited 2 s per node cut off from it took over
//! seconds late, and a node whose heartbeats waited on a connection to a scheduler cut
//! off was declared dead by the one it could reach. So a send that must not wait
//! ([`crate::van::Transport::send_nowait`]) starts the connection on a thread of its
//! own and leaves its message in the link's queue; whatever is sent to the peer
//! meanwhile queues behind it, in order (a sender past [`MAX_WAITING_BYTES`] waits),
//! and once the connection is open the messages are queued on it as any send's, large
//! frames placed in shared memory when the peer takes it. If it cannot be opened, the
//! queued messages are lost (as a failed write loses them; the resender, when on,
//! sends them again), and for [`RETRY_AFTER`] such sends fail at once with the error
//! instead of trying again.

use super::link::{open, Link, Peer};
use super::shm::Shm;
use super::wire::Wire;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// After a failed opening, sends that must not wait fail at once for this long.
pub(super) const RETRY_AFTER: Duration = Duration::from_millis(500);

/// At most this many bytes wait for a connection being opened (more than one
/// message's); a sender past it waits for the opening to end.
const MAX_WAITING_BYTES: usize = 64 << 20;

/// A sender waiting for an opening to end looks again this often.
pub(super) const LOOK_AGAIN: Duration = Duration::from_millis(2);

impl Peer {
    /// The error of the last failed opening, while more recent than [`RETRY_AFTER`].
    pub(super) fn recent_failure(&self) -> Option<io::Error> {
        let (at, kind, why) = self.failed.as_ref()?;
        (at.elapsed() < RETRY_AFTER).then(|| io::Error::new(*kind, why.clone()))
    }

    /// Whether a message of `len` bytes may wait for the connection being opened:
    /// while fewer than [`MAX_WAITING_BYTES`] wait (the first always may).
    pub(super) fn room_while_opening(&self, len: usize) -> bool {
        self.queued_msgs == 0 || self.queued_bytes + len <= MAX_WAITING_BYTES
    }

    /// Queues a message (its `frames`, `len` bytes) behind the others while the
    /// connection is being opened (see [`Peer::room_while_opening`]); returns `len`.
    pub(super) fn wait_for_opening(&mut self, frames: Vec<bytes::Bytes>, len: usize) -> usize {
        self.waiting.push(frames);
        self.queued_bytes += len;
        self.queued_msgs += 1;
        len
    }
}

/// Starts opening `link`'s connection (`p` is its locked state) on a thread of its
/// own, which writes the queue once the connection is open; nothing is written after
/// `stop` is set (the transport closed).
pub(super) fn open_in_background(
    link: &Arc<Link>,
    p: &mut Peer,
    shm: &Arc<Shm>,
    stop: &Arc<AtomicBool>,
) -> io::Result<()> {
    let (link, shm, stop) = (Arc::clone(link), Arc::clone(shm), Arc::clone(stop));
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
                // the messages that waited, in order, from now on counted as queued
                let waiting = std::mem::take(&mut p.waiting);
                p.queued_msgs -= waiting.len();
                p.queued_bytes -= waiting.iter().flatten().map(|f| f.len()).sum::<usize>();
                for frames in waiting {
                    p.queue(&shm, frames);
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
                p.waiting.clear();
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
