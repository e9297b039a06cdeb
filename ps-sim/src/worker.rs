//! A simulated worker: psrs's own training worker's task loop
//! ([`ps_apps::train::task_loop::TaskLoop`]) over psrs's own master client
//! ([`MasterClient`], a request sent again or given up when [`Call::due`] says so) and
//! [`KVWorker`] (which sends each key range to its first live holder and reroutes it
//! to the next one when that one dies). What the simulator adds is the summing job's
//! training of a task: a while of computing, then one push of the task's value to
//! every key range; and the carrying out of each step at the simulated time (the
//! waits a real worker sleeps through are timers here). At the end it waits in the
//! final barrier ([`NodeLink::course`]).

use crate::process::NodeLink;
use crate::rng::SimRng;
use crate::server::{PushKey, KV_APP};
use bytes::Bytes;
use parking_lot::Mutex;
use ps_apps::master::{MasterRequest, MasterResponse, Task, TaskReport};
use ps_apps::train::coordinator::{decode, encode};
use ps_apps::train::master_client::MasterClient;
use ps_apps::train::master_retry::{Call, Due};
use ps_apps::train::task_loop::{Next, TaskLoop, Trained};
use ps_apps::train::worker::MASTER_PATIENCE;
use ps_core::kv::worker::{KVWorker, KvRequest};
use ps_core::kv::KVPairs;
use ps_core::protocol::course::Stage;
use std::sync::Arc;

/// The dataset the simulated workers report (the simulated master holds its chunks
/// from the start, so the report reads no file).
pub const DATASET: &str = "sim";

/// A request to the master in flight.
struct Asked {
    /// Its timestamp (None: it could not be sent).
    ts: Option<i32>,
    body: Bytes,
    call: Call,
    /// The task whose result it reports.
    finish: Option<u64>,
}

impl Asked {
    /// A placeholder while the request is sent again.
    fn empty(now: u64) -> Asked {
        Asked {
            ts: None,
            body: Bytes::new(),
            call: Call::new(now, 0),
            finish: None,
        }
    }
}

/// The step of the task loop being carried out.
enum Doing {
    /// A request to the master is out.
    Asking(Asked),
    /// Training on a task until this time.
    Computing { task: Task, until: u64 },
    /// Pushing the task's value (request `ts` of the KV worker).
    Pushing { task: Task, ts: i32 },
    /// A pause until this time.
    Pausing { until: u64 },
}

enum Phase {
    /// The task loop has not started (the course has not reached it).
    Before,
    /// Running the task loop.
    Running(TaskLoop, Doing),
    /// The task loop ended (the job is complete, or the worker failed).
    After,
}

/// Whether a push's every range answered (set by the KV worker's callback).
type Pushed = Arc<Mutex<Option<bool>>>;

/// A worker process.
pub struct Worker {
    /// Its postoffice.
    pub node: NodeLink,
    rng: SimRng,
    kv: KVWorker<i64>,
    client: MasterClient,
    pushed: Pushed,
    phase: Phase,
    /// Pushes answered since the world last looked: (push, value).
    pub acked: Vec<(PushKey, i64)>,
    /// Tasks the master counted from this process's attempts since the world last
    /// looked.
    pub counted: Vec<u64>,
    /// Why the worker stopped, as the training worker's process ends with an error
    /// (the world ends the process).
    pub failed: Option<String>,
}

/// The value a task pushes to every range.
pub fn task_value(task: u64) -> i64 {
    task as i64 + 1
}

impl Worker {
    /// A worker over `node`, drawing its task times from `rng`.
    pub fn new(node: NodeLink, rng: SimRng) -> Worker {
        let kv = KVWorker::new(&node.po, KV_APP).expect("the KV worker's customer registers");
        let client = MasterClient::driven(&node.po).expect("the master client's customer registers");
        Worker {
            node,
            rng,
            kv,
            client,
            pushed: Arc::default(),
            phase: Phase::Before,
            acked: Vec::new(),
            counted: Vec::new(),
            failed: None,
        }
    }

    /// The phase, for reports.
    pub fn phase_name(&self) -> &'static str {
        match &self.phase {
            _ if self.node.stage() == Stage::Finalizing => "in the final barrier",
            _ if self.node.stage() == Stage::Done => "done",
            Phase::Before => "starting",
            Phase::After => "stopped",
            Phase::Running(_, Doing::Asking(_)) => "asking the master",
            Phase::Running(_, Doing::Pausing { .. }) => "pausing",
            Phase::Running(_, Doing::Computing { .. }) => "computing",
            Phase::Running(_, Doing::Pushing { .. }) => "pushing",
        }
    }

    /// True once released from the final barrier.
    pub fn finished(&self) -> bool {
        self.node.stage() == Stage::Done
    }

    /// The task loop starts (after the start barrier).
    fn start(&mut self, now: u64) {
        let (lp, next) = TaskLoop::new(vec![DATASET.into()], None);
        self.phase = Phase::Running(lp, Doing::Pausing { until: now });
        self.carry_out(next, now);
    }

    /// Carries out the loop's steps until one takes time.
    fn carry_out(&mut self, mut next: Next, now: u64) {
        let doing = loop {
            let Phase::Running(lp, _) = &mut self.phase else { return };
            break match next {
                Next::Ask(req) => Doing::Asking(self.ask(&req, now)),
                Next::Train(task) => Doing::Computing {
                    task,
                    until: now + self.rng.between(100, 500),
                },
                // the sums wait for no worker's gradient: the notice is nothing to send
                Next::Idle => {
                    next = lp.idled();
                    continue;
                }
                Next::Pause(d) => Doing::Pausing {
                    until: now + d.as_millis() as u64,
                },
                Next::Complete | Next::Left => {
                    self.phase = Phase::After;
                    self.node.finalize();
                    return;
                }
            };
        };
        if let Phase::Running(_, d) = &mut self.phase {
            *d = doing;
        }
    }

    /// Sends `req` to the master, as [`MasterClient::call`] does with the training
    /// worker's patience.
    fn ask(&self, req: &MasterRequest, now: u64) -> Asked {
        let finish = match req {
            MasterRequest::Finish { task, .. } => Some(*task),
            _ => None,
        };
        let mut asked = Asked {
            ts: None,
            body: encode(req),
            call: Call::new(now, MASTER_PATIENCE.as_millis() as u64),
            finish,
        };
        self.send(&mut asked, now);
        asked
    }

    /// One sending of `asked` (a late answer to the one before counts for nothing).
    fn send(&self, asked: &mut Asked, now: u64) {
        if let Some(ts) = asked.ts.take() {
            self.client.forget(ts);
        }
        let scheduler = self.client.scheduler();
        match self.client.send(&asked.body) {
            Ok(ts) => {
                asked.ts = Some(ts);
                asked.call.sent(now, scheduler);
            }
            Err(e) => {
                log::debug!("master: {e}; asking again");
                asked.call.unsent(now);
            }
        }
    }

    /// The task loop's step went wrong as the training worker's does: the process
    /// ends.
    fn fail(&mut self, why: String) {
        self.failed = Some(why);
        self.phase = Phase::After;
    }

    /// The master's answer, if it came.
    fn answered(&mut self, now: u64) {
        let Phase::Running(_, Doing::Asking(call)) = &self.phase else {
            return;
        };
        let Some(body) = call.ts.and_then(|ts| self.client.answer(ts)) else {
            return;
        };
        let finish = call.finish;
        let resp = match decode::<MasterResponse>(&body) {
            Ok(r) => r,
            Err(e) => return self.fail(e.to_string()),
        };
        if let (Some(id), MasterResponse::Counted(true)) = (finish, &resp) {
            self.counted.push(id);
        }
        let Phase::Running(lp, _) = &mut self.phase else { return };
        match lp.answered(resp) {
            Ok(next) => self.carry_out(next, now),
            Err(e) => self.fail(e.to_string()),
        }
    }

    /// Pushes `task`'s value to every key range (one key at each range's start).
    fn push(&mut self, task: Task) -> Doing {
        let keys: Vec<u64> = self.kv.ranges().iter().map(|r| r.begin).collect();
        let vals = vec![task_value(task.id); keys.len()];
        let slot = Arc::clone(&self.pushed);
        *slot.lock() = None;
        let req = KvRequest::new(KVPairs::new(keys, vals, Vec::new()), 0, true, false);
        let done = Box::new(move |r: Result<&[_], &_>| *slot.lock() = Some(r.is_ok()));
        match self.kv.request(req, Some(done)) {
            Ok(ts) => Doing::Pushing { task, ts },
            Err(e) => {
                self.fail(format!("push of task {} not sent: {e}", task.id));
                Doing::Pausing { until: 0 }
            }
        }
    }

    /// The push's answers are in: each range's push is recorded as answered, and the
    /// task is trained. A refused push fails the worker, as a failed exchange with
    /// the servers fails the training worker.
    fn pushed(&mut self, now: u64) {
        let Phase::Running(_, Doing::Pushing { task, ts }) = &self.phase else {
            return;
        };
        let Some(ok) = self.pushed.lock().take() else {
            return;
        };
        let (task, ts) = (task.clone(), *ts);
        if !ok {
            return self.fail(format!("push of task {} refused", task.id));
        }
        let me = self.node.me();
        for range in 0..self.kv.ranges().len() {
            let key = (me.id, me.incarnation, KV_APP, ts, range as i32);
            self.acked.push((key, task_value(task.id)));
        }
        let Phase::Running(lp, _) = &mut self.phase else { return };
        let next = lp.trained(&task, Trained::Done(TaskReport::default()));
        self.carry_out(next, now);
    }

    /// After every step it took part in: its course moves on (the task loop starts
    /// after the start barrier, or at once for a replacement); an answer of the
    /// master or of the servers is taken in.
    pub fn after_step(&mut self, now: u64) {
        if self.node.course() {
            self.start(now);
        }
        self.answered(now);
        self.pushed(now);
    }

    /// Timers: a finished computation starts the push; a pause ends; a master
    /// request is sent again, or given up, when [`Call::due`] says so.
    pub fn tick(&mut self, now: u64) {
        let Phase::Running(lp, doing) = &mut self.phase else {
            return;
        };
        match doing {
            Doing::Computing { task, until } if now >= *until => {
                let task = task.clone();
                let d = self.push(task);
                if let Phase::Running(_, doing) = &mut self.phase {
                    *doing = d;
                }
            }
            Doing::Pausing { until } if now >= *until => {
                let next = lp.paused();
                self.carry_out(next, now);
            }
            Doing::Asking(asked) => match asked.call.due(now, self.client.scheduler()) {
                Due::Wait => {}
                Due::Again(why) => {
                    log::debug!("master: {why}; asking again");
                    let mut asked = std::mem::replace(asked, Asked::empty(now));
                    self.send(&mut asked, now);
                    if let Phase::Running(_, doing) = &mut self.phase {
                        *doing = Doing::Asking(asked);
                    }
                }
                Due::GiveUp => {
                    let why = format!("the scheduler did not answer for {MASTER_PATIENCE:?}");
                    self.fail(why);
                }
            },
            _ => {}
        }
    }
}
