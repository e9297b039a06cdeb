//! The master with persistence: every request is applied to a copy of the queues, the
//! copy is saved to the store, and only then does it replace the queues and the reply
//! leave (seed 000). A failed save discards the copy and answers with an error.

use super::config::MasterConfig;
use super::queues::{Chunk, Reply, Task, TaskQueues};
use super::store::Store;
use crate::recordio;
use bincode::Options;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::Path;

/// What a worker tells about the task it finished (for statistics).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    /// Examples trained on.
    pub examples: u64,
    /// Sum of their losses.
    pub loss_sum: f64,
    /// Correct predictions among them (before the update).
    pub correct: u64,
    /// Model version the worker last saw.
    pub version: u64,
}

/// A request to the master.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MasterRequest {
    /// The dataset's RecordIO files; only the first report counts.
    ReportDataset {
        /// File paths.
        paths: Vec<String>,
    },
    /// Report the finished task (if any) and get the next.
    GetTask {
        /// The task just finished.
        finished: Option<u64>,
        /// Its statistics.
        report: Option<TaskReport>,
    },
    /// The task could not be trained.
    TaskFailed {
        /// The task.
        task: u64,
    },
    /// The queues' sizes.
    Snapshot,
}

/// The queues at a glance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    /// Waiting.
    pub todo: usize,
    /// Handed out.
    pub pending: usize,
    /// Finished this pass.
    pub done: usize,
    /// Given up this pass.
    pub failed: usize,
    /// Current pass.
    pub epoch: u64,
    /// Passes in all.
    pub num_epochs: u64,
    /// Moving average task time.
    pub avg_task_ms: f64,
    /// Tasks finished over the job.
    pub total_done: u64,
    /// Tasks in one pass.
    pub tasks_per_epoch: usize,
    /// Every pass is complete.
    pub finished: bool,
}

/// The master's reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MasterResponse {
    /// Done.
    Ok,
    /// Train on this task.
    Task(Task),
    /// Ask again shortly.
    Wait,
    /// The job is complete.
    NoMoreTasks,
    /// The queues.
    Snapshot(QueueSnapshot),
    /// The request failed; nothing changed.
    Error(String),
}

fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_limit(1 << 30)
}

/// The master: queues, settings and the store they are saved to.
pub struct Master {
    q: TaskQueues,
    cfg: MasterConfig,
    store: Box<dyn Store>,
}

/// Serializes the queues (bincode, then gzip, as the seed's gob + gzip).
pub fn encode_queues(q: &TaskQueues) -> Vec<u8> {
    let raw = codec().serialize(q).expect("queues always serialize");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

/// Reads queues written by [`encode_queues`]; corrupt bytes are an error.
pub fn decode_queues(bytes: &[u8]) -> Result<TaskQueues, String> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(1 << 30)
        .read_to_end(&mut raw)
        .map_err(|e| format!("the stored task queues are corrupt: {e}"))?;
    codec()
        .deserialize(&raw)
        .map_err(|e| format!("the stored task queues are corrupt: {e}"))
}

impl Master {
    /// A master resuming from `store` if it holds queues (pending tasks get fresh
    /// deadlines from `now_ms`), else starting empty.
    pub fn new(cfg: MasterConfig, mut store: Box<dyn Store>, now_ms: u64) -> Result<Master, String> {
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
        Ok(Master { q, cfg, store })
    }

    /// The queues (read-only).
    pub fn queues(&self) -> &TaskQueues {
        &self.q
    }

    /// The queues at a glance.
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
        }
    }

    fn commit(&mut self, copy: TaskQueues) -> Result<(), String> {
        if copy != self.q {
            self.store.save(&encode_queues(&copy))?;
            self.q = copy;
        }
        Ok(())
    }

    /// Applies `f` to a copy, persists it, then adopts it; on a failed save nothing
    /// changes and the error is returned.
    fn change<T>(&mut self, f: impl FnOnce(&mut TaskQueues, &MasterConfig) -> T) -> Result<T, String> {
        let mut copy = self.q.clone();
        let out = f(&mut copy, &self.cfg);
        self.commit(copy)?;
        Ok(out)
    }

    /// Handles a request from `worker` at `now_ms`.
    pub fn handle(&mut self, worker: i32, req: MasterRequest, now_ms: u64) -> MasterResponse {
        let result = match req {
            MasterRequest::ReportDataset { paths } => {
                if self.q.dataset.is_some() {
                    return MasterResponse::Ok;
                }
                match index_dataset(&paths) {
                    Ok(chunks) => {
                        let n = chunks.len();
                        self.change(|q, c| q.report_dataset(paths, chunks, c)).map(|taken| {
                            if taken {
                                log::info!("dataset: {n} chunks, {} tasks per pass", self.q.template.len());
                            }
                            MasterResponse::Ok
                        })
                    }
                    Err(e) => Err(e),
                }
            }
            MasterRequest::GetTask { finished, .. } => self.change(|q, c| {
                if let Some(id) = finished {
                    q.finish(id, now_ms);
                }
                match q.next(worker, now_ms, c) {
                    Reply::Task(t) => MasterResponse::Task(t),
                    Reply::Wait => MasterResponse::Wait,
                    Reply::NoMoreTasks => MasterResponse::NoMoreTasks,
                }
            }),
            MasterRequest::TaskFailed { task } => self.change(|q, c| {
                q.fail(task, c);
                MasterResponse::Ok
            }),
            MasterRequest::Snapshot => Ok(MasterResponse::Snapshot(self.snapshot())),
        };
        result.unwrap_or_else(|e| {
            log::error!("master: {e}");
            MasterResponse::Error(e)
        })
    }

    /// Times out late tasks; returns their ids.
    pub fn tick(&mut self, now_ms: u64) -> Result<Vec<u64>, String> {
        if self.q.pending.values().all(|e| e.deadline_ms > now_ms) {
            return Ok(Vec::new());
        }
        self.change(|q, c| q.tick(now_ms, c))
    }

    /// Requeues the tasks of a dead worker; returns how many.
    pub fn worker_dead(&mut self, worker: i32) -> Result<usize, String> {
        self.change(|q, _| q.worker_dead(worker))
    }
}

/// Indexes every file of the dataset into chunks, in order.
pub fn index_dataset(paths: &[String]) -> Result<Vec<Chunk>, String> {
    let mut out = Vec::new();
    for p in paths {
        for index in recordio::index(Path::new(p)).map_err(|e| e.to_string())? {
            out.push(Chunk { path: p.clone(), index });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::store::{FileStore, MemStore};
    use super::*;
    use crate::recordio::{Compressor, Writer};

    fn dataset(dir: &Path, files: usize, records: usize) -> Vec<String> {
        (0..files)
            .map(|f| {
                let p = dir.join(format!("part-{f}.rio"));
                let mut w = Writer::create(&p, Compressor::Snappy, 10, 1 << 20).unwrap();
                for r in 0..records {
                    w.write(format!("{f}:{r}").as_bytes()).unwrap();
                }
                w.finish().unwrap();
                p.display().to_string()
            })
            .collect()
    }

    fn cfg(epochs: u64) -> MasterConfig {
        MasterConfig {
            chunks_per_task: 2,
            num_epochs: epochs,
            timeout_floor_ms: 1000,
            ..Default::default()
        }
    }

    fn records_of(t: &Task) -> Vec<String> {
        t.chunks
            .iter()
            .flat_map(|c| recordio::read_chunk(Path::new(&c.path), &c.index).unwrap())
            .map(|r| String::from_utf8(r).unwrap())
            .collect()
    }

    #[test]
    fn four_workers_three_passes_see_every_record_once_per_pass() {
        let d = tempfile::tempdir().unwrap();
        let paths = dataset(d.path(), 3, 95);
        let mut m = Master::new(cfg(3), Box::new(MemStore::default()), 0).unwrap();
        assert_eq!(
            m.handle(9, MasterRequest::ReportDataset { paths: paths.clone() }, 0),
            MasterResponse::Ok
        );
        let mut seen: Vec<Vec<String>> = vec![Vec::new(); 3];
        let workers = [9, 11, 13, 15];
        let mut holding: Vec<Option<u64>> = vec![None; 4];
        let mut now = 0;
        let mut finished = 0;
        while finished < 4 {
            finished = 0;
            for (i, &w) in workers.iter().enumerate() {
                now += 7;
                match m.handle(
                    w,
                    MasterRequest::GetTask {
                        finished: holding[i].take(),
                        report: None,
                    },
                    now,
                ) {
                    MasterResponse::Task(t) => {
                        seen[t.epoch as usize].extend(records_of(&t));
                        holding[i] = Some(t.id);
                    }
                    MasterResponse::Wait => {}
                    MasterResponse::NoMoreTasks => finished += 1,
                    other => panic!("{other:?}"),
                }
            }
        }
        for pass in seen {
            let mut sorted = pass.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!((pass.len(), sorted.len()), (285, 285));
        }
    }

    #[test]
    fn restart_resumes_without_redoing_or_losing_tasks() {
        let d = tempfile::tempdir().unwrap();
        let paths = dataset(d.path(), 2, 100);
        let state = d.path().join("master.state");
        let mut m = Master::new(cfg(1), Box::new(FileStore::new(&state)), 0).unwrap();
        m.handle(9, MasterRequest::ReportDataset { paths }, 0);
        let MasterResponse::Task(a) = m.handle(
            9,
            MasterRequest::GetTask {
                finished: None,
                report: None,
            },
            1,
        ) else {
            panic!()
        };
        let MasterResponse::Task(b) = m.handle(
            11,
            MasterRequest::GetTask {
                finished: None,
                report: None,
            },
            2,
        ) else {
            panic!()
        };
        // a is finished (and persisted), b is pending when the master dies
        let MasterResponse::Task(c) = m.handle(
            9,
            MasterRequest::GetTask {
                finished: Some(a.id),
                report: None,
            },
            3,
        ) else {
            panic!()
        };
        drop(m);
        let mut m = Master::new(cfg(1), Box::new(FileStore::new(&state)), 10_000).unwrap();
        let s = m.snapshot();
        assert_eq!((s.done, s.pending, s.todo), (1, 2, 7));
        assert!(m.queues().pending.contains_key(&b.id) && m.queues().pending.contains_key(&c.id));
        // the worker holding b finishes it after the restart
        let r = m.handle(
            11,
            MasterRequest::GetTask {
                finished: Some(b.id),
                report: None,
            },
            10_001,
        );
        assert!(matches!(r, MasterResponse::Task(t) if t.id != a.id && t.id != b.id && t.id != c.id));
        assert_eq!(m.snapshot().done, 2);
        // a second report of the dataset is ignored
        assert_eq!(
            m.handle(
                9,
                MasterRequest::ReportDataset {
                    paths: vec!["other".into()]
                },
                10_002
            ),
            MasterResponse::Ok
        );
    }

    #[test]
    fn failed_save_changes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let paths = dataset(d.path(), 1, 50);
        let store = MemStore::default();
        let mut m = Master::new(cfg(1), Box::new(store.clone()), 0).unwrap();
        m.handle(9, MasterRequest::ReportDataset { paths }, 0);
        let before = m.queues().clone();
        *store.fail.lock() = true;
        let r = m.handle(
            9,
            MasterRequest::GetTask {
                finished: None,
                report: None,
            },
            1,
        );
        assert!(matches!(r, MasterResponse::Error(e) if e.contains("unavailable")));
        assert_eq!(m.queues(), &before);
        *store.fail.lock() = false;
        assert!(matches!(
            m.handle(
                9,
                MasterRequest::GetTask {
                    finished: None,
                    report: None
                },
                2
            ),
            MasterResponse::Task(_)
        ));
        assert_eq!(decode_queues(store.data.lock().as_ref().unwrap()).unwrap(), *m.queues());
    }

    #[test]
    fn corrupt_state_and_missing_files_are_clear_errors() {
        let store = MemStore::default();
        *store.data.lock() = Some(b"garbage".to_vec());
        let e = Master::new(cfg(1), Box::new(store), 0).err().unwrap();
        assert!(e.contains("corrupt"), "{e}");
        let mut m = Master::new(cfg(1), Box::new(MemStore::default()), 0).unwrap();
        let r = m.handle(
            9,
            MasterRequest::ReportDataset {
                paths: vec!["/no/such/file.rio".into()],
            },
            0,
        );
        assert!(matches!(r, MasterResponse::Error(e) if e.contains("/no/such/file.rio")));
        assert_eq!(
            m.handle(
                9,
                MasterRequest::GetTask {
                    finished: None,
                    report: None
                },
                1
            ),
            MasterResponse::Wait
        );
    }
}
