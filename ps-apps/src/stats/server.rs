//! The HTTP server: a tiny_http thread answering from a snapshot provider.

use super::access::Access;
use super::dashboard;
use super::prometheus::to_prometheus;
use super::snapshot::Snapshot;
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
    thread: Option<JoinHandle<()>>,
}

impl StatsServer {
    /// Serves on `addr` (e.g. `127.0.0.1:0` for any free port; a bare port binds
    /// 127.0.0.1): `/stats.json`, `/metrics` and `/` (dashboard), to requests `access`
    /// allows (others get 401, logged).
    pub fn start(addr: &str, provider: Provider, access: Access) -> Result<StatsServer, String> {
        StatsServer::start_with_api(addr, provider, None, access)
    }

    /// Like [`StatsServer::start`], with `api` consulted first for every request.
    pub fn start_with_api(
        addr: &str,
        provider: Provider,
        api: Option<Api>,
        access: Access,
    ) -> Result<StatsServer, String> {
        let addr = &super::access::bind_addr(addr);
        let server = tiny_http::Server::http(addr).map_err(|e| format!("cannot serve statistics on {addr}: {e}"))?;
        let bound = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| "statistics server has no IP address".to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("stats-http".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    match server.recv_timeout(Duration::from_millis(100)) {
                        Ok(Some(req)) => match allowed(&req, &access) {
                            Ok(()) => respond(req, &provider, api.as_ref()),
                            Err(why) => refuse(req, why),
                        },
                        Ok(None) => {}
                        Err(e) => log::warn!("statistics server: {e}"),
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(StatsServer {
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

fn allowed(req: &tiny_http::Request, access: &Access) -> Result<(), &'static str> {
    let auth = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str());
    access.check(req.method().as_str(), auth)
}

fn refuse(req: tiny_http::Request, why: &str) {
    let from = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
    log::warn!("HTTP {} {} from {from} refused: {why}", req.method(), req.url());
    let body = format!("{}\n", serde_json::json!({ "error": why }));
    let resp = tiny_http::Response::from_string(body)
        .with_status_code(401)
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
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_json_metrics_and_dashboard() {
        let provider: Provider = Arc::new(|| Snapshot {
            job: "test-job".into(),
            uptime_s: 1.0,
            ..Default::default()
        });
        let srv = StatsServer::start("127.0.0.1:0", provider, Access::open()).unwrap();
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
    fn a_secured_server_answers_401_without_the_token() {
        use ps_core::auth::{Secret, SecretSource};
        use ps_core::config::Security;
        let secret = Secret::new(vec![3; 32], SecretSource::File).unwrap();
        let sec = Security {
            secret: Some(secret.clone()),
            ..Default::default()
        };
        let provider: Provider = Arc::new(Snapshot::default);
        let srv = StatsServer::start("127.0.0.1:0", provider, Access::from_security(&sec)).unwrap();
        assert!(get(srv.addr(), "/stats.json").contains(" 401 "));
        let mut s = std::net::TcpStream::connect(srv.addr()).unwrap();
        write!(
            s,
            "GET /stats.json HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            secret.http_token()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.contains(" 200 "), "{out}");
    }
}
