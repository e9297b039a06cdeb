//! The etcd store against a real etcd server started on free loopback ports (skipped,
//! with a message, when no `etcd` binary is installed).
#![cfg(feature = "etcd")]

use ps_apps::etcd_store::EtcdStore;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Etcd {
    child: Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_etcd() -> Option<Etcd> {
    if Command::new("etcd").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no etcd binary (apt-get install etcd-server)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (c, p) = (port(), port());
    let endpoint = format!("http://127.0.0.1:{c}");
    let child = Command::new("etcd")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{p}")])
        .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{p}")])
        .args(["--initial-cluster", &format!("default=http://127.0.0.1:{p}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let etcd = Etcd {
        child,
        endpoint,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", c)).is_err() {
        assert!(Instant::now() < deadline, "etcd did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(etcd)
}

fn store(etcd: &Etcd, wait: Duration) -> Result<EtcdStore, String> {
    EtcdStore::connect(
        std::slice::from_ref(&etcd.endpoint),
        "/t/queues",
        "/t/lock",
        Duration::from_secs(5),
        wait,
    )
}

#[test]
fn saves_under_the_lock_and_a_new_master_takes_over() {
    let Some(etcd) = start_etcd() else { return };
    let mut a = store(&etcd, Duration::from_secs(10)).unwrap();
    assert_eq!(a.load().unwrap(), None);
    a.save(b"queues v1").unwrap();
    assert_eq!(a.load().unwrap().as_deref(), Some(&b"queues v1"[..]));

    // a second master cannot get the lock while the first holds it
    let e = store(&etcd, Duration::from_secs(1)).err().expect("lock is held");
    assert!(e.contains("another master holds"), "{e}");

    // the first loses its lease: it can no longer write; a new master resumes
    a.revoke().unwrap();
    let e = a.save(b"queues v2").unwrap_err();
    assert!(e.contains("no longer holds the master lock"), "{e}");
    let mut b = store(&etcd, Duration::from_secs(10)).unwrap();
    assert_eq!(b.load().unwrap().as_deref(), Some(&b"queues v1"[..]));
    b.save(b"queues v3").unwrap();
    assert_eq!(b.load().unwrap().as_deref(), Some(&b"queues v3"[..]));
}

#[test]
fn unreachable_etcd_is_a_clear_error() {
    let e = EtcdStore::connect(
        &[format!("http://127.0.0.1:{}", port())],
        "/k",
        "/l",
        Duration::from_secs(5),
        Duration::from_secs(1),
    )
    .err()
    .expect("nothing listens there");
    assert!(e.starts_with("etcd:"), "{e}");
}
