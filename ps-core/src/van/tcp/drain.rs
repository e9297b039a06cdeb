//! The TCP transport's drain thread: it finishes the writes that reader threads
//! started and the socket did not take at once ([`super::wire`]). A reader thread
//! hands such a link over and goes back to reading; the drain waits (without the
//! link's lock) until the socket is writable and writes more, until nothing waits. The
//! thread starts at the first hand-over and ends with the transport.

use super::wire::wait_writable;
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the drain waits for a writable socket before it looks for new links.
const POLL: Duration = Duration::from_millis(50);

/// What the drain finishes writing: an outgoing link whose socket did not take all
/// that waits for it.
pub(super) trait Unwritten: Send + Sync {
    /// The socket while bytes wait for it; None once nothing waits.
    fn waiting_fd(&self) -> Option<RawFd>;
    /// Hands the socket more of what waits: true when nothing waits any more or the
    /// connection failed.
    fn write_more(&self) -> bool;
}

/// The drain of one transport.
pub(super) struct Drain {
    tx: Sender<Arc<dyn Unwritten>>,
    rx: Receiver<Arc<dyn Unwritten>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    stop: Arc<AtomicBool>,
}

impl Drain {
    /// A drain whose thread has not started.
    pub(super) fn new() -> Arc<Drain> {
        let (tx, rx) = crossbeam_channel::unbounded();
        Arc::new(Drain {
            tx,
            rx,
            thread: Mutex::new(None),
            stop: Arc::default(),
        })
    }

    /// Has the drain finish writing `link` (its socket was full).
    pub(super) fn add(&self, link: Arc<dyn Unwritten>) {
        let mut t = self.thread.lock();
        if t.is_none() && !self.stop.load(Ordering::Relaxed) {
            let (rx, stop) = (self.rx.clone(), Arc::clone(&self.stop));
            match std::thread::Builder::new()
                .name("psrs-tcp-drain".into())
                .spawn(move || run(rx, stop))
            {
                Ok(h) => *t = Some(h),
                Err(e) => log::error!("cannot start the TCP drain thread: {e}"),
            }
        }
        let _ = self.tx.send(link);
    }

    /// Stops the thread (links still waiting are left to their owners).
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

fn run(rx: Receiver<Arc<dyn Unwritten>>, stop: Arc<AtomicBool>) {
    let mut links: Vec<Arc<dyn Unwritten>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if links.is_empty() {
            match rx.recv_timeout(POLL * 4) {
                Ok(l) => links.push(l),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        }
        for l in rx.try_iter() {
            if !links.iter().any(|x| Arc::ptr_eq(x, &l)) {
                links.push(l);
            }
        }
        // the sockets still waiting to take bytes (a sending thread may have emptied one)
        let mut fds = Vec::with_capacity(links.len());
        links.retain(|l| l.waiting_fd().map(|fd| fds.push(fd)).is_some());
        if fds.is_empty() {
            continue;
        }
        if wait_writable(&fds, POLL).is_err() {
            std::thread::sleep(POLL); // interrupted or no memory: try again
            continue;
        }
        // every link is tried: a writable one takes bytes, a stalled one is given up
        links.retain(|l| !l.write_more());
    }
}
