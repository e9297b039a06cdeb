//! A simulated worker training through the master's task queues: it asks the master
//! for a task (again when the scheduler changes or after the attempt time, as
//! `MasterClient` does), computes for a while, pushes the task's value to every key
//! range's first live holder (the same request to the next holder when that one
//! dies, as `KVWorker` reroutes), and reports the attempt it trained once every
//! range answered; the task counts for it if the master says so. At the end it waits
//! in the final barrier.

use crate::process::{Changes, NodeLink};
use crate::rng::SimRng;
use crate::server::{PushKey, KV_APP};
use bytes::Bytes;
use ps_apps::master::{MasterRequest, MasterResponse, Task};
use ps_apps::train::coordinator::{decode, encode, MASTER_APP, MASTER_HEAD};
use ps_core::kv::replication::copy_wire::OP_REJOINED;
use ps_core::kv::replication::{dead_server_ranks, Holders};
use ps_core::message::{Message, Meta};
use ps_core::node::{server_rank_to_id, ALL_GROUP, SCHEDULER};

/// A master request waits this long for its answer before it is sent again (as
/// `master_client::ATTEMPT`).
pub const ATTEMPT_MS: u64 = 5_000;

struct Call {
    ts: i32,
    body: Bytes,
    sent_ms: u64,
    scheduler: u64,
}

#[derive(Clone, Copy)]
struct Part {
    range: usize,
    ts: i32,
    target: i32,
    answered: bool,
}

enum Phase {
    /// Waiting for the table and the start barrier.
    Starting,
    /// A master request is out (a task asked for, or the attempt trained reported).
    Asking,
    /// Told to wait: ask again at this time.
    Idle { until: u64, finished: Option<u64> },
    /// Training on a task until this time.
    Computing { task: Task, until: u64 },
    /// Pushing the task's value.
    Pushing { task: Task, parts: Vec<Part> },
    /// In the final barrier.
    Finalizing,
    /// Released from the final barrier.
    Done,
}

/// A worker process.
pub struct Worker {
    /// Its postoffice.
    pub node: NodeLink,
    rng: SimRng,
    holders: Holders,
    servers: usize,
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
    /// A worker over `node` in a cluster of `servers` servers with `replicas` copies,
    /// drawing its task times from `rng`.
    pub fn new(node: NodeLink, rng: SimRng, servers: usize, replicas: usize) -> Worker {
        Worker {
            node,
            rng,
            holders: Holders::new(servers, replicas),
            servers,
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

    fn ask(&mut self, req: MasterRequest, now: u64) {
        let body = encode(&req);
        let ts = self.node.next_ts();
        self.call = Some(Call {
            ts,
            body: body.clone(),
            sent_ms: now,
            scheduler: self.node.po.van().scheduler_incarnation(),
        });
        self.send_call(now);
        self.phase = Phase::Asking;
    }

    fn send_call(&mut self, now: u64) {
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
        let _ = now;
        self.node.send(msg);
    }

    fn target(&self, range: usize) -> i32 {
        let dead = dead_server_ranks(&self.node.unavailable());
        server_rank_to_id(self.holders.primary(range, &dead).unwrap_or(range))
    }

    fn push(&mut self, part: &Part, value: i64, now: u64) {
        let msg = Message {
            meta: Meta {
                app_id: KV_APP,
                customer_id: 0,
                timestamp: part.ts,
                recver: part.target,
                request: true,
                push: true,
                range: part.range as i32,
                ..Default::default()
            },
            data: vec![Bytes::copy_from_slice(&value.to_le_bytes())],
        };
        let _ = now;
        self.node.send(msg);
    }

    /// What changed in its postoffice (after every step it took part in).
    pub fn on_changes(&mut self, c: Changes, now: u64) {
        if c.table {
            if matches!(self.phase, Phase::Starting) && !self.joined {
                // the first table: the start barrier (a replacement skips it)
                self.joined = true;
                if self.node.me().is_recovery {
                    self.ask(
                        MasterRequest::GetTask {
                            finished: None,
                            report: None,
                        },
                        now,
                    );
                } else {
                    self.node.barrier(ALL_GROUP);
                }
            }
            self.reroute(now);
        }
        if c.unavailable {
            self.reroute(now);
        }
        if c.released.is_some() {
            match self.phase {
                Phase::Starting => self.ask(
                    MasterRequest::GetTask {
                        finished: None,
                        report: None,
                    },
                    now,
                ),
                Phase::Finalizing => self.phase = Phase::Done,
                _ => {}
            }
        }
    }

    /// A message for the worker's KV or master app.
    pub fn on_data(&mut self, msg: Message, now: u64) {
        if msg.meta.request {
            if msg.meta.app_id == KV_APP && msg.meta.head == OP_REJOINED {
                // a replacement server holds its ranges again (as KVWorker hears it)
                self.node.po.mark_rejoined(msg.meta.sender);
                self.reroute(now);
            }
            return;
        }
        if msg.meta.app_id == MASTER_APP {
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
                    self.ask(
                        MasterRequest::GetTask {
                            finished: None,
                            report: None,
                        },
                        now,
                    );
                }
                MasterResponse::NoMoreTasks => {
                    self.phase = Phase::Finalizing;
                    self.node.barrier(ALL_GROUP);
                }
                _ => {
                    self.phase = Phase::Idle {
                        until: now + 100,
                        finished: None,
                    }
                }
            }
            return;
        }
        if msg.meta.app_id == KV_APP && msg.meta.push {
            let Phase::Pushing { task, parts } = &mut self.phase else {
                return;
            };
            let Some(p) = parts
                .iter_mut()
                .find(|p| p.ts == msg.meta.timestamp && p.range as i32 == msg.meta.range)
            else {
                return;
            };
            if p.answered {
                return;
            }
            p.answered = true;
            let me = self.node.me();
            let key = (me.id, me.incarnation, 0, p.ts, p.range as i32);
            self.acked.push((key, task_value(task.id)));
            if parts.iter().all(|p| p.answered) {
                let (id, attempt) = (task.id, task.attempt);
                self.reported = Some(id);
                self.ask(
                    MasterRequest::Finish {
                        task: id,
                        attempt,
                        report: None,
                    },
                    now,
                );
            }
        }
    }

    /// Unanswered pushes whose server is no longer available go to the range's next
    /// live holder (the same request: the holders apply it once).
    fn reroute(&mut self, now: u64) {
        let unavailable = self.node.unavailable();
        let targets: Vec<i32> = (0..self.servers).map(|r| self.target(r)).collect();
        let Phase::Pushing { task, parts } = &mut self.phase else {
            return;
        };
        let value = task_value(task.id);
        let mut again = Vec::new();
        for p in parts.iter_mut().filter(|p| !p.answered) {
            if unavailable.contains(&p.target) && targets[p.range] != p.target {
                p.target = targets[p.range];
                again.push(Part { ..*p });
            }
        }
        for p in again {
            self.push(&p, value, now);
        }
    }

    /// Timers: a finished computation starts the pushes; a wait ends; a master
    /// request is sent again when the scheduler changed or it went unanswered.
    pub fn tick(&mut self, now: u64) {
        match &self.phase {
            Phase::Computing { task, until } if now >= *until => {
                let task = task.clone();
                let mut parts = Vec::new();
                for range in 0..self.servers {
                    let ts = self.node.next_ts();
                    parts.push(Part {
                        range,
                        ts,
                        target: self.target(range),
                        answered: false,
                    });
                }
                let value = task_value(task.id);
                for p in &parts {
                    self.push(p, value, now);
                }
                self.phase = Phase::Pushing { task, parts };
            }
            Phase::Idle { until, finished } if now >= *until => {
                let finished = *finished;
                self.ask(MasterRequest::GetTask { finished, report: None }, now);
            }
            Phase::Asking => {
                let inc = self.node.po.van().scheduler_incarnation();
                let again = self
                    .call
                    .as_ref()
                    .is_some_and(|c| c.scheduler != inc || now.saturating_sub(c.sent_ms) >= ATTEMPT_MS);
                if again {
                    let ts = self.node.next_ts();
                    if let Some(c) = self.call.as_mut() {
                        c.ts = ts;
                        c.sent_ms = now;
                        c.scheduler = inc;
                    }
                    self.send_call(now);
                }
            }
            _ => {}
        }
    }
}
