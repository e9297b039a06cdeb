//! A real etcd server for the tests (Debian package `etcd-server`), on free loopback
//! ports with its own data dir, killed when dropped. Its election timeout is short so
//! leases of 1 s are honoured (etcd raises a lease to 1.5 election timeouts).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Free ports (included by path: ps-apps/tests uses this file on its own; the root
/// tests reach the helper through here).
#[path = "ports.rs"]
pub mod ports;

/// A running etcd server.
pub struct Etcd {
    child: Child,
    /// Its client URL, `http://127.0.0.1:PORT`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when an `etcd` binary is installed.
pub fn installed() -> bool {
    Command::new("etcd").arg("--version").output().is_ok()
}

/// A free port on 127.0.0.1 (bound then released).
pub fn port() -> u16 {
    ports::free_port()
}

impl Etcd {
    /// Starts etcd and waits (up to 20 s) until it accepts clients; panics when it
    /// cannot start.
    /// The etcd process's pid (to stop it with a signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start() -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let (c, p) = (port(), port());
        let endpoint = format!("http://127.0.0.1:{c}");
        let peer = format!("http://127.0.0.1:{p}");
        let child = Command::new("etcd")
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--listen-client-urls", &endpoint, "--advertise-client-urls", &endpoint])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd cannot start (apt-get install etcd-server)");
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
        etcd
    }
}

impl Etcd {
    /// The environment of a scheduler candidate electing through this etcd, its keys
    /// under `prefix`.
    pub fn election<'a>(&'a self, prefix: &'a str) -> [(&'static str, &'a str); 3] {
        [
            ("PS_ELECTION", "etcd"),
            ("PS_ETCD_ENDPOINTS", self.endpoint.as_str()),
            ("PS_ETCD_PREFIX", prefix),
        ]
    }
}
