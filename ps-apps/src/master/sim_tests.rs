//! Simulated jobs through the public API: several workers over real RecordIO files,
//! with deaths, stalls, failure reports and master restarts, on an injected clock.

use super::*;
use crate::recordio::Compressor;
use std::collections::BTreeSet;
use std::path::Path;

fn dataset(dir: &Path, files: usize, records: usize) -> Vec<String> {
    super::test_data::dataset(dir, files, records, Compressor::Gzip, 9)
}

fn cfg(epochs: u64) -> MasterConfig {
    MasterConfig {
        chunks_per_task: 2,
        num_epochs: epochs,
        timeout_multiplier: 3.0,
        timeout_floor_ms: 1000,
        max_retries: 3,
        planted: Default::default(),
    }
}

use super::test_data::records_of;

fn get(m: &mut Master, w: i32, finished: Option<u64>, now: u64) -> MasterResponse {
    m.handle(w, MasterRequest::GetTask { finished, report: None }, now)
}

/// Records trained on per pass, counted when a worker reports the task finished.
struct Ledger {
    seen: Vec<Vec<String>>,
    epoch_of: std::collections::HashMap<u64, (u64, Vec<String>)>,
}

impl Ledger {
    fn new(epochs: usize) -> Ledger {
        Ledger {
            seen: vec![Vec::new(); epochs],
            epoch_of: Default::default(),
        }
    }
    fn dispatched(&mut self, t: &Task) {
        self.epoch_of.insert(t.id, (t.epoch, records_of(t)));
    }
    fn finished(&mut self, id: u64) {
        let (e, recs) = self.epoch_of[&id].clone();
        self.seen[e as usize].extend(recs);
    }
    fn assert_exactly_once(&self, total: usize) {
        for (e, pass) in self.seen.iter().enumerate() {
            let distinct: BTreeSet<&String> = pass.iter().collect();
            assert_eq!((pass.len(), distinct.len()), (total, total), "pass {e}");
        }
    }
}

#[test]
fn dead_and_stalled_workers_lose_no_records() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 3, 40);
    let store = MemStore::default();
    let mut m = Master::new(cfg(2), Box::new(store.clone()), 0).unwrap();
    assert!(m.report_dataset(paths.clone()).unwrap());
    assert!(!m.report_dataset(vec!["ignored".into()]).unwrap());
    let mut ledger = Ledger::new(2);
    let mut holding: [Option<u64>; 4] = [None; 4];
    let (mut now, mut done_workers) = (0u64, BTreeSet::new());
    let (dead, stalled) = (2usize, 3usize);
    for round in 0.. {
        assert!(round < 1000, "the job never ends");
        now += 10;
        assert!(m.tick(now).is_ok());
        for (w, hold) in holding.iter_mut().enumerate() {
            // worker 2 dies holding its third task; worker 3 stalls holding its second
            if (w == dead && round >= 2) || (w == stalled && round >= 1) {
                if w == dead && round == 2 {
                    assert_eq!(m.worker_dead(w as i32).unwrap(), 1);
                }
                continue;
            }
            let fin = hold.take();
            if let Some(id) = fin {
                ledger.finished(id);
            }
            match get(&mut m, w as i32, fin, now) {
                MasterResponse::Task(t) => {
                    ledger.dispatched(&t);
                    *hold = Some(t.id);
                }
                MasterResponse::Wait => {}
                MasterResponse::NoMoreTasks => {
                    done_workers.insert(w);
                }
                other => panic!("{other:?}"),
            }
        }
        if done_workers.len() == 2 {
            break;
        }
    }
    ledger.assert_exactly_once(120);
    let s = m.snapshot();
    assert!(s.finished && s.failed == 0 && s.epoch == 1);
    assert_eq!(decode_queues(store.data.lock().as_ref().unwrap()).unwrap(), *m.queues());
}

#[test]
fn repeated_master_restarts_redo_nothing_and_lose_nothing() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 2, 50);
    let state = d.path().join("state").join("master.bin");
    let mem = MemStore::default();
    for use_file in [false, true] {
        let store = || -> Box<dyn Store> {
            if use_file {
                Box::new(FileStore::new(&state))
            } else {
                Box::new(mem.clone())
            }
        };
        let mut m = Master::new(cfg(2), store(), 0).unwrap();
        assert_eq!(
            m.handle(1, MasterRequest::ReportDataset { paths: paths.clone() }, 0),
            MasterResponse::Ok
        );
        let mut ledger = Ledger::new(2);
        let mut dispatched = BTreeSet::new();
        let mut holding: [Option<u64>; 4] = [None; 4];
        let (mut now, mut ended) = (0u64, 0);
        for step in 0.. {
            assert!(step < 500, "the job never ends");
            if step % 5 == 4 {
                // the master dies between requests and a new one recovers from the store
                drop(m);
                m = Master::recover(store(), cfg(2), now).unwrap();
            }
            let w = step % 4;
            now += 3;
            let fin = holding[w].take();
            if let Some(id) = fin {
                ledger.finished(id);
            }
            match get(&mut m, w as i32, fin, now) {
                MasterResponse::Task(t) => {
                    assert!(dispatched.insert(t.id), "task {} handed out twice", t.id);
                    ledger.dispatched(&t);
                    holding[w] = Some(t.id);
                }
                MasterResponse::Wait => {}
                MasterResponse::NoMoreTasks => {
                    ended += 1;
                    if ended == 4 {
                        break;
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        ledger.assert_exactly_once(100);
        assert_eq!(
            m.snapshot().total_done,
            12,
            "6 tasks (chunks of 9, 2 per task) x 2 passes"
        );
    }
}

#[test]
fn failure_reports_requeue_and_persist() {
    let d = tempfile::tempdir().unwrap();
    let paths = dataset(d.path(), 1, 20);
    let store = MemStore::default();
    let mut m = Master::new(cfg(1), Box::new(store.clone()), 0).unwrap();
    m.report_dataset(paths).unwrap();
    let Ok(Reply::Task(t)) = m.get_task(5, None, 1) else {
        panic!()
    };
    assert_eq!(
        m.handle(6, MasterRequest::TaskFailed { task: t.id }, 2),
        MasterResponse::Ok
    );
    assert_eq!(m.snapshot().pending, 1, "a worker not holding it cannot fail it");
    assert_eq!(
        m.handle(5, MasterRequest::TaskFailed { task: t.id }, 3),
        MasterResponse::Ok
    );
    let stored = decode_queues(store.data.lock().as_ref().unwrap()).unwrap();
    assert_eq!((stored.todo[1].task.id, stored.todo[1].num_timeout), (t.id, 1));
    assert_eq!(stored, *m.queues());
    // a failed save during a timeout sweep changes nothing (worker 6 overtakes the
    // task worker 5 holds, which is then late)
    let Ok(Reply::Task(_)) = m.get_task(5, None, 4) else {
        panic!()
    };
    let Ok(Reply::Task(t)) = m.get_task(6, None, 5) else {
        panic!()
    };
    assert_eq!(m.get_task(6, Some(t.id), 6).unwrap(), Reply::Wait);
    let before = m.queues().clone();
    *store.fail.lock() = true;
    assert!(m.tick(10_000).is_err());
    assert!(m.worker_dead(5).is_err());
    assert_eq!(*m.queues(), before);
    *store.fail.lock() = false;
    assert_eq!(m.tick(10_000).unwrap().len(), 1);
    let MasterResponse::Snapshot(s) = m.handle(5, MasterRequest::Snapshot, 10_001) else {
        panic!()
    };
    assert_eq!((s.todo, s.pending, s.tasks_per_epoch, s.num_epochs), (1, 0, 2, 1));
}
