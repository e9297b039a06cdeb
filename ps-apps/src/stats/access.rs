//! Who may use the scheduler's HTTP port (statistics, dashboard, jobs API), as a pure
//! decision per request ([`Access::decide`]).
//!
//! Every request needs credentials, on loopback too: a client certificate of the
//! cluster's CA naming `client` or `scheduler` (HTTPS), or the token, given as
//! `Authorization: Bearer TOKEN`, in the page's URL once (`?token=TOKEN`: answered
//! with a redirect that keeps it in a `SameSite=Strict`, `HttpOnly` cookie and drops
//! it from the URL), or in that cookie. With a cluster secret the token is derived
//! from it (`Secret::http_token`); without security it is a random one the cluster
//! made at start; with certificates and no secret there is none (certificates only).
//! `PS_HTTP_OPEN_READS=1` lets reads (GET, HEAD) through without credentials, e.g.
//! for Prometheus.
//!
//! A browser is kept to the API's own pages: the `Host` must be an address,
//! `localhost` or a name the operator gave (`--api-host`), against DNS rebinding; a
//! request that changes something (any method but GET, HEAD) must come from no page
//! or the API's own (`Origin`) and carry `Content-Type: application/json`, which no
//! page of another site can send without the API's consent.

use super::error::StatsError;
use super::origin::{cookie, host_allowed, is_json, origin_allowed, query_token};
use ps_core::tls::CertRole;
use std::net::SocketAddr;

/// The access policy of one HTTP server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// The token; None: certificates only.
    token: Option<String>,
    open_reads: bool,
    /// The server speaks HTTPS.
    secured: bool,
    /// `--insecure`: listening beyond loopback without security is allowed.
    insecure: bool,
    /// Names the API is reached by besides addresses and `localhost`.
    hosts: Vec<String>,
    /// The token cookie's name (per port: cookies are shared by every port of a host).
    cookie: String,
}

/// One request, as far as access is concerned.
#[derive(Clone, Copy, Debug, Default)]
pub struct Call<'a> {
    /// The method (`GET`, `POST`, ...).
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query, without `?`.
    pub query: Option<&'a str>,
    /// The `Host` header (or the request target's authority).
    pub host: Option<&'a str>,
    /// The `Origin` header.
    pub origin: Option<&'a str>,
    /// The `Content-Type` header.
    pub content_type: Option<&'a str>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// The `Cookie` header.
    pub cookie: Option<&'a str>,
    /// The caller presented a certificate of the cluster's CA naming `client` or
    /// `scheduler`.
    pub certified: bool,
}

/// Why a request may go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The caller showed credentials: anything.
    Member,
    /// An anonymous read the operator opened (`PS_HTTP_OPEN_READS=1`).
    OpenRead,
    /// The token came in a page's URL: answer `303 See Other` to `location` with
    /// `Set-Cookie: set_cookie`, so the token leaves the URL (and the history).
    Login {
        /// The same page without the token.
        location: String,
        /// The cookie that carries the token from now on.
        set_cookie: String,
    },
}

/// The pages a browser opens by URL (where a token in the URL becomes a cookie).
const PAGES: [&str; 3] = ["/", "/index.html", "/jobs.html"];

impl Access {
    /// A policy with `token` (None: certificates only, which needs `secured`);
    /// `secured`: the server speaks HTTPS.
    pub fn new(token: Option<String>, secured: bool) -> Access {
        Access {
            token,
            secured,
            cookie: "psrs-token".into(),
            ..Access::default()
        }
    }

    /// The same policy; `yes`: reads need no credentials (`PS_HTTP_OPEN_READS`).
    pub fn open_reads(mut self, yes: bool) -> Access {
        self.open_reads = yes;
        self
    }

    /// The same policy, allowing (`yes`) a server without security beyond loopback
    /// (`--insecure`).
    pub fn insecure(mut self, yes: bool) -> Access {
        self.insecure = yes;
        self
    }

    /// The same policy, also answering requests addressed to `names` (`--api-host`,
    /// the name in `--stats-addr`).
    pub fn hosts(mut self, names: Vec<String>) -> Access {
        self.hosts = names;
        self
    }

    /// The same policy, also answering requests addressed to `name`.
    pub fn also_host(mut self, name: &str) -> Access {
        self.hosts.push(name.to_string());
        self
    }

    /// The same policy for a server bound to `port` (names its cookie).
    pub fn bound(mut self, port: u16) -> Access {
        self.cookie = format!("psrs-token-{port}");
        self
    }

    /// Whether security is on (the server speaks HTTPS).
    pub fn secured(&self) -> bool {
        self.secured
    }

    /// The token, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Decides a request: the grant, or why not as a [`StatsError`] whose status
    /// answers it (401 no or wrong credentials, 403 a foreign Host or Origin, 415 a
    /// change without a JSON body). Credentials are checked first, so a caller
    /// without them learns nothing but that they are needed.
    pub fn decide(&self, c: &Call) -> Result<Grant, StatsError> {
        let grant = self.authenticate(c)?;
        if !host_allowed(c.host, &self.hosts) {
            return Err(StatsError::Forbidden(format!(
                "Host {:?} is not a name of this API (an address, localhost, or one given with --api-host)",
                c.host.unwrap_or("")
            )));
        }
        if !matches!(c.method, "GET" | "HEAD") {
            let scheme = if self.secured { "https" } else { "http" };
            if !origin_allowed(c.origin, scheme, c.host) {
                return Err(StatsError::Forbidden(format!(
                    "a request from another site (Origin {:?}) may not change anything",
                    c.origin.unwrap_or("")
                )));
            }
            if !is_json(c.content_type) {
                return Err(StatsError::NotJson(format!(
                    "{} needs Content-Type: application/json (got {:?})",
                    c.method,
                    c.content_type.unwrap_or("none")
                )));
            }
        }
        Ok(grant)
    }

    fn authenticate(&self, c: &Call) -> Result<Grant, StatsError> {
        if c.certified {
            return Ok(Grant::Member);
        }
        let read = matches!(c.method, "GET" | "HEAD");
        let bearer = c
            .authorization
            .map(|a| a.trim().strip_prefix("Bearer ").map(str::trim).unwrap_or(""));
        let (in_url, rest) = if read { query_token(c.query) } else { (None, None) };
        let given = bearer.or(cookie(c.cookie, &self.cookie)).or(in_url);
        let Some(given) = given else {
            if self.open_reads && read {
                return Ok(Grant::OpenRead);
            }
            return Err(StatsError::Unauthorized(match self.token {
                Some(_) => "this API needs its token: `psrs job` finds it; a browser opens the URL the cluster printed (?token=...); else send Authorization: Bearer TOKEN",
                None => "this cluster needs a client certificate (psrs certs issue --role client; `psrs job` sends PS_TLS_CERT)",
            }));
        };
        let Some(token) = &self.token else {
            return Err(StatsError::Unauthorized(
                "this cluster takes no token: it needs a client certificate (psrs certs issue --role client; `psrs job` sends PS_TLS_CERT)",
            ));
        };
        if !same(given, token) {
            return Err(StatsError::Unauthorized("wrong token"));
        }
        let from_url_only = bearer.is_none() && cookie(c.cookie, &self.cookie).is_none();
        if from_url_only && c.method == "GET" && PAGES.contains(&c.path) {
            let location = match rest {
                Some(q) => format!("{}?{q}", c.path),
                None => c.path.to_string(),
            };
            let secure = if self.secured { "; Secure" } else { "" };
            return Ok(Grant::Login {
                location,
                set_cookie: format!("{}={token}; Path=/; HttpOnly; SameSite=Strict{secure}", self.cookie),
            });
        }
        Ok(Grant::Member)
    }

    /// Whether the server may listen on `addr`: loopback always; beyond it only with
    /// security, or with `--insecure`. [`StatsError::Exposed`] is one line naming both
    /// ways out.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), StatsError> {
        if addr.ip().is_loopback() || self.secured {
            return Ok(());
        }
        if self.insecure {
            log::warn!("the HTTP API listens on {addr} without security (--insecure): its token crosses the network in plain text, and whoever has it can submit jobs and read and write files as this user");
            return Ok(());
        }
        Err(StatsError::Exposed(addr))
    }
}

/// Equal, in time independent of where they differ.
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Whether a client certificate naming `roles` may use the API.
pub fn certified(roles: &ps_core::tls::Roles) -> bool {
    roles.has(CertRole::Client) || roles.has(CertRole::Scheduler)
}

/// The address to bind for `addr`: a bare port (`8080` or `:8080`) binds 127.0.0.1;
/// anything else is taken as given (e.g. `0.0.0.0:8080` opens it to the network).
pub fn bind_addr(addr: &str) -> String {
    let a = addr.trim();
    let port = a.strip_prefix(':').unwrap_or(a);
    match port.parse::<u16>() {
        Ok(p) => format!("127.0.0.1:{p}"),
        Err(_) => a.to_string(),
    }
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
