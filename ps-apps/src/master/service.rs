//! The master with persistence: every request is applied to a copy of the queues, the
//! copy is saved to the store, and only then does it replace the queues and the reply
//! leave. A failed save discards the copy and answers with an error.

use super::codec::{decode_queues, encode_queues};
use super::config::MasterConfig;
use super::error::MasterError;
use super::queues::{Attempt, Chunk, Counted, Reply, TaskQueues};
use super::store::Store;
use super::wire::{MasterRequest, MasterResponse, QueueSnapshot};
use crate::recordio;
use std::collections::BTreeSet;
use std::path::Path;

/// The master: queues, settings and the store they are saved to.
pub struct Master {
    q: TaskQueues,
    cfg: MasterConfig,
    store: Box<dyn Store>,
    /// Workers declared dead: never handed a task (until a replacement takes the id).
    /// Not persisted: a restarted scheduler learns deaths from its own node table.
    dead: BTreeSet<i32>,
}

impl Master {
    /// A master resuming from `store` if it holds queues, else starting empty: see
    /// [`Master::recover`]. The configuration is validated first.
    pub fn new(cfg: MasterConfig, store: Box<dyn Store>, now_ms: u64) -> Result<Master, MasterError> {
        Master::recover(store, cfg, now_ms)
    }

    /// Resumes from the queues in `store` (nothing done is redone, nothing pending is
    /// lost: pending tasks keep their workers and get fresh deadlines from `now_ms`, so
    /// workers that still hold them can finish them), or starts empty if the store is
    /// empty. Corrupt stored bytes or an invalid configuration are an error.
    pub fn recover(mut store: Box<dyn Store>, cfg: MasterConfig, now_ms: u64) -> Result<Master, MasterError> {
        cfg.validate()?;
        let q = match store.load()? {
            Some(bytes) => {
                let mut q = decode_queues(&bytes)?;
                q.resume(now_ms, &cfg);
                log::info!(
                    "master resumed: pass {}, {} todo, {} pending, {} done, {} failed",
                    q.epoch + 1,
                    q.todo.len(),
                    q.pending.len(),
                    q.done.len(),
                    q.failed.len()
                );
                q
            }
            None => TaskQueues::default(),
        };
        Ok(Master {
            q,
            cfg,
            store,
            dead: BTreeSet::new(),
        })
    }

    /// The queues (read-only).
    pub fn queues(&self) -> &TaskQueues {
        &self.q
    }

    /// The settings.
    pub fn config(&self) -> &MasterConfig {
        &self.cfg
    }

    /// The queues at a glance (for the stats endpoint and progress lines).
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            todo: self.q.todo.len(),
            pending: self.q.pending.len(),
            done: self.q.done.len(),
            failed: self.q.failed.len(),
            epoch: self.q.epoch,
            num_epochs: self.cfg.num_epochs,
            avg_task_ms: self.q.avg_task_ms,
            total_done: self.q.total_done,
            tasks_per_epoch: self.q.template.len(),
            finished: self.q.finished,
            given_up: self.q.given_up.len(),
            skipped_records: self.q.skipped_records(),
        }
    }

    /// Applies `f` to a copy of the queues; if the copy differs it is saved to the
    /// store and only then adopted. On a failed save the copy is discarded (nothing
    /// changes) and the error is returned.
    fn change<T>(&mut self, f: impl FnOnce(&mut TaskQueues, &MasterConfig) -> T) -> Result<T, MasterError> {
        let mut copy = self.q.clone();
        let out = f(&mut copy, &self.cfg);
        if copy != self.q {
            self.store.save(&encode_queues(&copy)?)?;
            self.q = copy;
        }
        Ok(out)
    }

    /// Sets the dataset: indexes every file's chunks (headers only) and fills todo
    /// with tasks of `chunks_per_task` chunks, in file and chunk order. Only the first
    /// report is honoured: later ones return `Ok(false)` without reading the files. An
    /// unreadable or corrupt file, or a failed save, is an error and changes nothing.
    pub fn report_dataset(&mut self, paths: Vec<String>) -> Result<bool, MasterError> {
        if self.q.dataset.is_some() {
            return Ok(false);
        }
        let chunks = index_dataset(&paths)?;
        self.report_chunks(paths, chunks)
    }

    /// [`Master::report_dataset`] with the chunks already made (e.g. one per file of a
    /// directory dataset): todo is filled with tasks of `chunks_per_task` of them, in
    /// order. Only the first report is honoured.
    pub fn report_chunks(&mut self, paths: Vec<String>, chunks: Vec<Chunk>) -> Result<bool, MasterError> {
        if self.q.dataset.is_some() {
            return Ok(false);
        }
        let n = chunks.len();
        let taken = self.change(|q, c| q.report_dataset(paths, chunks, c))?;
        log::info!("dataset: {n} chunks, {} tasks per pass", self.q.template.len());
        Ok(taken)
    }

    /// `worker` reports the task it `finished` (if any) and asks for the next one at
    /// `now_ms`: a task, `Wait` (no dataset yet, or every remaining task is pending),
    /// or `NoMoreTasks` (every pass complete). Starts the next pass when the current
    /// one is complete. Persisted before returning; on a failed save nothing changes.
    ///
    /// A worker declared dead (a request it sent before dying, handled after its
    /// death) still gets its finished task counted, but is never handed a task: it
    /// gets `Wait`.
    pub fn get_task(&mut self, worker: i32, finished: Option<u64>, now_ms: u64) -> Result<Reply, MasterError> {
        self.get_task_with(worker, finished, now_ms, false)
    }

    /// [`Master::get_task`] for a worker that holds one task at a time and asks only
    /// once it finished or gave up its task (the training workers, through
    /// [`Master::handle`]): a task still pending on it is one whose handing-out reply
    /// it never got (the scheduler died before sending it, or the reply was lost). It
    /// goes back to the front of todo at once, without counting a timeout, rather than
    /// wait for its deadline.
    pub fn ask_for_task(&mut self, worker: i32, finished: Option<u64>, now_ms: u64) -> Result<Reply, MasterError> {
        self.get_task_with(worker, finished, now_ms, true)
    }

    fn get_task_with(
        &mut self,
        worker: i32,
        finished: Option<u64>,
        now_ms: u64,
        one_at_a_time: bool,
    ) -> Result<Reply, MasterError> {
        let dead = self.dead.contains(&worker);
        if dead {
            log::debug!("GetTask from dead worker {worker}: no task handed out");
        }
        self.change(|q, c| {
            if let Some(id) = finished {
                q.finish(id, now_ms);
            }
            let lost = if one_at_a_time { q.worker_dead(worker) } else { 0 };
            if lost > 0 {
                log::warn!("worker {worker} asked for a task while holding {lost}: requeued (its reply was lost)");
            }
            if dead {
                Reply::Wait
            } else {
                q.next(worker, now_ms, c)
            }
        })
    }

    /// Hand-outs from now on are made under `term` (the active scheduler's); taken
    /// into the state with its next change.
    pub fn set_term(&mut self, term: u64) {
        self.q.term = term;
    }

    /// `worker` trained `attempt` of `task` at `now_ms`: whether the task counts from
    /// it (see [`TaskQueues::finish_attempt`]). Persisted before returning.
    pub fn finish_attempt(
        &mut self,
        worker: i32,
        task: u64,
        attempt: Attempt,
        now_ms: u64,
    ) -> Result<Counted, MasterError> {
        self.change(|q, c| {
            let counted = q.finish_attempt(worker, task, attempt, now_ms);
            if c.planted.count_every_attempt && counted == Counted::Not && q.done.iter().any(|e| e.task.id == task) {
                return Counted::Now;
            }
            counted
        })
    }

    /// Replaces the queues with the stored queues `bytes` (the state a scheduler
    /// taking over was sent), resumed at `now_ms` as [`Master::recover`] resumes:
    /// a scheduler that acted before and takes over again goes on from the cluster's
    /// state, not its own older one. A state that counted fewer finished tasks than
    /// these queues is older than them (every finish is saved, through the standbys,
    /// before it counts): it is not taken, so a finish counted since is never undone
    /// and its task never trained again. Nothing is saved; corrupt bytes change
    /// nothing.
    pub fn resume_from(&mut self, bytes: &[u8], now_ms: u64) -> Result<(), MasterError> {
        let mut q = decode_queues(bytes)?;
        if q.total_done < self.q.total_done {
            log::info!(
                "master: the state taken over with counted {} finished tasks, these queues {}: kept these",
                q.total_done,
                self.q.total_done
            );
            return Ok(());
        }
        q.resume(now_ms, &self.cfg);
        log::info!(
            "master resumed from the replicated state: pass {}, {} todo, {} pending, {} done",
            q.epoch + 1,
            q.todo.len(),
            q.pending.len(),
            q.done.len()
        );
        self.q = q;
        self.dead.clear();
        Ok(())
    }

    /// Records that `task` was finished at `now_ms` (see [`TaskQueues::finish`])
    /// without handing out another; returns whether it changed anything. Persisted
    /// before returning.
    pub fn finish_task(&mut self, task: u64, now_ms: u64) -> Result<bool, MasterError> {
        self.change(|q, _| q.finish(task, now_ms))
    }

    /// `worker` leaves the job on its own: `finished` (if any) counts as in
    /// [`Master::get_task`], every task it still holds is requeued at once (front of
    /// todo, no timeout counted); returns how many. It is handed nothing more (the
    /// goodbye reaching the node table marks it gone); a new worker may take its id.
    /// Persisted before returning.
    pub fn leaving(&mut self, worker: i32, finished: Option<u64>, now_ms: u64) -> Result<usize, MasterError> {
        self.change(|q, _| {
            if let Some(id) = finished {
                q.finish(id, now_ms);
            }
            q.worker_dead(worker)
        })
    }

    /// True when every pass is complete: nothing waits and nothing is handed out in
    /// the last pass (also before a worker has asked and seen `NoMoreTasks`).
    pub fn complete(&self) -> bool {
        let q = &self.q;
        q.finished
            || (q.dataset.is_some() && q.todo.is_empty() && q.pending.is_empty() && q.epoch + 1 >= self.cfg.num_epochs)
    }

    /// `worker` could not train `task`: treated like a timeout (see
    /// [`TaskQueues::fail`]). Returns whether the report was taken (the worker held it).
    pub fn task_failed(&mut self, worker: i32, task: u64) -> Result<bool, MasterError> {
        self.change(|q, c| q.fail(worker, task, c))
    }

    /// [`Master::task_failed`] with the worker's reason, kept if the task is given up.
    pub fn task_failed_because(&mut self, worker: i32, task: u64, why: &str) -> Result<bool, MasterError> {
        self.change(|q, c| q.fail_because(worker, task, why, c))
    }

    /// Handles a request from node `worker` at `now_ms`: the whole protocol for the
    /// network shell, which only has to decode the request and send the response. Any
    /// error (unreadable dataset, failed save) becomes `MasterResponse::Error` and
    /// leaves the queues unchanged.
    pub fn handle(&mut self, worker: i32, req: MasterRequest, now_ms: u64) -> MasterResponse {
        let result = match req {
            MasterRequest::ReportDataset { paths } => self.report_dataset(paths).map(|_| MasterResponse::Ok),
            MasterRequest::GetTask { finished, .. } => self.ask_for_task(worker, finished, now_ms).map(|r| match r {
                Reply::Task(t) => MasterResponse::Task(t),
                Reply::Wait => MasterResponse::Wait,
                Reply::NoMoreTasks => MasterResponse::NoMoreTasks,
            }),
            MasterRequest::TaskFailed { task } => self.task_failed(worker, task).map(|_| MasterResponse::Ok),
            MasterRequest::TaskUnreadable { task, error } => {
                let why = format!("could not be read ({error})");
                self.change(|q, c| q.fail_because(worker, task, &why, c))
                    .map(|_| MasterResponse::Ok)
            }
            MasterRequest::Finish { task, attempt, .. } => self
                .finish_attempt(worker, task, attempt, now_ms)
                .map(|c| MasterResponse::Counted(c.counts())),
            MasterRequest::Snapshot => Ok(MasterResponse::Snapshot(self.snapshot())),
            MasterRequest::Leaving { finished, .. } => self.leaving(worker, finished, now_ms).map(|n| {
                log::info!("worker {worker} leaves the job: {n} of its tasks requeued");
                MasterResponse::Ok
            }),
        };
        result.unwrap_or_else(|e| {
            e.log(&format!("answering node {worker}"));
            MasterResponse::Error(e.to_string())
        })
    }

    /// Times out the pending tasks that are late at `now_ms` (see
    /// [`TaskQueues::late`]: back to todo with the count raised, or to failed above the
    /// threshold); returns their ids. Cheap when nothing is late (no copy, no save).
    pub fn tick(&mut self, now_ms: u64) -> Result<Vec<u64>, MasterError> {
        if self.q.late(now_ms, &self.cfg).is_empty() {
            return Ok(Vec::new());
        }
        self.change(|q, c| q.tick(now_ms, c))
    }

    /// `worker` was declared dead: it is handed no task from now on, and every task it
    /// holds is requeued at once, at the front of todo and without counting a timeout.
    /// Returns how many. Idempotent.
    pub fn worker_dead(&mut self, worker: i32) -> Result<usize, MasterError> {
        self.dead.insert(worker);
        if self.q.pending.values().all(|e| e.worker != worker) {
            return Ok(0);
        }
        self.change(|q, _| q.worker_dead(worker))
    }
}

impl Master {
    /// The end-of-job report: tasks trained, and every task given up on with its pass,
    /// records and reason; one line each.
    pub fn final_report(&self) -> String {
        let q = &self.q;
        let mut s = format!(
            "job complete: {} tasks trained, {} given up, {} records skipped",
            q.total_done,
            q.given_up.len(),
            q.skipped_records()
        );
        for g in &q.given_up {
            s += &format!(
                "\n  task {} (pass {}): {} records skipped: {}",
                g.task,
                g.epoch + 1,
                g.records,
                g.reason
            );
        }
        s
    }

    /// What the node table says of the sender of a request, before it is handled: a
    /// dead sender is treated as [`Master::worker_dead`] (its death may be handled
    /// after its last messages, or before), a live one whose id was declared dead is
    /// its replacement and may be handed tasks again.
    pub fn sender_liveness(&mut self, worker: i32, alive: bool) -> Result<(), MasterError> {
        if !alive {
            let n = self.worker_dead(worker)?;
            if n > 0 {
                log::warn!("worker {worker} is dead: {n} of its tasks requeued");
            }
        } else if self.dead.remove(&worker) {
            log::info!("worker {worker} was replaced: it gets tasks again");
        }
        Ok(())
    }

    /// True if `worker` was declared dead (and not replaced).
    pub fn is_dead(&self, worker: i32) -> bool {
        self.dead.contains(&worker)
    }
}

/// Indexes every file of the dataset into chunks, in file then chunk order.
pub fn index_dataset(paths: &[String]) -> Result<Vec<Chunk>, MasterError> {
    let mut out = Vec::new();
    for p in paths {
        for index in recordio::index(Path::new(p))? {
            out.push(Chunk { path: p.clone(), index });
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
