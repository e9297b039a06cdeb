//! Datasets and model files by URL, against a real S3-compatible server (`s3s-fs`, an
//! S3 API over a directory, from crates.io: `cargo install s3s-fs --features binary`;
//! scripts/test.sh installs it into target/tools) and an HTTP server with range
//! requests that this test runs (it also injects transient failures and logs every
//! range asked for).
//!
//! - `psrs train` reads `--train` from S3 and `--test` over HTTP and saves the model to
//!   S3 with `--out`; `psrs eval` reads both back by URL.
//! - Workers read only their tasks' chunks: every range request for data is exactly
//!   one chunk, and each chunk is read about once per pass.
//! - HTTP 503s and 502s are retried: the job finishes.
//! - A missing object fails `psrs train`, `psrs eval` and `psrs job submit` in one line.

mod common;

use common::{free_port, psrs_bin, training, Cluster};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const KEY: &str = "psrs-test-key";
const SECRET: &str = "psrs-test-secret-0123456789";
const BUCKET: &str = "data";

/// An s3s-fs server over a directory (bucket `data` = the folder `data`), killed on drop.
struct S3 {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl S3 {
    fn start() -> S3 {
        let bin = std::env::var_os("PSRS_S3S_FS")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin/s3s-fs"));
        assert!(
            bin.exists(),
            "{} is absent: cargo install s3s-fs@0.14.1 --features binary --root target/tools (scripts/test.sh does), or set PSRS_S3S_FS",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(BUCKET)).unwrap();
        let port = free_port();
        let child = Command::new(&bin)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--access-key",
                KEY,
                "--secret-key",
                SECRET,
            ])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s3 = S3 { child, dir, port };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t.elapsed() < Duration::from_secs(20), "s3s-fs did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        s3
    }

    /// Uploads `file` as `key` with a PUT through the S3 API (psrs's own client, in a
    /// process of this test binary given the store's variables): s3s-fs then keeps the
    /// object's ETag. A file copied into its directory has none, and s3s-fs computes
    /// the MD5 of the whole object for every GET and HEAD, which under load made each
    /// range read take seconds and the job stall past its time limit.
    fn put(&self, file: &Path, key: &str) -> String {
        let url = format!("s3://{BUCKET}/{key}");
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "upload_process", "--ignored", "--nocapture"])
            .envs(self.env())
            .env("UPLOAD_FILE", file)
            .env("UPLOAD_TO", &url)
            .output()
            .unwrap();
        assert!(
            out.status.success() && self.dir.path().join(BUCKET).join(key).is_file(),
            "upload of {} to {url}: {}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        url
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET.into()),
            ("AWS_ENDPOINT_URL".into(), format!("http://127.0.0.1:{}", self.port)),
            ("AWS_REGION".into(), "us-east-1".into()),
        ]
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The uploading process of [`S3::put`]: writes the file `UPLOAD_FILE` to the URL
/// `UPLOAD_TO` with psrs's object store client (configured by the `AWS_*` variables).
#[test]
#[ignore = "run as the uploading process by the tests below"]
fn upload_process() {
    let file = std::env::var("UPLOAD_FILE").expect("UPLOAD_FILE");
    let to = std::env::var("UPLOAD_TO").expect("UPLOAD_TO");
    let bytes = std::fs::read(&file).unwrap();
    ps_apps::storage::write(Path::new(&to), &bytes).unwrap_or_else(|e| panic!("{to}: {e}"));
}

/// One GET the HTTP server answered: the file and the byte range (None: whole file).
#[derive(Clone, Debug)]
struct Served {
    file: String,
    range: Option<(u64, u64)>,
}

/// A file server with range requests; fails the first `fail_first` GETs of each
/// distinct (file, range) (503, then 502, alternating).
struct Http {
    port: u16,
    log: Arc<Mutex<Vec<Served>>>,
    failed: Arc<AtomicUsize>,
    _server: common::fake_http::FakeHttp,
}

fn parse_range(h: &str, size: u64) -> Option<(u64, u64)> {
    let spec = h.trim().strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let a: u64 = a.parse().ok()?;
    let b: u64 = if b.is_empty() { size - 1 } else { b.parse().ok()? };
    Some((a, b.min(size - 1) + 1))
}

impl Http {
    fn start(root: &Path, fail_first: usize) -> Http {
        use common::fake_http::{FakeHttp, Resp};
        let log = Arc::new(Mutex::new(Vec::new()));
        let failed = Arc::new(AtomicUsize::new(0));
        let tries = Mutex::new(std::collections::HashMap::<String, usize>::new());
        let (root, l, f) = (root.to_path_buf(), log.clone(), failed.clone());
        let server = FakeHttp::start(move |req| {
            let name = req.path.trim_start_matches('/').to_string();
            let Ok(bytes) = std::fs::read(root.join(&name)) else {
                return Resp::new(404, "");
            };
            let size = bytes.len() as u64;
            let range = req.header("Range").and_then(|h| parse_range(h, size));
            if req.method == "HEAD" {
                return Resp {
                    status: 200,
                    headers: vec![("Content-Length", size.to_string()), ("Accept-Ranges", "bytes".into())],
                    body: Vec::new(),
                };
            }
            {
                let mut tries = tries.lock().unwrap();
                let n = tries.entry(format!("{name} {range:?}")).or_default();
                *n += 1;
                if *n <= fail_first {
                    f.fetch_add(1, Ordering::Relaxed);
                    return Resp::new(if *n % 2 == 1 { 503 } else { 502 }, "");
                }
                l.lock().unwrap().push(Served {
                    file: name.clone(),
                    range,
                });
            }
            let mut headers = vec![("Accept-Ranges", "bytes".to_string())];
            let (status, body) = match range {
                Some((a, b)) => {
                    headers.push(("Content-Range", format!("bytes {a}-{}/{size}", b - 1)));
                    (206, bytes[a as usize..b as usize].to_vec())
                }
                None => (200, bytes),
            };
            Resp { status, headers, body }
        });
        Http {
            port: server.addr.port(),
            log,
            failed,
            _server: server,
        }
    }

    fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    fn served(&self) -> Vec<Served> {
        self.log.lock().unwrap().clone()
    }
}

/// The chunks of a RecordIO file: (offset, header + payload length).
fn chunks(file: &Path) -> Vec<(u64, u64)> {
    let mut f = std::fs::File::open(file).unwrap();
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).unwrap();
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < bytes.len() {
        let len = u32::from_le_bytes(bytes[off + 12..off + 16].try_into().unwrap()) as usize;
        out.push((off as u64, 20 + len as u64));
        off += 20 + len;
    }
    out
}

fn small_job_with(dir: &Path, train: &str, test: &str, out: Option<&str>) -> Vec<String> {
    let mut args = training::small_job(dir, 1);
    let at = |args: &[String], flag: &str| args.iter().position(|a| a == flag).unwrap() + 1;
    let i = at(&args, "--train");
    args[i] = train.to_string();
    let i = at(&args, "--test");
    args[i] = test.to_string();
    if let Some(o) = out {
        args.extend(["--out".to_string(), o.to_string()]);
    }
    args
}

fn env_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn training_reads_s3_and_http_and_saves_the_model_to_s3() {
    training::require_data();
    let s3 = S3::start();
    let dir = tempfile::tempdir().unwrap();
    let data = training::convert_chunks(dir.path(), "t10k", 500);
    let train = s3.put(&data, "t10k.rio");
    let web = tempfile::tempdir().unwrap();
    std::fs::copy(&data, web.path().join("t10k.rio")).unwrap();
    let http = Http::start(web.path(), 0);
    let test = http.url("t10k.rio");
    let model = format!("s3://{BUCKET}/models/softmax.bin");
    let args = small_job_with(dir.path(), &train, &test, Some(&model));
    let env = s3.env();
    let mut c = Cluster::new(
        2,
        2,
        &args.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        &env_refs(&env),
        Duration::from_secs(120),
    );
    c.run_in_scratch();
    for role in ["scheduler", "server", "server", "worker", "worker"] {
        c.spawn(role);
    }
    c.wait_success();
    let text = c.dump();
    assert!(text.contains("progress: 20/20 tasks"), "{text}");
    assert!(text.contains("final test accuracy"), "{text}");
    assert!(
        s3.dir.path().join(BUCKET).join("models/softmax.bin").exists(),
        "the model was not saved to S3\n{text}"
    );
    // checking that the model can be written makes nothing locally ("s3:/data/models")
    assert!(
        !c.dir().join("s3:").exists(),
        "an s3:// location was made as a local directory"
    );
    // the test set was read over HTTP by ranges, never whole
    assert!(!http.served().is_empty());
    assert!(http.served().iter().all(|s| s.range.is_some()), "{:?}", http.served());

    let out = Command::new(psrs_bin())
        .args(["eval", "--model", &model, "--data", &test])
        .envs(env.iter().cloned())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("accuracy"), "{text}");
}

#[test]
fn workers_read_only_their_tasks_chunks_and_transient_errors_are_retried() {
    training::require_data();
    let dir = tempfile::tempdir().unwrap();
    let data = training::convert_chunks(dir.path(), "t10k", 500);
    let web = tempfile::tempdir().unwrap();
    std::fs::copy(&data, web.path().join("train.rio")).unwrap();
    // every distinct request fails twice (a 503, then a 502) first
    let http = Http::start(web.path(), 2);
    let train = http.url("train.rio");
    let test = data.display().to_string();
    let args = small_job_with(dir.path(), &train, &test, None);
    let mut c = Cluster::start(
        1,
        2,
        &args.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        &[("PS_OBJECT_RETRIES", "4")],
        Duration::from_secs(120),
    );
    c.wait_success();
    let text = c.dump();
    assert!(text.contains("progress: 20/20 tasks"), "{text}");
    assert!(http.failed.load(Ordering::Relaxed) > 0, "no failure was injected");

    let chunks = chunks(&data);
    let whole: u64 = chunks.iter().map(|c| c.1).sum();
    let served = http.served();
    let mut chunk_reads = vec![0usize; chunks.len()];
    let mut bytes = 0u64;
    for s in &served {
        assert_eq!(s.file, "train.rio");
        let (a, b) = s.range.unwrap_or_else(|| panic!("a GET of the whole file: {served:?}"));
        bytes += b - a;
        match chunks.iter().position(|&(off, len)| (off, off + len) == (a, b)) {
            Some(i) => chunk_reads[i] += 1,
            // otherwise an index read: a block from a chunk header, at most 64 KB
            None => assert!(
                chunks.iter().any(|c| c.0 == a) && b - a <= 64 << 10,
                "a range that is neither a chunk nor an index block: {a}..{b}"
            ),
        }
    }
    // one pass: each chunk read once by the worker given its task (twice at most, if
    // a task was handed out again after a timeout); the first chunk also once by each
    // of the 4 nodes for the first example (the model's input width)
    assert!((5..=6).contains(&chunk_reads[0]), "{chunk_reads:?}");
    assert!(
        chunk_reads[1..].iter().all(|&n| (1..=2).contains(&n)),
        "{chunk_reads:?}"
    );
    println!(
        "{} range requests, {bytes} bytes served for a {whole}-byte file read once for training",
        served.len()
    );
}

#[test]
fn a_missing_object_fails_train_eval_and_submit_in_one_line() {
    let s3 = S3::start();
    let env = s3.env();
    let absent = format!("s3://{BUCKET}/absent.rio");
    let want = format!("{absent}: not found");

    // psrs train: every node reads the first example (the model's input width) first
    let dir = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(
        1,
        1,
        &[
            "train",
            "--model",
            "softmax",
            "--dim",
            "4",
            "--classes",
            "2",
            "--train",
            &absent,
            "--work-dir",
            &dir.path().display().to_string(),
        ],
        &env_refs(&env),
        Duration::from_secs(60),
    );
    // its exit, not the first "error" in its output: the line is written in pieces
    c.wait_until("the worker's exit", |c| c.exited(2));
    assert_ne!(c.procs[2].status, Some(0), "{}", c.dump());
    c.kill_all();
    let worker = c.procs[2].stderr();
    let errors: Vec<&str> = worker.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{}", c.dump());
    assert!(errors[0].contains(&want), "{}", c.dump());

    // psrs eval: the model file is read first
    let out = Command::new(psrs_bin())
        .args(["eval", "--model", &absent, "--data", &absent])
        .envs(env.iter().cloned())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(&want), "{err}");

    // psrs job submit to a jobs cluster: refused in one line, nothing runs
    let work = tempfile::tempdir().unwrap();
    let stats = free_port();
    let addr = format!("127.0.0.1:{stats}");
    let c = Cluster::start(
        1,
        1,
        &[
            "cluster",
            "--stats-addr",
            &addr,
            "--work-dir",
            &work.path().display().to_string(),
        ],
        &env_refs(&env),
        Duration::from_secs(60),
    );
    let api = common::jobs::Api(format!("http://{addr}"));
    api.wait_up(&c);
    let e = api
        .run(&[
            "submit",
            "train",
            "--train",
            &absent,
            "--model",
            "softmax",
            "--dim",
            "4",
            "--classes",
            "2",
        ])
        .unwrap_err();
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    // the jobs API quotes the path it was given
    assert!(e.contains(&format!("'{absent}': not found")), "{e}");
}
