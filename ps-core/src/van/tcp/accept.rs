//! The TCP van's accept loop: takes new connections from the TCP listener and from
//! the Unix socket standing for it ([`super::stream`]), admits each at the guard's door
//! and starts its reader thread ([`super::read`]).

use super::guard::Guard;
use super::read::{serve, Serve};
use super::shm::Shm;
use super::stream::{self, Stream};
use super::wire::wait_for;
use crate::auth::gate::Peer;
use crate::van::transport::Deliver;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the loop waits for a connection before it looks at the stop flag again.
/// It wakes as soon as a connection arrives: a dialer's TLS handshake waits for this
/// loop, so a loop that slept instead added up to this much to every link opened.
const IDLE: Duration = Duration::from_millis(10);

/// What the accept loop hands each new connection's reader thread.
pub(super) struct Acceptor {
    pub(super) deliver: Deliver,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) incoming: Arc<Mutex<HashMap<u64, Stream>>>,
    pub(super) threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    pub(super) guard: Arc<Guard>,
    pub(super) spin: Duration,
    pub(super) shm: Arc<Shm>,
    pub(super) next_id: u64,
}

impl Acceptor {
    /// Accepts from the (non-blocking) listeners until the transport stops.
    pub(super) fn run(mut self, tcp: TcpListener, local: Option<UnixListener>) {
        while !self.stop.load(Ordering::Relaxed) {
            let got = match tcp.accept() {
                Ok((s, from)) => Ok((Stream::Tcp(s), from)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => match &local {
                    Some(u) => u.accept().map(|(s, _)| {
                        self.shm.stats().unix_in.fetch_add(1, Ordering::Relaxed);
                        let from = stream::accepted_local();
                        (Stream::Unix(s, from), from)
                    }),
                    None => Err(e),
                },
                Err(e) => Err(e),
            };
            match got {
                Ok((s, from)) => self.take(s, from),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let fds = [Some(tcp.as_raw_fd()), local.as_ref().map(|u| u.as_raw_fd())];
                    let fds: Vec<_> = fds.into_iter().flatten().collect();
                    if let Err(e) = wait_for(&fds, libc::POLLIN, IDLE) {
                        if e.kind() == io::ErrorKind::Interrupted {
                            continue;
                        }
                        log::warn!("waiting for connections failed: {e}");
                        std::thread::sleep(IDLE);
                    }
                }
                Err(e) => {
                    log::warn!("accept failed: {e}");
                    std::thread::sleep(IDLE);
                }
            }
        }
    }

    /// Admits `s` from `from` and starts its reader thread, or closes it (logged).
    fn take(&mut self, s: Stream, from: SocketAddr) {
        let who = s.who();
        let permit = match self.guard.admit(from, who) {
            Ok(p) => p,
            Err(e) => {
                match who {
                    Peer::Process(pid) => log::warn!("refused a connection from {from} (process {pid}): {e}"),
                    _ => log::warn!("refused a connection from {from}: {e}"),
                }
                return;
            }
        };
        let _ = s.set_nonblocking(false);
        s.tune();
        self.next_id += 1;
        let id = self.next_id;
        if let Ok(c) = s.try_clone() {
            self.incoming.lock().insert(id, c);
        }
        let ctx = Serve {
            deliver: Arc::clone(&self.deliver),
            stop: Arc::clone(&self.stop),
            guard: Arc::clone(&self.guard),
            permit,
            spin: self.spin,
            shm: Arc::clone(&self.shm),
        };
        let inc = Arc::clone(&self.incoming);
        match std::thread::Builder::new()
            .name("tcp-recv".into())
            .spawn(move || serve(id, inc, s, ctx))
        {
            Ok(h) => {
                let mut t = self.threads.lock();
                t.retain(|h| !h.is_finished());
                t.push(h);
            }
            Err(e) => log::error!("cannot start a reader thread: {e}"),
        }
    }
}
