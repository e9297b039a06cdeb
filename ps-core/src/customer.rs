//! A customer: one application object's mailbox. It owns a receive queue and a thread
//! that hands each message to the application's handle, and tracks its requests by
//! timestamp: how many responses each awaits, and lets callers wait for them.

use crate::error::PostofficeError;
use crate::message::Message;
use crate::postoffice::{Postoffice, Route};
use parking_lot::{Condvar, Mutex, MutexGuard};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One request's responses.
struct Pending {
    expected: usize,
    received: usize,
    /// The (node, key range) pairs that answered: a node's second answer for one range
    /// (to a request delivered to it twice) does not count; a KV server answering for
    /// two ranges (its own and one it took over) counts twice.
    from: Vec<(i32, i32)>,
    /// Nobody waits for it (its answers go to a callback): dropped once done.
    forget: bool,
}

impl Pending {
    fn done(&self) -> bool {
        self.received >= self.expected
    }
}

#[derive(Default)]
struct Tracker {
    /// timestamp → its responses
    requests: Mutex<FxHashMap<i32, Pending>>,
    cv: Condvar,
}

impl crate::van::cork::Wake for Tracker {
    fn wake(&self) {
        self.cv.notify_all();
    }
}

/// Wakes `t`'s waiters: at once, or, on a corked reader thread, when it has handled
/// what it read (one wake-up per batch of answers).
fn wake(t: &Arc<Tracker>) {
    let w: Arc<dyn crate::van::cork::Wake> = t.clone();
    if !crate::van::cork::defer_wake(&w) {
        t.cv.notify_all();
    }
}

/// A registered customer. Dropping it unregisters it and stops its thread.
pub struct Customer {
    app_id: i32,
    customer_id: i32,
    po: Arc<Postoffice>,
    next_ts: AtomicI32,
    tracker: Arc<Tracker>,
    thread: Option<JoinHandle<()>>,
}

impl Customer {
    /// Registers customer `customer_id` of app `app_id`; every message for it is passed
    /// to `handle` on the customer's own thread. A response also counts towards its
    /// request (after `handle` ran, so a waiter sees the handle's effects). Fails with
    /// [`PostofficeError::CustomerTaken`] if the ids are taken,
    /// [`PostofficeError::Thread`] if its thread cannot start.
    pub fn new(
        po: &Arc<Postoffice>,
        app_id: i32,
        customer_id: i32,
        mut handle: impl FnMut(Message) + Send + 'static,
    ) -> Result<Customer, PostofficeError> {
        let (tx, rx) = crossbeam_channel::unbounded::<Message>();
        let tracker = Arc::new(Tracker::default());
        let t = Arc::clone(&tracker);
        let thread = std::thread::Builder::new()
            .name(format!("customer-{app_id}-{customer_id}"))
            .spawn(move || {
                for msg in rx {
                    accept(&t, msg, &mut handle);
                }
            })
            .map_err(|e| PostofficeError::Thread(e.to_string()))?;
        let mut c = Customer {
            app_id,
            customer_id,
            po: Arc::clone(po),
            next_ts: AtomicI32::new(po.first_timestamp(app_id, customer_id)),
            tracker,
            thread: Some(thread),
        };
        if let Err(e) = po.add_customer(app_id, customer_id, Route::Queue(tx)) {
            c.thread.take(); // the thread ends with its queue
            return Err(e);
        }
        Ok(c)
    }

    /// Like [`Customer::new`], but `handle` runs on the thread that received the
    /// message (the transport's), one message at a time, without a hand-off to a
    /// customer thread: lower latency, for handles that never block. Fails with
    /// [`PostofficeError::CustomerTaken`] if the ids are taken.
    pub fn new_inline(
        po: &Arc<Postoffice>,
        app_id: i32,
        customer_id: i32,
        handle: impl FnMut(Message) + Send + 'static,
    ) -> Result<Customer, PostofficeError> {
        let tracker = Arc::new(Tracker::default());
        let t = Arc::clone(&tracker);
        let handle = Mutex::new(handle);
        po.add_customer(
            app_id,
            customer_id,
            Route::Inline(Arc::new(move |msg| accept(&t, msg, &mut *handle.lock()))),
        )?;
        Ok(Customer {
            app_id,
            customer_id,
            po: Arc::clone(po),
            next_ts: AtomicI32::new(po.first_timestamp(app_id, customer_id)),
            tracker,
            thread: None,
        })
    }

    /// The app id.
    pub fn app_id(&self) -> i32 {
        self.app_id
    }

    /// The customer id.
    pub fn customer_id(&self) -> i32 {
        self.customer_id
    }

    /// The postoffice this customer is registered with.
    pub fn postoffice(&self) -> &Arc<Postoffice> {
        &self.po
    }

    /// A new request to `recver` (a node or group id): returns its timestamp, which
    /// awaits one response per node `recver` stands for.
    pub fn new_request(&self, recver: i32) -> i32 {
        self.new_request_expecting(self.po.node_ids(recver).len())
    }

    /// A new request awaiting exactly `expected` responses.
    pub fn new_request_expecting(&self, expected: usize) -> i32 {
        let ts = self.next_ts.fetch_add(1, Ordering::Relaxed);
        self.tracker.requests.lock().insert(
            ts,
            Pending {
                expected,
                received: 0,
                from: Vec::new(),
                forget: false,
            },
        );
        ts
    }

    /// Drops request `ts` once it is done (at once if it is done already): for a
    /// request nobody will wait for, whose answers a callback takes. Without this such
    /// a request would be kept forever.
    pub fn forget_when_done(&self, ts: i32) {
        let mut r = self.tracker.requests.lock();
        match r.get_mut(&ts) {
            Some(e) if e.done() => _ = r.remove(&ts),
            Some(e) => e.forget = true,
            None => {}
        }
    }

    /// How many requests are tracked (sent and not yet waited for or forgotten).
    pub fn num_pending(&self) -> usize {
        self.tracker.requests.lock().len()
    }

    /// Adds `n` to the responses of request `ts` (for responses that never travel,
    /// e.g. an empty slice).
    pub fn add_response(&self, ts: i32, n: usize) {
        let mut r = self.tracker.requests.lock();
        let Some(e) = r.get_mut(&ts) else { return };
        e.received += n;
        settle(r, ts, &self.tracker);
    }

    /// Forgets request `ts`: a waiter returns at once, later responses count for
    /// nothing.
    pub fn forget_request(&self, ts: i32) {
        self.tracker.requests.lock().remove(&ts);
        self.tracker.cv.notify_all();
    }

    /// Responses received so far for `ts`.
    pub fn num_response(&self, ts: i32) -> usize {
        self.tracker.requests.lock().get(&ts).map_or(0, |e| e.received)
    }

    /// Blocks until request `ts` has all its responses, then forgets it.
    pub fn wait_request(&self, ts: i32) {
        let mut r = self.tracker.requests.lock();
        while r.get(&ts).is_some_and(|e| !e.done()) {
            parking_lot::MutexGuard::unlocked(&mut r, crate::van::cork::flush);
            if r.get(&ts).is_some_and(|e| !e.done()) {
                self.tracker.cv.wait(&mut r);
            }
        }
        r.remove(&ts);
    }

    /// Like [`Customer::wait_request`] but gives up after `timeout`; true if complete.
    pub fn wait_request_timeout(&self, ts: i32, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut r = self.tracker.requests.lock();
        while r.get(&ts).is_some_and(|e| !e.done()) {
            parking_lot::MutexGuard::unlocked(&mut r, crate::van::cork::flush);
            if r.get(&ts).is_some_and(|e| !e.done()) && self.tracker.cv.wait_until(&mut r, deadline).timed_out() {
                return false;
            }
        }
        r.remove(&ts);
        true
    }
}

/// Status of a response that does not count towards its request: the receiver asks
/// for the request again (e.g. a KV server that no longer has the cached key list).
pub const STATUS_NOT_COUNTED: i32 = i32::MIN + 1;

/// Runs `handle` on `msg`; a response then counts towards its request (unless its
/// status is [`STATUS_NOT_COUNTED`], or its sender answered the request already).
fn accept(t: &Arc<Tracker>, msg: Message, handle: &mut impl FnMut(Message)) {
    let response = (!msg.meta.request && msg.meta.status != STATUS_NOT_COUNTED)
        .then_some((msg.meta.timestamp, (msg.meta.sender, msg.meta.range)));
    handle(msg);
    if let Some((ts, sender)) = response {
        let mut r = t.requests.lock();
        let Some(e) = r.get_mut(&ts) else { return };
        if e.from.contains(&sender) {
            log::debug!("request {ts}: a second answer from node {sender:?} ignored");
        } else {
            e.from.push(sender);
            e.received += 1;
            settle(r, ts, t);
        }
    }
}

/// After request `ts` got responses: once it is done, drops it if nobody waits for it
/// (`forget`) and wakes the waiters (only then: they wait for it to be done).
fn settle(mut r: MutexGuard<'_, FxHashMap<i32, Pending>>, ts: i32, t: &Arc<Tracker>) {
    let Some(e) = r.get(&ts).filter(|e| e.done()) else {
        return;
    };
    if e.forget {
        r.remove(&ts);
    }
    drop(r);
    wake(t);
}

impl Drop for Customer {
    fn drop(&mut self) {
        self.po
            .close_customer(self.app_id, self.customer_id, self.next_ts.load(Ordering::Relaxed));
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
#[path = "customer_tests.rs"]
mod tests;
