use super::*;
use crate::stats::snapshot::Snapshot;
use crate::stats::HttpOptions;
use ps_core::auth::{Secret, SecretSource};
use ps_core::config::Security;
use ps_core::tls::{CertRole, Credentials};
use std::io::{Read, Write};
use std::path::Path;

const TOKEN: &str = "00112233445566778899aabbccddeeff00112233";

/// One request over plain TCP with `headers`; the whole answer.
fn request(addr: SocketAddr, head: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn get(addr: SocketAddr, path: &str) -> String {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"),
    )
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A GET over TLS trusting `trust`'s CA, with `id` as the client certificate and
/// `token` as the bearer token; Err is the TLS or I/O error.
fn get_tls(
    addr: SocketAddr,
    path: &str,
    trust: &ps_core::tls::Trust,
    id: Option<&Credentials>,
    token: Option<&str>,
) -> std::io::Result<String> {
    let cfg = trust.http_client_config(id).unwrap();
    let conn = rustls::ClientConnection::new(cfg, ps_core::tls::server_name("127.0.0.1")).unwrap();
    let tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

fn plain(provider: Provider) -> StatsServer {
    StatsServer::start("127.0.0.1:0", provider, HttpSecurity::with_token(TOKEN)).unwrap()
}

#[test]
fn serves_json_metrics_and_dashboard_to_the_token() {
    let provider: Provider = Arc::new(|| Snapshot {
        job: "test-job".into(),
        uptime_s: 1.0,
        ..Default::default()
    });
    let srv = plain(provider);
    assert_eq!(srv.scheme(), "http");
    let json = get(srv.addr(), "/stats.json");
    assert!(json.starts_with("HTTP/1.1 200"), "{json}");
    let snap: Snapshot = serde_json::from_str(body(&json)).unwrap();
    assert_eq!(snap.job, "test-job");
    let metrics = get(srv.addr(), "/metrics");
    assert!(metrics.contains("psrs_uptime_seconds 1"), "{metrics}");
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    let om = request(
        srv.addr(),
        &format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"),
    );
    assert!(
        om.contains("application/openmetrics-text") && om.contains("# EOF"),
        "{om}"
    );
    let page = get(srv.addr(), "/");
    assert!(page.contains("<title>psrs"), "{page}");
    assert!(
        page.to_lowercase()
            .contains("content-security-policy: default-src 'self'"),
        "{page}"
    );
    assert!(get(srv.addr(), "/nope").starts_with("HTTP/1.1 404"));
    // without the token: one line, and the connection closes
    let r = request(srv.addr(), "GET /stats.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    assert!(body(&r).contains("\"error\"") && !body(&r).contains("test-job"), "{r}");
    assert!(r.to_lowercase().contains("connection: close"), "{r}");
}

#[test]
fn a_head_too_large_or_too_slow_is_cut_off() {
    let srv = plain(Arc::new(Snapshot::default));
    // too large: 431 (or closed) long before it ends
    let big = format!(
        "GET /stats.json HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(64 << 10)
    );
    let mut s = std::net::TcpStream::connect(srv.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(big.as_bytes());
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 431"), "{out}");
    // too many header fields
    let many: String = (0..200).map(|i| format!("X-{i}: 1\r\n")).collect();
    let r = request(srv.addr(), &format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n"));
    assert!(r.is_empty() || r.starts_with("HTTP/1.1 431"), "{r}");
    // a body beyond the limit is refused before it is read
    let r = request(
        srv.addr(),
        &format!("POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n{{"),
    );
    assert!(r.starts_with("HTTP/1.1 413"), "{r}");
}

#[test]
fn a_token_in_the_pages_url_becomes_a_cookie() {
    let srv = plain(Arc::new(Snapshot::default));
    let port = srv.addr().port();
    let r = request(
        srv.addr(),
        &format!("GET /?token={TOKEN} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    );
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    let lower = r.to_lowercase();
    assert!(lower.contains("location: /\r\n"), "{r}");
    assert!(
        lower.contains(&format!(
            "set-cookie: psrs-token-{port}={TOKEN}; path=/; httponly; samesite=strict"
        )),
        "{r}"
    );
    let r = request(
        srv.addr(),
        &format!("GET /stats.json HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: psrs-token-{port}={TOKEN}\r\nConnection: close\r\n\r\n"),
    );
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

#[test]
fn an_api_answers_first_and_changes_need_json_from_its_own_origin() {
    let api: Api =
        Arc::new(|m: &str, p: &str, b: &str| (p == "/echo").then(|| (200, "text/plain", format!("{m} {b}"))));
    let srv = StatsServer::start_with_api(
        "127.0.0.1:0",
        Arc::new(Snapshot::default),
        Some(api),
        HttpSecurity::with_token(TOKEN),
    )
    .unwrap();
    let a = srv.addr();
    let post = |extra: &str| {
        request(
            a,
            &format!("POST /echo HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 2\r\nConnection: close\r\n{extra}\r\nhi"),
        )
    };
    let ok = post("Content-Type: application/json\r\n");
    assert!(ok.starts_with("HTTP/1.1 200") && body(&ok) == "POST hi", "{ok}");
    assert!(post("Content-Type: text/plain\r\n").starts_with("HTTP/1.1 415"));
    let evil = post("Content-Type: application/json\r\nOrigin: http://evil.example\r\n");
    assert!(evil.starts_with("HTTP/1.1 403"), "{evil}");
    let own = post(&format!("Content-Type: application/json\r\nOrigin: http://{a}\r\n"));
    assert!(own.starts_with("HTTP/1.1 200"), "{own}");
    let r = request(
        a,
        &format!(
            "GET /echo HTTP/1.1\r\nHost: evil.example:{}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n",
            a.port()
        ),
    );
    assert!(r.starts_with("HTTP/1.1 403"), "DNS rebinding: {r}");
}

#[test]
fn an_open_server_beyond_loopback_needs_insecure() {
    let provider: Provider = Arc::new(Snapshot::default);
    let e = StatsServer::start("0.0.0.0:0", Arc::clone(&provider), HttpSecurity::with_token(TOKEN))
        .err()
        .expect("refused");
    assert!(matches!(e, StatsError::Exposed(_)));
    let e = e.to_string();
    assert!(e.contains("--insecure") && e.contains("0.0.0.0"), "{e}");
    let mut sec = HttpSecurity::with_token(TOKEN);
    sec.access = sec.access.insecure(true);
    let srv = StatsServer::start("0.0.0.0:0", provider, sec).unwrap();
    let lo = SocketAddr::from(([127, 0, 0, 1], srv.addr().port()));
    assert!(get(lo, "/stats.json").starts_with("HTTP/1.1 200"));
}

#[test]
fn a_made_token_is_printed_in_the_url_and_published_for_clients() {
    let d = tempfile::tempdir().unwrap();
    let opts = HttpOptions {
        token_dir: Some(d.path().join("work")),
        runtime: Some(RuntimeDir(d.path().join("rt"))),
        ..HttpOptions::default()
    };
    let sec = HttpSecurity::from_security(&Security::default(), &opts).unwrap();
    let token = sec.access.token().unwrap().to_string();
    let srv = StatsServer::start("127.0.0.1:0", Arc::new(Snapshot::default), sec).unwrap();
    assert_eq!(srv.url(), format!("http://{}/?token={token}", srv.addr()));
    let url = format!("http://127.0.0.1:{}", srv.addr().port());
    let found = crate::stats::find_token(&url, opts.runtime.as_ref(), Path::new("/nonexistent"));
    assert_eq!(found.as_deref(), Some(token.as_str()));
    let entry = d.path().join("rt").join(format!("api-{}.json", srv.addr().port()));
    assert!(entry.exists());
    drop(srv);
    assert!(!entry.exists(), "removed when the server stops");
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
        HttpSecurity::from_security(&sec, &HttpOptions::default()).unwrap(),
    )
    .unwrap()
}

#[test]
fn a_secured_server_speaks_https_to_a_token_or_a_client_certificate() {
    let secret = Secret::new(vec![3; 32], SecretSource::File).unwrap();
    let srv = secured(&secret);
    assert_eq!(srv.scheme(), "https");
    assert_eq!(
        srv.url(),
        format!("https://{}/", srv.addr()),
        "a secret's token is not printed"
    );
    let client = Credentials::from_secret(&secret, CertRole::Client).unwrap();
    let worker = Credentials::from_secret(&secret, CertRole::Worker).unwrap();
    let trust = client.trust().clone();
    let token = secret.http_token();
    let ok = |r: std::io::Result<String>| r.unwrap().starts_with("HTTP/1.1 200");
    assert!(ok(get_tls(srv.addr(), "/stats.json", &trust, None, Some(&token))));
    assert!(ok(get_tls(srv.addr(), "/stats.json", &trust, Some(&client), None)));
    let r = get_tls(srv.addr(), "/stats.json", &trust, None, None).unwrap();
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let r = get_tls(srv.addr(), "/stats.json", &trust, Some(&worker), None).unwrap();
    assert!(
        r.starts_with("HTTP/1.1 401"),
        "a worker's certificate is not a client's: {r}"
    );
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
        .write_all(b"GET /stats.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let tcp = std::net::TcpStream::connect(srv.addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    let mut out = String::new();
    let r = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "{r:?}: {out}");
}
