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
}

/// A task in a queue, with its retry bookkeeping.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskEntry {
    /// The task.
    pub task: Task,
    /// Times it timed out or was reported failed.
    pub num_timeout: u32,
    /// The worker holding it (pending only).
    pub worker: i32,
    /// When it was handed out.
    pub dispatched_ms: u64,
    /// When it times out.
    pub deadline_ms: u64,
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
    /// Tasks finished over the whole job.
    pub total_done: u64,
    /// True once every pass is complete.
    pub finished: bool,
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
                },
                num_timeout: 0,
                worker: -1,
                dispatched_ms: 0,
                deadline_ms: 0,
            })
            .collect();
    }

    /// The current timeout: the multiple of the moving average, at least the floor.
    pub fn timeout_ms(&self, cfg: &MasterConfig) -> u64 {
        ((self.avg_task_ms * cfg.timeout_multiplier) as u64).max(cfg.timeout_floor_ms)
    }

    /// `worker` finished task `id` at `now_ms`. A late finish of a task that timed out
    /// and waits in todo, or was handed to another worker, still counts (once).
    pub fn finish(&mut self, id: u64, now_ms: u64) -> bool {
        let entry = if let Some(e) = self.pending.remove(&id) {
            let took = now_ms.saturating_sub(e.dispatched_ms) as f64;
            self.avg_task_ms = if self.avg_task_ms == 0.0 {
                took
            } else {
                0.8 * self.avg_task_ms + 0.2 * took
            };
            e
        } else if let Some(i) = self.todo.iter().position(|e| e.task.id == id) {
            self.todo.remove(i).expect("position is valid")
        } else {
            return false;
        };
        self.done.push(entry);
        self.total_done += 1;
        true
    }

    fn retry_or_fail(&mut self, mut e: TaskEntry, cfg: &MasterConfig, why: &str) {
        e.num_timeout += 1;
        e.worker = -1;
        if e.num_timeout > cfg.max_retries {
            log::error!("task {} {why} {} times; giving up on it", e.task.id, e.num_timeout);
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

    /// A worker reported task `id` failed: treated like a timeout.
    pub fn fail(&mut self, id: u64, cfg: &MasterConfig) -> bool {
        match self.pending.remove(&id) {
            Some(e) => {
                self.retry_or_fail(e, cfg, "was reported failed");
                true
            }
            None => false,
        }
    }

    /// Moves pending tasks whose deadline passed back to todo (or to failed); returns
    /// their ids.
    pub fn tick(&mut self, now_ms: u64, cfg: &MasterConfig) -> Vec<u64> {
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, e)| now_ms >= e.deadline_ms)
            .map(|(&id, _)| id)
            .collect();
        for id in &late {
            let e = self.pending.remove(id).expect("listed above");
            self.retry_or_fail(e, cfg, "timed out");
        }
        late
    }

    /// Requeues at once every task `worker` holds (it was declared dead), without
    /// counting a timeout. Returns how many.
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
        match self.todo.pop_front() {
            Some(mut e) => {
                e.worker = worker;
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
mod tests {
    use super::*;

    fn chunks(n: usize) -> Vec<Chunk> {
        (0..n)
            .map(|i| Chunk {
                path: "f".into(),
                index: ChunkIndex {
                    idx: i,
                    offset: i as u64 * 100,
                    len: 80,
                    records: 10,
                },
            })
            .collect()
    }

    fn cfg(epochs: u64) -> MasterConfig {
        MasterConfig {
            chunks_per_task: 2,
            num_epochs: epochs,
            timeout_multiplier: 2.0,
            timeout_floor_ms: 100,
            max_retries: 2,
        }
    }

    fn task(r: Reply) -> Task {
        match r {
            Reply::Task(t) => t,
            other => panic!("expected a task, got {other:?}"),
        }
    }

    #[test]
    fn first_dataset_wins_and_tasks_group_chunks() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        assert_eq!(q.next(9, 0, &c), Reply::Wait, "no dataset yet");
        assert!(q.report_dataset(vec!["a".into()], chunks(5), &c));
        assert!(!q.report_dataset(vec!["b".into()], chunks(1), &c));
        assert_eq!(q.dataset.as_deref(), Some(&["a".to_string()][..]));
        assert_eq!(q.todo.len(), 3);
        assert_eq!(q.todo[2].task.chunks.len(), 1);
    }

    #[test]
    fn wait_while_others_hold_tasks_then_no_more() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(2), &c);
        let t = task(q.next(9, 0, &c));
        assert_eq!(q.next(11, 0, &c), Reply::Wait);
        assert!(q.finish(t.id, 50));
        assert!(!q.finish(t.id, 60), "a second finish is ignored");
        assert_eq!(q.next(11, 70, &c), Reply::NoMoreTasks);
        assert_eq!(q.total_done, 1);
    }

    #[test]
    fn timeouts_requeue_then_fail_above_the_threshold() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(2), &c);
        let t = task(q.next(9, 0, &c));
        assert!(q.tick(99, &c).is_empty());
        assert_eq!(q.tick(100, &c), vec![t.id]);
        assert_eq!(q.todo[0].num_timeout, 1);
        for round in 2..=3 {
            let again = task(q.next(11, 1000 * round, &c));
            assert_eq!(again.id, t.id);
            q.tick(1000 * round + 100, &c);
        }
        assert_eq!(q.failed.len(), 1, "3 timeouts > 2 retries");
        assert!(q.todo.is_empty());
        // the job still completes: failed tasks end the pass
        assert_eq!(q.next(9, 5000, &c), Reply::NoMoreTasks);
    }

    #[test]
    fn reported_failures_count_like_timeouts() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(2), &c);
        let t = task(q.next(9, 0, &c));
        assert!(q.fail(t.id, &c));
        assert!(!q.fail(t.id, &c), "not pending any more");
        assert_eq!(q.todo[0].num_timeout, 1);
    }

    #[test]
    fn timeout_follows_the_moving_average_with_a_floor() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(6), &c);
        assert_eq!(q.timeout_ms(&c), 100);
        let t = task(q.next(9, 0, &c));
        q.finish(t.id, 1000);
        assert_eq!(q.timeout_ms(&c), 2000);
        let t = task(q.next(9, 1000, &c));
        q.finish(t.id, 1500);
        // 0.8 * 1000 + 0.2 * 500 = 900
        assert_eq!(q.timeout_ms(&c), 1800);
        let t = task(q.next(9, 2000, &c));
        assert_eq!(q.pending[&t.id].deadline_ms, 3800);
    }

    #[test]
    fn dead_worker_tasks_are_requeued_at_once() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(6), &c);
        let a = task(q.next(9, 0, &c));
        let _b = task(q.next(11, 0, &c));
        assert_eq!(q.worker_dead(9), 1);
        assert_eq!(q.todo[0].task.id, a.id, "requeued first");
        assert_eq!(q.todo[0].num_timeout, 0, "a death is not the task's fault");
        assert_eq!(q.pending.len(), 1);
    }

    #[test]
    fn late_finish_of_a_requeued_task_counts_once() {
        let c = cfg(1);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(4), &c);
        let t = task(q.next(9, 0, &c));
        q.tick(100, &c);
        assert!(q.finish(t.id, 150), "finished while waiting in todo");
        assert!(q.todo.iter().all(|e| e.task.id != t.id));
        assert_eq!(q.done.len(), 1);
    }

    #[test]
    fn passes_repeat_every_task_with_new_ids() {
        let c = cfg(3);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(4), &c);
        let mut seen = Vec::new();
        let mut now = 0;
        loop {
            match q.next(9, now, &c) {
                Reply::Task(t) => {
                    seen.push((t.epoch, t.chunks[0].index.idx));
                    q.finish(t.id, now + 10);
                }
                Reply::Wait => panic!("single worker never waits"),
                Reply::NoMoreTasks => break,
            }
            now += 20;
        }
        assert_eq!(seen.len(), 6);
        for e in 0..3 {
            assert_eq!(
                seen.iter().filter(|s| s.0 == e).map(|s| s.1).collect::<Vec<_>>(),
                vec![0, 2]
            );
        }
    }
}
