//! The scheduler with runners that warm models, and fair time over time, driven
//! deterministically: workers' requests as plain values, time passed in.

use super::scheduler::JobScheduler;
use super::scheduler_tests::{model_status, rows, runner_body, sched, Stores};
use super::wire::{Finished, JobsRequest, JobsResponse};
use crate::master::Task;
use crate::pyrunner::{ModelState, ModelStatus};
use std::collections::BTreeMap;
use std::path::Path;

/// A directory `name` of `n` input files.
fn files(dir: &Path, name: &str, n: usize) -> String {
    let d = dir.join(name);
    std::fs::create_dir(&d).unwrap();
    for i in 0..n {
        std::fs::write(d.join(format!("f{i:04}.txt")), format!("{i}")).unwrap();
    }
    d.display().to_string()
}

/// A runner job over `n` files, one file per query.
fn submit(s: &mut JobScheduler, dir: &Path, name: &str, n: usize, now: u64) -> u32 {
    let data = files(dir, name, n);
    let out = dir.join(format!("{name}.csv"));
    let body = runner_body(dir, &data, serde_json::json!({"batch": 1, "out": out}));
    let v = s.submit(&body, now).unwrap();
    v.id[1..].parse().unwrap()
}

fn ask(
    s: &mut JobScheduler,
    w: i32,
    f: Option<Finished>,
    models: Vec<ModelStatus>,
    catalog: u64,
    now: u64,
) -> JobsResponse {
    s.handle(
        w,
        JobsRequest::Next {
            finished: f,
            models,
            catalog,
        },
        now,
    )
}

#[test]
fn a_new_jobs_model_is_warmed_everywhere_and_a_worker_moved_to_it_starts_at_once() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let mut s = sched(d.path(), &stores, 0);
    let j1 = submit(&mut s, d.path(), "a", 40, 1);
    // a fresh worker hears of the jobs to warm first
    let JobsResponse::Warm { catalog, jobs } = ask(&mut s, 9, None, vec![], 0, 2) else {
        panic!("a worker with no list gets it first")
    };
    assert_eq!(jobs.iter().map(|j| j.0).collect::<Vec<_>>(), [j1]);
    let ready1 = || vec![model_status(j1, ModelState::Ready)];
    let mut held: BTreeMap<i32, Task> = BTreeMap::new();
    for w in [9, 11, 13, 15] {
        let JobsResponse::Infer { task, .. } = ask(&mut s, w, None, ready1(), catalog, 3) else {
            panic!("worker {w}")
        };
        held.insert(w, task);
    }
    // a second job: the list changes; the workers split 2 / 2 (workers 13, 15 move)
    let j2 = submit(&mut s, d.path(), "b", 40, 100);
    assert_eq!(s.view(j2, 100).unwrap().workers, 2);
    let t = held.remove(&13).unwrap();
    let JobsResponse::Warm { catalog: c2, jobs } = ask(&mut s, 13, Some(rows(j1, &t)), ready1(), catalog, 200) else {
        panic!("the list changed")
    };
    assert_ne!(c2, catalog);
    assert_eq!(jobs.iter().map(|j| j.0).collect::<Vec<_>>(), [j1, j2]);
    // worker 15 warmed job 2's model while it finished its query of job 1: it starts
    // on job 2 at once
    let t = held.remove(&15).unwrap();
    let mut both = ready1();
    both.push(ModelStatus {
        ready_ago_ms: Some(1_500),
        ..model_status(j2, ModelState::Ready)
    });
    let r = ask(&mut s, 15, Some(rows(j1, &t)), both.clone(), c2, 2_000);
    assert!(matches!(r, JobsResponse::Infer { job, .. } if job == j2), "{r:?}");
    // worker 13's is still loading: it waits for it, and is given nothing of job 1
    let mut loading = ready1();
    loading.push(model_status(j2, ModelState::Loading));
    let r = ask(&mut s, 13, None, loading.clone(), c2, 2_100);
    assert!(matches!(r, JobsResponse::Prepare { job, .. } if job == j2), "{r:?}");
    // worker 9 (still on job 1) hears of job 2 after its query, then has its model
    let t9 = held.remove(&9).unwrap();
    let r = ask(&mut s, 9, Some(rows(j1, &t9)), ready1(), catalog, 2_200);
    assert!(matches!(r, JobsResponse::Warm { .. }), "the list first: {r:?}");
    let r = ask(&mut s, 9, None, both.clone(), c2, 2_300);
    assert!(matches!(r, JobsResponse::Infer { job, .. } if job == j1), "{r:?}");
    // what the API shows: when each worker had job 2's model ready
    let v = s.view(j2, 2_400).unwrap();
    let on: Vec<(i32, ModelState, Option<u64>)> = v.models.iter().map(|m| (m.worker, m.state, m.ready_ms)).collect();
    assert_eq!(
        on,
        [
            (9, ModelState::Ready, Some(800)),
            (13, ModelState::Loading, None),
            (15, ModelState::Ready, Some(500))
        ]
    );
    assert_eq!(v.model_ready_ms, Some(500));
    assert_eq!(v.figures.first_task_ms, Some(2_000));
    assert_eq!(
        (v.models[0].load_s, v.models[0].cpu_s, v.models[0].bytes),
        (2.0, 1.5, 1 << 20)
    );
    let w: BTreeMap<i32, (Vec<String>, Vec<String>)> = s
        .worker_views()
        .into_iter()
        .map(|w| (w.id, (w.ready, w.loading)))
        .collect();
    assert_eq!(w[&13], (vec![format!("j{j1}")], vec![format!("j{j2}")]));
    assert_eq!(w[&15].0, [format!("j{j1}"), format!("j{j2}")]);
    // job 2 is cancelled: the list changes again, without it
    s.cancel(j2, 3_000).unwrap();
    let JobsResponse::Warm { jobs, .. } = ask(&mut s, 11, None, both, c2, 3_100) else {
        panic!("the list changed")
    };
    assert_eq!(jobs.iter().map(|j| j.0).collect::<Vec<_>>(), [j1]);
}

#[test]
fn fair_time_counts_each_workers_cycle_smoothed_and_workers_alike() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let mut s = sched(d.path(), &stores, 0);
    let j = submit(&mut s, d.path(), "a", 40, 1);
    let catalog = s.catalog;
    let ready = || vec![model_status(j, ModelState::Ready)];
    let mut tasks: BTreeMap<i32, Task> = BTreeMap::new();
    for w in [9, 11] {
        let JobsResponse::Infer { task, .. } = ask(&mut s, w, None, ready(), catalog, 1_000) else {
            panic!()
        };
        tasks.insert(w, task);
    }
    // worker 9 reports every 2 s, worker 11 every 4 s (its own measure says 1 s: the
    // cycle, hand-out to report, is what counts)
    for k in 1..=12u64 {
        let t = 1_000 + 2_000 * k;
        for (w, every) in [(9, 1), (11, 2)] {
            if k % every == 0 {
                let f = Finished {
                    took_ms: 1_000,
                    ..rows(j, &tasks[&w])
                };
                let JobsResponse::Infer { task, .. } = ask(&mut s, w, Some(f), ready(), catalog, t) else {
                    panic!()
                };
                tasks.insert(w, task);
            }
        }
    }
    // each worker weighs alike: (2 + 4) / 2, though worker 9 ran twice the queries
    let v = s.view(j, 25_000).unwrap();
    assert!((v.smoothed_seconds_per_query.unwrap() - 3.0).abs() < 1e-9, "{v:?}");
}

/// Ten workers on two jobs whose queries take 4.6 s and 5.4 s, for 10 minutes: the
/// ideal is 4.6 / 5.4; the split alternates 5 / 5 and 4 / 6 so that each job gets
/// its share on average, and the two jobs' query rates match.
#[test]
fn two_jobs_between_whole_splits_get_their_shares_over_time() {
    let d = tempfile::tempdir().unwrap();
    let stores = Stores::default();
    let mut s = sched(d.path(), &stores, 0);
    let cost = |job: u32| if job == 1 { 4_600 } else { 5_400 };
    submit(&mut s, d.path(), "a", 700, 0);
    submit(&mut s, d.path(), "b", 700, 0);
    let catalog = s.catalog;
    let models = vec![model_status(1, ModelState::Ready), model_status(2, ModelState::Ready)];
    let workers: Vec<i32> = (0..10).map(|k| 9 + 2 * k).collect();
    // each worker: the task it runs, its job and when it ends
    let mut running: BTreeMap<i32, Option<(u32, Task, u64)>> = workers.iter().map(|&w| (w, None)).collect();
    let mut splits: Vec<usize> = Vec::new();
    let mut done = [0u64; 2];
    let mut done_at_300s = [0u64; 2];
    let mut t = 0;
    while t <= 600_000 {
        for &w in &workers {
            let finished = match &running[&w] {
                Some((job, task, end)) if *end <= t => {
                    done[*job as usize - 1] += 1;
                    // no outputs: nothing to write (the jobs do not end here)
                    Some(Finished {
                        job: *job,
                        task: task.id,
                        report: Default::default(),
                        predictions: None,
                        rows: None,
                        took_ms: cost(*job),
                    })
                }
                Some(_) => continue,
                None => None,
            };
            let r = ask(&mut s, w, finished, models.clone(), catalog, t);
            running.insert(
                w,
                match r {
                    JobsResponse::Infer { job, task, .. } => Some((job, task, t + cost(job))),
                    _ => None,
                },
            );
        }
        s.tick(t);
        if t % 1_000 == 0 && t >= 60_000 {
            splits.push(s.view(1, t).unwrap().workers);
        }
        if t == 300_000 {
            done_at_300s = done;
        }
        t += 100;
    }
    let mean = splits.iter().sum::<usize>() as f64 / splits.len() as f64;
    assert!((mean - 4.6).abs() < 0.1, "job 1 averaged {mean} workers");
    assert!(splits.iter().all(|&c| c == 4 || c == 5), "{splits:?}");
    assert!(splits.contains(&4) && splits.contains(&5));
    // the two jobs' query counts over the last 5 minutes are within 3%
    let (a, b) = (done[0] - done_at_300s[0], done[1] - done_at_300s[1]);
    let gap = (a as f64 - b as f64).abs() / a.max(b) as f64;
    assert!(gap < 0.03, "{a} vs {b} queries: gap {gap}");
    let v = s.view(1, t).unwrap();
    assert!((v.ideal_workers.unwrap() - 4.6).abs() < 0.01, "{v:?}");
}
