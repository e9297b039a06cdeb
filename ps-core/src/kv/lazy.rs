//! A KV worker's lazily sent request parts. While an earlier request awaits its
//! answer, a new request's parts wait in their links' queues
//! ([`crate::van::Van::send_lazy`]) instead of each taking a write of its own. They
//! are written when the sending thread is about to block in a wait, when the link's
//! next prompt message goes, when the next answer arrives (its reader thread writes
//! them before it reads again), or when a server is declared dead; so a window of
//! requests goes out in a few vectored writes. A request with nothing before it in
//! flight goes at once (no added latency). Holding them until no written request
//! awaits an answer would batch more, but stalls training for seconds after a node is
//! killed (its answers never come).

use super::worker_state::Pending;
use crate::van::Van;
use bytemuck::Pod;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

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

/// True if a request other than `ts` awaits an answer: its answer will come and
/// flush the noted links, so request `ts` may wait in its links' queues.
pub(crate) fn may_defer<V: Pod>(pending: &FxHashMap<i32, Pending<V>>, ts: i32) -> bool {
    pending.iter().any(|(&t, p)| t != ts && p.answered.contains(&false))
}
