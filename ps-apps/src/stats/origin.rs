//! What a browser's request says about where it comes from, as pure checks: the
//! `Host` it was addressed to (against DNS rebinding: a page whose own name resolves
//! to this machine reaches the API under that name), its `Origin` (the page that sent
//! it), its `Content-Type`, and the credentials it carries in a cookie or the URL.

/// Whether a request addressed to `host` (the `Host` header: a name or address with
/// an optional port) may be answered: an IP address (v4 or `[v6]`) always, since a
/// page addressed by the address is the API's own origin; `localhost`; otherwise one
/// of `names` (compared without case, a trailing dot ignored). A request without a
/// `Host` (HTTP/1.0, no browser) passes.
pub fn host_allowed(host: Option<&str>, names: &[String]) -> bool {
    let Some(host) = host else {
        return true;
    };
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest
            .split_once(']')
            .is_some_and(|(v6, _)| v6.parse::<std::net::Ipv6Addr>().is_ok());
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return false;
    }
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Whether a request that changes something may come from `origin` (its `Origin`
/// header): absent (not a browser, or a same-origin navigation), or the API's own
/// origin `SCHEME://HOST`, `host` being the `Host` header it was addressed to. `null`
/// (a sandboxed or file page) and any other site are refused.
pub fn origin_allowed(origin: Option<&str>, scheme: &str, host: Option<&str>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    let Some(host) = host else {
        return false;
    };
    let own = format!("{scheme}://{}", host.trim());
    origin.trim().eq_ignore_ascii_case(&own)
}

/// Whether `content_type` is `application/json` (parameters such as `charset`
/// allowed). A browser sends a cross-origin request without asking first only with
/// `text/plain`, form or multipart bodies; requiring JSON makes it ask, and the API
/// never says yes.
pub fn is_json(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|c| c.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == name).then(|| v.trim())
    })
}

/// The value of `token=` in a URL's query, and the query without it (None when
/// nothing else remains).
pub fn query_token(query: Option<&str>) -> (Option<&str>, Option<String>) {
    let Some(q) = query else {
        return (None, None);
    };
    let mut token = None;
    let mut rest = Vec::new();
    for kv in q.split('&').filter(|kv| !kv.is_empty()) {
        match kv.strip_prefix("token=") {
            Some(t) if token.is_none() => token = Some(t),
            _ => rest.push(kv),
        }
    }
    let rest = (!rest.is_empty()).then(|| rest.join("&"));
    (token, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_localhost_or_named() {
        let names = vec!["psrs-jobs".to_string(), "Sched.Example.org".to_string()];
        for ok in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "[fe80::1]",
            "localhost:8080",
            "LOCALHOST",
            "localhost.:80",
            "psrs-jobs:8080",
            "sched.example.org",
        ] {
            assert!(host_allowed(Some(ok), &names), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "psrs-jobs.evil.example",
            "[not-v6]:80",
            "",
            ":8080",
            "127.0.0.1:80:80",
        ] {
            assert!(!host_allowed(Some(bad), &names), "{bad}");
        }
        assert!(host_allowed(None, &[]), "HTTP/1.0 without Host");
    }

    #[test]
    fn an_origin_is_absent_or_the_apis_own() {
        assert!(origin_allowed(None, "http", Some("127.0.0.1:8080")));
        assert!(origin_allowed(
            Some("http://127.0.0.1:8080"),
            "http",
            Some("127.0.0.1:8080")
        ));
        assert!(origin_allowed(Some("HTTPS://Host:1"), "https", Some("host:1")));
        for bad in [
            "http://evil.example",
            "null",
            "http://127.0.0.1:8081",
            "https://127.0.0.1:8080",
            "http://127.0.0.1",
            "",
        ] {
            assert!(!origin_allowed(Some(bad), "http", Some("127.0.0.1:8080")), "{bad}");
        }
        assert!(
            !origin_allowed(Some("http://x"), "http", None),
            "an Origin needs a Host"
        );
    }

    #[test]
    fn only_json_is_json() {
        assert!(is_json(Some("application/json")));
        assert!(is_json(Some("Application/JSON; charset=utf-8")));
        for bad in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/jsonx"),
            Some(""),
        ] {
            assert!(!is_json(bad), "{bad:?}");
        }
    }

    #[test]
    fn cookies_and_query_tokens() {
        let h = Some("a=1; psrs-token-8080=abc ; other=x=y");
        assert_eq!(cookie(h, "psrs-token-8080"), Some("abc"));
        assert_eq!(cookie(h, "other"), Some("x=y"));
        assert_eq!(cookie(h, "psrs-token-9090"), None);
        assert_eq!(cookie(None, "a"), None);
        assert_eq!(query_token(Some("token=t1")), (Some("t1"), None));
        assert_eq!(
            query_token(Some("a=1&token=t1&b=2")),
            (Some("t1"), Some("a=1&b=2".to_string()))
        );
        assert_eq!(query_token(Some("a=1")), (None, Some("a=1".to_string())));
        assert_eq!(query_token(None), (None, None));
    }
}
