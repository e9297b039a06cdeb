//! `psrs job` as a shell pipeline's first command: a reader that stops early
//! (`psrs job list | head -1`) ends the client quietly with success, never a panic.
//! The jobs API is stood in for by a local HTTP server answering a long job list.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn job_list_into_a_closed_pipe_ends_quietly() {
    let jobs: Vec<serde_json::Value> = (0..20_000)
        .map(|i| serde_json::json!({"id": format!("j{i}"), "kind": "train", "state": "done", "workers": 0}))
        .collect();
    let body = serde_json::to_string(&jobs).unwrap();
    let http = common::fake_http::FakeHttp::start(move |_| common::fake_http::Resp::new(200, body.clone()));
    let addr = http.addr;
    let mut child = Command::new(env!("CARGO_BIN_EXE_psrs"))
        .args(["job", "--api", &format!("http://{addr}"), "list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("j0 "), "first line: {first:?}");
    // the reader is gone (stdout dropped above); the client must end by itself
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("psrs job list did not end after its reader went away");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!err.contains("panicked"), "stderr: {err}");
    assert!(status.success(), "status {status}, stderr: {err}");
    drop(http);
}
