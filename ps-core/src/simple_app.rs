//! SimpleApp: request/response between nodes with an integer head and a byte body,
//! handled by user-supplied handles.

use crate::customer::Customer;
use crate::message::{Message, Meta};
use crate::postoffice::Postoffice;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

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

type Replies = Arc<Mutex<HashMap<i32, Vec<SimpleData>>>>;

/// A SimpleApp: a customer that exchanges [`SimpleData`].
pub struct SimpleApp {
    customer: Customer,
    po: Arc<Postoffice>,
    replies: Replies,
}

fn to_data(msg: &Message) -> SimpleData {
    SimpleData {
        head: msg.meta.head,
        body: msg.data.first().cloned().unwrap_or_default(),
        sender: msg.meta.sender,
        timestamp: msg.meta.timestamp,
        customer_id: msg.meta.customer_id,
        incarnation: msg.meta.incarnation,
    }
}

impl SimpleApp {
    /// A SimpleApp with app and customer id `app_id` whose requests are answered by
    /// `request_handle` (None: reply with an empty body) and whose responses go to
    /// `response_handle` (None: ignored, except by [`SimpleApp::call`]).
    pub fn new(
        po: &Arc<Postoffice>,
        app_id: i32,
        request_handle: Option<RequestHandle>,
        response_handle: Option<ResponseHandle>,
    ) -> Result<SimpleApp, String> {
        let responder = Responder {
            po: Arc::clone(po),
            app_id,
        };
        let replies: Replies = Arc::default();
        let r2 = Arc::clone(&replies);
        let customer = Customer::new(po, app_id, app_id, move |msg| {
            let data = to_data(&msg);
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
                if let Some(v) = r2.lock().get_mut(&data.timestamp) {
                    v.push(data.clone());
                }
                if let Some(h) = &response_handle {
                    h(&data);
                }
            }
        })?;
        Ok(SimpleApp {
            customer,
            po: Arc::clone(po),
            replies,
        })
    }

    /// Sends a request to every node `recver` stands for; returns its timestamp.
    pub fn request(&self, head: i32, body: impl Into<Bytes>, recver: i32) -> io::Result<i32> {
        let ts = self.customer.new_request(recver);
        self.send_request(ts, head, body.into(), recver)?;
        Ok(ts)
    }

    fn send_request(&self, ts: i32, head: i32, body: Bytes, recver: i32) -> io::Result<()> {
        for r in self.po.node_ids(recver) {
            let msg = Message {
                meta: Meta {
                    head,
                    app_id: self.customer.app_id(),
                    customer_id: self.customer.customer_id(),
                    timestamp: ts,
                    recver: r,
                    request: true,
                    simple_app: true,
                    ..Default::default()
                },
                data: if body.is_empty() { vec![] } else { vec![body.clone()] },
            };
            self.po.van().send(msg)?;
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
        self.replies.lock().insert(ts, Vec::new());
        let sent = self.send_request(ts, head, body.into(), recver);
        let complete = sent.is_ok() && self.customer.wait_request_timeout(ts, timeout);
        let mut got = self.replies.lock().remove(&ts).unwrap_or_default();
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

    /// Waits until request `ts` has all its responses.
    pub fn wait(&self, ts: i32) {
        self.customer.wait_request(ts)
    }

    /// The underlying customer.
    pub fn customer(&self) -> &Customer {
        &self.customer
    }
}
