//! The scheduler driven deterministically: in-memory stores, small datasets on disk,
//! time passed in.

use super::api::route;
use super::scheduler::{FairMode, JobScheduler, SchedulerConfig, StoreFactory};
use super::table::JobState;
use super::wire::{Finished, JobsRequest, JobsResponse, Prediction};
use crate::master::{MemStore, Store, Task, TaskReport};
use crate::model::Model;
use crate::pyrunner::{ModelState, ModelStatus};
use crate::recordio::{Compressor, Example, Features, Writer};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub(super) type Stores = Arc<Mutex<HashMap<String, MemStore>>>;

fn factory(stores: &Stores) -> StoreFactory {
    let s = Arc::clone(stores);
    Box::new(move |name| Box::new(s.lock().entry(name.to_string()).or_default().clone()) as Box<dyn Store>)
}

/// `n` examples of 2 features in chunks of 4; label i % 2.
fn dataset(dir: &Path, n: usize) -> String {
    let p = dir.join("data.rio");
    let mut w = Writer::create(&p, Compressor::None, 4, 1 << 20).unwrap();
    for i in 0..n {
        let e = Example {
            label: (i % 2) as f32,
            features: Features::Dense(vec![i as f32, 1.0]),
        };
        w.write(&e.encode()).unwrap();
    }
    w.finish().unwrap();
    p.display().to_string()
}

pub(super) fn sched(dir: &Path, stores: &Stores, servers: usize) -> JobScheduler {
    let cfg = SchedulerConfig {
        outputs_dir: dir.to_path_buf(),
        paths: Default::default(),
        mode: FairMode::Local,
        realloc_every_ms: 1000,
        num_servers: servers,
        hysteresis_ws: 2.0,
        cost_tau_ms: 20_000,
    };
    JobScheduler::new(cfg, factory(stores), 0).unwrap()
}

/// A worker asks for work, its runner holding no model, knowing the list of jobs to warm.
fn next(s: &mut JobScheduler, w: i32, finished: Option<Finished>, now: u64) -> JobsResponse {
    let catalog = s.catalog;
    s.handle(
        w,
        JobsRequest::Next {
            finished,
            models: vec![],
            catalog,
        },
        now,
    )
}

fn infer_task(r: JobsResponse) -> (u32, Task) {
    match r {
        JobsResponse::Infer { job, task, .. } => (job, task),
        other => panic!("expected an inference task, got {other:?}"),
    }
}

/// Predicts class = label for every record of the task (read back from disk).
fn done(job: u32, t: &Task) -> Finished {
    let ex = crate::train::worker::task_examples(t).unwrap();
    Finished {
        job,
        task: t.id,
        report: TaskReport::default(),
        predictions: Some(
            ex.iter()
                .map(|e| Prediction {
                    class: e.label as u32,
                    prob: 0.9,
                    label: e.label,
                })
                .collect(),
        ),
        rows: None,
        took_ms: 0,
    }
}

fn infer_body(dir: &Path, data: &str) -> String {
    let model = dir.join("m.model");
    let m = Model::Softmax { dim: 2, classes: 2 };
    crate::model::save(&model, &m, &m.init(1)).unwrap();
    serde_json::json!({"kind": "infer", "model": model, "data": data, "out": dir.join("out.csv")}).to_string()
}

#[test]
fn inference_job_survives_a_restart_and_writes_every_record_once() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 12); // 3 chunks of 4
    let mut s = sched(d.path(), &stores, 1);
    let v = s.submit(&infer_body(d.path(), &data), 10).unwrap();
    assert_eq!(
        (v.id.as_str(), v.state, v.figures.tasks_total),
        ("j1", JobState::Queued, 3)
    );
    let (j, t0) = infer_task(next(&mut s, 9, None, 20));
    let (_, t1) = infer_task(next(&mut s, 11, None, 20));
    assert_eq!(s.view(j, 20).unwrap().state, JobState::Running);
    assert_eq!(s.view(j, 20).unwrap().workers, 2);
    let (_, t2) = infer_task(next(&mut s, 9, Some(done(j, &t0)), 120));
    // the scheduler is killed and restarted: the job, its queue and batch 0 survive
    drop(s);
    let mut s = sched(d.path(), &stores, 1);
    let v = s.view(j, 200).unwrap();
    assert_eq!((v.state, v.figures.tasks_done), (JobState::Running, 1));
    // batch 1 is finished twice (a late duplicate): kept once
    assert!(matches!(next(&mut s, 11, Some(done(j, &t1)), 300), JobsResponse::Wait));
    assert!(matches!(next(&mut s, 11, Some(done(j, &t1)), 300), JobsResponse::Wait));
    assert!(matches!(next(&mut s, 9, Some(done(j, &t2)), 400), JobsResponse::Wait));
    let v = s.view(j, 400).unwrap();
    assert_eq!((v.state, v.accuracy, v.progress), (JobState::Done, Some(1.0), 1.0));
    let out = std::fs::read_to_string(d.path().join("out.csv")).unwrap();
    let idx: Vec<&str> = out.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(idx, (0..12).map(|i| i.to_string()).collect::<Vec<_>>());
    assert_eq!(s.table().active().count(), 0);
}

#[test]
fn worker_death_requeues_its_batch_and_reallocates() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 8);
    let mut s = sched(d.path(), &stores, 1);
    for w in [9, 11, 13] {
        assert!(matches!(next(&mut s, w, None, 0), JobsResponse::Wait), "no job yet");
    }
    let a = s.submit(&infer_body(d.path(), &data), 1).unwrap();
    let b = s.submit(&infer_body(d.path(), &data), 2).unwrap();
    let workers = |s: &mut JobScheduler| (s.view(1, 3).unwrap().workers, s.view(2, 3).unwrap().workers);
    assert_eq!((a.id.as_str(), b.id.as_str()), ("j1", "j2"));
    assert_eq!(workers(&mut s), (2, 1), "3 workers, no rates yet: 2 / 1");
    let held: Vec<(i32, u32, Task)> = [9, 11, 13]
        .iter()
        .map(|&w| {
            let (j, t) = infer_task(next(&mut s, w, None, 10));
            (w, j, t)
        })
        .collect();
    let (dead, job, task) = (held[0].0, held[0].1, held[0].2.id);
    s.worker_dead(dead, 50);
    assert_eq!(workers(&mut s), (1, 1));
    // the dead worker's batch goes to the next worker of its job
    let (other, _, its) = held.iter().find(|h| h.1 == job && h.0 != dead).unwrap();
    let (j, t) = infer_task(next(&mut s, *other, Some(done(job, its)), 60));
    assert_eq!((j, t.id), (job, task), "the requeued batch comes first");
    assert!(s.worker_views().iter().all(|w| w.id != dead));
}

#[test]
fn training_jobs_wait_for_every_server() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 8);
    let mut s = sched(d.path(), &stores, 2);
    let body = serde_json::json!({"kind": "train", "train": data, "epochs": 1}).to_string();
    let v = s.submit(&body, 0).unwrap();
    assert!(matches!(next(&mut s, 9, None, 1), JobsResponse::Wait));
    let JobsResponse::Servers(list) = s.handle(8, JobsRequest::ServerPoll { hosting: vec![] }, 1) else {
        panic!("servers' answer")
    };
    assert_eq!((list.len(), list[0].workers), (1, 1));
    s.handle(8, JobsRequest::ServerPoll { hosting: vec![1] }, 2);
    assert!(
        matches!(next(&mut s, 9, None, 3), JobsResponse::Wait),
        "one of two servers"
    );
    s.handle(10, JobsRequest::ServerPoll { hosting: vec![1] }, 4);
    let mut tasks = 0;
    let mut finished = None;
    loop {
        match next(&mut s, 9, finished.take(), 5) {
            JobsResponse::Train { task, .. } => {
                tasks += 1;
                finished = Some(Finished {
                    job: 1,
                    task: task.id,
                    report: TaskReport::default(),
                    predictions: None,
                    rows: None,
                    took_ms: 0,
                });
            }
            JobsResponse::Finalize { job, .. } => {
                assert_eq!(job, 1);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(tasks, 2);
    s.handle(
        9,
        JobsRequest::Finalized {
            job: 1,
            accuracy: Some(0.5),
            error: None,
        },
        9,
    );
    let v2 = s.view(1, 10).unwrap();
    assert_eq!(
        (v.id.as_str(), v2.state, v2.accuracy),
        ("j1", JobState::Done, Some(0.5))
    );
    let JobsResponse::Servers(list) = s.handle(8, JobsRequest::ServerPoll { hosting: vec![1] }, 11) else {
        panic!("servers' answer")
    };
    assert!(list.is_empty(), "servers drop the ended job's shards");
}

#[test]
fn http_api_statuses_and_reasons() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 8);
    let mut s = sched(d.path(), &stores, 1);
    let mut call = |m: &str, p: &str, b: &str| route(&mut s, m, p, b, 5).unwrap();
    for (body, code) in [
        ("{", 400),
        (r#"{"kind":"dance"}"#, 400),
        (r#"{"kind":"train","train":"/no.rio"}"#, 400),
    ] {
        let (c, _, text) = call("POST", "/jobs", body);
        assert_eq!(c, code, "{body}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(!v["error"].as_str().unwrap().contains('\n'));
    }
    let (c, _, text) = call("POST", "/jobs", &infer_body(d.path(), &data));
    assert_eq!(c, 201, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for key in [
        "id",
        "kind",
        "state",
        "workers",
        "progress",
        "queries_per_s",
        "accuracy",
        "error",
    ] {
        assert!(v.get(key).is_some(), "job object lacks {key}: {text}");
    }
    assert_eq!((v["id"].as_str(), v["state"].as_str()), (Some("j1"), Some("queued")));
    let (c, _, text) = call("GET", "/jobs", "");
    assert_eq!(
        (
            c,
            serde_json::from_str::<serde_json::Value>(&text).unwrap()[0]["id"].as_str()
        ),
        (200, Some("j1"))
    );
    assert_eq!(call("GET", "/jobs/j1", "").0, 200);
    assert_eq!(call("GET", "/jobs/j7", "").0, 404);
    assert_eq!(call("GET", "/jobs/zz", "").0, 404);
    assert_eq!(call("PUT", "/jobs", "").0, 405);
    let (c, _, text) = call("DELETE", "/jobs/j1", "");
    assert!(c == 200 && text.contains("\"cancelled\""), "{text}");
    assert_eq!(call("DELETE", "/jobs/j1", "").0, 409);
    assert_eq!(call("GET", "/", "").0, 200);
    assert!(
        route(&mut s, "GET", "/stats.json", "", 5).is_none(),
        "falls through to the stats routes"
    );
}

/// A scheduler (one server) whose store holds one inference job, j1, submitted
/// through the HTTP API at time 5: the temporary directory, the stores, the dataset.
fn one_job_submitted() -> (tempfile::TempDir, Stores, String, JobScheduler) {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 8);
    let mut s = sched(d.path(), &stores, 1);
    let (c, _, text) = route(&mut s, "POST", "/jobs", &infer_body(d.path(), &data), 5).unwrap();
    assert_eq!(c, 201, "{text}");
    (d, stores, data, s)
}

/// The status follows the kind of the error that came out of the table or the
/// store, not its words: the table's refusal to change an ended job is a conflict, a
/// store that cannot save is the scheduler's failure.
#[test]
fn a_tables_refusal_is_a_conflict_and_a_failed_save_an_internal_error() {
    let (d, stores, data, mut s) = one_job_submitted();
    s.cancel(1, 6).unwrap();
    let e = s.change(|t| t.finish(1, None, 7)).unwrap_err();
    assert!(matches!(e, super::error::JobsError::Final { num: 1, .. }), "{e}");
    assert_eq!(
        (e.http_status(), e.to_string().as_str()),
        (409, "job j1 is already cancelled")
    );
    *stores.lock().get("jobs").unwrap().fail.lock() = true;
    let (c, _, text) = route(&mut s, "POST", "/jobs", &infer_body(d.path(), &data), 8).unwrap();
    assert_eq!(c, 500, "{text}");
    assert!(text.contains("the store is unavailable"), "{text}");
}

/// A submission whose save the store refuses because the scheduler stepped down is
/// answered 503 (the active scheduler takes it), not 500, and leaves no job behind.
#[test]
fn a_submission_refused_by_a_step_down_is_unavailable_and_changes_nothing() {
    let (d, stores, data, mut s) = one_job_submitted();
    *stores.lock().get("jobs").unwrap().stepped_down.lock() = true;
    let (c, _, text) = route(&mut s, "POST", "/jobs", &infer_body(d.path(), &data), 8).unwrap();
    assert_eq!(c, 503, "{text}");
    assert!(text.contains("not active"), "{text}");
    assert_eq!(s.table().jobs.len(), 1, "the refused job is not in the table");
}

#[test]
fn a_worker_moved_to_another_job_finishes_its_batch_first() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 16);
    let mut s = sched(d.path(), &stores, 1);
    s.submit(&infer_body(d.path(), &data), 1).unwrap();
    let (j1, t1) = infer_task(next(&mut s, 9, None, 10));
    let (_, t2) = infer_task(next(&mut s, 11, None, 10));
    // a second job arrives: one of the two workers is moved while it holds a batch
    s.submit(&infer_body(d.path(), &data), 20).unwrap();
    let moved = s
        .worker_views()
        .into_iter()
        .find(|w| w.job.as_deref() == Some("j2"))
        .unwrap();
    assert_eq!(
        moved.task.as_deref().map(|t| t.starts_with("j1 task")),
        Some(true),
        "{moved:?}"
    );
    let (held, other) = if moved.id == 9 { (t1, t2) } else { (t2, t1) };
    // its next request reports the old job's batch (recorded) and gets a task of job 2
    let (j, _) = infer_task(next(&mut s, moved.id, Some(done(j1, &held)), 30));
    assert_eq!(j, 2);
    assert_eq!(
        s.view(j1, 30).unwrap().figures.tasks_done,
        1,
        "the old job kept the finished batch"
    );
    let stay = if moved.id == 9 { 11 } else { 9 };
    let (j, _) = infer_task(next(&mut s, stay, Some(done(j1, &other)), 40));
    assert_eq!((j, s.view(j1, 40).unwrap().figures.tasks_done), (j1, 2));
}

#[test]
fn an_ended_job_keeps_its_true_figures() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 12); // 3 chunks of 4
    let mut s = sched(d.path(), &stores, 1);
    s.submit(&infer_body(d.path(), &data), 1_000).unwrap();
    let (j, t0) = infer_task(next(&mut s, 9, None, 1_000));
    let (_, t1) = infer_task(next(&mut s, 9, Some(done(j, &t0)), 1_500));
    let (_, t2) = infer_task(next(&mut s, 9, Some(done(j, &t1)), 2_000));
    let live = s.view(j, 2_000).unwrap().figures;
    assert_eq!((live.tasks_done, live.tasks_total, live.tasks_dispatched), (2, 3, 3));
    assert!(
        live.queries_per_s > 0.0 && live.seconds_per_query == Some(0.5),
        "{live:?}"
    );
    assert!(matches!(next(&mut s, 9, Some(done(j, &t2)), 3_000), JobsResponse::Wait));
    // long after the end, from the table: what it did, not zeros
    drop(s);
    let mut s = sched(d.path(), &stores, 1);
    let v = s.view(j, 60_000).unwrap();
    assert_eq!(v.state, JobState::Done);
    let f = v.figures;
    assert_eq!(
        (f.tasks_done, f.tasks_total, f.tasks_dispatched),
        (3, 3, 3),
        "no task ran twice"
    );
    assert_eq!((f.passes_done, f.passes, f.first_query_ms), (1, 1, Some(1_500)));
    assert_eq!(f.seconds_per_query, Some(2.0 / 3.0), "(0.5 + 0.5 + 1) / 3 over the run");
    assert_eq!(
        f.queries_per_s, 1.5,
        "3 queries over the 2 s from the first dispatch to the end"
    );
}

#[test]
fn a_worker_asking_again_gets_its_lost_task_back_at_once() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 12);
    let mut s = sched(d.path(), &stores, 1);
    s.submit(&infer_body(d.path(), &data), 1).unwrap();
    let (j, lost) = infer_task(next(&mut s, 9, None, 10));
    // the reply never reached worker 9, which asks again: the task is requeued at once
    // (not after a timeout) and handed out again
    let (_, again) = infer_task(next(&mut s, 9, None, 20));
    assert_eq!(again.id, lost.id);
    let q = s.active[&j].master.queues();
    assert_eq!(q.pending.len(), 1);
    assert!(
        q.todo.iter().chain(q.pending.values()).all(|e| e.num_timeout == 0),
        "no timeout counted"
    );
}

#[test]
fn each_completed_pass_is_evaluated_once_and_its_figures_kept() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = dataset(d.path(), 8); // 2 chunks: 2 tasks a pass
    let mut s = sched(d.path(), &stores, 1);
    let body = serde_json::json!({"kind": "train", "train": data, "test": data, "epochs": 3}).to_string();
    s.submit(&body, 0).unwrap();
    s.handle(8, JobsRequest::ServerPoll { hosting: vec![1] }, 1);
    let report = |loss_sum| TaskReport {
        examples: 4,
        loss_sum,
        ..Default::default()
    };
    let (mut finished, mut evaluated, mut now) = (None, Vec::new(), 10);
    let mut evaluating_dies = true;
    loop {
        now += 10;
        let w = if evaluating_dies { 9 } else { 11 };
        match next(&mut s, w, finished.take(), now) {
            JobsResponse::Train { task, .. } => {
                let loss = if task.epoch == 0 { 8.0 } else { 4.0 };
                finished = Some(Finished {
                    job: 1,
                    task: task.id,
                    report: report(loss),
                    predictions: None,
                    rows: None,
                    took_ms: 0,
                });
            }
            JobsResponse::Evaluate { job, pass, .. } => {
                if evaluating_dies {
                    // the evaluating worker dies: the pass goes to the next one asking
                    evaluating_dies = false;
                    s.worker_dead(9, now);
                    continue;
                }
                evaluated.push(pass);
                let accuracy = Some(0.5 + pass as f64 / 10.0);
                s.handle(w, JobsRequest::Evaluated { job, pass, accuracy }, now);
            }
            JobsResponse::Finalize { .. } => {
                s.handle(
                    w,
                    JobsRequest::Finalized {
                        job: 1,
                        accuracy: Some(0.9),
                        error: None,
                    },
                    now,
                );
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(evaluated, vec![0, 1], "the last pass is the finalizer's");
    let f = s.view(1, now).unwrap().figures;
    let per: Vec<(u64, Option<f64>, Option<f64>)> = f.per_pass.iter().map(|p| (p.pass, p.loss, p.accuracy)).collect();
    assert_eq!(
        per,
        vec![
            (1, Some(2.0), Some(0.5)),
            (2, Some(1.0), Some(0.6)),
            (3, Some(1.0), Some(0.9))
        ]
    );
    assert_eq!((f.passes_done, f.passes), (3, 3));
}

/// A directory of `n` input files (`f00.txt`, ...), created in shuffled order.
fn inputs_dir(dir: &Path, n: usize) -> String {
    let d = dir.join("inputs");
    std::fs::create_dir(&d).unwrap();
    for i in (0..n).rev() {
        std::fs::write(d.join(format!("f{i:02}.txt")), format!("{i}")).unwrap();
    }
    d.display().to_string()
}

pub(super) fn runner_body(dir: &Path, data: &str, extra: serde_json::Value) -> String {
    let mut v =
        serde_json::json!({"kind": "infer", "runner": "m:f", "data": data, "out": dir.join("out.csv"), "batch": 4});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

pub(super) fn model_status(job: u32, state: ModelState) -> ModelStatus {
    ModelStatus {
        job,
        state,
        error: None,
        bytes: 1 << 20,
        rss_growth: 2 << 20,
        load_s: 2.0,
        cpu_s: 1.5,
        ready_ago_ms: (state == ModelState::Ready).then_some(0),
    }
}

/// A worker whose runner has `job`'s model ready asks for work.
fn ready(s: &mut JobScheduler, w: i32, job: u32, finished: Option<Finished>, now: u64) -> JobsResponse {
    let catalog = s.catalog;
    s.handle(
        w,
        JobsRequest::Next {
            finished,
            models: vec![model_status(job, ModelState::Ready)],
            catalog,
        },
        now,
    )
}

pub(super) fn rows(job: u32, t: &Task) -> Finished {
    Finished {
        job,
        task: t.id,
        report: TaskReport::default(),
        predictions: None,
        rows: Some(
            t.chunks
                .iter()
                .map(|c| vec![std::fs::read_to_string(&c.path).unwrap(), "x,y".into()])
                .collect(),
        ),
        took_ms: 1000,
    }
}

#[test]
fn a_runner_job_over_a_directory_loads_first_then_gets_batches_of_files() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = inputs_dir(d.path(), 10);
    let mut s = sched(d.path(), &stores, 0);
    let v = s
        .submit(&runner_body(d.path(), &data, serde_json::json!({})), 1)
        .unwrap();
    assert_eq!(
        (v.figures.tasks_total, v.model.as_str()),
        (3, "python m:f"),
        "10 files, 4 per query"
    );
    let JobsResponse::Prepare { job, spec } = next(&mut s, 9, None, 2) else {
        panic!("a worker without the model loads it first")
    };
    assert_eq!((job, spec.runner.as_deref()), (1, Some("m:f")));
    let r = ready(&mut s, 9, 1, None, 3);
    let JobsResponse::Infer {
        task: t0, timeout_ms, ..
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(timeout_ms, 60_000, "the task timeout floor");
    let names: Vec<&str> = t0.chunks.iter().map(|c| c.path.rsplit('/').next().unwrap()).collect();
    assert_eq!(names, ["f00.txt", "f01.txt", "f02.txt", "f03.txt"], "sorted order");
    // a batch the runner failed on goes back to the queue; its error is in the status
    let (_, t1) = infer_task(ready(&mut s, 11, 1, None, 4));
    s.handle(
        11,
        JobsRequest::Failed {
            job: 1,
            task: t1.id,
            error: Some("the Python runner died (killed by signal 9)".into()),
        },
        5,
    );
    let v = s.view(1, 5).unwrap();
    assert!(v.last_error.unwrap().contains("signal 9"));
    assert_eq!(v.state, JobState::Running, "one failed batch does not fail the job");
    let (_, t2) = infer_task(ready(&mut s, 9, 1, Some(rows(1, &t0)), 6));
    let (_, t1b) = infer_task(ready(&mut s, 11, 1, None, 7));
    assert_eq!((t2.id, t1b.id), (2, t1.id), "the failed batch again, after the others");
    ready(&mut s, 9, 1, Some(rows(1, &t2)), 8);
    ready(&mut s, 11, 1, Some(rows(1, &t1b)), 9);
    let v = s.view(1, 10).unwrap();
    assert_eq!((v.state, v.accuracy), (JobState::Done, None));
    let out = std::fs::read_to_string(d.path().join("out.csv")).unwrap();
    let want: String = (0..10).map(|i| format!("{i},{i},\"x,y\"\n")).collect();
    assert_eq!(out, format!("index,output_0,output_1\n{want}"));
}

#[test]
fn a_model_no_runner_can_load_fails_the_job_after_the_retries() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = inputs_dir(d.path(), 4);
    let mut s = sched(d.path(), &stores, 0);
    s.submit(&runner_body(d.path(), &data, serde_json::json!({"max_retries": 2})), 1)
        .unwrap();
    let load_failed = |s: &mut JobScheduler, w: i32, now: u64| {
        s.handle(
            w,
            JobsRequest::LoadFailed {
                job: 1,
                error: "ModuleNotFoundError: No module named 'm'".into(),
            },
            now,
        )
    };
    for now in 2..4 {
        assert!(matches!(next(&mut s, 9, None, now), JobsResponse::Prepare { .. }));
        load_failed(&mut s, 9, now);
        assert_eq!(s.state(1), Some(JobState::Queued));
    }
    assert!(matches!(next(&mut s, 9, None, 4), JobsResponse::Prepare { .. }));
    load_failed(&mut s, 9, 4);
    let v = s.view(1, 6).unwrap();
    assert_eq!(v.state, JobState::Failed);
    assert_eq!(
        v.error.as_deref(),
        Some("loading the model failed 3 times: ModuleNotFoundError: No module named 'm'")
    );
}

#[test]
fn a_batch_that_fails_every_retry_fails_the_job_with_its_reason() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let data = inputs_dir(d.path(), 8);
    let mut s = sched(d.path(), &stores, 0);
    s.submit(&runner_body(d.path(), &data, serde_json::json!({"max_retries": 1})), 1)
        .unwrap();
    // a loaded runner elsewhere: load failures are only noted from now on
    let (_, t0) = infer_task(ready(&mut s, 9, 1, None, 2));
    s.handle(
        11,
        JobsRequest::LoadFailed {
            job: 1,
            error: "MemoryError: ".into(),
        },
        3,
    );
    s.handle(
        11,
        JobsRequest::LoadFailed {
            job: 1,
            error: "MemoryError: ".into(),
        },
        3,
    );
    assert_eq!(s.state(1), Some(JobState::Running));
    let fail = |s: &mut JobScheduler, t: u64, now: u64| {
        s.handle(
            9,
            JobsRequest::Failed {
                job: 1,
                task: t,
                error: Some("ValueError: cannot decode image".into()),
            },
            now,
        )
    };
    fail(&mut s, t0.id, 4);
    let (_, t1) = infer_task(ready(&mut s, 9, 1, None, 5));
    let (_, again) = infer_task(ready(&mut s, 9, 1, Some(rows(1, &t1)), 6));
    assert_eq!(again.id, t0.id);
    fail(&mut s, t0.id, 8);
    ready(&mut s, 9, 1, None, 9);
    let v = s.view(1, 10).unwrap();
    assert_eq!(v.state, JobState::Failed);
    assert_eq!(
        v.error.as_deref(),
        Some("1 of 2 queries failed 2 times; task 0: ValueError: cannot decode image")
    );
}
