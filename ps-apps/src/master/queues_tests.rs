//! Tests of the task queues: dispatch, waits, timeouts, retries, passes.

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
        planted: Default::default(),
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
fn an_overdue_task_goes_to_a_worker_with_nothing_to_do_then_fails_above_the_threshold() {
    let c = cfg(1);
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(2), &c);
    let t = task(q.next(9, 0, &c));
    assert!(
        q.tick(1000, &c).is_empty(),
        "nobody overtook it and nobody asks for work: handing it over gains nothing"
    );
    assert_eq!(q.next(11, 99, &c), Reply::Wait, "not overdue yet");
    let again = task(q.next(11, 100, &c));
    assert_eq!((again.id, q.pending[&t.id].worker), (t.id, 11));
    assert_eq!(q.pending[&t.id].num_timeout, 1);
    let again = task(q.next(9, 1000, &c));
    assert_eq!((again.id, q.pending[&t.id].num_timeout), (t.id, 2));
    assert_eq!(q.next(11, 2000, &c), Reply::Wait, "3 timeouts > 2 retries: given up");
    assert_eq!(q.failed.len(), 1);
    assert!(q.todo.is_empty() && q.pending.is_empty());
    // the job still completes: failed tasks end the pass
    assert_eq!(q.next(9, 5000, &c), Reply::NoMoreTasks);
}

#[test]
fn an_overdue_task_others_overtook_times_out_at_the_tick() {
    let c = cfg(1);
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(6), &c);
    let a = task(q.next(9, 0, &c));
    let b = task(q.next(11, 10, &c));
    assert!(q.finish(b.id, 30));
    assert_eq!(q.timeout_ms(&c), 100, "2 x 20 ms, at least the floor");
    assert!(q.tick(99, &c).is_empty());
    assert_eq!(q.late(100, &c), vec![a.id]);
    assert_eq!(q.tick(100, &c), vec![a.id]);
    let back = q.todo.back().unwrap();
    assert_eq!((back.task.id, back.num_timeout), (a.id, 1));
}

/// Four workers on a job whose pace drops 100-fold after 12 tasks (workers moved in,
/// the machine got busy): every task in flight slows down alike. Nothing is stuck, so
/// nothing may time out, though the tasks soon take 10 times the old timeout.
#[test]
fn a_job_that_slows_down_times_nothing_out() {
    let c = MasterConfig {
        timeout_multiplier: 4.0,
        timeout_floor_ms: 100,
        ..cfg(1)
    };
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(80), &c);
    // work left per worker's task (1.0 = a whole task); speed per ms
    let mut holding: Vec<Option<(u64, f64)>> = vec![None; 4];
    let mut finished = 0;
    for now in 0..200_000u64 {
        let speed = if finished < 12 { 0.1 } else { 0.001 };
        for (w, h) in holding.iter_mut().enumerate() {
            if let Some((id, left)) = h {
                *left -= speed;
                if *left <= 1e-9 {
                    assert!(q.finish(*id, now));
                    finished += 1;
                    *h = None;
                }
            }
            if h.is_none() {
                match q.next(w as i32, now, &c) {
                    Reply::Task(t) => *h = Some((t.id, 1.0)),
                    Reply::Wait => {}
                    Reply::NoMoreTasks => {}
                }
            }
        }
        assert!(q.tick(now, &c).is_empty(), "a task timed out at {now} ms");
        if q.finished {
            break;
        }
    }
    assert!(q.finished, "the job ends");
    assert_eq!(q.done.len(), 40);
    assert!(q.done.iter().all(|e| e.num_timeout == 0), "no task ran twice");
    assert!(q.timeout_ms(&c) >= 4000, "the timeout followed the pace");
}

#[test]
fn a_late_finish_of_a_task_that_timed_out_raises_the_pace() {
    let c = cfg(1);
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(6), &c);
    let a = task(q.next(9, 0, &c));
    let b = task(q.next(11, 0, &c));
    q.finish(b.id, 10);
    assert_eq!(q.tick(100, &c), vec![a.id], "overdue and overtaken");
    assert!(q.finish(a.id, 500), "its first worker finishes it after all");
    assert_eq!(q.last_task_ms, 500, "measured from the dispatch that timed out");
    assert_eq!(q.timeout_ms(&c), 1000);
}

#[test]
fn reported_failures_count_like_timeouts() {
    let c = cfg(1);
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(2), &c);
    let t = task(q.next(9, 0, &c));
    assert!(!q.fail(11, t.id, &c), "only the holder can report it failed");
    assert!(q.fail(9, t.id, &c));
    assert!(!q.fail(9, t.id, &c), "not pending any more");
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
    let other = task(q.next(11, 1, &c));
    q.finish(other.id, 2);
    assert_eq!(q.tick(100, &c), vec![t.id]);
    assert!(q.finish(t.id, 150), "finished while waiting in todo");
    assert!(q.todo.iter().all(|e| e.task.id != t.id));
    assert_eq!(q.done.len(), 2);
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

#[test]
fn tasks_are_dispatched_in_dataset_order() {
    let c = cfg(1);
    let mut q = TaskQueues::default();
    q.report_dataset(vec!["f".into()], chunks(5), &c);
    let ids: Vec<(u64, Vec<usize>)> = (0..3)
        .map(|w| task(q.next(w, 0, &c)))
        .map(|t| (t.id, t.chunks.iter().map(|c| c.index.idx).collect()))
        .collect();
    assert_eq!(ids, vec![(0, vec![0, 1]), (1, vec![2, 3]), (2, vec![4])]);
    assert_eq!(q.pending[&1].worker, 1);
}

#[test]
fn late_finish_of_a_failed_task_moves_it_to_done() {
    let c = MasterConfig {
        max_retries: 0,
        ..cfg(1)
    };
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(4), &c);
    let t = task(q.next(9, 0, &c));
    let other = task(q.next(11, 1, &c));
    q.finish(other.id, 2);
    assert_eq!(q.tick(100, &c), vec![t.id]);
    assert_eq!(q.failed.len(), 1, "no retries allowed");
    assert!(q.finish(t.id, 150));
    assert_eq!((q.failed.len(), q.done.len()), (0, 2));
    assert!(!q.finish(t.id, 160), "counted once");
}

#[test]
fn empty_dataset_is_complete_at_once() {
    let c = cfg(2);
    let mut q = TaskQueues::default();
    assert!(q.report_dataset(vec![], Vec::new(), &c));
    assert_eq!(q.next(9, 0, &c), Reply::NoMoreTasks);
}

#[test]
fn resume_gives_pending_tasks_fresh_deadlines() {
    let c = cfg(1);
    let mut q = TaskQueues::default();
    q.report_dataset(vec![], chunks(4), &c);
    let t = task(q.next(9, 0, &c));
    q.resume(5000, &c);
    assert_eq!(q.pending[&t.id].deadline_ms, 5100);
    assert_eq!(q.pending[&t.id].worker, 9, "still held by its worker");
    assert!(q.tick(5099, &c).is_empty());
}

/// One step of a random schedule.
#[derive(Clone, Debug)]
enum Op {
    Get(i32),
    Finish(i32),
    Fail(i32),
    Dead(i32),
    Tick(u64),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..4i32).prop_map(Op::Get),
        4 => (0..4i32).prop_map(Op::Finish),
        1 => (0..4i32).prop_map(Op::Fail),
        1 => (0..4i32).prop_map(Op::Dead),
        2 => (0..300u64).prop_map(Op::Tick),
    ]
}

/// Every task of the current pass is in exactly one queue; pending tasks have a
/// worker, waiting and failed ones none.
fn check_invariants(q: &TaskQueues) {
    let n = q.template.len() as u64;
    let mut ids: Vec<u64> = q
        .todo
        .iter()
        .chain(&q.done)
        .chain(&q.failed)
        .map(|e| e.task.id)
        .collect();
    ids.extend(q.pending.keys());
    ids.sort_unstable();
    assert_eq!(ids, (q.epoch * n..(q.epoch + 1) * n).collect::<Vec<_>>());
    assert!(q.pending.iter().all(|(id, e)| e.task.id == *id && e.worker >= 0));
    assert!(q.todo.iter().chain(&q.failed).all(|e| e.worker == -1));
    assert!(q.todo.iter().chain(q.pending.values()).all(|e| e.task.epoch == q.epoch));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    #[test]
    fn random_schedules_keep_every_task_in_one_queue_and_finish(ops in proptest::collection::vec(op(), 0..120)) {
        let c = cfg(3);
        let mut q = TaskQueues::default();
        q.report_dataset(vec![], chunks(7), &c);
        let mut holding: Vec<Vec<u64>> = vec![Vec::new(); 4];
        let mut now = 0;
        for op in ops {
            now += 10;
            match op {
                Op::Get(w) => {
                    if let Reply::Task(t) = q.next(w, now, &c) {
                        holding[w as usize].push(t.id);
                    }
                }
                Op::Finish(w) => {
                    if let Some(id) = holding[w as usize].pop() {
                        q.finish(id, now);
                    }
                }
                Op::Fail(w) => {
                    if let Some(id) = holding[w as usize].pop() {
                        q.fail(w, id, &c);
                    }
                }
                Op::Dead(w) => {
                    q.worker_dead(w);
                    holding[w as usize].clear();
                }
                Op::Tick(dt) => {
                    now += dt;
                    q.tick(now, &c);
                }
            }
            check_invariants(&q);
        }
        // an honest worker drives the job to its end in a bounded number of steps
        let mut steps = 0;
        loop {
            now += 1000;
            q.tick(now, &c);
            match q.next(0, now, &c) {
                Reply::Task(t) => {
                    q.finish(t.id, now + 1);
                }
                Reply::Wait => {}
                Reply::NoMoreTasks => break,
            }
            check_invariants(&q);
            steps += 1;
            proptest::prop_assert!(steps < 100, "the job never ends");
        }
        proptest::prop_assert_eq!(q.epoch, 2);
        proptest::prop_assert!(q.finished && q.todo.is_empty() && q.pending.is_empty());
    }
}

#[test]
fn a_task_counts_once_per_pass_from_one_attempt() {
    let c = cfg(2);
    let mut q = TaskQueues {
        term: 1,
        ..Default::default()
    };
    q.report_dataset(vec![], chunks(4), &c);
    let t = task(q.next(9, 0, &c));
    assert_eq!(t.attempt, Attempt { term: 1, n: 1 });
    // worker 9 is declared dead; after a failover the task goes to 11 under term 2
    q.worker_dead(9);
    q.term = 2;
    let t2 = task(q.next(11, 10, &c));
    assert_eq!((t2.id, t2.attempt), (t.id, Attempt { term: 2, n: 2 }));
    // an attempt this state never handed out counts for nothing
    assert_eq!(q.finish_attempt(13, t.id, Attempt { term: 2, n: 3 }, 20), Counted::Not);
    assert_eq!(q.finish_attempt(13, t.id, Attempt { term: 1, n: 2 }, 20), Counted::Not);
    assert_eq!(q.finish_attempt(13, t.id, Attempt::default(), 20), Counted::Not);
    // the first attempt, late (9 was alive after all): counts, the task is not done
    assert_eq!(q.finish_attempt(9, t.id, t.attempt, 30), Counted::Now);
    // reported again: counted already; the later attempt does not count
    assert_eq!(q.finish_attempt(9, t.id, t.attempt, 31), Counted::Already);
    assert_eq!(q.finish_attempt(11, t.id, t2.attempt, 40), Counted::Not);
    assert_eq!(q.total_done, 1);
    // after its pass ended, a report sent again is answered as before
    let u = task(q.next(11, 50, &c));
    assert_eq!(q.finish_attempt(11, u.id, u.attempt, 60), Counted::Now);
    let v = task(q.next(11, 70, &c));
    assert_eq!(v.epoch, 1);
    assert_eq!(q.finish_attempt(11, u.id, u.attempt, 80), Counted::Already);
    assert_eq!(q.finish_attempt(11, t.id, t2.attempt, 80), Counted::Not);
    assert_eq!(q.total_done, 2);
}
