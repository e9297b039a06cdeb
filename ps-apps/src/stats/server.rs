//! The HTTP server: hyper's HTTP/1.1 on a small tokio runtime of its own, plain HTTP
//! or HTTPS (tokio-rustls with the node's rustls configuration, client certificates
//! asked for, not required), answering through [`super::respond`].
//!
//! Limits ([`super::limits`]): every connection is admitted by the [`ConnTable`]
//! (pending connections from one address, pending and open ones in all; the oldest
//! pending one makes room); the TLS handshake must finish within
//! `PS_HANDSHAKE_TIMEOUT`; a request head is at most [`MAX_HEAD_BYTES`] in at most
//! [`MAX_HEADERS`] fields and must arrive within [`HEADER_TIMEOUT`] (also the idle
//! limit of a kept-alive connection); a read or write without progress fails after
//! [`IO_TIMEOUT`]. A refused request closes its connection, so a caller without
//! credentials holds no more than its request head before it is gone.

use super::access::certified;
use super::error::StatsError;
use super::guard::HttpSecurity;
use super::limits::{Admission, ConnLimits, ConnTable, Quiet, HEADER_TIMEOUT, IO_TIMEOUT, MAX_HEADERS, MAX_HEAD_BYTES};
use super::respond::{handle, Api, Caller, Provider, Served};
use super::token_file::{Entry, RuntimeDir};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// A running statistics server; stops when dropped.
pub struct StatsServer {
    addr: SocketAddr,
    https: bool,
    /// The token to put in the printed URL (one made at start).
    url_token: Option<String>,
    runtime: Option<tokio::runtime::Runtime>,
    stop: watch::Sender<bool>,
    /// The entry published for `psrs job`, removed when the server stops.
    published: Option<PathBuf>,
}

/// The connections' eviction signals, by number.
type Kills = Mutex<HashMap<u64, Arc<Notify>>>;

impl StatsServer {
    /// Serves on `addr` (e.g. `127.0.0.1:0` for any free port; a bare port binds
    /// 127.0.0.1): `/stats.json`, `/metrics` and `/` (dashboard), to requests `sec`
    /// allows (others get 401, logged); HTTPS when `sec` has a TLS configuration. An
    /// address that cannot be served is [`StatsError::Io`] naming it.
    pub fn start(addr: &str, provider: Provider, sec: HttpSecurity) -> Result<StatsServer, StatsError> {
        StatsServer::start_with_api(addr, provider, None, sec)
    }

    /// Like [`StatsServer::start`], with `api` consulted first for every request.
    /// Fails before binding when the address is beyond loopback and `sec` allows
    /// that neither by security nor by `--insecure` ([`Access::check_listen`],
    /// [`StatsError::Exposed`]).
    ///
    /// [`Access::check_listen`]: super::Access::check_listen
    pub fn start_with_api(
        addr: &str,
        provider: Provider,
        api: Option<Api>,
        sec: HttpSecurity,
    ) -> Result<StatsServer, StatsError> {
        let addr = &super::access::bind_addr(addr);
        let cannot = |e: &dyn std::fmt::Display| StatsError::Io(format!("cannot serve statistics on {addr}: {e}"));
        for a in addr.to_socket_addrs().map_err(|e| cannot(&e))? {
            sec.access.check_listen(a)?;
        }
        let std_listener = std::net::TcpListener::bind(addr).map_err(|e| cannot(&e))?;
        let bound = std_listener.local_addr().map_err(|e| cannot(&e))?;
        std_listener.set_nonblocking(true).map_err(|e| cannot(&e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(16)
            .thread_name("http")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| cannot(&e))?;
        let listener = {
            let _in = runtime.enter();
            TcpListener::from_std(std_listener).map_err(|e| cannot(&e))?
        };
        let mut access = sec.access.clone().bound(bound.port());
        // the name the address was given by, if a name (`sched.example:8080`)
        if let Some((name, _)) = addr.rsplit_once(':') {
            if name.parse::<std::net::IpAddr>().is_err() && !name.starts_with('[') {
                access = access.also_host(name);
            }
        }
        let url_token = sec.made_token.then(|| access.token().map(str::to_string)).flatten();
        let served = Arc::new(Served {
            access,
            provider,
            api,
            conns: Mutex::new(ConnTable::new(ConnLimits::default())),
            refusals: Mutex::new(Quiet::new(1000)),
            started: Instant::now(),
        });
        let (stop, stopped) = watch::channel(false);
        let tls = sec.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        let door = Arc::new(Door {
            served,
            tls,
            handshake_timeout: sec.handshake_timeout,
            kills: Mutex::new(HashMap::new()),
            evictions: Mutex::new(Quiet::new(1000)),
        });
        runtime.spawn(accept_loop(listener, door, stopped));
        let mut srv = StatsServer {
            addr: bound,
            https: sec.tls.is_some(),
            url_token,
            runtime: Some(runtime),
            stop,
            published: None,
        };
        if let (Some(rt), Some(token)) = (&sec.runtime, srv.url_token.clone()) {
            srv.published = publish(rt, &srv, token);
        }
        Ok(srv)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` with security on, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
    }

    /// The dashboard's URL; with a token made at start it carries it (`?token=...`),
    /// as Jupyter prints its own: opening it once logs the browser in.
    pub fn url(&self) -> String {
        let base = format!("{}://{}/", self.scheme(), self.addr);
        match &self.url_token {
            Some(t) => format!("{base}?token={t}"),
            None => base,
        }
    }
}

/// Publishes the API for `psrs job` on this host; a failure is logged (the token is
/// still in the work dir and the printed URL).
fn publish(rt: &RuntimeDir, srv: &StatsServer, token: String) -> Option<PathBuf> {
    let e = Entry {
        addr: srv.addr,
        url: srv.url(),
        token,
        pid: std::process::id(),
    };
    match rt.publish(&e) {
        Ok(p) => Some(p),
        Err(err) => {
            log::warn!("cannot publish the API in {}: {err}", rt.0.display());
            None
        }
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        if let Some(p) = self.published.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The accept loop's and the connections' shared state.
struct Door {
    served: Arc<Served>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    handshake_timeout: Duration,
    kills: Kills,
    evictions: Mutex<Quiet>,
}

impl Door {
    fn now_ms(&self) -> u64 {
        self.served.started.elapsed().as_millis() as u64
    }
}

async fn accept_loop(listener: TcpListener, door: Arc<Door>, mut stopped: watch::Receiver<bool>) {
    loop {
        let (sock, peer) = tokio::select! {
            _ = stopped.changed() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    log::warn!("HTTP accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let admission = door.served.conns.lock().admit(peer.ip());
        let id = match admission {
            Admission::Full => {
                if let Some(held) = door.evictions.lock().allow(door.now_ms()) {
                    log::warn!("HTTP connection from {peer} refused: every connection is a member's and the table is full ({held} more since the last line)");
                }
                continue;
            }
            Admission::Admitted { id, evict } => {
                if !evict.is_empty() {
                    if let Some(held) = door.evictions.lock().allow(door.now_ms()) {
                        log::warn!(
                            "HTTP: closed {} connection(s) that had not shown credentials, to let {peer} in ({held} more such since the last line)",
                            evict.len()
                        );
                    }
                }
                let mut kills = door.kills.lock();
                for e in evict {
                    if let Some(k) = kills.remove(&e) {
                        k.notify_one();
                    }
                }
                id
            }
        };
        let kill = Arc::new(Notify::new());
        door.kills.lock().insert(id, Arc::clone(&kill));
        let d = Arc::clone(&door);
        tokio::spawn(async move {
            tokio::select! {
                r = connection(&d, sock, peer, id) => {
                    if let Err(e) = r {
                        log::debug!("HTTP connection from {peer}: {e}");
                    }
                }
                _ = kill.notified() => log::debug!("HTTP connection from {peer} closed to make room"),
            }
            d.kills.lock().remove(&id);
            d.served.conns.lock().close(id);
        });
    }
}

/// Serves one connection: TLS first when configured, then HTTP/1.1.
async fn connection(door: &Arc<Door>, sock: TcpStream, peer: SocketAddr, id: u64) -> Result<(), String> {
    let _ = sock.set_nodelay(true);
    let mut io = tokio_io_timeout::TimeoutStream::new(sock);
    io.set_read_timeout(Some(IO_TIMEOUT));
    io.set_write_timeout(Some(IO_TIMEOUT));
    let io = Box::pin(io);
    let Some(acceptor) = &door.tls else {
        let caller = Caller {
            id,
            peer,
            certified: false,
        };
        return serve_http(door, io, caller).await;
    };
    let tls = tokio::time::timeout(door.handshake_timeout, acceptor.accept(io))
        .await
        .map_err(|_| format!("no TLS handshake within {:?}", door.handshake_timeout))?
        .map_err(|e| format!("TLS handshake refused: {e}"))?;
    let is_certified = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| ps_core::tls::peer::roles(c).unwrap_or_default())
        .as_ref()
        .is_some_and(certified);
    if is_certified {
        door.served.conns.lock().trust(id);
    }
    let caller = Caller {
        id,
        peer,
        certified: is_certified,
    };
    serve_http(door, tls, caller).await
}

async fn serve_http<I>(door: &Arc<Door>, io: I, caller: Caller) -> Result<(), String>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let served = Arc::clone(&door.served);
    let svc = hyper::service::service_fn(move |req| {
        let s = Arc::clone(&served);
        async move { Ok::<_, std::convert::Infallible>(handle(s, caller, req).await) }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
