//! Tests of the persisted master: real RecordIO files, stores, restarts.

use super::super::store::{FileStore, MemStore};
use super::*;
use crate::recordio::Compressor;

fn dataset(dir: &Path, files: usize, records: usize) -> Vec<String> {
    super::super::test_data::dataset(dir, files, records, Compressor::Snappy, 10)
}

fn cfg(epochs: u64) -> MasterConfig {
    MasterConfig {
        chunks_per_task: 2,
        num_epochs: epochs,
        timeout_floor_ms: 1000,
        ..Default::default()
    }
}

use super::super::test_data::records_of;

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
    assert!(
        matches!(e, MasterError::Corrupt(_)) && e.to_string().contains("corrupt"),
        "{e}"
    );
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

#[test]
fn an_unreadable_task_is_retried_then_given_up_and_the_job_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 1, 40); // 4 chunks of 10, 2 tasks of 2 chunks
    let cfg = MasterConfig {
        max_retries: 2,
        ..cfg(2)
    };
    let mut m = Master::new(cfg, Box::new(MemStore::default()), 0).unwrap();
    m.handle(9, MasterRequest::ReportDataset { paths }, 0);
    let (mut now, mut finished, mut reads) = (0, None, 0);
    loop {
        now += 1;
        let req = MasterRequest::GetTask {
            finished: finished.take(),
            report: None,
        };
        let t = match m.handle(9, req, now) {
            MasterResponse::Task(t) => t,
            MasterResponse::NoMoreTasks => break,
            other => panic!("{other:?}"),
        };
        if t.id % 2 == 1 {
            // the second task of each pass has a corrupt chunk
            reads += 1;
            let error = "part-0.rio: chunk 3: CRC mismatch: the chunk is corrupt".to_string();
            let r = m.handle(9, MasterRequest::TaskUnreadable { task: t.id, error }, now);
            assert_eq!(r, MasterResponse::Ok);
        } else {
            finished = Some(t.id);
        }
    }
    assert_eq!(reads, 2 * 3, "tried 1 + max_retries times in each pass");
    let s = m.snapshot();
    assert_eq!((s.total_done, s.given_up, s.skipped_records), (2, 2, 40));
    let report = m.final_report();
    assert!(
        report.starts_with("job complete: 2 tasks trained, 2 given up, 40 records skipped"),
        "{report}"
    );
    assert!(
        report.contains("task 1 (pass 1): 20 records skipped: could not be read (part-0.rio: chunk 3: CRC mismatch"),
        "{report}"
    );
}

#[test]
fn a_leaving_worker_counts_its_finished_task_and_returns_the_one_it_holds() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 1, 100);
    let mut m = Master::new(cfg(1), Box::new(MemStore::default()), 0).unwrap();
    m.handle(9, MasterRequest::ReportDataset { paths }, 0);
    let get = |m: &mut Master, w: i32, finished: Option<u64>| match m.handle(
        w,
        MasterRequest::GetTask { finished, report: None },
        1,
    ) {
        MasterResponse::Task(t) => t.id,
        other => panic!("{other:?}"),
    };
    let a = get(&mut m, 11, None);
    let leave = MasterRequest::Leaving {
        finished: Some(a),
        report: None,
    };
    assert_eq!(m.handle(11, leave, 2), MasterResponse::Ok);
    let s = m.snapshot();
    assert_eq!((s.total_done, s.pending), (1, 0));
    // a worker leaving while it holds a task: the task goes to the next worker at once
    let b = get(&mut m, 9, None);
    let leave = MasterRequest::Leaving {
        finished: None,
        report: None,
    };
    assert_eq!(m.handle(9, leave, 3), MasterResponse::Ok);
    assert_eq!(m.snapshot().pending, 0);
    assert_eq!(get(&mut m, 13, None), b, "a newcomer gets the returned task first");
    assert_eq!(m.snapshot().total_done, 1);
}

#[test]
fn a_master_that_takes_over_again_resumes_from_the_replicated_state() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 2, 40);
    // the active scheduler's master hands out a task and finishes another
    let mut active = Master::new(cfg(1), Box::new(MemStore::default()), 0).unwrap();
    active.report_dataset(paths.clone()).unwrap();
    let Reply::Task(t) = active.ask_for_task(9, None, 10).unwrap() else {
        panic!("a task")
    };
    assert!(active.finish_attempt(9, t.id, t.attempt, 20).unwrap().counts());
    let Reply::Task(held) = active.ask_for_task(11, None, 30).unwrap() else {
        panic!("a task")
    };
    let state = encode_queues(active.queues()).unwrap();
    // an old active, stale since it was cut off, wins again with that state
    let mut old = Master::new(cfg(1), Box::new(MemStore::default()), 0).unwrap();
    old.report_dataset(paths).unwrap();
    old.resume_from(&state, 1000).unwrap();
    assert_eq!(old.queues().total_done, 1);
    assert_eq!(old.queues().pending[&held.id].dispatched_ms, 1000, "fresh deadlines");
    assert_eq!(old.finish_attempt(9, t.id, t.attempt, 1001).unwrap(), Counted::Already);
    assert!(old.resume_from(b"garbage", 1002).is_err());
    assert_eq!(old.queues().total_done, 1, "corrupt bytes change nothing");
}

#[test]
fn a_state_taken_over_with_fewer_finished_tasks_is_not_resumed_from() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 2, 40);
    // the state as the takeover found it: nothing finished yet
    let mut m = Master::new(cfg(1), Box::new(MemStore::default()), 0).unwrap();
    m.report_dataset(paths).unwrap();
    let taken_over = encode_queues(m.queues()).unwrap();
    // the new active's master answers a finish before the takeover's state reaches it
    let Reply::Task(t) = m.ask_for_task(9, None, 10).unwrap() else {
        panic!("a task")
    };
    assert!(m.finish_attempt(9, t.id, t.attempt, 20).unwrap().counts());
    m.resume_from(&taken_over, 30).unwrap();
    assert_eq!(m.queues().total_done, 1, "the finish counted stays counted");
    assert_eq!(
        m.finish_attempt(9, t.id, t.attempt, 31).unwrap(),
        Counted::Already,
        "its task is not trained again"
    );
}
