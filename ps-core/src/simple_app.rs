//! SimpleApp: request/response between nodes with an integer head and a byte body,
//! handled by user-supplied handles.

use crate::customer::Customer;
use crate::error::PostofficeError;
use crate::message::{Message, Meta};
use crate::node::SCHEDULER;
use crate::postoffice::Postoffice;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A received request or response.
#[derive(Clone, Debug, PartialEq)]
pub struct SimpleData {
    /// The head.
    pub head: i32,
    /// The body.
    pub body: Bytes,
    /// Who sent it.
    pub sender: i32,
    /// The request's timestamp.
    pub timestamp: i32,
    /// The sending customer.
    pub customer_id: i32,
    /// The sending process's incarnation (a response goes to this very process).
    pub incarnation: u64,
}

/// Sends responses on behalf of a SimpleApp; handed to the request handle.
#[derive(Clone)]
pub struct Responder {
    po: Arc<Postoffice>,
    app_id: i32,
}

impl Responder {
    /// Answers `req` with `body` (same head and timestamp).
    pub fn response(&self, req: &SimpleData, body: impl Into<Bytes>) -> io::Result<()> {
        let body: Bytes = body.into();
        let msg = Message {
            meta: Meta {
                head: req.head,
                app_id: self.app_id,
                customer_id: req.customer_id,
                timestamp: req.timestamp,
                recver: req.sender,
                recver_incarnation: req.incarnation,
                request: false,
                simple_app: true,
                ..Default::default()
            },
            data: if body.is_empty() { vec![] } else { vec![body] },
        };
        self.po.van().send(msg).map(|_| ())
    }
}

/// Request handle: gets each request and a responder.
pub type RequestHandle = Box<dyn Fn(&SimpleData, &Responder) + Send + Sync>;
/// Response handle: gets each response.
pub type ResponseHandle = Box<dyn Fn(&SimpleData) + Send + Sync>;

/// A [`SimpleApp::call`] in progress: what was asked of whom, and the replies so far.
struct Call {
    head: i32,
    body: Bytes,
    recvers: Vec<i32>,
    got: Vec<SimpleData>,
}

type Calls = Arc<Mutex<HashMap<i32, Call>>>;

/// A SimpleApp: a customer that exchanges [`SimpleData`].
pub struct SimpleApp {
    customer: Customer,
    po: Arc<Postoffice>,
    calls: Calls,
}

/// Request `ts` of customer `app_id` to node `recver`.
fn request_msg(app_id: i32, ts: i32, head: i32, body: &Bytes, recver: i32) -> Message {
    Message {
        meta: Meta {
            head,
            app_id,
            customer_id: app_id,
            timestamp: ts,
            recver,
            request: true,
            simple_app: true,
            ..Default::default()
        },
        data: if body.is_empty() { vec![] } else { vec![body.clone()] },
    }
}

/// How often a [`SimpleApp::call`] in progress checks whether the scheduler restarted.
const SCHEDULER_CHECK: Duration = Duration::from_millis(200);

/// Call `ts`'s request again for `node`, if `node` was asked and has not answered.
fn unanswered(app_id: i32, ts: i32, c: &Call, node: i32) -> Option<Message> {
    (c.recvers.contains(&node) && !c.got.iter().any(|g| g.sender == node))
        .then(|| request_msg(app_id, ts, c.head, &c.body, node))
}

/// The requests of `calls` that nodes in `dead` were asked and have not answered.
fn to_ask_again(app_id: i32, calls: &HashMap<i32, Call>, dead: &[i32]) -> Vec<Message> {
    calls
        .iter()
        .flat_map(|(&ts, c)| dead.iter().filter_map(move |&d| unanswered(app_id, ts, c, d)))
        .collect()
}

/// Asks the calls in progress again of the nodes in `dead` that have not answered: a
/// node may have taken the request (acknowledged it) and died before answering, or the
/// request went out on the link its death broke. The resender (when on) holds the
/// copies until a replacement takes the dead node's id and delivers them to it; a
/// second answer from one node does not count twice.
fn ask_again(po: &Postoffice, app_id: i32, calls: &Calls, dead: &[i32]) {
    for m in to_ask_again(app_id, &calls.lock(), dead) {
        let (ts, to) = (m.meta.timestamp, m.meta.recver);
        match po.van().send(m) {
            Ok(_) => log::info!("request {ts}: node {to} died before answering; asked again"),
            Err(e) => log::info!("request {ts}: cannot ask node {to} again: {e}"),
        }
    }
}

impl From<&Message> for SimpleData {
    /// The request or response `msg` carries (its first data frame is the body).
    fn from(msg: &Message) -> SimpleData {
        SimpleData {
            head: msg.meta.head,
            body: msg.data.first().cloned().unwrap_or_default(),
            sender: msg.meta.sender,
            timestamp: msg.meta.timestamp,
            customer_id: msg.meta.customer_id,
            incarnation: msg.meta.incarnation,
        }
    }
}

impl SimpleApp {
    /// A SimpleApp with app and customer id `app_id` whose requests are answered by
    /// `request_handle` (None: reply with an empty body) and whose responses go to
    /// `response_handle` (None: ignored, except by [`SimpleApp::call`]), both on the
    /// customer's own thread. Fails as [`Customer::new`] does.
    pub fn new(
        po: &Arc<Postoffice>,
        app_id: i32,
        request_handle: Option<RequestHandle>,
        response_handle: Option<ResponseHandle>,
    ) -> Result<SimpleApp, PostofficeError> {
        SimpleApp::with_customer(po, app_id, request_handle, response_handle, false)
    }

    /// [`SimpleApp::new`] whose handles run on the thread that received the message
    /// ([`Customer::new_inline`]): for handles that never block, or for a process
    /// whose steps are run by a driver without threads (the simulator).
    pub fn new_inline(
        po: &Arc<Postoffice>,
        app_id: i32,
        request_handle: Option<RequestHandle>,
        response_handle: Option<ResponseHandle>,
    ) -> Result<SimpleApp, PostofficeError> {
        SimpleApp::with_customer(po, app_id, request_handle, response_handle, true)
    }

    fn with_customer(
        po: &Arc<Postoffice>,
        app_id: i32,
        request_handle: Option<RequestHandle>,
        response_handle: Option<ResponseHandle>,
        inline: bool,
    ) -> Result<SimpleApp, PostofficeError> {
        let responder = Responder {
            po: Arc::clone(po),
            app_id,
        };
        let calls: Calls = Arc::default();
        let r2 = Arc::clone(&calls);
        let handle = move |msg: Message| {
            let data = SimpleData::from(&msg);
            if msg.meta.request {
                match &request_handle {
                    Some(h) => h(&data, &responder),
                    None => {
                        if let Err(e) = responder.response(&data, Bytes::new()) {
                            log::warn!("response to {} not sent: {e}", data.sender);
                        }
                    }
                }
            } else {
                if let Some(c) = r2.lock().get_mut(&data.timestamp) {
                    c.got.push(data.clone());
                }
                if let Some(h) = &response_handle {
                    h(&data);
                }
            }
        };
        let customer = match inline {
            true => Customer::new_inline(po, app_id, app_id, handle)?,
            false => Customer::new(po, app_id, app_id, handle)?,
        };
        let (weak_po, c2) = (Arc::downgrade(po), Arc::clone(&calls));
        po.on_node_dead(move |dead| {
            if let Some(po) = weak_po.upgrade() {
                ask_again(&po, app_id, &c2, dead);
            }
        });
        Ok(SimpleApp {
            customer,
            po: Arc::clone(po),
            calls,
        })
    }

    /// Sends a request to every node `recver` stands for; returns its timestamp.
    pub fn request(&self, head: i32, body: impl Into<Bytes>, recver: i32) -> io::Result<i32> {
        let ts = self.customer.new_request(recver);
        self.send_request(ts, head, &body.into(), &self.po.node_ids(recver))?;
        Ok(ts)
    }

    /// Sends request `ts` to each node of `recvers`.
    fn send_request(&self, ts: i32, head: i32, body: &Bytes, recvers: &[i32]) -> io::Result<()> {
        for &r in recvers {
            self.po
                .van()
                .send(request_msg(self.customer.app_id(), ts, head, body, r))?;
        }
        Ok(())
    }

    /// Sends a request and waits for every response (at most `timeout`); returns them
    /// sorted by sender, or an error on timeout.
    pub fn call(
        &self,
        head: i32,
        body: impl Into<Bytes>,
        recver: i32,
        timeout: Duration,
    ) -> io::Result<Vec<SimpleData>> {
        let ts = self.customer.new_request(recver);
        let body = body.into();
        let recvers = self.po.node_ids(recver);
        self.calls.lock().insert(
            ts,
            Call {
                head,
                body: body.clone(),
                recvers: recvers.clone(),
                got: Vec::new(),
            },
        );
        let sent = self.send_request(ts, head, &body, &recvers);
        let complete = sent.is_ok() && self.wait_call(ts, timeout);
        let mut got = self.calls.lock().remove(&ts).map(|c| c.got).unwrap_or_default();
        if !complete {
            self.customer.forget_request(ts); // late answers count for nothing
        }
        sent?;
        if !complete {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("request to {recver} got {} responses within {timeout:?}", got.len()),
            ));
        }
        got.sort_by_key(|d| d.sender);
        Ok(got)
    }

    /// Waits up to `timeout` for call `ts`'s responses. A scheduler that restarted in
    /// the meantime is never declared dead, yet it lost a request it took and had not
    /// answered: such a request is asked again of the new scheduler.
    fn wait_call(&self, ts: i32, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let van = self.po.van();
        let mut scheduler = van.scheduler_incarnation();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.customer.wait_request_timeout(ts, left.min(SCHEDULER_CHECK)) {
                return true;
            }
            if left <= SCHEDULER_CHECK {
                return false;
            }
            let now = van.scheduler_incarnation();
            if now != scheduler {
                scheduler = now;
                let again = self
                    .calls
                    .lock()
                    .get(&ts)
                    .and_then(|c| unanswered(self.customer.app_id(), ts, c, SCHEDULER));
                if let Some(m) = again {
                    match van.send(m) {
                        Ok(_) => log::info!("request {ts}: the scheduler restarted before answering; asked again"),
                        Err(e) => log::info!("request {ts}: cannot ask the restarted scheduler again: {e}"),
                    }
                }
            }
        }
    }

    /// Waits until request `ts` has all its responses.
    pub fn wait(&self, ts: i32) {
        self.customer.wait_request(ts)
    }

    /// The underlying customer.
    pub fn customer(&self) -> &Customer {
        &self.customer
    }
}

#[cfg(test)]
#[path = "simple_app_tests.rs"]
mod tests;
