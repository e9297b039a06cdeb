//! The jobs dashboard in headless Chromium (Debian's `chromium`; the test fails naming
//! it when it is missing), on real processes: two training jobs run on 1 server and 4
//! workers and a worker is SIGKILLed. The page the browser renders must list the jobs,
//! name the active scheduler and its term, and have data in every chart (the point
//! counts the page writes into `#chart-points`): queries per second and workers per
//! job over time, each worker's job, loss and test accuracy per pass, and the node
//! death among the events. A screenshot is taken (`PSRS_DASHBOARD_PNG=PATH` keeps it,
//! e.g. for docs/dashboard.png) and checked to be a PNG of the window's size.

mod common;

use common::jobs::{blobs, env_with_heartbeat_timeout, jobs_cluster, train_args};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

fn browser() -> &'static str {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("no chromium: apt-get install chromium (scripts/install-deps.sh does)")
}

/// Runs headless Chromium on `url` with `what` (`--dump-dom` or `--screenshot=...`) and
/// a fresh profile; returns its stdout.
fn chromium(url: &str, what: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1000,1400",
            "--virtual-time-budget=4000",
            what,
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The JSON the page wrote into `#chart-points`.
fn chart_points(dom: &str) -> Option<Value> {
    let start = dom.find("id=\"chart-points\"")?;
    let body = &dom[start..];
    let body = &body[body.find('>')? + 1..];
    let body = &body[..body.find("</pre>")?];
    serde_json::from_str(&body.replace("&quot;", "\"")).ok()
}

#[test]
fn the_dashboard_charts_two_running_jobs_and_a_killed_worker_in_headless_chromium() {
    browser();
    let dir = tempfile::tempdir().unwrap();
    let (mut c, api) = jobs_cluster(dir.path(), 4, &[], &env_with_heartbeat_timeout("3"), LIMIT);
    let (train, test) = (dir.path().join("train.rio"), dir.path().join("test.rio"));
    blobs(&train, 2000, 100, 3);
    blobs(&test, 400, 100, 4);
    let (train, test) = (train.to_str().unwrap(), test.to_str().unwrap());
    let a = api.submit(&train_args(train, test, "softmax", "2000"));
    let b = api.submit(&train_args(train, test, "mlp", "2000"));
    for id in [&a, &b] {
        api.until(&c, LIMIT, id, "a pass evaluated", |j| {
            j["per_pass"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["accuracy"].is_f64()))
        });
    }
    c.kill(2 + 3); // the last worker
    let start = Instant::now();
    while !api.get("/history")["events"]
        .as_array()
        .is_some_and(|e| e.iter().any(|e| e["kind"] == "node-dead"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no death event\n{}",
            c.dump()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(3)); // a few samples after the death
                                                // the URL the cluster printed: the token once, kept in a cookie from then on
    let token = common::jobs::token_for(&api.0).expect("the cluster published its token");
    let url = format!("{}/?token={token}", api.0);
    let start = Instant::now();
    let (dom, points) = loop {
        let dom = chromium(&url, "--dump-dom");
        if let Some(p) = chart_points(&dom).filter(|p| p["samples"].as_u64().unwrap_or(0) > 0) {
            break (dom, p);
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the page never drew its charts:\n{dom}"
        );
    };
    for id in [&a, &b] {
        let row = &dom[dom.find(&format!("id=\"job-{id}\"")).expect("the job is listed")..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains("<td>train</td>") && row.contains("running"), "{row}");
    }
    assert!(dom.contains("active scheduler #0") && dom.contains("term 1"), "{dom}");
    let n = |k: &str| points[k].as_u64().unwrap_or(0);
    assert!(n("samples") >= 5, "{points}");
    for k in ["queries_per_s", "workers"] {
        assert!(n(k) >= 2 * 5, "{k}: two jobs over at least 5 samples: {points}");
    }
    assert!(n("timeline") >= 5, "{points}");
    assert!(n("loss") >= 2 && n("accuracy") >= 2, "per pass, both jobs: {points}");
    let kinds: Vec<&str> = points["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for k in ["takeover", "submitted", "node-dead"] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    let png = match std::env::var("PSRS_DASHBOARD_PNG") {
        Ok(p) => Path::new(&p).to_path_buf(),
        Err(_) => dir.path().join("dashboard.png"),
    };
    chromium(&url, &format!("--screenshot={}", png.display()));
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let (w, h) = (
        u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
        u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1000, 1400), "the window's size");
    for id in [&a, &b] {
        let _ = api.run(&["cancel", id]);
    }
}

/// The token the cluster wrote into its work dir (empty if none).
fn work_dir_token(work: &Path) -> String {
    std::fs::read_to_string(work.join("api-token"))
        .map(|t| t.trim().to_string())
        .unwrap_or_default()
}

/// Markup a page must show as text: each piece, if it became an element, would set
/// the document's title (an image that fails to load runs its `onerror`).
fn payload(what: &str) -> String {
    format!("<img src=x onerror=document.title='pwned-{what}'>")
}

/// Whatever a node, a job or its error says reaches the pages as text, never as
/// markup: on an open cluster (elastic workers) an intruder registers a worker whose
/// hostname is markup (a scheduler that validates hostnames refuses it: then the
/// pages simply do not list it), and an inference job's Python function fails with
/// markup as its error. Both pages (the jobs dashboard, the node
/// statistics at /index.html), rendered by headless Chromium, must keep their title
/// and show the markup as text.
#[test]
fn markup_in_a_hostname_or_an_error_is_shown_as_text_in_headless_chromium() {
    use ps_core::message::{Command as Cmd, Message};
    use ps_core::node::{Node, Role};
    browser();
    assert!(
        Command::new("python3").arg("-V").output().is_ok(),
        "python3 is not installed: apt-get install python3"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut env = common::jobs::ENV.to_vec();
    env.extend([("DMLC_PS_VAN_TYPE", "tcp"), ("PS_ELASTIC_WORKERS", "1")]);
    let (c, api) = jobs_cluster(dir.path(), 1, &["--python", "python3"], &env, LIMIT);
    let work = dir.path().join("work");

    // an intruder registers a worker named with markup (kept connected)
    let mut reg = Message::default();
    reg.meta.recver = 1;
    reg.meta.control.cmd = Cmd::AddNode;
    reg.meta.control.nodes = vec![Node {
        role: Role::Worker,
        id: -1,
        hostname: payload("node"),
        port: 1,
        is_recovery: false,
        incarnation: 7,
    }];
    let mut intruder = std::net::TcpStream::connect(("127.0.0.1", c.port)).unwrap();
    std::io::Write::write_all(&mut intruder, &common::tcp_frame(&reg)).unwrap();

    // a Python function whose error is markup
    let mods = dir.path().join("mods");
    std::fs::create_dir(&mods).unwrap();
    std::fs::write(
        mods.join("boom.py"),
        format!("def go(xs):\n    raise RuntimeError({:?})\n", payload("error")),
    )
    .unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::write(inputs.join("a.txt"), "x").unwrap();
    let out = dir.path().join("out.csv");
    let j = api.submit(&[
        "infer",
        "--runner",
        "boom:go",
        "--pythonpath",
        mods.to_str().unwrap(),
        "--data",
        inputs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--max-retries",
        "1",
    ]);
    api.until(&c, LIMIT, &j, "failed", |j| j["state"] == "failed");
    let node_listed = {
        let start = Instant::now();
        loop {
            let listed = api.get("/stats.json")["nodes"].as_array().is_some_and(|n| {
                n.iter()
                    .any(|n| n["addr"].as_str().unwrap_or("").contains("pwned-node"))
            });
            if listed || start.elapsed() > Duration::from_secs(5) {
                break listed;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    eprintln!("the intruder's worker is listed: {node_listed}");
    let token = common::jobs::token_for(&api.0).expect("the cluster published its token");
    assert_eq!(work_dir_token(&work), token, "the work dir holds the same token");
    let text = |what: &str| payload(what).replace('<', "&lt;").replace('>', "&gt;");
    for (page, title) in [("/", "psrs cluster"), ("/index.html", "psrs dashboard")] {
        let dom = chromium(&format!("{}{page}?token={token}", api.0), "--dump-dom");
        assert!(
            dom.contains(&format!("<title>{title}</title>")),
            "{page}: a script from the data ran:\n{dom}"
        );
        assert!(!dom.contains("<img"), "{page}: markup became an element:\n{dom}");
        if page == "/" {
            assert!(
                dom.contains(&text("error")),
                "{page}: the error is shown as text:\n{dom}"
            );
        } else if node_listed {
            assert!(
                dom.contains(&text("node")),
                "{page}: the node's address is shown as text:\n{dom}"
            );
        }
    }
    drop(intruder);
}
