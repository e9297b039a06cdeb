//! A long-running cluster with many jobs, on real processes: one training job alone,
//! then two training jobs side by side with a third cancelled mid-way, then an
//! inference job over the first job's model; a worker is SIGKILLed during the training
//! jobs and another during the inference job. Checks: the side-by-side job reaches the
//! lone job's accuracy within a point, the cancelled job's shards are freed, every
//! record appears exactly once in the inference output in dataset order, and its
//! accuracy is the lone job's test accuracy (same model, same data). Prints the
//! figures of docs/benchmarks.md (submit to first query, kill to reallocation).

mod common;

use common::jobs::{blobs, now_ms, train_args, Api, ENV};
use common::{free_port, Cluster};
use serde_json::Value;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn training_and_inference_jobs_side_by_side_with_failures_and_cancel() {
    let addr = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let args = ["cluster", "--stats-addr", &addr, "--work-dir", work.to_str().unwrap()];
    let mut c = Cluster::start(2, 4, &args, ENV, LIMIT);
    let api = Api(format!("http://{addr}"));
    api.wait_up(&c);
    let (train, test) = (dir.path().join("train.rio"), dir.path().join("test.rio"));
    blobs(&train, 4000, 200, 7);
    let labels = blobs(&test, 1000, 50, 11);
    let (train, test) = (train.to_str().unwrap(), test.to_str().unwrap());
    let m1 = dir.path().join("m1.model");
    let m1 = m1.to_str().unwrap();

    // one job alone
    let j1 = api.submit(&[train_args(train, test, "softmax", "3"), vec!["--out", m1]].concat());
    let v1 = api.until(&c, LIMIT, &j1, "done", |j| j["state"] == "done");
    let acc1 = v1["accuracy"].as_f64().unwrap();
    assert!(acc1 > 0.7, "lone job accuracy {acc1}");

    // two side by side, and a third to cancel; a worker dies mid-way
    let t2 = now_ms();
    let j2 = api.submit(&train_args(train, test, "softmax", "3"));
    let j3 = api.submit(&train_args(train, test, "mlp", "3"));
    let j4 = api.submit(&train_args(train, test, "softmax", "50"));
    let v3 = api.until(&c, LIMIT, &j3, "a first query", |j| {
        j["first_query_ms"].as_u64().is_some()
    });
    let first_query_s = (v3["first_query_ms"].as_u64().unwrap() - t2) as f64 / 1000.0;
    api.until(&c, LIMIT, &j2, "progress", |j| j["progress"].as_f64().unwrap() > 0.2);
    let killed = Instant::now();
    c.kill(3);
    let start = Instant::now();
    let realloc_s = loop {
        let ws = api.get("/workers");
        if ws.as_array().is_some_and(|a| a.len() == 3) {
            break killed.elapsed().as_secs_f64();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "dead worker never dropped: {ws}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    api.until(&c, LIMIT, &j4, "running", |j| j["state"] == "running");
    let cancelled = api.run(&["cancel", &j4]).unwrap();
    assert!(cancelled.contains("cancelled"), "{cancelled}");
    assert!(api.run(&["cancel", &j4]).unwrap_err().contains("409"));
    assert!(api.run(&["wait", &j4]).is_err(), "waiting on a cancelled job fails");
    let v2 = api.until(&c, LIMIT, &j2, "done", |j| j["state"] == "done");
    let v3 = api.until(&c, LIMIT, &j3, "done", |j| j["state"] == "done");
    let (acc2, acc3) = (v2["accuracy"].as_f64().unwrap(), v3["accuracy"].as_f64().unwrap());
    assert!((acc2 - acc1).abs() <= 0.01, "side by side {acc2} vs alone {acc1}");
    assert!(acc3 > 0.7, "mlp accuracy {acc3}");
    assert_eq!(api.status(&j4)["state"], "cancelled", "a cancelled job stays cancelled");
    for s in [1, 2] {
        c.wait_for_output(s, "the cancelled job's shard freed", |o| {
            o.contains(&format!("job {j4} ended: its shard is freed"))
        });
    }

    // inference over the lone job's model; another worker dies mid-way
    let out = dir.path().join("out.csv");
    let j5 = api.submit(&["infer", "--model", m1, "--data", test, "--out", out.to_str().unwrap()]);
    api.until(&c, LIMIT, &j5, "progress", |j| j["progress"].as_f64().unwrap() > 0.1);
    c.kill(4);
    let v5 = api.until(&c, LIMIT, &j5, "done", |j| j["state"] == "done");
    let acc5 = v5["accuracy"].as_f64().unwrap();
    assert!(
        (acc5 - acc1).abs() < 1e-3,
        "inference accuracy {acc5} vs the job's test accuracy {acc1}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), labels.len(), "every record once");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[0], i.to_string(), "dataset order");
        assert_eq!(r[3], labels[i].to_string(), "record {i}'s label");
    }
    let list = api.run(&["list"]).unwrap();
    assert_eq!(list.lines().count(), 5, "{list}");
    println!("figure: submit of a second job to its first finished query: {first_query_s:.3} s");
    println!("figure: worker kill -9 to allocation updated (heartbeat timeout 1 s): {realloc_s:.3} s");
    println!("accuracy alone {acc1:.4}, side by side {acc2:.4}, mlp {acc3:.4}, inference {acc5:.4}");
}

/// Fair-time figures on 4 workers (no timed assertion; over many runs on 10 workers:
/// `tests/fair_time.rs`): in each mode, two training
/// jobs of different cost (softmax, and an MLP with 1024 hidden units) share 4
/// workers; the split and the query rates are sampled every 0.5 s for 8 s once both
/// jobs have a measured rate, and the medians printed. Checked: every worker is
/// allocated and each job has at least one.
#[test]
fn fair_time_split_of_two_jobs_of_different_cost_in_each_mode() {
    fair_time_split(4, ENV);
}

fn fair_time_split(workers: usize, env: &[(&str, &str)]) {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.rio");
    blobs(&train, 4000, 200, 5);
    let train = train.to_str().unwrap();
    for mode in ["local", "global"] {
        let extra = ["--scheduling", mode, "--realloc-ms", "1000"];
        let (c, api) = common::jobs::jobs_cluster(&dir.path().join(mode), workers, &extra, env, LIMIT);
        let cheap = api.submit(&train_args(train, train, "softmax", "1000"));
        let mut wide = train_args(train, train, "mlp", "1000");
        let h = wide.iter().position(|a| *a == "16").unwrap();
        wide[h] = "1024";
        let costly = api.submit(&wide);
        for id in [&cheap, &costly] {
            api.until(&c, LIMIT, id, "a measured rate", |j| j["seconds_per_query"].is_number());
        }
        // both jobs from one snapshot (GET /jobs): two GETs may straddle a reallocation
        let both = || {
            let all = api.get("/jobs");
            let find = |id: &str| all.as_array().unwrap().iter().find(|j| j["id"] == id).cloned().unwrap();
            (find(&cheap), find(&costly))
        };
        // every worker has asked for work once (a worker is known from its first request)
        let start = std::time::Instant::now();
        while {
            let (a, b) = both();
            a["workers"].as_u64().unwrap_or(0) + b["workers"].as_u64().unwrap_or(0) != workers as u64
        } {
            assert!(start.elapsed() < LIMIT, "not every worker allocated\n{}", c.dump());
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut samples: Vec<[f64; 6]> = Vec::new();
        for _ in 0..16 {
            std::thread::sleep(Duration::from_millis(500));
            let (a, b) = both();
            let f = |j: &Value, k: &str| j[k].as_f64().unwrap_or(f64::NAN);
            samples.push([
                f(&a, "workers"),
                f(&b, "workers"),
                f(&a, "queries_per_s"),
                f(&b, "queries_per_s"),
                f(&a, "seconds_per_query"),
                f(&b, "seconds_per_query"),
            ]);
            assert_eq!(f(&a, "workers") + f(&b, "workers"), workers as f64, "{a}\n{b}");
            assert!(f(&a, "workers") >= 1.0 && f(&b, "workers") >= 1.0, "{a}\n{b}");
        }
        let med = |k: usize| {
            let mut v: Vec<f64> = samples.iter().map(|s| s[k]).collect();
            v.sort_by(|x, y| x.total_cmp(y));
            v[v.len() / 2]
        };
        let (qa, qb) = (med(2), med(3));
        let ideal = workers as f64 * med(4) / (med(4) + med(5));
        println!(
            "figure: {mode} mode, {workers} workers: softmax {} workers {qa:.2} q/s ({:.3} s/query), mlp-1024 {} workers {qb:.2} q/s ({:.3} s/query); rate gap {:.1}%; local rule's split {ideal:.2} / {:.2}",
            med(0),
            med(4),
            med(1),
            med(5),
            100.0 * (qa - qb).abs() / qa.max(qb),
            workers as f64 - ideal
        );
        for id in [&cheap, &costly] {
            api.run(&["cancel", id]).unwrap();
        }
    }
}
