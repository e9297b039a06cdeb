use super::*;

const T: &str = "0123456789abcdef0123456789abcdef";

fn get(path: &'static str) -> Call<'static> {
    Call {
        method: "GET",
        path,
        host: Some("127.0.0.1:8080"),
        ..Call::default()
    }
}

fn post() -> Call<'static> {
    Call {
        method: "POST",
        path: "/jobs",
        host: Some("127.0.0.1:8080"),
        content_type: Some("application/json"),
        ..Call::default()
    }
}

fn status(r: Result<Grant, StatsError>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(e) => e.http_status(),
    }
}

fn plain() -> Access {
    Access::new(Some(T.into()), false).bound(8080)
}

#[test]
fn every_request_needs_the_token_or_a_certificate() {
    let a = plain();
    let bearer = format!("Bearer {T}");
    assert_eq!(status(a.decide(&get("/jobs"))), 401);
    assert_eq!(status(a.decide(&post())), 401);
    fn with<'a>(mut c: Call<'a>, auth: &'a str) -> Call<'a> {
        c.authorization = Some(auth);
        c
    }
    assert_eq!(a.decide(&with(get("/jobs"), &bearer)).unwrap(), Grant::Member);
    assert_eq!(a.decide(&with(post(), &bearer)).unwrap(), Grant::Member);
    assert_eq!(status(a.decide(&with(post(), "Bearer nope"))), 401);
    assert_eq!(status(a.decide(&with(post(), T))), 401, "the Bearer scheme is required");
    let mut c = post();
    c.certified = true;
    assert_eq!(a.decide(&c).unwrap(), Grant::Member, "a client certificate is enough");
    // the cookie, by this port's name only
    let (ours, theirs) = (format!("x=1; psrs-token-8080={T}"), format!("psrs-token-9090={T}"));
    let mut c = post();
    c.cookie = Some(&ours);
    assert_eq!(a.decide(&c).unwrap(), Grant::Member);
    c.cookie = Some(&theirs);
    assert_eq!(status(a.decide(&c)), 401, "another port's cookie");
}

#[test]
fn a_token_in_a_pages_url_becomes_a_strict_cookie_and_leaves_the_url() {
    let a = plain();
    let q = format!("token={T}");
    let q = q.as_str();
    let mut c = get("/");
    c.query = Some(q);
    match a.decide(&c).unwrap() {
        Grant::Login { location, set_cookie } => {
            assert_eq!(location, "/");
            assert_eq!(
                set_cookie,
                format!("psrs-token-8080={T}; Path=/; HttpOnly; SameSite=Strict")
            );
        }
        g => panic!("{g:?}"),
    }
    let q2 = format!("a=1&token={T}");
    c.path = "/index.html";
    c.query = Some(&q2);
    assert!(matches!(a.decide(&c).unwrap(), Grant::Login { location, .. } if location == "/index.html?a=1"));
    // an API read with the token in its URL is simply answered
    let mut c = get("/jobs");
    c.query = Some(q);
    assert_eq!(a.decide(&c).unwrap(), Grant::Member);
    // a wrong one is refused; a change never takes it from the URL
    c.query = Some("token=nope");
    assert_eq!(status(a.decide(&c)), 401);
    let mut p = post();
    p.query = Some(q);
    assert_eq!(status(a.decide(&p)), 401);
    // over HTTPS the cookie is Secure
    let s = Access::new(Some(T.into()), true).bound(1);
    let mut c = get("/");
    c.query = Some(q);
    assert!(matches!(s.decide(&c).unwrap(), Grant::Login { set_cookie, .. } if set_cookie.ends_with("; Secure")));
}

#[test]
fn open_reads_open_reads_only() {
    let a = plain().open_reads(true);
    assert_eq!(a.decide(&get("/metrics")).unwrap(), Grant::OpenRead);
    let mut h = get("/stats.json");
    h.method = "HEAD";
    assert_eq!(a.decide(&h).unwrap(), Grant::OpenRead);
    assert_eq!(status(a.decide(&post())), 401);
    let mut d = post();
    d.method = "DELETE";
    assert_eq!(status(a.decide(&d)), 401);
    // a wrong token is still wrong
    let mut c = get("/metrics");
    c.authorization = Some("Bearer nope");
    assert_eq!(status(a.decide(&c)), 401);
}

#[test]
fn a_browser_is_kept_to_the_apis_own_host_and_origin_and_to_json() {
    let a = plain().hosts(vec!["psrs-jobs".into()]);
    let member = |mut c: Call<'static>| -> Call<'static> {
        c.certified = true;
        c
    };
    // DNS rebinding: the right credentials under a foreign name
    let mut c = member(get("/jobs"));
    c.host = Some("evil.example:8080");
    assert_eq!(status(a.decide(&c)), 403);
    c.host = Some("psrs-jobs:8080");
    assert_eq!(status(a.decide(&c)), 200);
    // cross-origin changes
    for origin in ["http://evil.example", "null", "https://127.0.0.1:8080"] {
        let mut c = member(post());
        c.origin = Some(origin);
        assert_eq!(status(a.decide(&c)), 403, "{origin}");
    }
    let mut c = member(post());
    c.origin = Some("http://127.0.0.1:8080");
    assert_eq!(status(a.decide(&c)), 200);
    // a change needs a JSON body type, DELETE included; reads do not
    for ct in [None, Some("text/plain"), Some("application/x-www-form-urlencoded")] {
        let mut c = member(post());
        c.content_type = ct;
        assert_eq!(status(a.decide(&c)), 415, "{ct:?}");
        c.method = "DELETE";
        assert_eq!(status(a.decide(&c)), 415, "DELETE {ct:?}");
    }
    assert_eq!(status(a.decide(&member(get("/jobs")))), 200);
    // without credentials the answer is 401 whatever else is wrong
    let mut c = post();
    c.host = Some("evil.example");
    c.origin = Some("http://evil.example");
    c.content_type = Some("text/plain");
    assert_eq!(status(a.decide(&c)), 401);
}

#[test]
fn certificates_without_a_secret_have_no_token() {
    let a = Access::new(None, true);
    let mut c = get("/jobs");
    c.authorization = Some("Bearer anything");
    let e = a.decide(&c).unwrap_err();
    assert!(matches!(e, StatsError::Unauthorized(_)));
    assert!(e.to_string().contains("client certificate"), "{e}");
    let e = a.decide(&get("/jobs")).unwrap_err();
    assert!(e.to_string().contains("client certificate"), "{e}");
    c.certified = true;
    assert!(a.decide(&c).is_ok());
    use ps_core::tls::{CertRole as R, Roles};
    assert!(certified(&Roles(vec![R::Client])) && certified(&Roles(vec![R::Scheduler])));
    assert!(!certified(&Roles(vec![R::Worker])) && !certified(&Roles(vec![R::Server])));
}

#[test]
fn beyond_loopback_needs_security_or_insecure() {
    let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
    let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    assert!(plain().check_listen(lo).is_ok());
    let e = plain().check_listen(any).unwrap_err();
    assert!(matches!(e, StatsError::Exposed(a) if a == any));
    let e = e.to_string();
    assert!(e.contains("--insecure") && e.contains("0.0.0.0:8080"), "{e}");
    assert!(plain().insecure(true).check_listen(any).is_ok());
    assert!(Access::new(None, true).check_listen(any).is_ok());
    assert!(plain().check_listen("[::1]:80".parse().unwrap()).is_ok());
}

#[test]
fn bare_ports_bind_loopback() {
    assert_eq!(bind_addr("8080"), "127.0.0.1:8080");
    assert_eq!(bind_addr(":0"), "127.0.0.1:0");
    assert_eq!(bind_addr("0.0.0.0:80"), "0.0.0.0:80");
    assert_eq!(bind_addr("[::1]:80"), "[::1]:80");
}
