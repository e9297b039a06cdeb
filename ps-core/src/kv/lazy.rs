//! A KV worker's lazily sent request parts. While a request that was written awaits
//! its answer, a new request's parts wait in their links' queues
//! ([`crate::van::Van::send_lazy`]) instead of each taking a write of its own. They
//! are written when the sending thread blocks in a wait (the usual case: a window of
//! requests then goes out in one vectored write per link), when the link's next
//! prompt message goes, or at the latest when no written request awaits an answer
//! any more (the last answer's reader writes them: nothing else would) or a server
//! is declared dead. A request with nothing written before it in flight goes at once
//! (no added latency).

use super::worker_state::{Pending, State};
use crate::van::Van;
use bytemuck::Pod;
use parking_lot::Mutex;
use std::collections::HashMap;

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

/// True if a request written at once (not lazily) awaits an answer: its answer will
/// come and check again, so a new request may wait in its links' queues.
pub(crate) fn may_defer<V: Pod>(pending: &HashMap<i32, Pending<V>>) -> bool {
    pending.values().any(|p| !p.lazy && p.answered.contains(&false))
}

/// After an answer, a lazy send, or a death: when no request written at once awaits
/// an answer any more, writes every noted link and counts every lazy request as
/// written.
pub(crate) fn flush_if_idle<V: Pod>(links: &LazyLinks, state: &State<V>, van: &Van) {
    if !may_defer(&state.lock()) {
        flush_all(links, state, van);
    }
}

/// Writes every noted link and counts every lazy request as written (a thread about
/// to wait for an answer does this first).
pub(crate) fn flush_all<V: Pod>(links: &LazyLinks, state: &State<V>, van: &Van) {
    for p in state.lock().values_mut() {
        p.lazy = false;
    }
    links.flush(van);
}
