//! Coalescing of the TCP van's writes (adaptive batching, no timer). A reader thread
//! "corks" itself: while it handles the messages already in its receive buffer, what
//! its handlers send (a KV server's responses, acknowledgements) is queued per
//! outgoing link instead of written; right before the thread next reads its socket,
//! which is when its buffer has run dry and it may sleep, every queued link is written,
//! each in one vectored write. A burst of requests read in one `read` thus gets its
//! responses in one `write`; a lone request is answered as soon as it was handled (no
//! delay waits for company). A link queues at most [`MAX_QUEUED_BYTES`] and
//! [`MAX_QUEUED_MSGS`]; past either, a corked thread writes its queues as soon as the
//! message being handled is done ([`flush_if_due`]), outside the handler: a handler
//! runs under its customer's lock, and a write there would hold up every other reader
//! thread handing that customer a message (a KV server's second worker's reader waited
//! out each 64 KB write of the first's responses). Threads that never cork
//! (application threads, customer threads) write every message at once, except lazy
//! sends ([`crate::van::Transport::send_lazy`], a KV worker's request while an earlier
//! one awaits its answer): those wait for the link's next flush (the answer's arrival)
//! or for the thread to block in one of ps-core's waits, which all call [`flush`].
//!
//! A reader thread also defers waking the waiters of the requests its handlers
//! complete ([`defer_wake`]) to the same moment, so a thread waiting on a window of
//! requests wakes once per batch of answers. Deferred wake-ups go out before anything
//! that may block the reader ([`wake_now`]: each write, each new connection, a
//! shared-memory offer), never behind a slow peer.

use std::cell::RefCell;
use std::sync::Arc;

/// A link's queue is written at once when it holds this many bytes.
pub const MAX_QUEUED_BYTES: usize = 64 << 10;
/// A link's queue is written at once when it holds this many messages.
pub const MAX_QUEUED_MSGS: usize = 64;

/// An outgoing link whose queued messages can be written out.
pub trait Flush: Send + Sync {
    /// Writes everything queued on this link; a failure is logged (the resender, when
    /// on, sends the lost messages again) and closes the link for reconnection.
    fn flush_queued(&self);
}

/// Something a corked thread wakes at its next [`flush`] instead of at once: e.g. the
/// waiters of requests its handlers completed, so an application thread waiting on a
/// window of requests wakes once per batch of answers read, not once per answer.
pub trait Wake: Send + Sync {
    /// Wakes whoever waits on this.
    fn wake(&self);
}

/// A thread's corking state.
#[derive(Default)]
struct ThreadCork {
    /// Whether this thread corks its sends (a reader thread).
    corked: bool,
    /// The links this thread queued messages on and has not written yet.
    links: Vec<Arc<dyn Flush>>,
    /// What this thread's next flush wakes.
    wakes: Vec<Arc<dyn Wake>>,
    /// A queue passed its limit: [`flush_if_due`] writes.
    due: bool,
}

impl ThreadCork {
    fn note(&mut self, link: &Arc<dyn Flush>) {
        if !self.links.iter().any(|l| Arc::ptr_eq(l, link)) {
            self.links.push(Arc::clone(link));
        }
    }
}

thread_local! {
    static CORK: RefCell<ThreadCork> = RefCell::default();
}

/// Makes the current thread cork its sends until it ends (see the module docs). Its
/// reads must call [`flush`] before they may block.
pub fn begin() {
    CORK.with(|c| c.borrow_mut().corked = true);
}

/// True if the current thread corks its sends.
pub fn active() -> bool {
    CORK.with(|c| c.borrow().corked)
}

/// Records that `link` holds queued messages of the current thread, to be written by
/// the next [`flush`]. False if the thread does not cork (the caller writes at once).
pub fn defer(link: &Arc<dyn Flush>) -> bool {
    CORK.with(|c| {
        let mut c = c.borrow_mut();
        if c.corked {
            c.note(link);
        }
        c.corked
    })
}

/// Like [`defer`], for a link whose queue passed [`MAX_QUEUED_BYTES`] or
/// [`MAX_QUEUED_MSGS`]: also makes the thread's next [`flush_if_due`] write. False if
/// the thread does not cork (the caller writes at once).
pub fn defer_full(link: &Arc<dyn Flush>) -> bool {
    let corked = defer(link);
    if corked {
        CORK.with(|c| c.borrow_mut().due = true);
    }
    corked
}

/// [`flush`]es if a queue of the current thread passed its limit since the last
/// flush ([`defer_full`]); a corked thread calls it after each message it handled.
pub fn flush_if_due() {
    if CORK.with(|c| c.borrow().due) {
        flush();
    }
}

/// Records that `link` holds a message the current thread queued lazily
/// ([`crate::van::Transport::send_lazy`]), corking or not: the thread's next [`flush`]
/// (before it blocks) writes it, if nothing wrote it before.
pub fn remember(link: &Arc<dyn Flush>) {
    CORK.with(|c| c.borrow_mut().note(link));
}

/// Defers `w`'s wake-up to the current thread's next [`flush`] if the thread corks
/// (returns true); false if it does not (the caller wakes at once).
pub fn defer_wake(w: &Arc<dyn Wake>) -> bool {
    CORK.with(|c| {
        let mut c = c.borrow_mut();
        if c.corked && !c.wakes.iter().any(|x| Arc::ptr_eq(x, w)) {
            c.wakes.push(Arc::clone(w));
        }
        c.corked
    })
}

/// Wakes what the current thread deferred ([`defer_wake`]) at once. Called before
/// anything that may block the thread (every write and every new connection of the
/// TCP van), so no waiter waits on this thread's I/O to a slow or stopped peer.
pub fn wake_now() {
    let wakes = CORK.with(|c| std::mem::take(&mut c.borrow_mut().wakes));
    for w in wakes {
        w.wake();
    }
}

/// Wakes what the current thread deferred ([`defer_wake`]), then writes every link it
/// queued messages on. Cheap when there is nothing.
pub fn flush() {
    wake_now();
    let links = CORK.with(|c| {
        let mut c = c.borrow_mut();
        c.due = false;
        std::mem::take(&mut c.links)
    });
    for l in links {
        l.flush_queued();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Flush for Counting {
        fn flush_queued(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_corked_thread_flushes_each_link_once_and_others_write_at_once() {
        std::thread::spawn(|| {
            let a: Arc<Counting> = Arc::default();
            let b: Arc<Counting> = Arc::default();
            let (la, lb): (Arc<dyn Flush>, Arc<dyn Flush>) = (a.clone(), b.clone());
            assert!(!active());
            assert!(!defer(&la), "an uncorked thread writes at once");
            begin();
            assert!(active());
            assert!(defer(&la) && defer(&la) && defer(&lb));
            flush();
            assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 1));
            flush();
            assert_eq!(a.0.load(Ordering::SeqCst), 1, "nothing queued: nothing written");
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            let a: Arc<Counting> = Arc::default();
            let la: Arc<dyn Flush> = a.clone();
            remember(&la);
            assert!(!active(), "a lazy send does not cork the thread");
            flush();
            flush();
            assert_eq!(a.0.load(Ordering::SeqCst), 1, "a remembered link is written once");
        })
        .join()
        .unwrap();
        assert!(!active(), "corking is per thread");
    }

    #[test]
    fn a_full_queue_is_written_after_the_message_not_inside_its_handler() {
        std::thread::spawn(|| {
            let a: Arc<Counting> = Arc::default();
            let b: Arc<Counting> = Arc::default();
            let (la, lb): (Arc<dyn Flush>, Arc<dyn Flush>) = (a.clone(), b.clone());
            assert!(!defer_full(&la), "an uncorked thread writes at once");
            begin();
            assert!(defer(&lb));
            flush_if_due();
            assert_eq!(b.0.load(Ordering::SeqCst), 0, "a small queue waits for the read");
            assert!(defer_full(&la), "full: still deferred (the handler may hold a lock)");
            assert_eq!(a.0.load(Ordering::SeqCst), 0);
            flush_if_due(); // the message was handled
            assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 1));
            flush_if_due();
            assert!(defer(&la));
            flush_if_due();
            assert_eq!(a.0.load(Ordering::SeqCst), 1, "written: no longer due");
        })
        .join()
        .unwrap();
    }

    #[derive(Default)]
    struct Woken(AtomicUsize);

    impl Wake for Woken {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_corked_thread_wakes_once_at_its_flush_or_before_it_may_block() {
        std::thread::spawn(|| {
            let w: Arc<Woken> = Arc::default();
            let dw: Arc<dyn Wake> = w.clone();
            assert!(!defer_wake(&dw), "an uncorked thread wakes at once");
            begin();
            assert!(defer_wake(&dw) && defer_wake(&dw));
            assert_eq!(w.0.load(Ordering::SeqCst), 0, "deferred, not woken yet");
            flush();
            assert_eq!(w.0.load(Ordering::SeqCst), 1, "one wake-up per flush");
            flush();
            assert_eq!(w.0.load(Ordering::SeqCst), 1);
            assert!(defer_wake(&dw));
            wake_now(); // before a write that may block
            assert_eq!(w.0.load(Ordering::SeqCst), 2);
            flush();
            assert_eq!(w.0.load(Ordering::SeqCst), 2, "woken already");
        })
        .join()
        .unwrap();
    }
}
