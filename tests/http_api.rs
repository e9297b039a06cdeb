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

use common::jobs::{Api, ENV};
use common::{free_port, Cluster};
use ps_core::tls::{CertRole, Credentials};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(240);

/// A scheduler's resident memory in KB (`VmRSS` of /proc/PID/status).
fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

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
        std::fs::write(&secret, "the-secret-of-the-http-api-test-cluster").unwrap();
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

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// An anonymous TLS connection to `addr`, handshake done.
fn connect_tls(addr: &str, cfg: &Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let conn = rustls::ClientConnection::new(Arc::clone(cfg), ps_core::tls::server_name("127.0.0.1")).unwrap();
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(20)))?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// Whatever the server answered on `s` (until it closed, an error, or 2 s of silence).
fn answer<S: Read>(s: &mut S) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The status code of an HTTP answer (0: none).
fn status(answer: &str) -> u16 {
    answer
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Writes `head` then the endless header value in writes of `chunk` bytes, `pause`
/// apart, until the server refuses (a write fails) or `most` bytes were sent. Returns
/// the bytes sent before the refusal (None: never refused).
fn flood(s: &mut Tls, chunk: usize, pause: Duration, most: usize) -> Option<usize> {
    s.sock.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: ";
    if s.write_all(head).and_then(|()| s.flush()).is_err() {
        return Some(0);
    }
    let data = vec![b'a'; chunk];
    let mut sent = head.len();
    while sent < most {
        if s.write_all(&data).and_then(|()| s.flush()).is_err() {
            return Some(sent);
        }
        sent += chunk;
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    None
}

#[test]
fn a_header_that_never_ends_is_refused_and_the_scheduler_stays_small() {
    let sc = Secured::start();
    let anon = sc.anonymous();
    let pid = sc.scheduler_pid();
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kb(pid);

    // one header line without end, in 64 KB writes, up to 256 MB
    let mut s = connect_tls(&sc.addr, &anon).unwrap();
    let refused = flood(&mut s, 64 << 10, Duration::ZERO, 256 << 20);
    let grown = rss_kb(pid).saturating_sub(before);
    let said = answer(&mut s);
    assert!(
        refused.is_some_and(|n| n < 1 << 20),
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
    let mut s = connect_tls(&sc.addr, &anon).unwrap();
    let refused = flood(&mut s, 64, Duration::from_millis(1), 256 << 10);
    let grown = rss_kb(pid).saturating_sub(before);
    assert!(
        refused.is_some_and(|n| n < 64 << 10),
        "a header in small reads was taken: {refused:?} bytes before a refusal\n{}",
        sc.c.dump()
    );
    assert!(grown < 4 << 10, "the scheduler grew {grown} KB (from {before} KB)");
    eprintln!("a header in 64-byte writes: refused after {refused:?} bytes, the scheduler grew {grown} KB");

    // a header a byte at a time, never finished: cut off by the header-read timeout
    let mut s = connect_tls(&sc.addr, &anon).unwrap();
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

/// Keeps `n` slow anonymous connections open to `addr` until `stop`: half stuck in the
/// TLS handshake (a ClientHello's bytes, one every 2 s), half with the handshake done
/// and an HTTP header sent a byte every 2 s; each one the server closes is opened
/// again. Returns the connections opened in all.
fn slow_attack(addr: String, cfg: Arc<rustls::ClientConfig>, n: usize, stop: Arc<AtomicBool>) -> usize {
    enum Slow {
        Raw(TcpStream, usize),
        Tls(Box<Tls>, usize),
        Closed(bool),
    }
    // the start of a real ClientHello record, sent slowly (never finished)
    let hello = [0x16u8, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    let header = b"GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let open = |tls: bool| -> Slow {
        if tls {
            match connect_tls(&addr, &cfg) {
                Ok(s) => Slow::Tls(Box::new(s), 0),
                Err(_) => Slow::Closed(true),
            }
        } else {
            match TcpStream::connect(&addr) {
                Ok(s) => Slow::Raw(s, 0),
                Err(_) => Slow::Closed(false),
            }
        }
    };
    let mut conns: Vec<Slow> = (0..n).map(|i| open(i % 2 == 1)).collect();
    let mut opened = n;
    while !stop.load(Ordering::Relaxed) {
        for c in conns.iter_mut() {
            let next = match c {
                Slow::Raw(s, i) => {
                    let ok = s.write_all(&hello[*i % hello.len()..][..1]).is_ok();
                    *i += 1;
                    if ok {
                        continue;
                    }
                    false
                }
                Slow::Tls(s, i) => {
                    let ok = s
                        .write_all(&header[*i % header.len()..][..1])
                        .and_then(|()| s.flush())
                        .is_ok();
                    *i += 1;
                    if ok {
                        continue;
                    }
                    true
                }
                Slow::Closed(tls) => *tls,
            };
            *c = open(next);
            opened += 1;
        }
        for _ in 0..20 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    opened
}

#[test]
fn three_hundred_slow_anonymous_connections_do_not_lock_out_a_member() {
    let sc = Secured::start();
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, cfg, s2) = (sc.addr.clone(), sc.anonymous(), Arc::clone(&stop));
    let attacker = std::thread::spawn(move || slow_attack(addr, cfg, 300, s2));
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
        let mut s = connect_tls(&sc.addr, &anon).unwrap();
        let body = r#"{"kind":"train"}"#;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            sc.addr,
            body.len()
        )
        .unwrap();
        s.flush().unwrap();
        let said = answer(&mut s);
        assert_eq!(status(&said), 401, "{method} {path}: {said}");
        let body = said.split("\r\n\r\n").nth(1).unwrap_or("");
        assert!(
            body.len() < 300 && body.contains("\"error\""),
            "{method} {path}: a 401 says one line: {body}"
        );
    }
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
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
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
    answer(&mut s)
}

#[test]
fn a_web_page_cannot_submit_a_job_to_the_default_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let work = dir.path().join("work");
    let args = ["cluster", "--stats-addr", &addr, "--work-dir", work.to_str().unwrap()];
    let c = Cluster::start(0, 1, &args, ENV, LIMIT);
    let api = Api(format!("http://{addr}"));
    // the API is up: the member's `psrs job list` works (it finds the token itself)
    let up = Instant::now();
    while let Err(e) = api.run(&["list"]) {
        assert!(up.elapsed() < Duration::from_secs(60), "{e}\n{}", c.dump());
        std::thread::sleep(Duration::from_millis(100));
    }
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
    let addr = format!("127.0.0.1:{}", free_port());
    let work = dir.path().join("work");
    let args = ["cluster", "--stats-addr", &addr, "--work-dir", work.to_str().unwrap()];
    let mut env = ENV.to_vec();
    env.push(("PS_HTTP_OPEN_READS", "1"));
    let c = Cluster::start(0, 1, &args, &env, LIMIT);
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
