//! Only members get in: a cluster with a secret (TCP van, encrypted links) and an
//! intruder *process* that tries to register, push, pull and send TERMINATE to the
//! scheduler and a server — with no handshake (raw psrs messages), as an open node (no
//! secret), with a wrong secret, with handshake bytes replayed from a real
//! authenticated connection, and silently. The intruder must receive nothing after
//! the handshake and be disconnected; the job's sums stay exact; the logs say what
//! was refused.

mod common;

use common::{free_port, Cluster};
use ps_core::auth::handshake::{Initiator, CHALLENGE_LEN, PROOF_LEN};
use ps_core::auth::{Secret, SecretSource};
use ps_core::config::Security;
use ps_core::message::{Command, Message, Meta};
use ps_core::node::{Node, Role};
use ps_core::van::tcp::guard::Guard;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command as Process;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);
const SECRET: &str = "intruder-test-secret-0123456789";

/// The TCP van's framing of one message (magic, frame count, lengths, frames).
fn frame(m: &Message) -> Vec<u8> {
    let mut frames = vec![m.encode_meta()];
    frames.extend(m.data.iter().cloned());
    let mut out = b"PSRS".to_vec();
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for f in &frames {
        out.extend_from_slice(&(f.len() as u64).to_le_bytes());
    }
    for f in &frames {
        out.extend_from_slice(f);
    }
    out
}

/// Register as a worker, push 1000 to key 0, pull it, TERMINATE.
fn attack(recver: i32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut reg = Message::default();
    reg.meta.recver = 1;
    reg.meta.control.cmd = Command::AddNode;
    reg.meta.control.nodes = vec![Node {
        role: Role::Worker,
        id: -1,
        hostname: "127.0.0.1".into(),
        port: 1,
        is_recovery: false,
        incarnation: 7,
    }];
    out.extend(frame(&reg));
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

/// The intruder process: env INTRUDER_TARGETS = "host:port=id,...", INTRUDER_REPLAY =
/// a file of captured handshake bytes. Exits non-zero if any attempt got an answer.
#[test]
#[ignore = "run as the intruder process by the tests below"]
fn intruder_process() {
    let targets = std::env::var("INTRUDER_TARGETS").expect("INTRUDER_TARGETS");
    let replay = std::fs::read(std::env::var("INTRUDER_REPLAY").expect("INTRUDER_REPLAY")).unwrap();
    let wrong = Secret::new(b"not-the-cluster-secret-987654321".to_vec(), SecretSource::File).unwrap();
    let mut failures = Vec::new();
    for t in targets.split(',') {
        let (addr, id) = t.split_once('=').unwrap();
        let id: i32 = id.parse().unwrap();
        for mode in ["raw", "open", "wrong", "replay", "silent"] {
            let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("intruder cannot reach {addr}: {e}"));
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut got_challenge = false;
            let sent = match mode {
                "raw" => s.write_all(&attack(id)),
                "open" => {
                    let (_, hello) = Initiator::new(None, true, [3; 32]);
                    s.write_all(&hello).and_then(|_| s.write_all(&attack(id)))
                }
                "wrong" => {
                    let (init, hello) = Initiator::new(Some(&wrong), true, [4; 32]);
                    s.write_all(&hello).unwrap();
                    let mut c = [0u8; CHALLENGE_LEN];
                    got_challenge = s.read_exact(&mut c).is_ok();
                    assert!(
                        init.on_challenge(&c).is_err(),
                        "a wrong secret verified the cluster's challenge"
                    );
                    let mut forged = [0u8; PROOF_LEN];
                    forged[..4].copy_from_slice(b"PSAP");
                    forged[4..].copy_from_slice(&wrong.mac(&[b"psrs-v1 initiator", &[4; 32], &c[4..36]]));
                    s.write_all(&forged).and_then(|_| s.write_all(&attack(id)))
                }
                "replay" => {
                    // HELLO, then the captured PROOF and sealed records after a challenge
                    s.write_all(&replay[..40]).unwrap();
                    let mut c = [0u8; CHALLENGE_LEN];
                    got_challenge = s.read_exact(&mut c).is_ok();
                    s.write_all(&replay[40..])
                }
                _ => Ok(()),
            };
            let start = Instant::now();
            let mut answer = Vec::new();
            let closed = match s.read_to_end(&mut answer) {
                Ok(_) => true,
                Err(e) => matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                ),
            };
            let line = format!(
                "intruder {mode} -> {addr}: challenge {got_challenge}, sent {:?}, received {} bytes after the handshake, closed {closed} after {:?}",
                sent.is_ok(),
                answer.len(),
                start.elapsed()
            );
            println!("{line}");
            if !answer.is_empty() || !closed {
                failures.push(line);
            }
        }
    }
    assert!(failures.is_empty(), "the intruder got through: {failures:?}");
    println!("intruder: nothing got through");
}

/// Captures the client side of a real authenticated, sealed connection (psrs's own
/// `Guard` on both ends, through a recording relay) that sends an attack.
fn capture_real_handshake(secret_file: &std::path::Path) -> Vec<u8> {
    let mut vars = std::collections::HashMap::new();
    vars.insert("PS_SECRET_FILE".to_string(), secret_file.display().to_string());
    let sec = Security::from_vars(&vars).unwrap();
    let node = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let (node_addr, relay_addr) = (node.local_addr().unwrap(), relay.local_addr().unwrap());
    let g = Guard::new(&sec);
    let g2 = std::sync::Arc::clone(&g);
    let server = std::thread::spawn(move || {
        let (s, from) = node.accept().unwrap();
        let permit = g2.admit(from).unwrap();
        let mut r = g2.accept(s, from, permit).unwrap();
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        all
    });
    let recorder = std::thread::spawn(move || {
        let (mut a, _) = relay.accept().unwrap();
        let mut b = TcpStream::connect(node_addr).unwrap();
        let (mut a2, mut b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
        std::thread::spawn(move || std::io::copy(&mut b2, &mut a2));
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = a.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            b.write_all(&buf[..n]).unwrap();
        }
        b.shutdown(std::net::Shutdown::Write).unwrap();
        seen
    });
    let mut out = g
        .connect(TcpStream::connect(relay_addr).unwrap(), &relay_addr.to_string())
        .unwrap();
    out.write_all(&attack(8)).unwrap();
    out.flush().unwrap();
    out.shutdown(std::net::Shutdown::Write).unwrap();
    let plain = server.join().unwrap();
    assert_eq!(plain, attack(8), "the real connection carried the messages");
    let seen = recorder.join().unwrap();
    assert!(
        seen.len() > 40 + PROOF_LEN && !seen.windows(4).any(|w| w == b"PSRS"),
        "sealed on the wire"
    );
    seen
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
    let secret = c.dir().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let f = secret.display().to_string();
    let env = [("PS_SECRET_FILE", f.as_str())];
    let args = ["kv-test", "--keys", "1000", "--repeat", "30"];
    c.spawn_with("scheduler", &args, &env);
    let port = server_port.to_string();
    c.spawn_with("server", &args, &[env[0], ("PORT", &port)]);
    // the scheduler and the server listen; the workers are not there yet
    let sp = c.port;
    c.wait_until("the scheduler and the server listening", |_| {
        TcpStream::connect(("127.0.0.1", sp)).is_ok() && TcpStream::connect(("127.0.0.1", server_port)).is_ok()
    });
    let capture = c.dir().join("captured");
    std::fs::write(&capture, capture_real_handshake(&secret)).unwrap();
    let targets = format!("127.0.0.1:{}=1,127.0.0.1:{server_port}=8", c.port);
    let out = Process::new(std::env::current_exe().unwrap())
        .args(["--exact", "intruder_process", "--ignored", "--nocapture"])
        .env("INTRUDER_TARGETS", &targets)
        .env("INTRUDER_REPLAY", &capture)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("intruder: nothing got through"),
        "{text}"
    );
    assert_eq!(
        text.matches("received 0 bytes after the handshake, closed true")
            .count(),
        10,
        "{text}"
    );
    c.spawn_with("worker", &args, &env);
    c.spawn_with("worker", &args, &env);
    c.wait_success();
    assert_eq!(c.all_stdout().matches("kv-test ok").count(), 2, "{}", c.dump());
    assert!(c.all_stdout().contains("= 60 x pushed"), "{}", c.dump());
    for i in 0..2 {
        let log = c.procs[i].stderr();
        for why in [
            "not a psrs handshake",
            "the peer has no cluster secret",
            "authentication failed (wrong secret or replayed handshake)",
            "silent for 1s (PS_HANDSHAKE_TIMEOUT)",
        ] {
            let n = log.matches(why).count();
            assert!(n >= 1, "{} did not log '{why}'\n{}", c.procs[i].name, c.dump());
        }
        assert!(log.contains("refused a connection from 127.0.0.1:"), "{}", c.dump());
    }
}
