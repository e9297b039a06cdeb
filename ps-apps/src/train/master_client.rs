//! The worker's connection to the master: a request is waited for in short slices and
//! sent again when [`Call::due`] says so (the scheduler was replaced, or
//! [`ATTEMPT`] passed without an answer): waiting out the full attempt after a
//! scheduler's restart would stall the worker (and the servers' versions waiting for
//! its gradients) for seconds.

use super::coordinator::{decode, encode, MASTER_APP, MASTER_HEAD};
use super::error::TrainError;
use super::master_retry::{ActingScheduler, Again, Call, Due, ATTEMPT_MS};
use crate::master::{MasterRequest, MasterResponse};
use bytes::Bytes;
use parking_lot::Mutex;
use ps_core::node::SCHEDULER;
use ps_core::simple_app::{SimpleApp, SimpleData};
use ps_core::Postoffice;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one request waits for the master's answer before it is sent again.
pub const ATTEMPT: Duration = Duration::from_millis(ATTEMPT_MS);

/// How often a waiting request checks whether the scheduler was replaced.
const POLL: Duration = Duration::from_millis(50);

/// How often the same reason for asking the master again is logged as a warning (the
/// retries in between are logged at debug level).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Answers by request timestamp: present (None) while waited for.
type Answers = Arc<Mutex<HashMap<i32, Option<Bytes>>>>;

/// Calls the master (or another request/response service on the scheduler, e.g. the
/// jobs cluster's) from a worker or server.
pub struct MasterClient {
    app: SimpleApp,
    head: i32,
    po: Arc<Postoffice>,
    answers: Answers,
}

impl MasterClient {
    /// A client on this node's master app ([`TrainError::Register`] if it cannot
    /// register).
    pub fn new(po: &Arc<Postoffice>) -> Result<MasterClient, TrainError> {
        MasterClient::on_app(po, MASTER_APP, MASTER_HEAD)
    }

    /// A client of the scheduler's SimpleApp `app_id`, requests with head `head`
    /// ([`TrainError::Register`] if it cannot register).
    pub fn on_app(po: &Arc<Postoffice>, app_id: i32, head: i32) -> Result<MasterClient, TrainError> {
        MasterClient::with_app(po, app_id, head, false)
    }

    /// A client on this node's master app whose answers are taken in on the thread
    /// that receives them, for a process whose steps a driver runs without threads
    /// (the simulator): it calls [`MasterClient::send`], [`MasterClient::answer`] and
    /// [`MasterClient::forget`] as [`MasterClient::call`] does, at its own times.
    pub fn driven(po: &Arc<Postoffice>) -> Result<MasterClient, TrainError> {
        MasterClient::with_app(po, MASTER_APP, MASTER_HEAD, true)
    }

    fn with_app(po: &Arc<Postoffice>, app_id: i32, head: i32, inline: bool) -> Result<MasterClient, TrainError> {
        let answers: Answers = Arc::default();
        let a2 = Arc::clone(&answers);
        let on_answer = move |d: &SimpleData| {
            if let Some(slot) = a2.lock().get_mut(&d.timestamp) {
                *slot = Some(d.body.clone());
            }
        };
        let app = match inline {
            true => SimpleApp::new_inline(po, app_id, None, Some(Box::new(on_answer)))?,
            false => SimpleApp::new(po, app_id, None, Some(Box::new(on_answer)))?,
        };
        Ok(MasterClient {
            app,
            head,
            po: Arc::clone(po),
            answers,
        })
    }

    /// The scheduler acting now, as this node knows it: its process and the term its
    /// last node table came under ([`ps_core::van::Van::scheduler_generation`]; what
    /// decides whether a request waiting for its answer is sent again).
    pub fn scheduler(&self) -> ActingScheduler {
        let (incarnation, epoch) = self.po.van().scheduler_generation();
        ActingScheduler {
            incarnation,
            term: epoch.term,
        }
    }

    /// Sends the encoded request `body` once; its timestamp, whose answer
    /// [`MasterClient::answer`] takes. Fails if it cannot be sent.
    pub fn send(&self, body: &Bytes) -> std::io::Result<i32> {
        // The answer's slot must exist before the answer can arrive: the lock is held
        // while the request is sent, so the customer thread storing a fast answer
        // waits for the slot (else it finds none and the answer is lost).
        let mut answers = self.answers.lock();
        let sent = self.app.request(self.head, body.clone(), SCHEDULER);
        if let Ok(ts) = sent {
            answers.insert(ts, None);
        }
        sent
    }

    /// The answer to request `ts`, once it came (taken: asked once).
    pub fn answer(&self, ts: i32) -> Option<Bytes> {
        let mut answers = self.answers.lock();
        let body = answers.get_mut(&ts)?.take()?;
        answers.remove(&ts);
        Some(body)
    }

    /// Request `ts` is given up (sent again under another timestamp): a late answer
    /// to it counts for nothing.
    pub fn forget(&self, ts: i32) {
        self.app.customer().forget_request(ts);
        self.answers.lock().remove(&ts);
    }

    /// Sends `req` to the master and returns its answer, sending it again when the
    /// scheduler was replaced or after [`ATTEMPT`], for at most `patience` in all.
    /// [`TrainError::Unanswered`] when no answer came in that time,
    /// [`TrainError::Malformed`] when the answer does not decode.
    pub fn call(&self, req: &MasterRequest, patience: Duration) -> Result<MasterResponse, TrainError> {
        decode(&self.call_bytes(encode(req), patience)?)
    }

    /// [`MasterClient::call`] with the encoded request; returns the encoded answer
    /// ([`TrainError::Unanswered`] when none came within `patience`).
    pub fn call_bytes(&self, body: Bytes, patience: Duration) -> Result<Bytes, TrainError> {
        let van = self.po.van();
        let mut call = Call::new(van.now_ms(), patience.as_millis() as u64);
        // a scheduler that stays unreachable is logged when the reason changes and then
        // every WARN_EVERY, not at every retry (5 a second while it cannot be resolved)
        let mut warned: Option<(String, Instant)> = None;
        let mut why = String::from("no answer");
        loop {
            let scheduler = self.scheduler();
            let due = match self.send(&body) {
                Ok(ts) => {
                    call.sent(van.now_ms(), scheduler);
                    match self.wait(ts, &call) {
                        Ok(answer) => return Ok(answer),
                        Err(due) => due,
                    }
                }
                Err(e) => {
                    call.unsent(van.now_ms());
                    why = e.to_string();
                    loop {
                        std::thread::sleep(POLL);
                        match call.due(van.now_ms(), self.scheduler()) {
                            Due::Wait => {}
                            due => break due,
                        }
                    }
                }
            };
            match due {
                Due::GiveUp => {
                    return Err(TrainError::Unanswered(format!(
                        "the scheduler did not answer for {patience:?}: {why}"
                    )))
                }
                Due::Again(Again::Unsent) => {}
                Due::Again(again) => why = again.to_string(),
                Due::Wait => {}
            }
            match &warned {
                Some((last, at)) if *last == why && at.elapsed() < WARN_EVERY => {
                    log::debug!("master: {why}; asking again")
                }
                _ => {
                    log::warn!("master: {why}; asking again");
                    warned = Some((why.clone(), Instant::now()));
                }
            }
        }
    }

    /// Waits for request `ts`: its answer, or, when [`Call::due`] says so, what to do
    /// instead (the request is forgotten then).
    fn wait(&self, ts: i32, call: &Call) -> Result<Bytes, Due> {
        let van = self.po.van();
        loop {
            if self.app.customer().wait_request_timeout(ts, POLL) {
                return Ok(self.answer(ts).unwrap_or_default());
            }
            match call.due(van.now_ms(), self.scheduler()) {
                Due::Wait => {}
                due => {
                    self.forget(ts);
                    return Err(due);
                }
            }
        }
    }
}
