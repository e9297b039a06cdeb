//! The jobs API's door tried as an attacker would, on real `psrs cluster` processes:
//!
//! - on a cluster with a secret (HTTPS), one anonymous TLS connection sending a header
//!   line that never ends, in large writes and in many small ones: the scheduler's
//!   memory (VmRSS) must not grow beyond a few MB and the connection must be refused;
//!   a header trickled a byte at a time is cut off by the header-read timeout;
//! - 300 slow anonymous connections (a byte every 2 s, at the TLS handshake and after
//!   it) must not lock out a member: `psrs job list` with the secret still works;
//! - on the README's default cluster (no security, the API on loopback) a cross-origin
//!   `POST /jobs` with `Content-Type: text/plain` and no token, as any web page can
//!   send, is refused and nothing runs; so is a request with a foreign Host (DNS
//!   rebinding), and with the token, a foreign Origin or a non-JSON body;
//! - an anonymous TLS connection gets at most a 401, on every route.

mod common;

use common::jobs::{jobs_cluster, Api, ENV};
use common::{free_port, Cluster};
use ps_apps::bench::http_attack::{flood, rss_kb, slow_connections, Conn};
use ps_core::tls::{CertRole, Credentials};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

/// A jobs cluster (0 servers, 1 worker) whose nodes share the cluster secret in
/// `secret`; its API at `https://ADDR`, up.
struct Secured {
    c: Cluster,
    addr: String,
    secret: PathBuf,
}

impl Secured {
    fn start() -> Secured {
        let mut env = ENV.to_vec();
        env.push(("DMLC_PS_VAN_TYPE", "tcp"));
        let mut c = Cluster::new(0, 1, &[], &env, LIMIT);
        let secret = c.dir().join("cluster.secret");
        common::write_private(&secret, "the-secret-of-the-http-api-test-cluster");
        let addr = format!("127.0.0.1:{}", free_port());
        let work = c.dir().join("work").display().to_string();
        let args = ["cluster", "--stats-addr", &addr, "--work-dir", &work];
        let s = secret.display().to_string();
        for role in ["scheduler", "worker"] {
            c.spawn_with(role, &args, &[("PS_SECRET_FILE", &s)]);
        }
        let me = Secured { c, addr, secret };
        let up = Instant::now();
        while let Err(e) = me.member(&["list"]) {
            assert!(
                up.elapsed() < Duration::from_secs(60),
                "the API never came up: {e}\n{}",
                me.c.dump()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        me
    }

    /// `psrs job ARGS` as a member (with the secret).
    fn member(&self, args: &[&str]) -> Result<String, String> {
        let s = self.secret.display().to_string();
        Api(format!("https://{}", self.addr)).run_env(&[("PS_SECRET_FILE", &s), ("PSRS_API_TOKEN", "")], args)
    }

    /// The client configuration of an anonymous caller that trusts the cluster's CA
    /// (it has seen the server's certificate) but has no client certificate.
    fn anonymous(&self) -> Arc<rustls::ClientConfig> {
        let vars = [("PS_SECRET_FILE".to_string(), self.secret.display().to_string())].into();
        let sec = ps_core::config::Security::from_vars(&vars).unwrap();
        let id = Credentials::from_secret(sec.secret.as_ref().unwrap(), CertRole::Client).unwrap();
        id.trust().http_client_config(None).unwrap()
    }

    fn scheduler_pid(&self) -> u32 {
        self.c.procs[0].pid()
    }
}

/// The largest socket buffer the kernel gives a TCP connection (the third figure of
/// `/proc/sys/net/ipv4/NAME`, `tcp_wmem` or `tcp_rmem`), in bytes.
fn tcp_buffer_ceiling(name: &str) -> usize {
    let path = format!("/proc/sys/net/ipv4/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no third figure in {text:?}"))
}

/// The status code of an HTTP answer (0: none).
fn status(answer: &str) -> u16 {
    answer
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_header_that_never_ends_is_refused_and_the_scheduler_stays_small() {
    let sc = Secured::start();
    let anon = sc.anonymous();
    let pid = sc.scheduler_pid();
    std::thread::sleep(Duration::from_millis(500));
    let rss = |pid| rss_kb(pid).expect("VmRSS in /proc/PID/status");
    let before = rss(pid);

    // one header line without end, in 64 KB writes, up to 256 MB
    let mut s = Conn::open(&sc.addr, Some(&anon)).unwrap();
    let refused = flood(&mut s, 64 << 10, Duration::ZERO, 256 << 20);
    let grown = rss(pid).saturating_sub(before);
    let said = s.answer();
    // what the two kernels may hold between the programs when the server closes is
    // not the server's: the client's send and the server's receive buffer ceilings
    let in_kernels = tcp_buffer_ceiling("tcp_wmem") + tcp_buffer_ceiling("tcp_rmem");
    assert!(
        refused.is_some_and(|n| n < (1 << 20) + in_kernels),
        "the endless header was taken: {refused:?} bytes before a refusal; the scheduler grew {grown} KB\n{}",
        sc.c.dump()
    );
    assert!(
        matches!(status(&said), 0 | 401 | 431 | 400),
        "answered with more than a refusal: {said}"
    );
    assert!(grown < 4 << 10, "the scheduler grew {grown} KB (from {before} KB)");
    eprintln!(
        "an endless header: refused after {refused:?} bytes, answered {}, the scheduler grew {grown} KB",
        status(&said)
    );

    // the same in many small writes (one read each on the server)
    let mut s = Conn::open(&sc.addr, Some(&anon)).unwrap();
    let refused = flood(&mut s, 64, Duration::from_millis(1), 256 << 10);
    let grown = rss(pid).saturating_sub(before);
    assert!(
        refused.is_some_and(|n| n < 64 << 10),
        "a header in small reads was taken: {refused:?} bytes before a refusal\n{}",
        sc.c.dump()
    );
    assert!(grown < 4 << 10, "the scheduler grew {grown} KB (from {before} KB)");
    eprintln!("a header in 64-byte writes: refused after {refused:?} bytes, the scheduler grew {grown} KB");

    // a header a byte at a time, never finished: cut off by the header-read timeout
    let mut s = Conn::open(&sc.addr, Some(&anon)).unwrap();
    let start = Instant::now();
    let refused = flood(&mut s, 1, Duration::from_millis(500), 80);
    let took = start.elapsed();
    assert!(
        refused.is_some() && took < Duration::from_secs(30),
        "a header trickled for {took:?} and was not cut off ({refused:?})\n{}",
        sc.c.dump()
    );
    eprintln!("a header trickled a byte every 0.5 s: cut off after {took:?}");
    // and members still get in
    sc.member(&["list"]).unwrap_or_else(|e| panic!("{e}\n{}", sc.c.dump()));
}

#[test]
fn three_hundred_slow_anonymous_connections_do_not_lock_out_a_member() {
    let sc = Secured::start();
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, cfg, s2) = (sc.addr.clone(), sc.anonymous(), Arc::clone(&stop));
    let attacker = std::thread::spawn(move || slow_connections(&addr, Some(&cfg), 300, &s2));
    std::thread::sleep(Duration::from_secs(5));
    let mut fails = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        match sc.member(&["list"]) {
            Ok(_) => {}
            Err(e) => fails.push(format!("after {:?}: {e}", t.elapsed())),
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    stop.store(true, Ordering::Relaxed);
    let opened = attacker.join().unwrap();
    eprintln!(
        "{opened} slow connections opened in all; member failures: {}",
        fails.len()
    );
    assert!(
        fails.is_empty(),
        "a member was locked out by {opened} slow connections: {fails:?}\n{}",
        sc.c.dump()
    );
}

#[test]
fn an_anonymous_tls_connection_gets_at_most_a_401() {
    let sc = Secured::start();
    let anon = sc.anonymous();
    let routes = [
        ("GET", "/"),
        ("GET", "/index.html"),
        ("GET", "/jobs"),
        ("GET", "/jobs/j1"),
        ("GET", "/workers"),
        ("GET", "/history"),
        ("GET", "/stats.json"),
        ("GET", "/metrics"),
        ("GET", "/assets/uPlot.js"),
        ("GET", "/nope"),
        ("POST", "/jobs"),
        ("DELETE", "/jobs/j1"),
    ];
    for (method, path) in routes {
        let mut s = Conn::open(&sc.addr, Some(&anon)).unwrap();
        let body = r#"{"kind":"train"}"#;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            sc.addr,
            body.len()
        )
        .unwrap();
        s.flush().unwrap();
        let said = s.answer();
        assert_eq!(status(&said), 401, "{method} {path}: {said}");
        let body = said.split("\r\n\r\n").nth(1).unwrap_or("");
        assert!(
            body.len() < 300 && body.contains("\"error\""),
            "{method} {path}: a 401 says one line: {body}"
        );
    }
}

/// `HOST:PORT` of an API's URL.
fn addr_of(api: &Api) -> String {
    api.0.trim_start_matches("http://").to_string()
}

/// The token the default cluster wrote into its work dir, if any.
fn work_dir_token(work: &Path) -> Option<String> {
    std::fs::read_to_string(work.join("api-token"))
        .ok()
        .map(|t| t.trim().to_string())
}

/// One HTTP/1.1 request over plain TCP; returns the whole answer (empty: no
/// connection).
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let Ok(mut s) = Conn::open(addr, None) else {
        return String::new();
    };
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += "\r\n";
    req += body;
    s.write_all(req.as_bytes()).unwrap();
    s.answer()
}

#[test]
fn a_web_page_cannot_submit_a_job_to_the_default_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let (c, api) = jobs_cluster(dir.path(), 1, &[], ENV, LIMIT);
    let (addr, work) = (addr_of(&api), dir.path().join("work"));
    let mods = dir.path().join("mods");
    std::fs::create_dir(&mods).unwrap();
    let mark = dir.path().join("pwned");
    std::fs::write(
        mods.join("pwn.py"),
        format!(
            "def go(xs):\n    open({:?}, 'w').write('ran')\n    return [1 for _ in xs]\n",
            mark.display()
        ),
    )
    .unwrap();
    let data = dir.path().join("inputs");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("a.txt"), "x").unwrap();
    let job = serde_json::json!({
        "kind": "infer", "runner": "pwn:go", "pythonpath": mods, "data": data,
        "out": dir.path().join("out.csv"),
    })
    .to_string();
    let host = addr.as_str();

    // what a browser sends from any page: a "simple" cross-origin request, no token
    let said = http(
        &addr,
        "POST",
        "/jobs",
        &[
            ("Host", host),
            ("Content-Type", "text/plain"),
            ("Origin", "http://evil.example"),
        ],
        &job,
    );
    assert!(
        matches!(status(&said), 401 | 403 | 415),
        "a cross-origin text/plain POST was not refused: {said}"
    );
    // DNS rebinding: the page's own name resolves to 127.0.0.1
    let said = http(&addr, "GET", "/jobs", &[("Host", "evil.example:80")], "");
    assert!(
        matches!(status(&said), 401 | 403),
        "a foreign Host was answered: {said}"
    );
    let said = http(
        &addr,
        "POST",
        "/jobs",
        &[
            ("Host", "evil.example"),
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
        ],
        &job,
    );
    assert!(
        matches!(status(&said), 401 | 403),
        "a rebound POST was answered: {said}"
    );

    // with the token (read from the work dir), the other checks still refuse
    let token = work_dir_token(&work).expect("the cluster wrote its token into its work dir");
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());
    type Case<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);
    let cases: [Case; 4] = [
        (
            &[
                auth,
                ("Host", host),
                ("Content-Type", "application/json"),
                ("Origin", "http://evil.example"),
            ],
            403,
            "a foreign Origin",
        ),
        (
            &[auth, ("Host", host), ("Content-Type", "text/plain")],
            415,
            "a body that is not JSON",
        ),
        (
            &[auth, ("Host", "evil.example"), ("Content-Type", "application/json")],
            403,
            "a foreign Host",
        ),
        (
            &[
                auth,
                ("Host", host),
                ("Content-Type", "application/json"),
                ("Origin", "null"),
            ],
            403,
            "Origin null",
        ),
    ];
    for (headers, want, what) in cases {
        let said = http(&addr, "POST", "/jobs", headers, &job);
        assert_eq!(status(&said), want, "{what}: {said}");
    }
    let said = http(&addr, "GET", "/jobs", &[("Host", "evil.example"), auth], "");
    assert_eq!(status(&said), 403, "a foreign Host with the token: {said}");

    // nothing ran, nothing was submitted
    std::thread::sleep(Duration::from_secs(3));
    assert!(!mark.exists(), "the attacker's code ran\n{}", c.dump());
    let list = api.run(&["list"]).unwrap();
    assert!(list.trim().is_empty(), "a job was submitted: {list}");
    // and the same request from the API's own page (Origin absent or its own) works
    let own = format!("http://{addr}");
    let said = http(
        &addr,
        "POST",
        "/jobs",
        &[
            auth,
            ("Host", host),
            ("Content-Type", "application/json"),
            ("Origin", &own),
        ],
        &job,
    );
    assert_eq!(status(&said), 201, "the API's own origin: {said}");
}

/// `promtool check metrics` (Debian's `prometheus`; the test fails naming it when it
/// is missing) on the `/metrics` of a running cluster, read without a token as the
/// operator allows with `PS_HTTP_OPEN_READS=1` (while a write still needs the token):
/// every metric has help text and the lint passes.
#[test]
fn metrics_are_readable_when_opened_and_pass_promtool() {
    let promtool = Command::new("promtool").arg("--version").output();
    assert!(
        promtool.is_ok_and(|o| o.status.success()),
        "no promtool: apt-get install prometheus (scripts/install-deps.sh does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut env = ENV.to_vec();
    env.push(("PS_HTTP_OPEN_READS", "1"));
    let (c, api) = jobs_cluster(dir.path(), 1, &[], &env, LIMIT);
    let addr = addr_of(&api);
    let start = Instant::now();
    let metrics = loop {
        let said = http(&addr, "GET", "/metrics", &[("Host", &addr)], "");
        if status(&said) == 200 && said.contains("psrs_node_up{") {
            break said.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{said}\n{}", c.dump());
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin.take().unwrap().write_all(metrics.as_bytes()).unwrap();
    let out = lint.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{metrics}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = http(
        &addr,
        "POST",
        "/jobs",
        &[("Host", &addr), ("Content-Type", "application/json")],
        "{}",
    );
    assert_eq!(status(&said), 401, "open reads open no writes: {said}");
}

/// `psrs cluster --no-code-jobs` refuses every job that would run the submitter's code
/// (a Python function, its pythonpath, a TorchScript file) with one line and a 403,
/// through `psrs job` and the API alike, and still runs inference over a psrs model.
#[test]
fn no_code_jobs_refuses_code_and_runs_models() {
    use common::jobs::{blobs, CLASSES, DIM};
    let dir = tempfile::tempdir().unwrap();
    let (c, api) = jobs_cluster(dir.path(), 1, &["--no-code-jobs"], ENV, LIMIT);
    let (addr, work) = (addr_of(&api), dir.path().join("work"));
    let data = dir.path().join("data.rio");
    blobs(&data, 200, 50, 3);
    let model = ps_apps::model::Model::Softmax {
        dim: DIM,
        classes: CLASSES,
    };
    let file = dir.path().join("m.model");
    ps_apps::model::save(&file, &model, &vec![0.0; model.num_params()]).unwrap();
    let (data, file) = (data.to_str().unwrap(), file.to_str().unwrap());
    let out = dir.path().join("out.csv");
    let out = out.to_str().unwrap();
    let mods = dir.path().display().to_string();
    for (code, field) in [
        (vec!["--runner", "m:f", "--pythonpath", mods.as_str()], "runner"),
        (vec!["--torch", file], "torch"),
    ] {
        let e = api
            .run(&[&["submit", "infer"], &code[..], &["--data", data, "--out", out]].concat())
            .unwrap_err();
        assert!(
            e.contains("403") && e.contains("--no-code-jobs") && e.contains(field),
            "{e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    }
    let token = work_dir_token(&work).unwrap();
    let bearer = format!("Bearer {token}");
    let said = http(
        &addr,
        "POST",
        "/jobs",
        &[
            ("Authorization", &bearer),
            ("Host", &addr),
            ("Content-Type", "application/json"),
        ],
        r#"{"kind":"infer","pythonpath":"/tmp","runner":"m:f","data":"/tmp","out":"/tmp/x.csv"}"#,
    );
    assert_eq!(status(&said), 403, "{said}");
    assert!(api.run(&["list"]).unwrap().trim().is_empty(), "nothing was submitted");
    let id = api.submit(&["infer", "--model", file, "--data", data, "--out", out]);
    api.until(&c, LIMIT, &id, "done", |j| j["state"] == "done");
}
