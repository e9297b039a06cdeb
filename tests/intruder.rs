//! Only members get in: a cluster with certificates (`psrs certs init`; TCP van, TLS
//! 1.3 on every link) and an intruder *process* that tries to register, push, pull and
//! send TERMINATE to the scheduler and a server — in plaintext (raw psrs messages),
//! with garbage, as an HTTP client, over TLS with a certificate of another CA, with an
//! expired certificate of the cluster's CA, silently, and with a stolen worker
//! certificate registering as a server and as a scheduler. The intruder must receive
//! nothing but (for the stolen certificate) the link's confirmation; the job's sums
//! stay exact; the logs say what was refused. `openssl s_client` is a real foreign TLS
//! client: it gets in with a client certificate and is refused with another CA's.
//! And `psrs job` reaches the jobs API (HTTPS) with the cluster's client certificate
//! only.

mod common;

use common::{free_port, tcp_frame as frame, Cluster};
use ps_core::message::{Command, Message, Meta};
use ps_core::node::{Node, Role};
use ps_core::tls::issue::{Ca, Request};
use ps_core::tls::{CertRole, Credentials};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command as Process;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);

/// An ADD_NODE registering a node of `role`.
fn register(role: Role) -> Vec<u8> {
    let mut reg = Message::default();
    reg.meta.recver = 1;
    reg.meta.control.cmd = Command::AddNode;
    reg.meta.control.nodes = vec![Node {
        role,
        id: -1,
        hostname: "127.0.0.1".into(),
        port: 1,
        is_recovery: false,
        incarnation: 7,
    }];
    frame(&reg)
}

/// Register as a worker, push 1000 to key 0, pull it, TERMINATE.
fn attack(recver: i32) -> Vec<u8> {
    let mut out = register(Role::Worker);
    let kv = |push: bool| Message {
        meta: Meta {
            recver,
            sender: 9,
            request: true,
            push,
            pull: !push,
            timestamp: 1,
            ..Default::default()
        },
        data: if push {
            vec![
                0u64.to_le_bytes().to_vec().into(),
                1000f32.to_le_bytes().to_vec().into(),
            ]
        } else {
            vec![0u64.to_le_bytes().to_vec().into()]
        },
    };
    out.extend(frame(&kv(true)));
    out.extend(frame(&kv(false)));
    let mut term = Message::default();
    term.meta.recver = recver;
    term.meta.control.cmd = Command::Terminate;
    out.extend(frame(&term));
    out
}

/// A TLS client with `creds` on `s`: the handshake, `payload` inside TLS, then what
/// comes back (plaintext) until the peer closes or 5 s pass. Err: the TLS error.
fn over_tls(s: TcpStream, creds: &Credentials, payload: &[u8]) -> Result<Vec<u8>, String> {
    let conn = rustls::ClientConnection::new(creds.client_config(), ps_core::tls::server_name("127.0.0.1"))
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, s);
    tls.write_all(payload).map_err(|e| e.to_string())?;
    tls.flush().map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if got.is_empty() && e.kind() == std::io::ErrorKind::InvalidData => return Err(e.to_string()),
            Err(_) => return Ok(got),
        }
    }
}

/// `psrs certs init --dir DIR`: a CA and a certificate per role.
fn certs_init(dir: &Path) {
    let st = Process::new(common::psrs_bin())
        .args(["certs", "init", "--dir"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "psrs certs init --dir {}", dir.display());
}

/// The variables giving a process the certificate `name` of the CA in `dir`.
fn tls_vars(dir: &Path, name: &str) -> [(&'static str, String); 3] {
    let p = |f: String| dir.join(f).display().to_string();
    [
        ("PS_TLS_CA", p("ca.pem".into())),
        ("PS_TLS_CERT", p(format!("{name}.pem"))),
        ("PS_TLS_KEY", p(format!("{name}-key.pem"))),
    ]
}

fn load(dir: &Path, name: &str) -> Credentials {
    let read = |f: String| std::fs::read(dir.join(f)).unwrap();
    Credentials::from_pem(
        &read(format!("{name}.pem")),
        &read(format!("{name}-key.pem")),
        &read("ca.pem".into()),
    )
    .unwrap()
}

/// The intruder process: env INTRUDER_TARGETS = "host:port=id,...", INTRUDER_CERTS =
/// the cluster's certificate directory (the stolen worker certificate and the CA key,
/// to make an expired certificate). Exits non-zero if any attempt got an answer.
#[test]
#[ignore = "run as the intruder process by the tests below"]
fn intruder_process() {
    let targets = std::env::var("INTRUDER_TARGETS").expect("INTRUDER_TARGETS");
    let dir = std::path::PathBuf::from(std::env::var("INTRUDER_CERTS").expect("INTRUDER_CERTS"));
    let stolen = load(&dir, "worker");
    let other_ca = Ca::generate(1).unwrap();
    let foreign = {
        let leaf = other_ca.issue(&Request::new(CertRole::Worker, 1)).unwrap();
        Credentials::from_pem(
            leaf.cert_pem.as_bytes(),
            leaf.key_pem.as_bytes(),
            other_ca.cert_pem().as_bytes(),
        )
        .unwrap()
    };
    // an expired worker certificate of the cluster's own CA, presented without the
    // local check (Credentials::new refuses to build it)
    let ca = Ca::from_pem(
        &std::fs::read_to_string(dir.join("ca.pem")).unwrap(),
        &std::fs::read_to_string(dir.join("ca-key.pem")).unwrap(),
    )
    .unwrap();
    let mut req = Request::new(CertRole::Worker, 1);
    req.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(3);
    req.not_after = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    let expired_leaf = ca.issue(&req).unwrap();
    let mut failures = Vec::new();
    for t in targets.split(',') {
        let (addr, id) = t.split_once('=').unwrap();
        let id: i32 = id.parse().unwrap();
        for mode in [
            "raw",
            "garbage",
            "http",
            "other-ca",
            "expired",
            "silent",
            "stolen-worker",
        ] {
            let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("intruder cannot reach {addr}: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let start = Instant::now();
            let got: Result<Vec<u8>, String> = match mode {
                "raw" | "garbage" | "http" | "silent" => {
                    let bytes = match mode {
                        "raw" => attack(id),
                        "garbage" => (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect(),
                        "http" => b"GET / HTTP/1.0\r\n\r\n".to_vec(),
                        _ => Vec::new(),
                    };
                    let _ = s.write_all(&bytes);
                    let mut answer = Vec::new();
                    match s.read_to_end(&mut answer) {
                        Ok(_) => Ok(answer),
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => Ok(answer),
                        Err(e) => Err(format!("not closed: {e}")),
                    }
                }
                "other-ca" => over_tls(s, &foreign, &attack(id)).map(|_| b"handshake accepted".to_vec()),
                "expired" => {
                    let trust = stolen.trust();
                    let cfg = rustls::ClientConfig::builder_with_provider(ps_core::tls::provider())
                        .with_protocol_versions(&[&rustls::version::TLS13])
                        .unwrap()
                        .dangerous()
                        .with_custom_certificate_verifier(std::sync::Arc::new(AnyServer))
                        .with_client_auth_cert(
                            vec![expired_leaf.cert.clone()],
                            rustls::pki_types::PrivateKeyDer::Pkcs8(expired_leaf.key.clone_key()),
                        )
                        .unwrap();
                    let _ = trust;
                    let conn =
                        rustls::ClientConnection::new(std::sync::Arc::new(cfg), ps_core::tls::server_name("127.0.0.1"))
                            .unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, s);
                    let _ = tls.write_all(&attack(id));
                    let mut answer = Vec::new();
                    match tls.read_to_end(&mut answer) {
                        Ok(_) if answer.is_empty() => Err("closed".into()),
                        Ok(_) => Ok(answer),
                        Err(e) => Err(e.to_string()),
                    }
                }
                _ => {
                    // a valid worker certificate registering as a server and a scheduler
                    let mut payload = register(Role::Server);
                    payload.extend(register(Role::Scheduler));
                    over_tls(s, &stolen, &payload).map(|mut a| {
                        // the link's confirmation is all it may get
                        if a.first() == Some(&1) {
                            a.remove(0);
                        }
                        a
                    })
                }
            };
            let line = format!(
                "intruder {mode} -> {addr}: {} after {:?}",
                match &got {
                    Ok(a) => format!("received {} bytes, closed", a.len()),
                    Err(e) => format!("refused ({e})"),
                },
                start.elapsed()
            );
            println!("{line}");
            if matches!(&got, Ok(a) if !a.is_empty()) || matches!(&got, Err(e) if e.starts_with("not closed")) {
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "the intruder got through: {failures:?}");
    println!("intruder: nothing got through");
}

/// Accepts any server certificate (the intruder only tests the server's checks).
#[derive(Debug)]
struct AnyServer;

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        ps_core::tls::provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[test]
fn an_intruder_gets_nothing_and_the_sums_stay_exact() {
    let server_port = free_port();
    let mut c = Cluster::new(
        1,
        2,
        &["kv-test", "--keys", "1000", "--repeat", "30"],
        &[("DMLC_PS_VAN_TYPE", "tcp"), ("PS_HANDSHAKE_TIMEOUT", "1")],
        LIMIT,
    );
    let certs = c.dir().join("certs");
    certs_init(&certs);
    let env = |role: &str| tls_vars(&certs, role);
    let args = ["kv-test", "--keys", "1000", "--repeat", "30"];
    let e = env("scheduler");
    c.spawn_with(
        "scheduler",
        &args,
        &[(e[0].0, &e[0].1), (e[1].0, &e[1].1), (e[2].0, &e[2].1)],
    );
    let port = server_port.to_string();
    let e = env("server");
    c.spawn_with(
        "server",
        &args,
        &[(e[0].0, &e[0].1), (e[1].0, &e[1].1), (e[2].0, &e[2].1), ("PORT", &port)],
    );
    // the scheduler and the server listen; the workers are not there yet
    let sp = c.port;
    c.wait_until("the scheduler and the server listening", |_| {
        TcpStream::connect(("127.0.0.1", sp)).is_ok() && TcpStream::connect(("127.0.0.1", server_port)).is_ok()
    });
    let targets = format!("127.0.0.1:{}=1,127.0.0.1:{server_port}=8", c.port);
    let out = Process::new(std::env::current_exe().unwrap())
        .args(["--exact", "intruder_process", "--ignored", "--nocapture"])
        .env("INTRUDER_TARGETS", &targets)
        .env("INTRUDER_CERTS", &certs)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("intruder: nothing got through"),
        "{text}"
    );
    openssl_is_a_foreign_client(sp, &certs);
    let e = env("worker");
    let we = [
        (e[0].0, e[0].1.as_str()),
        (e[1].0, e[1].1.as_str()),
        (e[2].0, e[2].1.as_str()),
    ];
    c.spawn_with("worker", &args, &we);
    c.spawn_with("worker", &args, &we);
    c.wait_success();
    assert_eq!(c.all_stdout().matches("kv-test ok").count(), 2, "{}", c.dump());
    assert!(c.all_stdout().contains("= 60 x pushed"), "{}", c.dump());
    for i in 0..2 {
        let log = c.procs[i].stderr();
        for why in [
            "not a TLS handshake",
            "TLS handshake refused",
            "silent for 1s (PS_HANDSHAKE_TIMEOUT)",
            "registering a server from a peer whose certificate names worker",
            "registering a scheduler from a peer whose certificate names worker",
        ] {
            let n = log.matches(why).count();
            assert!(n >= 1, "{} did not log '{why}'\n{}", c.procs[i].name, c.dump());
        }
        assert!(log.contains("refused a connection from 127.0.0.1:"), "{}", c.dump());
    }
}

/// `openssl s_client` against the scheduler's port: with the client certificate of
/// the cluster it completes TLS 1.3 and reads the link's confirmation; with a
/// certificate of another CA it is refused.
fn openssl_is_a_foreign_client(port: u16, certs: &Path) {
    let run = |cert: &Path, key: &Path| {
        let mut child = Process::new("openssl")
            .args([
                "s_client",
                "-connect",
                &format!("127.0.0.1:{port}"),
                "-tls1_3",
                "-quiet",
                "-cert",
            ])
            .arg(cert)
            .arg("-key")
            .arg(key)
            .arg("-CAfile")
            .arg(certs.join("ca.pem"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("openssl (apt-get install openssl) runs");
        std::thread::sleep(Duration::from_secs(2));
        drop(child.stdin.take());
        let _ = child.kill();
        child.wait_with_output().unwrap()
    };
    let ok = run(&certs.join("client.pem"), &certs.join("client-key.pem"));
    assert_eq!(
        ok.stdout,
        vec![1u8],
        "the link's confirmation: {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let other = certs.join("other");
    certs_init(&other);
    let bad = run(&other.join("client.pem"), &other.join("client-key.pem"));
    assert!(bad.stdout.is_empty(), "another CA's certificate got {:?}", bad.stdout);
}

/// `psrs job` against a jobs cluster with certificates, whose API therefore speaks
/// HTTPS: with the cluster's CA and client certificate, submit, list, status and wait
/// work and the job writes its model under `--outputs-dir`. Refused, and nothing
/// submitted: no credentials (the server's certificate is of an unknown CA), plain
/// HTTP, the CA but no client certificate, a stolen worker certificate, another CA's
/// client certificate; and with the right certificate, an output outside
/// `--outputs-dir` or an input outside `--data-dir` (whose contents the error does not
/// echo).
#[test]
fn psrs_job_over_https_needs_the_clusters_client_certificate() {
    use common::jobs::{blobs, train_args, ENV};
    let addr = format!("127.0.0.1:{}", free_port());
    let mut env = ENV.to_vec();
    env.push(("DMLC_PS_VAN_TYPE", "tcp"));
    let mut c = Cluster::new(1, 2, &[], &env, LIMIT);
    let dir = c.dir().to_path_buf();
    let (certs, data, outputs) = (dir.join("certs"), dir.join("data"), dir.join("outputs"));
    certs_init(&certs);
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&outputs).unwrap();
    let (train, test) = (data.join("train.rio"), data.join("test.rio"));
    blobs(&train, 1000, 100, 7);
    blobs(&test, 200, 50, 11);
    let s = |p: &Path| p.display().to_string();
    let (work, data_s, outputs_s) = (s(&dir.join("work")), s(&data), s(&outputs));
    let args = [
        "cluster",
        "--stats-addr",
        &addr,
        "--work-dir",
        &work,
        "--data-dir",
        &data_s,
        "--outputs-dir",
        &outputs_s,
    ];
    for role in ["scheduler", "server", "worker", "worker"] {
        let v = tls_vars(&certs, role);
        let v: Vec<(&str, &str)> = v.iter().map(|(k, x)| (*k, x.as_str())).collect();
        c.spawn_with(role, &args, &v);
    }
    let https = format!("https://{addr}");
    // `psrs job` with the variables `vars` (and nothing of the test's own environment)
    let job = |api: &str, vars: &[(&str, String)], a: &[&str]| -> Result<String, String> {
        let mut p = Process::new(common::psrs_bin());
        p.arg("job").args(a).env("PSRS_API", api);
        for v in [
            "PS_TLS_CA",
            "PS_TLS_CERT",
            "PS_TLS_KEY",
            "PS_SECRET_FILE",
            "PS_SECRET",
            "PSRS_API_TOKEN",
        ] {
            p.env_remove(v);
        }
        p.envs(vars.iter().map(|(k, v)| (k, v)));
        let out = p.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            Ok(text)
        } else {
            Err(text)
        }
    };
    let client = tls_vars(&certs, "client").to_vec();
    let up = Instant::now();
    while job(&https, &client, &["list"]).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "the API never came up\n{}",
            c.dump()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (train_s, test_s) = (s(&train), s(&test));
    let model = outputs.join("m.model");
    let model_s = s(&model);
    let submit = |vars: &[(&str, String)], extra: &[&str]| {
        let a = [&["submit"][..], &train_args(&train_s, &test_s, "softmax", "2"), extra].concat();
        job(&https, vars, &a)
    };

    // refused without the cluster's credentials
    let other = dir.join("other");
    certs_init(&other);
    let ca_only = vec![client[0].clone()];
    // trusts the cluster's CA, presents a client certificate of another CA
    let mut foreign = tls_vars(&other, "client").to_vec();
    foreign[0] = client[0].clone();
    let refusals = [
        ("no credentials", job(&https, &[], &["list"])),
        ("plain HTTP", job(&format!("http://{addr}"), &[], &["list"])),
        ("the CA but no certificate", job(&https, &ca_only, &["list"])),
        ("the CA but no certificate, submit", submit(&ca_only, &[])),
        ("a stolen worker certificate", submit(&tls_vars(&certs, "worker"), &[])),
        ("another CA's client certificate", submit(&foreign, &[])),
    ];
    for (what, r) in &refusals {
        assert!(r.is_err(), "{what}: accepted: {r:?}");
    }
    for (what, r) in &refusals[2..5] {
        let e = r.as_ref().unwrap_err();
        assert!(e.contains("401") && e.contains("client certificate"), "{what}: {e}");
    }

    // refused with the certificate: paths outside --outputs-dir / --data-dir
    let evil = dir.join("evil.bin");
    let e = submit(&client, &["--out", &s(&evil)]).unwrap_err();
    assert!(e.contains("--outputs-dir"), "{e}");
    assert!(!evil.exists());
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "root:x:0:0:do-not-echo").unwrap();
    let e = job(
        &https,
        &client,
        &[&["submit"][..], &train_args(&s(&secret), &test_s, "softmax", "2")].concat(),
    )
    .unwrap_err();
    assert!(
        e.contains("--data-dir") && !e.contains("do-not-echo") && !e.contains("root:x"),
        "{e}"
    );

    // accepted with the cluster's client certificate
    let id = submit(&client, &["--out", &model_s]).unwrap_or_else(|e| panic!("{e}\n{}", c.dump()));
    let id = id.trim().to_string();
    let status: serde_json::Value = serde_json::from_str(&job(&https, &client, &["status", &id]).unwrap()).unwrap();
    assert_eq!(status["id"], id.as_str(), "{status}");
    let list = job(&https, &client, &["list"]).unwrap();
    assert_eq!(
        list.lines().filter(|l| !l.trim().is_empty()).count(),
        1,
        "only the accepted job: {list}"
    );
    assert!(list.contains(&id), "{list}");
    job(&https, &client, &["wait", &id, "--timeout-s", "100"]).unwrap_or_else(|e| panic!("{e}\n{}", c.dump()));
    assert!(model.is_file(), "the model under --outputs-dir");
    c.kill_all();
}

/// A node whose own credentials are refused (a cluster secret other than the
/// scheduler's) stops after a few tries with a one-line error naming the scheduler and
/// the variables to check, and a non-zero exit; the scheduler logs the refusal.
#[test]
fn a_node_with_another_secret_stops_with_one_line() {
    let args = ["kv-test", "--keys", "10"];
    let mut c = Cluster::new(1, 1, &args, &[("DMLC_PS_VAN_TYPE", "tcp")], LIMIT);
    let (a, b) = (c.dir().join("a.secret"), c.dir().join("b.secret"));
    std::fs::write(&a, "the-cluster-secret-of-this-cluster").unwrap();
    std::fs::write(&b, "another-secret-of-another-cluster!").unwrap();
    let (a, b) = (a.display().to_string(), b.display().to_string());
    c.spawn_with("scheduler", &args, &[("PS_SECRET_FILE", &a)]);
    let w = c.spawn_with("worker", &args, &[("PS_SECRET_FILE", &b)]);
    let started = Instant::now();
    c.wait_until("the worker to give up", |c| c.exited(w));
    assert!(started.elapsed() < Duration::from_secs(60), "{}", c.dump());
    assert_ne!(c.procs[w].status, Some(0), "{}", c.dump());
    let err = c.procs[w].stderr();
    let last = err.lines().last().unwrap_or_default().to_string();
    assert!(
        last.contains("cannot join the scheduler at") && last.contains("PS_SECRET_FILE"),
        "one line naming the scheduler and the variables: {last}\n{}",
        c.dump()
    );
    c.kill_all();
}

/// A jobs cluster's HTTP API asked to listen beyond loopback without security, or with
/// security but without its jobs' paths confined, is refused before the scheduler
/// waits for any node: one line, a non-zero exit, no other node needed.
#[test]
fn an_api_beyond_loopback_is_refused_before_the_cluster_forms() {
    let mut c = Cluster::new(1, 1, &[], &[("DMLC_PS_VAN_TYPE", "tcp")], LIMIT);
    let secret = c.dir().join("cluster.secret");
    std::fs::write(&secret, "the-cluster-secret-of-this-cluster").unwrap();
    let secret = secret.display().to_string();
    let stats = format!("0.0.0.0:{}", free_port());
    let work = c.dir().join("work").display().to_string();
    let data = c.dir().display().to_string();
    let open = ["cluster", "--stats-addr", &stats, "--work-dir", &work];
    let confined = [&open[..], &["--data-dir", &data, "--outputs-dir", &data]].concat();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 2] = [
        (&confined, &[], "without security"),
        (
            &open,
            &[("PS_SECRET_FILE", &secret)],
            "give --data-dir and --outputs-dir",
        ),
    ];
    for (args, env, says) in cases {
        let s = c.spawn_with("scheduler", args, env);
        // (after the cluster formed it would wait for nodes, then say they never came)
        c.wait_until("the scheduler to refuse", |c| c.exited(s));
        assert_ne!(c.procs[s].status, Some(0), "{}", c.dump());
        let err = c.procs[s].stderr();
        let last = err.lines().last().unwrap_or_default().to_string();
        assert!(last.contains(says), "{says}: {last}\n{}", c.dump());
    }
    c.kill_all();
}
