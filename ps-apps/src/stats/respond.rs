//! One request, from hyper's parts to the answer: the access decision
//! ([`Access::decide`]), the body read within its limits, then the routes (the API
//! first, then `/stats.json`, `/metrics`, the dashboard): reads on the connection's
//! own thread, changes on tokio's blocking threads (they read files and save state
//! under the scheduler's lock).

use super::access::{Access, Call, Grant};
use super::dashboard;
use super::error::StatsError;
use super::limits::{ConnId, ConnTable, Quiet, IO_TIMEOUT, MAX_BODY_BYTES};
use super::prometheus;
use super::snapshot::Snapshot;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Produces the current snapshot.
pub type Provider = Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// An HTTP response from an [`Api`]: status, content type and body.
pub type ApiResponse = (u16, &'static str, String);

/// Extra routes served before the statistics ones: gets the method, the path (without
/// the query) and the body, and answers, or None to fall through.
pub type Api = Arc<dyn Fn(&str, &str, &str) -> Option<ApiResponse> + Send + Sync>;

/// What every connection of a server shares.
pub(super) struct Served {
    pub(super) access: Access,
    pub(super) provider: Provider,
    pub(super) api: Option<Api>,
    pub(super) conns: Mutex<ConnTable>,
    pub(super) refusals: Mutex<Quiet>,
    pub(super) started: Instant,
}

/// Who is on the other end of a connection.
#[derive(Clone, Copy, Debug)]
pub(super) struct Caller {
    pub(super) id: ConnId,
    pub(super) peer: SocketAddr,
    pub(super) certified: bool,
}

type Answer = Response<Full<Bytes>>;

/// The content security policy of a page: scripts only from the API itself and the
/// page's own inline scripts (by hash), so markup that reached the page as data could
/// not run even if it became an element.
fn csp(page: &str) -> String {
    let hashes: Vec<String> = inline_scripts(page)
        .into_iter()
        .map(|s| {
            let d = ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
            format!("'sha256-{}'", base64(d.as_ref()))
        })
        .collect();
    format!(
        "default-src 'self'; script-src 'self' {}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hashes.join(" ")
    )
}

/// The text of each `<script>` element without `src` in `page`.
fn inline_scripts(page: &str) -> Vec<&str> {
    page.split("<script>")
        .skip(1)
        .filter_map(|s| s.split_once("</script>").map(|(body, _)| body))
        .collect()
}

fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn answer(code: u16, ctype: &str, body: impl Into<Bytes>) -> Answer {
    let body: Bytes = body.into();
    let policy = ctype
        .starts_with("text/html")
        .then(|| csp(&String::from_utf8_lossy(&body)));
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(ctype) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(p) = policy {
        if let Ok(v) = HeaderValue::from_str(&p) {
            h.insert(header::CONTENT_SECURITY_POLICY, v);
        }
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    r
}

/// A refusal: `why`'s status and one line of JSON; the connection is closed after it.
fn refusal(why: &StatsError) -> Answer {
    let body = format!("{}\n", serde_json::json!({ "error": why.to_string() }));
    let mut r = answer(why.http_status(), "application/json", body);
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

impl Served {
    /// Logs a refusal, at most one line a second (the rest counted).
    fn refused(&self, c: &Call, peer: SocketAddr, why: &StatsError) {
        let now = self.started.elapsed().as_millis() as u64;
        if let Some(held) = self.refusals.lock().allow(now) {
            let more = if held > 0 {
                format!(" ({held} more refused since the last line)")
            } else {
                String::new()
            };
            log::warn!("HTTP {} {} from {peer} refused: {why}{more}", c.method, c.path);
        }
    }
}

/// Answers one request of `caller`.
pub(super) async fn handle(sh: Arc<Served>, caller: Caller, req: Request<Incoming>) -> Answer {
    let (parts, body) = req.into_parts();
    let h = |name: header::HeaderName| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let call = Call {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query(),
        host: h(header::HOST).or(parts.uri.authority().map(|a| a.as_str())),
        origin: h(header::ORIGIN),
        content_type: h(header::CONTENT_TYPE),
        authorization: h(header::AUTHORIZATION),
        cookie: h(header::COOKIE),
        certified: caller.certified,
    };
    match sh.access.decide(&call) {
        Err(why) => {
            sh.refused(&call, caller.peer, &why);
            return refusal(&why);
        }
        Ok(Grant::Login { location, set_cookie }) => {
            sh.conns.lock().trust(caller.id);
            let mut r = answer(303, "text/plain; charset=utf-8", "see the page without its token\n");
            if let (Ok(l), Ok(c)) = (HeaderValue::from_str(&location), HeaderValue::from_str(&set_cookie)) {
                r.headers_mut().insert(header::LOCATION, l);
                r.headers_mut().insert(header::SET_COOKIE, c);
            }
            return r;
        }
        Ok(Grant::Member) => sh.conns.lock().trust(caller.id),
        Ok(Grant::OpenRead) => {}
    }
    let method = if parts.method == hyper::Method::HEAD {
        "GET".to_string()
    } else {
        parts.method.as_str().to_string()
    };
    let path = parts.uri.path().to_string();
    let openmetrics = h(header::ACCEPT).is_some_and(|a| a.contains("application/openmetrics-text"));
    let body = if method == "GET" {
        String::new()
    } else {
        match read_body(&parts, body).await {
            Ok(b) => b,
            Err(why) => {
                sh.refused(&call, caller.peer, &why);
                return refusal(&why);
            }
        }
    };
    // a read answers on this thread (its locks are held briefly); a change, which may
    // read files and save the scheduler's state, on a blocking thread
    let routed = if method == "GET" {
        Ok(route(&sh, &method, &path, &body, openmetrics))
    } else {
        let s2 = Arc::clone(&sh);
        tokio::task::spawn_blocking(move || route(&s2, &method, &path, &body, openmetrics)).await
    };
    match routed {
        Ok((code, ctype, body)) => answer(code, ctype, body),
        Err(e) => {
            log::error!("HTTP {} {}: the handler failed: {e}", parts.method, parts.uri.path());
            answer(500, "application/json", "{\"error\": \"internal error\"}\n")
        }
    }
}

/// The request's body as text, at most [`MAX_BODY_BYTES`] and within [`IO_TIMEOUT`].
async fn read_body(parts: &hyper::http::request::Parts, body: Incoming) -> Result<String, StatsError> {
    let too_large = || StatsError::TooLarge(format!("the request body is larger than {MAX_BODY_BYTES} bytes"));
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let read = tokio::time::timeout(IO_TIMEOUT, Limited::new(body, MAX_BODY_BYTES).collect()).await;
    let bytes = match read {
        Err(_) => {
            return Err(StatsError::BadRequest(format!(
                "the request body did not arrive within {IO_TIMEOUT:?}"
            )))
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Ok(Err(e)) => return Err(StatsError::BadRequest(format!("unreadable request body: {e}"))),
        Ok(Ok(c)) => c.to_bytes(),
    };
    String::from_utf8(bytes.to_vec()).map_err(|_| StatsError::BadRequest("the request body is not UTF-8".into()))
}

/// The answer to `method path` with `body`: the API's, else the statistics routes'.
fn route(sh: &Served, method: &str, path: &str, body: &str, openmetrics: bool) -> ApiResponse {
    if let Some(api) = &sh.api {
        if let Some(r) = api(method, path, body) {
            return r;
        }
    }
    let page = matches!(path, "/stats.json" | "/api/stats" | "/metrics" | "/" | "/index.html");
    if page && method != "GET" {
        return (405, "application/json", "{\"error\": \"use GET\"}\n".into());
    }
    match path {
        "/stats.json" | "/api/stats" => {
            let body = serde_json::to_string(&(sh.provider)()).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
            (200, "application/json", body)
        }
        "/metrics" => {
            let om = prometheus::to_prometheus(&(sh.provider)());
            if openmetrics {
                (200, prometheus::CONTENT_TYPE, om)
            } else {
                (200, prometheus::TEXT_CONTENT_TYPE, prometheus::to_text_format(&om))
            }
        }
        "/" | "/index.html" => (200, "text/html; charset=utf-8", dashboard::PAGE.to_string()),
        _ => (
            404,
            "text/plain; charset=utf-8",
            "not found: try /, /stats.json or /metrics\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pages_inline_scripts_are_allowed_by_hash_and_no_other_inline_script() {
        let scripts = inline_scripts(dashboard::PAGE);
        assert_eq!(scripts.len(), 1);
        assert!(scripts[0].contains("function tick()"));
        let p = csp(dashboard::PAGE);
        assert_eq!(p.matches("'sha256-").count(), 1, "{p}");
        let script_src = p.split(';').find(|d| d.trim().starts_with("script-src")).unwrap();
        assert!(!script_src.contains("unsafe"), "{p}");
        let d = ring::digest::digest(&ring::digest::SHA256, scripts[0].as_bytes());
        assert!(p.contains(&base64(d.as_ref())), "{p}");
    }
}
