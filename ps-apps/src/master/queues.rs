//! The task queues as a plain state machine: no I/O and no clock (times are passed in
//! as milliseconds), so dispatch, timeouts, retries and passes are tested exactly.

use super::config::MasterConfig;
use crate::recordio::ChunkIndex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// A chunk of a dataset file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// The RecordIO file.
    pub path: String,
    /// Where the chunk is in it.
    pub index: ChunkIndex,
}

/// A task: some chunks to train on, in one pass over the data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique over the whole job (`epoch * tasks_per_epoch + n`).
    pub id: u64,
    /// The pass it belongs to.
    pub epoch: u64,
    /// Its chunks.
    pub chunks: Vec<Chunk>,
    /// Which hand-out of the task this is (in a queue: the latest).
    pub attempt: Attempt,
}

/// Which hand-out of a task: the term of the scheduler that handed it out and how
/// many times the task was handed out in its pass, this one included. A result names
/// the attempt it trained, so the master counts a task once per pass whatever the
/// failovers and timeouts in between ([`TaskQueues::finish_attempt`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The term of the scheduler that handed it out (0 without standby schedulers).
    pub term: u64,
    /// Hand-outs of the task in its pass so far (from 1; 0: never handed out).
    pub n: u32,
}

/// What a result of an attempt did ([`TaskQueues::finish_attempt`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// The task is counted done now, from this attempt.
    Now,
    /// The task was counted from this very attempt before (a report sent again).
    Already,
    /// Not counted: the task was counted from another attempt, or this attempt was
    /// never handed out by this master's state (a stale or unknown task).
    Not,
}

impl Counted {
    /// True when the task counts from this attempt (now or before).
    pub fn counts(self) -> bool {
        self != Counted::Not
    }
}

/// A task in a queue, with its retry bookkeeping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskEntry {
    /// The task.
    pub task: Task,
    /// Times it timed out or was reported failed.
    pub num_timeout: u32,
    /// The node id of the worker holding it while pending (kept in done: who finished
    /// it); -1 in todo and failed.
    pub worker: i32,
    /// When it was handed out (kept when it goes back to todo: a late finish of a
    /// task that timed out measures its time from there).
    pub dispatched_ms: u64,
    /// When it was due by the pace at its dispatch (for reports; whether a task is
    /// late is decided by the pace at the time of the check, see [`TaskQueues::late`]).
    pub deadline_ms: u64,
}

/// A task given up on (failed more than `max_retries` times): its records were not
/// trained on in its pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GivenUp {
    /// The task.
    pub task: u64,
    /// Its pass.
    pub epoch: u64,
    /// Records in its chunks.
    pub records: u64,
    /// Why it failed the last time (e.g. `FILE: chunk N: CRC mismatch ...`).
    pub reason: String,
}

/// What `GetTask` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// Work on this.
    Task(Task),
    /// Nothing to hand out now (others hold the remaining tasks); ask again.
    Wait,
    /// Every pass is complete.
    NoMoreTasks,
}

/// The master's queues.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskQueues {
    /// The dataset (set by the first ReportDataset).
    pub dataset: Option<Vec<String>>,
    /// The tasks of one pass, as cut from the dataset.
    pub template: Vec<Vec<Chunk>>,
    /// Tasks waiting.
    pub todo: VecDeque<TaskEntry>,
    /// Tasks handed out, by id.
    pub pending: BTreeMap<u64, TaskEntry>,
    /// Tasks finished this pass.
    pub done: Vec<TaskEntry>,
    /// Tasks given up on this pass.
    pub failed: Vec<TaskEntry>,
    /// The current pass.
    pub epoch: u64,
    /// Moving average of completion time, ms (0 before the first completion).
    pub avg_task_ms: f64,
    /// The latest completion time, ms: with the average it makes the pace
    /// ([`TaskQueues::timeout_ms`]).
    pub last_task_ms: u64,
    /// Tasks finished over the whole job.
    pub total_done: u64,
    /// True once every pass is complete.
    pub finished: bool,
    /// Every task given up on over the whole job, in order.
    pub given_up: Vec<GivenUp>,
    /// The term tasks are handed out under (the active scheduler's).
    pub term: u64,
    /// The previous pass's tasks and the attempts they were counted from: a report
    /// sent again after its pass ended is answered as before.
    pub prev_done: BTreeMap<u64, Attempt>,
}

impl TaskQueues {
    /// Sets the dataset and fills todo with the first pass, unless a dataset was
    /// reported before (then nothing changes). Returns whether it was taken.
    pub fn report_dataset(&mut self, paths: Vec<String>, chunks: Vec<Chunk>, cfg: &MasterConfig) -> bool {
        if self.dataset.is_some() {
            return false;
        }
        self.dataset = Some(paths);
        self.template = chunks.chunks(cfg.chunks_per_task.max(1)).map(|c| c.to_vec()).collect();
        self.start_epoch(0);
        if self.template.is_empty() {
            self.finished = true;
        }
        true
    }

    fn start_epoch(&mut self, epoch: u64) {
        let n = self.template.len() as u64;
        self.epoch = epoch;
        self.prev_done = self.done.iter().map(|e| (e.task.id, e.task.attempt)).collect();
        self.done.clear();
        self.failed.clear();
        self.todo = self
            .template
            .iter()
            .enumerate()
            .map(|(i, chunks)| TaskEntry {
                task: Task {
                    id: epoch * n + i as u64,
                    epoch,
                    chunks: chunks.clone(),
                    attempt: Attempt::default(),
                },
                num_timeout: 0,
                worker: -1,
                dispatched_ms: 0,
                deadline_ms: 0,
            })
            .collect();
    }

    /// The current timeout: the multiple of the pace, at least the floor. The pace is
    /// the larger of the moving average and the latest completion time, so a job that
    /// slows down (workers moving in, the machine loaded) raises its timeout with the
    /// first task that finishes slower, not five completions later.
    pub fn timeout_ms(&self, cfg: &MasterConfig) -> u64 {
        let pace = self.avg_task_ms.max(self.last_task_ms as f64);
        ((pace * cfg.timeout_multiplier) as u64).max(cfg.timeout_floor_ms)
    }

    /// Whether a pending task is past the current timeout (measured from its dispatch
    /// with the pace of now, so tasks already out get the slower pace too).
    fn overdue(&self, e: &TaskEntry, now_ms: u64, cfg: &MasterConfig) -> bool {
        now_ms.saturating_sub(e.dispatched_ms) >= self.timeout_ms(cfg)
    }

    /// The pending tasks that are late: overdue, and overtaken (a task handed out no
    /// earlier is done already). A task every other worker is still behind is not stuck:
    /// the whole job is slower (its pace changed), and handing it to someone else would
    /// only run it twice. An overdue task nobody overtook is instead handed over when a
    /// worker asks for work and finds none ([`TaskQueues::next`]). Pure (no change).
    pub fn late(&self, now_ms: u64, cfg: &MasterConfig) -> Vec<u64> {
        let Some(newest_done) = self.done.iter().map(|e| e.dispatched_ms).max() else {
            return Vec::new();
        };
        self.pending
            .iter()
            .filter(|(_, e)| newest_done >= e.dispatched_ms && self.overdue(e, now_ms, cfg))
            .map(|(&id, _)| id)
            .collect()
    }

    fn record_time(&mut self, took: u64) {
        let took_f = took as f64;
        self.avg_task_ms = if self.avg_task_ms == 0.0 {
            took_f
        } else {
            0.8 * self.avg_task_ms + 0.2 * took_f
        };
        self.last_task_ms = took;
    }

    /// Task `id` was finished at `now_ms`; returns whether this changed anything.
    ///
    /// A pending task moves to done and its completion time (now − dispatch) feeds the
    /// moving average (exponential, weight 0.2 on the newest). A late finish of a task
    /// that timed out and waits in todo, was handed to another worker, or was given up
    /// on (failed) still counts, once: it moves to done; from todo or failed its time
    /// since the dispatch that timed out feeds the average too, so a timeout that was
    /// wrong (the task was slow, not lost) raises the timeout rather than recurring. A
    /// task already done, or of an earlier pass, or unknown, is ignored (false). The
    /// seed accepts that a task may thus be trained on twice.
    pub fn finish(&mut self, id: u64, now_ms: u64) -> bool {
        let (entry, measured) = if let Some(e) = self.pending.remove(&id) {
            (e, true)
        } else if let Some(i) = self.todo.iter().position(|e| e.task.id == id) {
            let e = self.todo.remove(i).expect("position is valid");
            let measured = e.num_timeout > 0;
            (e, measured)
        } else if let Some(i) = self.failed.iter().position(|e| e.task.id == id) {
            self.given_up.retain(|g| g.task != id);
            (self.failed.remove(i), true)
        } else {
            return false;
        };
        if measured {
            self.record_time(now_ms.saturating_sub(entry.dispatched_ms));
        }
        self.done.push(entry);
        self.total_done += 1;
        true
    }

    /// `worker` reports that it trained `attempt` of task `id`, at `now_ms`: counted
    /// at most once per pass. An attempt older than the task's latest hand-out, or the
    /// latest as it was handed out (under its term), counts if the task is not done
    /// yet (a late result of a task that timed out is not wasted: the later attempt
    /// will not count); the attempt that counted, reported again, is answered
    /// [`Counted::Already`]; anything else (another attempt of a done task, an attempt
    /// this state never handed out) is [`Counted::Not`]. Otherwise as
    /// [`TaskQueues::finish`].
    pub fn finish_attempt(&mut self, worker: i32, id: u64, attempt: Attempt, now_ms: u64) -> Counted {
        if let Some(e) = self.done.iter().find(|e| e.task.id == id) {
            return if e.task.attempt == attempt && e.worker == worker {
                Counted::Already
            } else {
                Counted::Not
            };
        }
        if let Some(a) = self.prev_done.get(&id) {
            return if *a == attempt { Counted::Already } else { Counted::Not };
        }
        let latest = self
            .pending
            .get(&id)
            .or_else(|| self.todo.iter().find(|e| e.task.id == id))
            .or_else(|| self.failed.iter().find(|e| e.task.id == id))
            .map(|e| e.task.attempt);
        let handed_out = latest.is_some_and(|l| attempt.n >= 1 && (attempt.n < l.n || attempt == l));
        if !handed_out || !self.finish(id, now_ms) {
            return Counted::Not;
        }
        if let Some(e) = self.done.last_mut() {
            e.task.attempt = attempt;
            e.worker = worker;
        }
        Counted::Now
    }

    fn retry_or_fail(&mut self, mut e: TaskEntry, cfg: &MasterConfig, why: &str) {
        e.num_timeout += 1;
        e.worker = -1;
        if e.num_timeout > cfg.max_retries {
            let records: u64 = e.task.chunks.iter().map(|c| u64::from(c.index.records)).sum();
            log::error!(
                "task {} {why} {} times; giving up on it: its {records} records are skipped in pass {}",
                e.task.id,
                e.num_timeout,
                e.task.epoch + 1
            );
            self.given_up.push(GivenUp {
                task: e.task.id,
                epoch: e.task.epoch,
                records,
                reason: why.to_string(),
            });
            self.failed.push(e);
        } else {
            log::warn!(
                "task {} {why} ({} of {}); back to todo",
                e.task.id,
                e.num_timeout,
                cfg.max_retries
            );
            self.todo.push_back(e);
        }
    }

    /// `worker` reported task `id` failed: treated like a timeout (count raised, back
    /// to todo, or to failed above the threshold). Ignored (false) unless `worker`
    /// holds the task: a stale report about a task since handed to another worker must
    /// not take it away from that worker.
    pub fn fail(&mut self, worker: i32, id: u64, cfg: &MasterConfig) -> bool {
        self.fail_because(worker, id, "was reported failed", cfg)
    }

    /// [`TaskQueues::fail`] with the worker's reason (e.g. an unreadable chunk, named
    /// by file and chunk), logged and kept in [`GivenUp::reason`] if the task is given up.
    pub fn fail_because(&mut self, worker: i32, id: u64, why: &str, cfg: &MasterConfig) -> bool {
        match self.pending.get(&id) {
            Some(e) if e.worker == worker => {}
            _ => return false,
        }
        let e = self.pending.remove(&id).expect("checked above");
        self.retry_or_fail(e, cfg, why);
        true
    }

    /// Records skipped over the whole job: those of every task given up on.
    pub fn skipped_records(&self) -> u64 {
        self.given_up.iter().map(|g| g.records).sum()
    }

    /// Moves the [late](TaskQueues::late) pending tasks back to todo (or to failed);
    /// returns their ids.
    pub fn tick(&mut self, now_ms: u64, cfg: &MasterConfig) -> Vec<u64> {
        let late = self.late(now_ms, cfg);
        for id in &late {
            let e = self.pending.remove(id).expect("listed above");
            self.retry_or_fail(e, cfg, "timed out");
        }
        late
    }

    /// Requeues at once, at the front of todo, every task `worker` holds (it was
    /// declared dead, or lost its task), without counting a timeout. Returns how many.
    pub fn worker_dead(&mut self, worker: i32) -> usize {
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, e)| e.worker == worker)
            .map(|(&id, _)| id)
            .collect();
        for id in &ids {
            let mut e = self.pending.remove(id).expect("listed above");
            e.worker = -1;
            self.todo.push_front(e);
        }
        ids.len()
    }

    /// Hands `worker` the next task, or says to wait, or that the job is complete.
    /// With nothing in todo, an overdue pending task (the oldest) times out and goes
    /// to this worker, which has nothing else to do (a straggler at the end of a pass).
    pub fn next(&mut self, worker: i32, now_ms: u64, cfg: &MasterConfig) -> Reply {
        if self.dataset.is_none() {
            return Reply::Wait;
        }
        if self.todo.is_empty() && self.pending.is_empty() && !self.finished {
            if self.epoch + 1 < cfg.num_epochs {
                log::info!(
                    "pass {} complete: {} done, {} failed",
                    self.epoch + 1,
                    self.done.len(),
                    self.failed.len()
                );
                self.start_epoch(self.epoch + 1);
            } else {
                self.finished = true;
            }
        }
        if self.finished {
            return Reply::NoMoreTasks;
        }
        if self.todo.is_empty() {
            let overdue = self
                .pending
                .values()
                .filter(|e| self.overdue(e, now_ms, cfg))
                .min_by_key(|e| (e.dispatched_ms, e.task.id))
                .map(|e| e.task.id);
            if let Some(id) = overdue {
                let e = self.pending.remove(&id).expect("listed above");
                self.retry_or_fail(e, cfg, "timed out");
            }
        }
        match self.todo.pop_front() {
            Some(mut e) => {
                e.worker = worker;
                e.task.attempt = Attempt {
                    term: self.term,
                    n: e.task.attempt.n + 1,
                };
                e.dispatched_ms = now_ms;
                e.deadline_ms = now_ms + self.timeout_ms(cfg);
                let t = e.task.clone();
                self.pending.insert(t.id, e);
                Reply::Task(t)
            }
            None => Reply::Wait,
        }
    }

    /// After a restart: pending tasks get fresh deadlines from `now_ms`, so workers that
    /// still hold them can finish them.
    pub fn resume(&mut self, now_ms: u64, cfg: &MasterConfig) {
        let t = self.timeout_ms(cfg);
        for e in self.pending.values_mut() {
            e.dispatched_ms = now_ms;
            e.deadline_ms = now_ms + t;
        }
    }
}

#[cfg(test)]
#[path = "queues_tests.rs"]
mod tests;
