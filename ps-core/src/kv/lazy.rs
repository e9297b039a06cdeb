//! A KV worker's lazily sent request parts. While an earlier request still awaits an
//! answer, a new request's parts wait in their links' queues
//! ([`crate::van::Van::send_lazy`]) instead of each taking a write of its own: the
//! next answer to arrive (or the thread blocking in a wait, or a server's death
//! notice) writes them, so a window of requests goes out in a few vectored writes.
//! A request with nothing before it in flight is written at once (no added latency).

use crate::van::Van;
use parking_lot::Mutex;

/// The nodes whose links hold lazily sent parts not yet flushed.
#[derive(Default)]
pub(crate) struct LazyLinks(Mutex<Vec<i32>>);

impl LazyLinks {
    /// Records that the link to `node` holds a lazily sent part.
    pub(crate) fn note(&self, node: i32) {
        let mut l = self.0.lock();
        if !l.contains(&node) {
            l.push(node);
        }
    }

    /// Writes every link noted so far (from a corking reader thread: before its next
    /// read).
    pub(crate) fn flush(&self, van: &Van) {
        let nodes = std::mem::take(&mut *self.0.lock());
        for n in nodes {
            van.flush_link(n);
        }
    }
}
