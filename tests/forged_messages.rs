//! Members kept to their role: a secured cluster (certificates from `psrs certs`, one
//! per process; TCP van, TLS 1.3 on every link) runs `kv-test`, and a hostile
//! *process* holding real certificates of the cluster's CA — of each role: a worker's
//! (its own, and the stolen certificate of a running worker), a server's, a scheduler
//! candidate's, a client's — sends each message a member of another role could forge:
//! a NODE_DEAD for a live node, an ADD_NODE reply evicting a worker, a node table
//! re-pointing the server at itself, a barrier release, a vote request, a data answer
//! nobody asked for, answers in a server's name, registrations claiming the server's
//! id or advertising HTML as a host name, a vote from the scheduler's certificate,
//! and a push from an id no node table names. Every one is refused (logged on the
//! node it was sent to, the link kept), no node exits before its time, and the sums
//! stay exact. The client certificate opens no link at all.

mod common;

use common::tls::{certs_init, certs_issue, load, over_tls, tls_vars};
use common::{free_port, tcp_frame as frame, Cluster};
use ps_core::message::{Command, Message};
use ps_core::node::{Node, Role, EMPTY_ID, SCHEDULER, WORKER_GROUP};
use ps_core::tls::Credentials;
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);
/// How long the hostile process listens for an answer after each forgery.
const WAIT: Duration = Duration::from_millis(250);

/// What the hostile process knows of the cluster (from the nodes' start lines, as a
/// member would from the node table).
#[derive(serde::Serialize, serde::Deserialize)]
struct Plan {
    certs: PathBuf,
    scheduler: String,
    server: String,
    server_inc: u64,
    worker: String,
    worker_id: i32,
    worker_inc: u64,
    other_worker_id: i32,
    /// The certificate of the other worker (the one with `other_worker_id`).
    stolen: String,
}

/// A message `cmd` from `sender`; in the scheduler's name it claims a term far above
/// the active scheduler's, so that the failover's fencing (lower terms are dropped)
/// does not stop it: only the authorization can.
fn control(cmd: Command, sender: i32, recver: i32) -> Message {
    let mut m = Message::control(recver, cmd);
    m.meta.sender = sender;
    if sender == SCHEDULER {
        m.meta.control.term = 1_000_000;
    }
    m
}

fn node(role: Role, id: i32, host: &str, port: u16, incarnation: u64) -> Node {
    Node {
        role,
        id,
        hostname: host.into(),
        port,
        is_recovery: false,
        incarnation,
        cert: 0,
    }
}

/// A KV answer to a pull of key 0 from `sender`: a million, which no worker pushed.
fn kv_answer(sender: i32, recver: i32, timestamp: i32) -> Message {
    let mut m = control(Command::Empty, sender, recver);
    m.meta.pull = true;
    m.meta.timestamp = timestamp;
    m.data = vec![
        0u64.to_le_bytes().to_vec().into(),
        1.0e6f32.to_le_bytes().to_vec().into(),
    ];
    m
}

/// One forgery: the certificate it is sent with, where, and what.
struct Forgery {
    what: &'static str,
    cert: String,
    to: String,
    msg: Message,
}

fn forgeries(p: &Plan) -> Vec<Forgery> {
    let (w, other) = (p.worker_id, p.other_worker_id);
    let f = |what, cert: &str, to: &str, msg| Forgery {
        what,
        cert: cert.to_string(),
        to: to.to_string(),
        msg,
    };
    let (wk, sv, sc, st) = (
        "hostile-worker",
        "hostile-server",
        "hostile-scheduler",
        p.stolen.as_str(),
    );
    let mut dead_server = control(Command::NodeDead, SCHEDULER, w);
    dead_server.meta.control.nodes = vec![node(Role::Server, 8, "127.0.0.1", 1, p.server_inc)];
    let mut dead_self = control(Command::NodeDead, SCHEDULER, w);
    dead_self.meta.control.nodes = vec![node(Role::Worker, w, "127.0.0.1", 1, p.worker_inc)];
    dead_self.meta.recver_incarnation = p.worker_inc;
    let mut evict = control(Command::AddNode, SCHEDULER, w);
    evict.meta.control.reason = "you are evicted".into();
    let mut repoint = control(Command::AddNode, SCHEDULER, w);
    repoint.meta.control.nodes = vec![node(Role::Server, 8, "127.0.0.1", 9, 4242)];
    let mut release = control(Command::Barrier, SCHEDULER, w);
    release.meta.control.barrier_group = WORKER_GROUP;
    let mut campaign = control(Command::Campaign, SCHEDULER, w);
    (campaign.meta.control.term, campaign.meta.control.seq) = (1000, u64::MAX / 2);
    let mut vote = control(Command::Vote, SCHEDULER, SCHEDULER);
    (vote.meta.control.granted, vote.meta.control.term) = (true, 1000);
    let register = |sender: i32, n: Node| {
        let mut m = control(Command::AddNode, sender, SCHEDULER);
        m.meta.control.nodes = vec![n];
        m
    };
    let mut push = control(Command::Empty, 1013, 8);
    (push.meta.request, push.meta.push, push.meta.timestamp) = (true, true, 1);
    push.data = vec![
        0u64.to_le_bytes().to_vec().into(),
        1.0e6f32.to_le_bytes().to_vec().into(),
    ];
    vec![
        // in the scheduler's name, with a worker's and a server's certificate
        f("NODE_DEAD for the live server", st, &p.worker, dead_server.clone()),
        f("an eviction (ADD_NODE with a reason)", st, &p.worker, evict.clone()),
        f("a table re-pointing server 8", sv, &p.worker, repoint.clone()),
        f("a barrier release", sv, &p.worker, release.clone()),
        f("a vote request", wk, &p.worker, campaign.clone()),
        // with a scheduler candidate's certificate that is not the active scheduler's
        f("NODE_DEAD evicting the worker", sc, &p.worker, dead_self),
        f("an eviction from a scheduler certificate", sc, &p.worker, evict),
        f("a vote request from a scheduler certificate", sc, &p.worker, campaign),
        f("a barrier release from a scheduler certificate", sc, &p.worker, release),
        // data answers nobody asked for, and answers in the server's name
        f("a data answer from a worker", st, &p.worker, kv_answer(other, w, 0)),
        f("a data answer as another worker", wk, &p.worker, kv_answer(other, w, 1)),
        f("a data answer as server 8", sv, &p.worker, kv_answer(8, w, 2)),
        // registrations at the scheduler
        f(
            "a worker claiming server 8's id",
            wk,
            &p.scheduler,
            register(EMPTY_ID, node(Role::Worker, 8, "127.0.0.1", 9, 7)),
        ),
        f(
            "a worker registering as a server",
            wk,
            &p.scheduler,
            register(EMPTY_ID, node(Role::Server, EMPTY_ID, "127.0.0.1", 9, 7)),
        ),
        f(
            "a server certificate re-registering server 8",
            sv,
            &p.scheduler,
            register(8, node(Role::Server, 8, "127.0.0.1", 9, 7)),
        ),
        f(
            "HTML as a host name",
            wk,
            &p.scheduler,
            register(
                EMPTY_ID,
                node(Role::Worker, EMPTY_ID, "<img src=x onerror=alert(1)>", 9, 7),
            ),
        ),
        f("a vote from a scheduler certificate", sc, &p.scheduler, vote),
        // to the server: a NODE_DEAD from a worker, a push from an id no table names
        f("NODE_DEAD at the server", wk, &p.server, dead_server),
        f("a push from an unknown worker id", wk, &p.server, push),
        f("a table at the server", st, &p.server, repoint),
    ]
}

/// The hostile process: env FORGE_PLAN (a [`Plan`] in JSON). Exits non-zero if a
/// forgery got an answer other than the link's confirmation, or a client certificate
/// got a link.
#[test]
#[ignore = "run as the hostile process by the test below"]
fn hostile_process() {
    let plan: Plan = serde_json::from_str(&std::env::var("FORGE_PLAN").expect("FORGE_PLAN")).unwrap();
    let mut creds: BTreeMap<String, Credentials> = BTreeMap::new();
    let mut failures = Vec::new();
    for fg in forgeries(&plan) {
        let c = creds
            .entry(fg.cert.clone())
            .or_insert_with(|| load(&plan.certs, &fg.cert));
        let s = TcpStream::connect(&fg.to).unwrap_or_else(|e| panic!("cannot reach {}: {e}", fg.to));
        let got = over_tls(s, c, &frame(&fg.msg), WAIT);
        let line = format!("forged {} ({}) -> {}: {got:?}", fg.what, fg.cert, fg.to);
        println!("{line}");
        if got.as_deref() != Ok(&[1u8][..]) {
            failures.push(line);
        }
    }
    let client = load(&plan.certs, "client");
    for to in [&plan.scheduler, &plan.server, &plan.worker] {
        let got = over_tls(
            TcpStream::connect(to).unwrap(),
            &client,
            &frame(&kv_answer(8, 9, 0)),
            WAIT,
        );
        println!("client certificate -> {to}: {got:?}");
        if matches!(&got, Ok(a) if !a.is_empty()) {
            failures.push(format!("a client certificate got a link to {to}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    println!("hostile: every forgery refused");
}

/// A node's start line: `worker[9]@127.0.0.1:PORT is process incarnation N`.
fn started(log: &str) -> Option<(i32, u16, u64)> {
    let line = log.lines().find(|l| l.contains(" is process incarnation "))?;
    let msg = line.split_once("] ")?.1;
    let id = msg.split_once('[')?.1.split(']').next()?.parse().ok()?;
    let port = msg.split(" is process").next()?.rsplit(':').next()?.parse().ok()?;
    let inc = msg.rsplit("incarnation ").next()?.parse().ok()?;
    Some((id, port, inc))
}

fn vars(certs: &Path, name: &str) -> Vec<(&'static str, String)> {
    tls_vars(certs, name).to_vec()
}

#[test]
fn forged_messages_from_members_of_each_role_are_refused_and_the_sums_stay_exact() {
    let args = ["kv-test", "--keys", "100", "--repeat", "300", "--interval-ms", "50"];
    let mut c = Cluster::new(1, 2, &args, &[("DMLC_PS_VAN_TYPE", "tcp")], LIMIT);
    let certs = c.dir().join("certs");
    certs_init(&certs);
    for (role, name) in [
        ("server", "server-0"),
        ("worker", "worker-0"),
        ("worker", "worker-1"),
        ("worker", "hostile-worker"),
        ("server", "hostile-server"),
        ("scheduler", "hostile-scheduler"),
    ] {
        certs_issue(&certs, role, name);
    }
    let ports = [free_port(), free_port(), free_port()];
    let spawn = |c: &mut Cluster, role: &str, cert: &str, port: Option<u16>| {
        let mut v = vars(&certs, cert);
        if let Some(p) = port {
            v.push(("PORT", p.to_string()));
        }
        let v: Vec<(&str, &str)> = v.iter().map(|(k, x)| (*k, x.as_str())).collect();
        c.spawn_with(role, &args, &v)
    };
    spawn(&mut c, "scheduler", "scheduler", None);
    spawn(&mut c, "server", "server-0", Some(ports[0]));
    spawn(&mut c, "worker", "worker-0", Some(ports[1]));
    spawn(&mut c, "worker", "worker-1", Some(ports[2]));
    c.wait_until("every node started", |c| {
        (1..4).all(|i| started(&c.procs[i].stderr()).is_some())
    });
    let s = |i: usize| started(&c.procs[i].stderr()).unwrap();
    let (server, w0, w1) = (s(1), s(2), s(3));
    // the victim is worker 9; the other worker's certificate is the stolen one
    let (victim, other, stolen) = if w0.0 < w1.0 {
        (w0, w1, "worker-1")
    } else {
        (w1, w0, "worker-0")
    };
    let victim_proc = if w0.0 < w1.0 { 2 } else { 3 };
    let addr = |port: u16| format!("127.0.0.1:{port}");
    let plan = Plan {
        certs: certs.clone(),
        scheduler: addr(c.port),
        server: addr(server.1),
        server_inc: server.2,
        worker: addr(victim.1),
        worker_id: victim.0,
        worker_inc: victim.2,
        other_worker_id: other.0,
        stolen: stolen.into(),
    };
    let out = Process::new(std::env::current_exe().unwrap())
        .args(["--exact", "hostile_process", "--ignored", "--nocapture"])
        .env("FORGE_PLAN", serde_json::to_string(&plan).unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("every forgery refused"),
        "{text}\n{}",
        c.dump()
    );
    c.wait_success();
    let stdout = c.all_stdout();
    assert_eq!(stdout.matches("kv-test ok").count(), 2, "{}", c.dump());
    assert!(stdout.contains("= 600 x pushed"), "{}", c.dump());
    let expect = |i: usize, lines: &[&str]| {
        let log = c.procs[i].stderr();
        for l in lines {
            assert!(log.contains(l), "{} did not log '{l}'\n{}", c.procs[i].name, c.dump());
        }
        for bad in [
            "evicted",
            "declared dead",
            "refused this node",
            "replaced without a death notice",
        ] {
            assert!(!log.contains(bad), "{} logged '{bad}'\n{}", c.procs[i].name, c.dump());
        }
    };
    let o = other.0;
    expect(
        victim_proc,
        &[
            "NODE_DEAD from scheduler 1 over a link whose certificate names worker",
            "ADD_NODE from scheduler 1 over a link whose certificate names worker",
            "ADD_NODE from scheduler 1 over a link whose certificate names server",
            "BARRIER from scheduler 1 over a link whose certificate names server",
            "CAMPAIGN from scheduler 1 over a link whose certificate names worker",
            "NODE_DEAD in the scheduler's name over a link whose certificate is not the active scheduler's",
            "ADD_NODE in the scheduler's name over a link whose certificate is not the active scheduler's",
            "CAMPAIGN in the scheduler's name over a link whose certificate is not the active scheduler's",
            "BARRIER in the scheduler's name over a link whose certificate is not the active scheduler's",
            &format!("data answer from node {o} (app 0, customer 0), which this node never asked"),
            &format!(
                "data message from node {o} over a link whose certificate is not the one node {o} registered with"
            ),
            "data message from node 8 over a link whose certificate is not the one node 8 registered with",
        ],
    );
    expect(
        0,
        &[
            "ADD_NODE registration from a process without an id: it claims id 8 before it has one",
            "an ADD_NODE registering a server from a peer whose certificate names worker",
            "ADD_NODE from node 8 over a link whose certificate is not the one node 8 registered with",
            "\"<img src=x onerror=alert(1)>\", which is no host name or IP address",
            "VOTE from scheduler 1: only servers and workers may send it to a scheduler",
            "a client certificate opens no node link",
        ],
    );
    expect(
        1,
        &[
            "NODE_DEAD from scheduler 1 over a link whose certificate names worker",
            "ADD_NODE from scheduler 1 over a link whose certificate names worker",
            "a client certificate opens no node link",
        ],
    );
}
