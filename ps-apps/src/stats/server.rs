//! The HTTP server: tiny_http threads answering from a snapshot provider, on the
//! address itself (plain HTTP, no security) or behind the HTTPS front
//! ([`super::https`]).

use super::access::{Access, HttpSecurity};
use super::dashboard;
use super::error::StatsError;
use super::prometheus::to_prometheus;
use super::snapshot::Snapshot;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Produces the current snapshot.
pub type Provider = Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// An HTTP response from an [`Api`]: status, content type and body.
pub type ApiResponse = (u16, &'static str, String);

/// Extra routes served before the statistics ones: gets the method, the path (without
/// the query) and the body, and answers, or None to fall through.
pub type Api = Arc<dyn Fn(&str, &str, &str) -> Option<ApiResponse> + Send + Sync>;

/// Largest request body read.
const MAX_BODY: u64 = 1 << 20;

/// A running statistics server; stops when dropped.
pub struct StatsServer {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The HTTPS front and the private directory of its Unix sockets.
    front: Option<(super::https::Front, PathBuf)>,
}

/// What answers a request.
struct Handler {
    provider: Provider,
    api: Option<Api>,
    access: Access,
}

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
        let handler = Arc::new(Handler {
            provider,
            api,
            access: sec.access.clone(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let Some(cfg) = sec.tls else {
            let server = tiny_http::Server::http(addr).map_err(|e| cannot(&e))?;
            let bound = server
                .server_addr()
                .to_ip()
                .ok_or_else(|| StatsError::Io("statistics server has no IP address".to_string()))?;
            let t = serve(server, Arc::clone(&handler), false, Arc::clone(&stop))?;
            return Ok(StatsServer {
                addr: bound,
                stop,
                threads: vec![t],
                front: None,
            });
        };
        let listener = std::net::TcpListener::bind(addr).map_err(|e| cannot(&e))?;
        let bound = listener.local_addr().map_err(|e| cannot(&e))?;
        let dir = private_dir().map_err(|e| cannot(&e))?;
        let backends = super::https::Backends {
            certified: dir.join("certified"),
            anonymous: dir.join("anonymous"),
        };
        let mut threads = Vec::new();
        for (path, certified) in [(&backends.certified, true), (&backends.anonymous, false)] {
            let server = tiny_http::Server::http_unix(path).map_err(|e| cannot(&e))?;
            threads.push(serve(server, Arc::clone(&handler), certified, Arc::clone(&stop))?);
        }
        let front =
            super::https::Front::start(listener, cfg, backends, sec.handshake_timeout).map_err(|e| cannot(&e))?;
        Ok(StatsServer {
            addr: bound,
            stop,
            threads,
            front: Some((front, dir)),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `https` with security on, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.front.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// A new directory only this user can enter, for the HTTPS front's Unix sockets.
fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!(
        "psrs-https-{}-{}-{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let dir = std::env::temp_dir().join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// Answers `server`'s requests until `stop`; `certified` says how its callers came in.
fn serve(
    server: tiny_http::Server,
    handler: Arc<Handler>,
    certified: bool,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, StatsError> {
    std::thread::Builder::new()
        .name("stats-http".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match server.recv_timeout(Duration::from_millis(100)) {
                    Ok(Some(req)) => match allowed(&req, &handler.access, certified) {
                        Ok(()) => respond(req, &handler.provider, handler.api.as_ref()),
                        Err(why) => refuse(req, &why),
                    },
                    Ok(None) => {}
                    Err(e) => log::warn!("statistics server: {e}"),
                }
            }
        })
        .map_err(|e| StatsError::Io(e.to_string()))
}

fn allowed(req: &tiny_http::Request, access: &Access, certified: bool) -> Result<(), StatsError> {
    let auth = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str());
    access.check(req.method().as_str(), auth, certified)
}

/// Answers a refused request with the status of `why`'s kind and its one line.
fn refuse(req: tiny_http::Request, why: &StatsError) {
    let from = req
        .remote_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "an HTTPS caller".into());
    log::warn!("HTTP {} {} from {from} refused: {why}", req.method(), req.url());
    let body = format!("{}\n", serde_json::json!({ "error": why.to_string() }));
    let resp = tiny_http::Response::from_string(body)
        .with_status_code(why.http_status())
        .with_header(header("application/json"));
    let _ = req.respond(resp);
}

fn header(v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(&b"Content-Type"[..], v.as_bytes()).expect("valid header")
}

fn respond(mut req: tiny_http::Request, provider: &Provider, api: Option<&Api>) {
    let path = req.url().split('?').next().unwrap_or("/").to_string();
    if let Some(api) = api {
        use std::io::Read;
        let mut body = String::new();
        let read = req.as_reader().take(MAX_BODY).read_to_string(&mut body);
        let answer = match read {
            Ok(_) => api(req.method().as_str(), &path, &body),
            Err(e) => Some((400, "text/plain", format!("unreadable request body: {e}\n"))),
        };
        if let Some((code, ctype, body)) = answer {
            let resp = tiny_http::Response::from_string(body)
                .with_status_code(code)
                .with_header(header(ctype));
            if let Err(e) = req.respond(resp) {
                log::debug!("API response failed: {e}");
            }
            return;
        }
    }
    let resp = match path.as_str() {
        "/stats.json" | "/api/stats" => {
            let body = serde_json::to_string(&provider()).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
            tiny_http::Response::from_string(body).with_header(header("application/json"))
        }
        "/metrics" => tiny_http::Response::from_string(to_prometheus(&provider()))
            .with_header(header(super::prometheus::CONTENT_TYPE)),
        "/" | "/index.html" => {
            tiny_http::Response::from_string(dashboard::PAGE).with_header(header("text/html; charset=utf-8"))
        }
        _ => tiny_http::Response::from_string("not found: try /, /stats.json or /metrics\n").with_status_code(404),
    };
    if let Err(e) = req.respond(resp) {
        log::debug!("statistics response failed: {e}");
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some((front, dir)) = self.front.take() {
            drop(front);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ps_core::auth::{Secret, SecretSource};
    use ps_core::config::Security;
    use ps_core::tls::{CertRole, Credentials};
    use std::io::{Read, Write};

    fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// A GET over TLS trusting `trust`'s CA, with `id` as the client certificate and
    /// `token` as the bearer token; Err is the TLS or I/O error.
    fn get_tls(
        addr: std::net::SocketAddr,
        path: &str,
        trust: &ps_core::tls::Trust,
        id: Option<&Credentials>,
        token: Option<&str>,
    ) -> std::io::Result<String> {
        let cfg = trust.http_client_config(id).unwrap();
        let conn = rustls::ClientConnection::new(cfg, ps_core::tls::server_name("127.0.0.1")).unwrap();
        let tcp = std::net::TcpStream::connect(addr)?;
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }

    #[test]
    fn serves_json_metrics_and_dashboard() {
        let provider: Provider = Arc::new(|| Snapshot {
            job: "test-job".into(),
            uptime_s: 1.0,
            ..Default::default()
        });
        let srv = StatsServer::start("127.0.0.1:0", provider, HttpSecurity::open()).unwrap();
        assert_eq!(srv.scheme(), "http");
        let json = get(srv.addr(), "/stats.json");
        assert!(json.starts_with("HTTP/1.") && json.contains(" 200 "), "{json}");
        let body = json.split("\r\n\r\n").nth(1).unwrap();
        let snap: Snapshot = serde_json::from_str(body).unwrap();
        assert_eq!(snap.job, "test-job");
        assert!(get(srv.addr(), "/metrics").contains("psrs_uptime_seconds 1"));
        assert!(get(srv.addr(), "/").contains("<title>psrs"));
        assert!(get(srv.addr(), "/nope").contains(" 404 "));
    }

    #[test]
    fn an_open_server_beyond_loopback_needs_insecure() {
        let provider: Provider = Arc::new(Snapshot::default);
        let e = StatsServer::start("0.0.0.0:0", Arc::clone(&provider), HttpSecurity::open())
            .err()
            .expect("refused");
        assert!(matches!(e, StatsError::Exposed(_)));
        let e = e.to_string();
        assert!(e.contains("--insecure") && e.contains("0.0.0.0"), "{e}");
        let mut sec = HttpSecurity::open();
        sec.access = sec.access.insecure(true);
        let srv = StatsServer::start("0.0.0.0:0", provider, sec).unwrap();
        let lo = std::net::SocketAddr::from(([127, 0, 0, 1], srv.addr().port()));
        assert!(get(lo, "/stats.json").contains(" 200 "));
    }

    /// A server on loopback secured by `secret` (HTTPS).
    fn secured(secret: &Secret) -> StatsServer {
        let sec = Security {
            secret: Some(secret.clone()),
            ..Default::default()
        };
        let provider: Provider = Arc::new(Snapshot::default);
        StatsServer::start(
            "127.0.0.1:0",
            provider,
            HttpSecurity::from_security(&sec, false).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn a_secured_server_speaks_https_to_a_token_or_a_client_certificate() {
        let secret = Secret::new(vec![3; 32], SecretSource::File).unwrap();
        let srv = secured(&secret);
        assert_eq!(srv.scheme(), "https");
        let client = Credentials::from_secret(&secret, CertRole::Client).unwrap();
        let worker = Credentials::from_secret(&secret, CertRole::Worker).unwrap();
        let trust = client.trust().clone();
        let token = secret.http_token();
        let ok = |r: std::io::Result<String>| r.unwrap().contains(" 200 ");
        assert!(ok(get_tls(srv.addr(), "/stats.json", &trust, None, Some(&token))));
        assert!(ok(get_tls(srv.addr(), "/stats.json", &trust, Some(&client), None)));
        let r = get_tls(srv.addr(), "/stats.json", &trust, None, None).unwrap();
        assert!(r.contains(" 401 "), "{r}");
        let r = get_tls(srv.addr(), "/stats.json", &trust, Some(&worker), None).unwrap();
        assert!(r.contains(" 401 "), "a worker's certificate is not a client's: {r}");
        // plain HTTP gets no answer, and a client trusting another CA refuses the server
        assert!(!get(srv.addr(), "/stats.json").contains("HTTP/1."));
        let other =
            Credentials::from_secret(&Secret::new(vec![4; 32], SecretSource::File).unwrap(), CertRole::Client).unwrap();
        assert!(get_tls(srv.addr(), "/stats.json", other.trust(), None, Some(&token)).is_err());
    }

    #[test]
    fn a_request_sent_with_the_last_handshake_message_is_answered() {
        let secret = Secret::new(vec![5; 32], SecretSource::File).unwrap();
        let srv = secured(&secret);
        let client = Credentials::from_secret(&secret, CertRole::Client).unwrap();
        let cfg = client.trust().http_client_config(Some(&client)).unwrap();
        let mut conn = rustls::ClientConnection::new(cfg, ps_core::tls::server_name("127.0.0.1")).unwrap();
        // written before the handshake: rustls sends it in one flight with its Finished
        conn.writer()
            .write_all(b"GET /stats.json HTTP/1.0\r\nHost: x\r\n\r\n")
            .unwrap();
        let tcp = std::net::TcpStream::connect(srv.addr()).unwrap();
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut s = rustls::StreamOwned::new(conn, tcp);
        let mut out = String::new();
        let r = s.read_to_string(&mut out);
        assert!(out.contains(" 200 "), "{r:?}: {out}");
    }
}
