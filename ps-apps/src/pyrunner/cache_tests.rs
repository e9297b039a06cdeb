//! The warm-up decisions, driven deterministically: the runner's status as plain
//! values, time passed in.

use super::*;

const MB: u64 = 1 << 20;

fn model(name: &str) -> UserModel {
    UserModel::Runner {
        function: format!("{name}:f"),
        pythonpath: None,
    }
}

fn job(j: u32) -> WarmJob {
    WarmJob {
        job: j,
        model: model(&format!("m{j}")),
        load_limit_ms: 120_000,
    }
}

fn st(job: u32, state: ModelState, bytes: u64) -> ModelStatus {
    ModelStatus {
        job,
        state,
        error: (state == ModelState::Failed).then(|| format!("ImportError: m{job}")),
        bytes,
        rss_growth: 0,
        load_s: 1.0,
        cpu_s: 0.5,
        ready_ago_ms: (state == ModelState::Ready).then_some(0),
    }
}

fn warms(a: &[Action]) -> Vec<u32> {
    a.iter()
        .filter_map(|x| match x {
            Action::Warm(j, _) => Some(*j),
            _ => None,
        })
        .collect()
}

fn drops(a: &[Action]) -> Vec<u32> {
    a.iter()
        .filter_map(|x| match x {
            Action::Drop(j) => Some(*j),
            _ => None,
        })
        .collect()
}

#[test]
fn every_running_job_is_warmed_once_the_assigned_one_first_and_ended_ones_dropped() {
    let mut c = ModelCache::new(0);
    let a = c.plan(&[job(1), job(2), job(3)], Some(2), 0);
    assert_eq!(warms(&a), [2, 1, 3], "the assigned job first, then the list's order");
    assert_eq!(a[0], Action::Warm(2, model("m2")));
    // asked once: loading, nothing more to do
    assert!(c.plan(&[job(1), job(2), job(3)], Some(2), 10).is_empty());
    let seen = [
        st(1, ModelState::Ready, 10 * MB),
        st(2, ModelState::Loading, 0),
        st(3, ModelState::Ready, 20 * MB),
    ];
    assert!(c.observe(&seen, 20).is_empty());
    assert_eq!(c.ready(), [1, 3]);
    assert_eq!(c.used_bytes(), 30 * MB, "the loading model's size is not known yet");
    // job 1 ended: its model goes
    let a = c.plan(&[job(2), job(3)], Some(2), 30);
    assert_eq!((drops(&a), warms(&a)), (vec![1], vec![]));
    // the runner was replaced (it lists nothing): every model is warmed again
    assert!(c.observe(&[], 40).is_empty());
    assert_eq!(warms(&c.plan(&[job(2), job(3)], None, 50)), [2, 3]);
}

#[test]
fn over_the_budget_the_least_recently_used_model_goes_never_the_assigned_one() {
    let mut c = ModelCache::new(100 * MB);
    c.plan(&[job(1), job(2)], Some(1), 0);
    c.observe(
        &[st(1, ModelState::Ready, 40 * MB), st(2, ModelState::Ready, 40 * MB)],
        10,
    );
    c.used(1, 20);
    c.used(2, 30);
    c.used(1, 40); // job 2 is now the least recently used

    // job 3 arrives: its size is unknown, estimated as the others' mean (40 MB)
    let a = c.plan(&[job(1), job(2), job(3)], Some(1), 50);
    assert_eq!((drops(&a), warms(&a)), (vec![2], vec![3]), "{a:?}");
    assert_eq!(c.used_bytes(), 80 * MB);
    // job 2 was dropped for room: not warmed again in the background...
    c.observe(
        &[st(1, ModelState::Ready, 40 * MB), st(3, ModelState::Ready, 40 * MB)],
        60,
    );
    assert!(c.plan(&[job(1), job(2), job(3)], Some(1), 70).is_empty());
    // ...but at once when the worker is assigned to it; the least recently used
    // of the others (job 1 now: used at 40, job 3 ready at 60) makes room
    let a = c.plan(&[job(1), job(2), job(3)], Some(2), 80);
    assert_eq!((drops(&a), warms(&a)), (vec![1], vec![2]), "{a:?}");
}

#[test]
fn a_model_larger_than_measured_makes_room_once_its_size_is_known() {
    let mut c = ModelCache::new(100 * MB);
    c.plan(&[job(1), job(2)], Some(2), 0);
    // both loaded: 150 MB in all; job 1 (not assigned, ready first) goes
    c.observe(&[st(1, ModelState::Ready, 90 * MB), st(2, ModelState::Loading, 0)], 10);
    c.observe(
        &[st(1, ModelState::Ready, 90 * MB), st(2, ModelState::Ready, 60 * MB)],
        20,
    );
    assert_eq!(drops(&c.plan(&[job(1), job(2)], Some(2), 30)), [1]);
    // the assigned job's model alone over the budget stays: its queries need it
    let mut c = ModelCache::new(50 * MB);
    c.plan(&[job(1)], Some(1), 0);
    c.observe(&[st(1, ModelState::Ready, 80 * MB)], 10);
    assert!(c.plan(&[job(1)], Some(1), 20).is_empty());
    // a job with no room even after dropping every other model waits until assigned
    let a = c.plan(&[job(1), job(2)], Some(1), 30);
    assert!(a.is_empty(), "{a:?}");
    let a = c.plan(&[job(1), job(2)], Some(2), 40);
    assert_eq!((drops(&a), warms(&a)), (vec![1], vec![2]));
}

#[test]
fn a_failed_load_is_reported_once_and_tried_again_only_for_the_assigned_job() {
    let mut c = ModelCache::new(0);
    c.plan(&[job(1), job(2)], None, 0);
    let f = c.observe(&[st(1, ModelState::Failed, 0), st(2, ModelState::Loading, 0)], 10);
    assert_eq!(f, [(1, "ImportError: m1".to_string())]);
    assert!(
        c.observe(&[st(1, ModelState::Failed, 0), st(2, ModelState::Loading, 0)], 20)
            .is_empty(),
        "reported once"
    );
    assert!(
        c.plan(&[job(1), job(2)], None, 5_000).is_empty(),
        "not retried in the background"
    );
    // assigned: tried again RETRY_MS after the failure was seen
    assert!(c.plan(&[job(1), job(2)], Some(1), 10 + RETRY_MS - 1).is_empty());
    assert_eq!(warms(&c.plan(&[job(1), job(2)], Some(1), 10 + RETRY_MS)), [1]);
    // fails again: reported again (each failed attempt counts)
    let f = c.observe(&[st(1, ModelState::Failed, 0), st(2, ModelState::Loading, 0)], 2_000);
    assert_eq!(f.len(), 1);
    // a runner replaced meanwhile does not make a failed model retried in the background
    c.observe(&[], 2_100);
    assert_eq!(warms(&c.plan(&[job(1), job(2)], None, 9_000)), [2]);
}

#[test]
fn a_load_past_its_limit_is_given_up() {
    let mut c = ModelCache::new(0);
    let mut slow = job(1);
    slow.load_limit_ms = 5_000;
    c.plan(&[slow.clone(), job(2)], Some(1), 0);
    c.observe(&[st(1, ModelState::Loading, 0), st(2, ModelState::Ready, MB)], 100);
    assert!(c.plan(&[slow.clone(), job(2)], Some(1), 5_000).is_empty());
    let a = c.plan(&[slow.clone(), job(2)], Some(1), 5_001);
    assert_eq!(a, [Action::GiveUp(1)]);
    // the runner is killed: job 2 is warmed again at once, job 1 after RETRY_MS
    c.observe(&[], 5_002);
    assert_eq!(warms(&c.plan(&[slow.clone(), job(2)], Some(1), 5_003)), [2]);
    assert_eq!(warms(&c.plan(&[slow, job(2)], Some(1), 5_001 + RETRY_MS)), [1]);
}

#[test]
fn a_runner_that_would_not_take_the_request_counts_as_a_failed_load() {
    let mut c = ModelCache::new(0);
    assert_eq!(warms(&c.plan(&[job(1), job(2)], Some(1), 0)), [1, 2]);
    // the interpreter is missing: neither request reached a runner
    c.failed(1, 5);
    c.failed(2, 5);
    c.observe(&[], 6);
    assert!(c.plan(&[job(1), job(2)], Some(1), 7).is_empty(), "no retry at once");
    assert_eq!(warms(&c.plan(&[job(1), job(2)], Some(1), 5 + RETRY_MS)), [1]);
}
