//! A simulated worker training through the master's task queues: it asks the master
//! for a task (sent again when [`Attempt::again`] says so, as `MasterClient` does),
//! computes for a while, pushes the task's value to every key range through psrs's
//! own [`KVWorker`] (which sends each range to its first live holder and reroutes it
//! to the next one when that one dies), and reports the attempt it trained once every
//! range answered; the task counts for it if the master says so. At the end it waits
//! in the final barrier.

use crate::process::{Changes, NodeLink};
use crate::rng::SimRng;
use crate::server::{PushKey, KV_APP};
use bytes::Bytes;
use parking_lot::Mutex;
use ps_apps::master::{MasterRequest, MasterResponse, Task};
use ps_apps::train::coordinator::{decode, encode, MASTER_APP, MASTER_HEAD};
use ps_apps::train::master_retry::Attempt;
use ps_core::kv::worker::{KVWorker, KvRequest};
use ps_core::kv::KVPairs;
use ps_core::message::{Message, Meta};
use ps_core::node::{ALL_GROUP, SCHEDULER};
use std::sync::Arc;

struct Call {
    ts: i32,
    body: Bytes,
    attempt: Attempt,
}

enum Phase {
    /// Waiting for the table and the start barrier.
    Starting,
    /// A master request is out (a task asked for, or the attempt trained reported).
    Asking,
    /// Told to wait: ask again at this time.
    Idle { until: u64 },
    /// Training on a task until this time.
    Computing { task: Task, until: u64 },
    /// Pushing the task's value (request `ts` of the KV worker).
    Pushing { task: Task, ts: i32 },
    /// In the final barrier.
    Finalizing,
    /// Released from the final barrier.
    Done,
}

/// Whether a push's every range answered (set by the KV worker's callback).
type Pushed = Arc<Mutex<Option<bool>>>;

/// A worker process.
pub struct Worker {
    /// Its postoffice.
    pub node: NodeLink,
    rng: SimRng,
    kv: KVWorker<i64>,
    pushed: Pushed,
    phase: Phase,
    joined: bool,
    call: Option<Call>,
    /// Pushes answered since the world last looked: (push, value).
    pub acked: Vec<(PushKey, i64)>,
    /// Tasks the master counted from this process's attempts since the world last
    /// looked.
    pub counted: Vec<u64>,
    /// The task whose attempt was reported, while the master's answer is awaited.
    reported: Option<u64>,
}

/// The value a task pushes to every range.
pub fn task_value(task: u64) -> i64 {
    task as i64 + 1
}

impl Worker {
    /// A worker over `node`, drawing its task times from `rng`.
    pub fn new(node: NodeLink, rng: SimRng) -> Worker {
        let kv = KVWorker::new(&node.po, KV_APP).expect("the KV worker's customer registers");
        Worker {
            node,
            rng,
            kv,
            pushed: Arc::default(),
            phase: Phase::Starting,
            joined: false,
            call: None,
            acked: Vec::new(),
            counted: Vec::new(),
            reported: None,
        }
    }

    /// The phase, for reports.
    pub fn phase_name(&self) -> &'static str {
        match self.phase {
            Phase::Starting => "starting",
            Phase::Asking => "asking the master",
            Phase::Idle { .. } => "told to wait",
            Phase::Computing { .. } => "computing",
            Phase::Pushing { .. } => "pushing",
            Phase::Finalizing => "in the final barrier",
            Phase::Done => "done",
        }
    }

    /// True once released from the final barrier.
    pub fn finished(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    fn get_task(&mut self, now: u64) {
        self.ask(
            MasterRequest::GetTask {
                finished: None,
                report: None,
            },
            now,
        );
    }

    fn ask(&mut self, req: MasterRequest, now: u64) {
        let ts = self.node.next_ts();
        let attempt = Attempt::new(now, self.node.po.van().scheduler_incarnation());
        self.call = Some(Call {
            ts,
            body: encode(&req),
            attempt,
        });
        self.send_call();
        self.phase = Phase::Asking;
    }

    fn send_call(&mut self) {
        let Some(c) = &self.call else { return };
        let msg = Message {
            meta: Meta {
                head: MASTER_HEAD,
                app_id: MASTER_APP,
                customer_id: 0,
                timestamp: c.ts,
                recver: SCHEDULER,
                request: true,
                simple_app: true,
                ..Default::default()
            },
            data: vec![c.body.clone()],
        };
        self.node.send(msg);
    }

    /// Pushes `task`'s value to every key range (one key at each range's start).
    fn push(&mut self, task: Task, now: u64) {
        let keys: Vec<u64> = self.kv.ranges().iter().map(|r| r.begin).collect();
        let vals = vec![task_value(task.id); keys.len()];
        let slot = Arc::clone(&self.pushed);
        *slot.lock() = None;
        let req = KvRequest::new(KVPairs::new(keys, vals, Vec::new()), 0, true, false);
        let done = Box::new(move |r: Result<&[_], &_>| *slot.lock() = Some(r.is_ok()));
        match self.kv.request(req, Some(done)) {
            Ok(ts) => self.phase = Phase::Pushing { task, ts },
            Err(e) => {
                log::debug!("push of task {} not sent: {e}", task.id);
                self.get_task(now);
            }
        }
    }

    /// The push's answers are in: each range's push is recorded as answered, and the
    /// attempt is reported. A refused push leaves the task to the master's timeout.
    fn pushed(&mut self, now: u64) {
        let Phase::Pushing { task, ts } = &self.phase else {
            return;
        };
        let Some(ok) = self.pushed.lock().take() else {
            return;
        };
        let (task, ts) = (task.clone(), *ts);
        if !ok {
            log::debug!("push of task {} refused", task.id);
            return self.get_task(now);
        }
        let me = self.node.me();
        for range in 0..self.kv.ranges().len() {
            let key = (me.id, me.incarnation, KV_APP, ts, range as i32);
            self.acked.push((key, task_value(task.id)));
        }
        self.reported = Some(task.id);
        self.ask(
            MasterRequest::Finish {
                task: task.id,
                attempt: task.attempt,
                report: None,
            },
            now,
        );
    }

    /// What changed in its postoffice (after every step it took part in).
    pub fn on_changes(&mut self, c: Changes, now: u64) {
        if c.table && matches!(self.phase, Phase::Starting) && !self.joined {
            // the first table: the start barrier (a replacement skips it)
            self.joined = true;
            if self.node.me().is_recovery {
                self.get_task(now);
            } else {
                self.node.barrier(ALL_GROUP);
            }
        }
        if c.released.is_some() {
            match self.phase {
                Phase::Starting => self.get_task(now),
                Phase::Finalizing => self.phase = Phase::Done,
                _ => {}
            }
        }
        self.pushed(now);
    }

    /// A message for the worker's master app.
    pub fn on_data(&mut self, msg: Message, now: u64) {
        if msg.meta.request || msg.meta.app_id != MASTER_APP {
            return;
        }
        let Some(c) = &self.call else { return };
        if c.ts != msg.meta.timestamp || !matches!(self.phase, Phase::Asking) {
            return;
        }
        self.call = None;
        let Some(Ok(resp)) = msg.data.first().map(|b| decode::<MasterResponse>(b)) else {
            return;
        };
        let reported = self.reported.take();
        match resp {
            MasterResponse::Task(task) => {
                let until = now + self.rng.between(100, 500);
                self.phase = Phase::Computing { task, until };
            }
            MasterResponse::Counted(counts) => {
                if let (Some(id), true) = (reported, counts) {
                    self.counted.push(id);
                }
                self.get_task(now);
            }
            MasterResponse::NoMoreTasks => {
                self.phase = Phase::Finalizing;
                self.node.barrier(ALL_GROUP);
            }
            _ => self.phase = Phase::Idle { until: now + 100 },
        }
    }

    /// Timers: a finished computation starts the push; a wait ends; a master request
    /// is sent again when [`Attempt::again`] says so.
    pub fn tick(&mut self, now: u64) {
        match &self.phase {
            Phase::Computing { task, until } if now >= *until => {
                let task = task.clone();
                self.push(task, now);
            }
            Phase::Idle { until } if now >= *until => self.get_task(now),
            Phase::Asking => {
                let inc = self.node.po.van().scheduler_incarnation();
                let again = self.call.as_ref().and_then(|c| c.attempt.again(now, inc));
                if let Some(why) = again {
                    log::debug!("master: {why}; asking again");
                    let ts = self.node.next_ts();
                    if let Some(c) = self.call.as_mut() {
                        c.ts = ts;
                        c.attempt = Attempt::new(now, inc);
                    }
                    self.send_call();
                }
            }
            _ => {}
        }
    }
}
