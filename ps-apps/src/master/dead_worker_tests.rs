//! A dead worker's tasks and messages, in every order its death and its last
//! requests can reach the master: it is never handed a task after its
//! death, every task it held goes back to todo, and each task is done once per pass.

use super::store::MemStore;
use super::test_data::dataset;
use super::*;
use crate::recordio::Compressor;

fn master(dir: &std::path::Path, epochs: u64) -> Master {
    let paths = dataset(dir, 2, 40, Compressor::None, 10);
    let cfg = MasterConfig {
        chunks_per_task: 1,
        num_epochs: epochs,
        timeout_floor_ms: 10_000,
        ..Default::default()
    };
    let mut m = Master::new(cfg, Box::new(MemStore::default()), 0).unwrap();
    m.report_dataset(paths).unwrap();
    m
}

fn get(m: &mut Master, w: i32, finished: Option<u64>, now: u64) -> Reply {
    m.get_task(w, finished, now).unwrap()
}

fn task_id(r: Reply) -> u64 {
    match r {
        Reply::Task(t) => t.id,
        other => panic!("expected a task, got {other:?}"),
    }
}

fn held_by(m: &Master, w: i32) -> Vec<u64> {
    m.queues()
        .pending
        .values()
        .filter(|e| e.worker == w)
        .map(|e| e.task.id)
        .collect()
}

#[test]
fn a_request_handled_after_the_death_gets_no_task() {
    let d = tempfile::tempdir().unwrap();
    let mut m = master(d.path(), 1);
    let a = task_id(get(&mut m, 9, None, 0));
    assert_eq!(m.worker_dead(9).unwrap(), 1);
    assert_eq!(m.queues().todo.front().map(|e| e.task.id), Some(a), "front of todo");
    // 9's GetTask, sent before it died, is handled now
    assert_eq!(get(&mut m, 9, None, 5), Reply::Wait);
    assert!(held_by(&m, 9).is_empty());
    assert_eq!(task_id(get(&mut m, 11, None, 6)), a, "a live worker takes it at once");
}

#[test]
fn a_finish_reported_after_the_death_counts_once() {
    let d = tempfile::tempdir().unwrap();
    let mut m = master(d.path(), 1);
    let a = task_id(get(&mut m, 9, None, 0));
    m.worker_dead(9).unwrap();
    // 9 had finished `a`: its report arrives after the death was handled
    assert_eq!(get(&mut m, 9, Some(a), 5), Reply::Wait);
    assert_eq!(m.queues().total_done, 1);
    assert!(m.queues().todo.iter().all(|e| e.task.id != a), "not trained again");
    // the same when the requeued task was already handed to another worker
    let b = task_id(get(&mut m, 13, None, 6));
    m.worker_dead(13).unwrap();
    assert_eq!(task_id(get(&mut m, 11, None, 7)), b, "requeued to 11");
    assert_eq!(get(&mut m, 13, Some(b), 8), Reply::Wait);
    assert!(m.queues().done.iter().any(|e| e.task.id == b));
    let done = m.queues().total_done;
    get(&mut m, 11, Some(b), 9);
    assert_eq!(m.queues().total_done, done, "b is counted once");
}

#[test]
fn a_failure_reported_after_the_death_is_ignored() {
    let d = tempfile::tempdir().unwrap();
    let mut m = master(d.path(), 1);
    let a = task_id(get(&mut m, 9, None, 0));
    m.worker_dead(9).unwrap();
    assert!(!m.task_failed(9, a).unwrap());
    let e = m.queues().todo.front().unwrap();
    assert_eq!((e.task.id, e.num_timeout), (a, 0), "requeued without a retry counted");
}

#[test]
fn the_node_table_is_checked_before_the_death_callback_runs() {
    let d = tempfile::tempdir().unwrap();
    let mut m = master(d.path(), 1);
    let a = task_id(get(&mut m, 9, None, 0));
    // 9's request arrives when the node table says dead, before on_node_dead ran
    m.sender_liveness(9, false).unwrap();
    assert!(m.is_dead(9));
    assert_eq!(get(&mut m, 9, None, 5), Reply::Wait);
    assert_eq!(m.queues().todo.front().map(|e| e.task.id), Some(a));
    // the callback then finds nothing left to requeue
    assert_eq!(m.worker_dead(9).unwrap(), 0);
    // a replacement takes id 9: it gets tasks again
    m.sender_liveness(9, true).unwrap();
    assert!(!m.is_dead(9));
    assert_eq!(task_id(get(&mut m, 9, None, 6)), a);
}

/// Three workers run a two-pass job in lock step; worker 13 dies after `k` of its
/// requests, and its last request (carrying the task it finished) is handled either
/// before or after its death. Every pass must complete with every task done exactly
/// once, no task ever pending on the dead worker, and nothing left to the timeout.
#[test]
fn every_order_of_death_and_last_request_completes_each_pass_once() {
    let d = tempfile::tempdir().unwrap();
    for k in 0..12 {
        for last_after_death in [false, true] {
            let mut m = master(d.path(), 2);
            let per_pass = m.queues().template.len() as u64;
            let workers = [9, 11, 13];
            let mut holding: [Option<u64>; 3] = [None; 3];
            let mut requests = 0;
            let mut dead = false;
            let mut over = [false; 3];
            let mut now = 0;
            let mut steps = 0;
            while !(over[0] && over[1]) {
                steps += 1;
                assert!(steps < 1000, "k={k}: the job does not finish");
                for (i, &w) in workers.iter().enumerate() {
                    if over[i] || (i == 2 && dead) {
                        continue;
                    }
                    now += 10;
                    if i == 2 && requests == k {
                        // 13's last request, sent just before it dies
                        let fin = holding[2].take();
                        if last_after_death {
                            m.worker_dead(13).unwrap();
                            assert_eq!(get(&mut m, 13, fin, now), Reply::Wait);
                        } else {
                            let _ = get(&mut m, 13, fin, now);
                            m.worker_dead(13).unwrap();
                        }
                        dead = true;
                        continue;
                    }
                    match get(&mut m, w, holding[i].take(), now) {
                        Reply::Task(t) => holding[i] = Some(t.id),
                        Reply::Wait => {}
                        Reply::NoMoreTasks => over[i] = true,
                    }
                    if i == 2 {
                        requests += 1;
                    }
                    if dead {
                        assert!(held_by(&m, 13).is_empty(), "k={k}: a task pending on the dead worker");
                    }
                }
            }
            let q = m.queues();
            assert!(q.finished, "k={k}");
            assert_eq!(
                q.total_done,
                2 * per_pass,
                "k={k} after={last_after_death}: every task once"
            );
            assert_eq!((q.done.len() as u64, q.failed.len()), (per_pass, 0));
            assert!(now < 10_000, "k={k}: nothing waited for a task timeout");
        }
    }
}

/// The scheduler died after handing 9 a task and before its reply left (or the reply
/// was lost): the resumed master has the task pending on 9, which asks again. The task
/// goes back at once instead of waiting for its deadline (a stall at the end of a pass).
#[test]
fn a_task_whose_reply_was_lost_is_handed_out_again_at_once() {
    let d = tempfile::tempdir().unwrap();
    let mut m = master(d.path(), 1);
    let ask = |m: &mut Master, w, f, now| m.ask_for_task(w, f, now).unwrap();
    let a = task_id(ask(&mut m, 9, None, 0));
    let b = task_id(ask(&mut m, 11, None, 0));
    // 9 never got `a` and asks again: it gets `a` back, nothing stays pending twice
    assert_eq!(task_id(ask(&mut m, 9, None, 5)), a);
    assert_eq!(held_by(&m, 9), vec![a]);
    assert_eq!(m.queues().todo.front().map(|e| e.num_timeout), Some(0));
    // 11 finished `b` and its report is handled twice (a resent request): counted once,
    // and the task it was handed by the first one comes back too
    let c = task_id(ask(&mut m, 11, Some(b), 6));
    assert_eq!(task_id(ask(&mut m, 11, Some(b), 7)), c);
    assert_eq!(m.queues().total_done, 1);
    assert_eq!(held_by(&m, 11), vec![c]);
}
