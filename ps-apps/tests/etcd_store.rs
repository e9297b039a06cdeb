//! The etcd store against a real etcd server started on free loopback ports (skipped,
//! with a message, when no `etcd` binary is installed).
#![cfg(feature = "etcd")]

#[path = "../../tests/common/etcd.rs"]
#[allow(dead_code)] // the election helpers serve the root tests
mod etcd;

use etcd::Etcd;
use ps_apps::master::etcd_store::EtcdStore;
use ps_apps::master::StoreError;
use std::time::Duration;

fn start_etcd() -> Option<Etcd> {
    if !etcd::installed() {
        eprintln!("SKIPPED: no etcd binary (apt-get install etcd-server)");
        return None;
    }
    Some(Etcd::start())
}

fn store(etcd: &Etcd, wait: Duration) -> Result<EtcdStore, StoreError> {
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
    assert!(
        matches!(&e, StoreError::Failed(m) if m.contains("another master holds")),
        "{e}"
    );

    // the first loses its lease: it can no longer write; a new master resumes
    a.revoke().unwrap();
    let e = a.save(b"queues v2").unwrap_err();
    assert!(
        matches!(&e, StoreError::SteppedDown(m) if m.contains("no longer holds the master lock")),
        "{e}"
    );
    let mut b = store(&etcd, Duration::from_secs(10)).unwrap();
    assert_eq!(b.load().unwrap().as_deref(), Some(&b"queues v1"[..]));
    b.save(b"queues v3").unwrap();
    assert_eq!(b.load().unwrap().as_deref(), Some(&b"queues v3"[..]));
}

#[test]
fn unreachable_etcd_is_a_clear_error() {
    let e = EtcdStore::connect(
        &[format!("http://127.0.0.1:{}", etcd::port())],
        "/k",
        "/l",
        Duration::from_secs(5),
        Duration::from_secs(1),
    )
    .err()
    .expect("nothing listens there");
    assert!(matches!(&e, StoreError::Failed(m) if m.starts_with("etcd:")), "{e}");
}

/// A store whose etcd stops answering (SIGSTOP) is still dropped within a bound: the
/// lease keep-alive waits on etcd with a deadline and then sees it must stop.
#[test]
fn a_store_whose_etcd_stops_answering_is_dropped_within_a_bound() {
    let Some(etcd) = start_etcd() else { return };
    let a = store(&etcd, Duration::from_secs(10)).unwrap();
    let pid = etcd.pid().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill").args([sig, &pid]).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill {sig} {pid}");
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_secs(3));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(a);
        let _ = tx.send(());
    });
    let dropped = rx.recv_timeout(Duration::from_secs(15));
    signal("-CONT");
    assert!(
        dropped.is_ok(),
        "the store was not dropped within 15 s of etcd stopping"
    );
}
