//! Who may use the scheduler's HTTP port (statistics, dashboard, jobs API), as pure
//! checks. Without security (no certificates, no cluster secret) everything is open,
//! and only on loopback unless the user passes `--insecure`. With security the port
//! speaks HTTPS (see [`super::https`]) and every request needs either a client
//! certificate of the cluster's CA naming the role `client` or `scheduler`, or
//! `Authorization: Bearer TOKEN`, the token derived from the cluster secret
//! (`Secret::http_token`; none without a secret: certificates only).
//! `PS_HTTP_OPEN_READS=1` opens GET/HEAD (reads) to everyone.

use super::error::StatsError;
use ps_core::config::Security;
use ps_core::tls::CertRole;
use std::net::SocketAddr;
use std::sync::Arc;

/// The access policy of one HTTP server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    token: Option<String>,
    open_reads: bool,
    /// Security is on: a certificate or the token is needed.
    secured: bool,
    /// `--insecure`: listening beyond loopback without security is allowed.
    insecure: bool,
}

impl Access {
    /// Everything allowed (no security), on loopback only.
    pub fn open() -> Access {
        Access::default()
    }

    /// The policy of a node with these security settings.
    pub fn from_security(sec: &Security) -> Access {
        Access {
            token: sec.secret.as_ref().map(|s| s.http_token()),
            open_reads: sec.http_open_reads,
            secured: sec.is_on(),
            insecure: false,
        }
    }

    /// The same policy, allowing (`yes`) an open server beyond loopback (`--insecure`).
    pub fn insecure(mut self, yes: bool) -> Access {
        self.insecure = yes;
        self
    }

    /// Whether security is on (the server speaks HTTPS).
    pub fn secured(&self) -> bool {
        self.secured
    }

    /// Checks a request; `certified` says the caller presented a certificate of the
    /// cluster's CA naming `client` or `scheduler`. [`StatsError::Unauthorized`] says
    /// in one line what is needed (a 401).
    pub fn check(&self, method: &str, authorization: Option<&str>, certified: bool) -> Result<(), StatsError> {
        if !self.secured || certified {
            return Ok(());
        }
        if self.open_reads && matches!(method, "GET" | "HEAD") {
            return Ok(());
        }
        let Some(token) = &self.token else {
            return Err(StatsError::Unauthorized(
                "this cluster needs a client certificate (psrs certs issue --role client; `psrs job` sends PS_TLS_CERT)",
            ));
        };
        let given = authorization
            .and_then(|a| a.trim().strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or(StatsError::Unauthorized(
                "this cluster needs a client certificate or Authorization: Bearer TOKEN (`psrs job` sends either)",
            ))?;
        // constant time over the token's length
        let same =
            given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if same {
            Ok(())
        } else {
            Err(StatsError::Unauthorized("wrong bearer token"))
        }
    }

    /// Whether the server may listen on `addr`: loopback always; beyond it only with
    /// security, or with `--insecure`. [`StatsError::Exposed`] is one line naming both
    /// ways out.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), StatsError> {
        if addr.ip().is_loopback() || self.secured {
            return Ok(());
        }
        if self.insecure {
            log::warn!("the HTTP API listens on {addr} without security (--insecure): anyone who reaches it can submit jobs and read and write files as this user");
            return Ok(());
        }
        Err(StatsError::Exposed(addr))
    }
}

/// Whether a client certificate naming `roles` may use the API.
pub fn certified(roles: &ps_core::tls::Roles) -> bool {
    roles.has(CertRole::Client) || roles.has(CertRole::Scheduler)
}

/// How an HTTP server is guarded: the access policy and, with security on, the
/// HTTPS configuration (this node's certificate; client certificates asked for).
#[derive(Clone, Debug)]
pub struct HttpSecurity {
    /// Who may call.
    pub access: Access,
    /// The HTTPS configuration; None: plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// How long an HTTPS handshake may take (`PS_HANDSHAKE_TIMEOUT`).
    pub handshake_timeout: std::time::Duration,
}

impl HttpSecurity {
    /// Plain HTTP, open, loopback only.
    pub fn open() -> HttpSecurity {
        HttpSecurity {
            access: Access::open(),
            tls: None,
            handshake_timeout: ps_core::config::Limits::default().handshake_timeout,
        }
    }

    /// The guard of a scheduler with these settings; `insecure` as
    /// [`Access::insecure`]. With security on, the scheduler's credentials serve HTTPS;
    /// credentials that cannot be read are [`StatsError::Config`], ones rustls
    /// refuses [`StatsError::Tls`].
    pub fn from_security(sec: &Security, insecure: bool) -> Result<HttpSecurity, StatsError> {
        let access = Access::from_security(sec).insecure(insecure);
        let tls = match sec.credentials(CertRole::Scheduler)? {
            Some(c) => Some(c.http_server_config()?),
            None => None,
        };
        Ok(HttpSecurity {
            access,
            tls,
            handshake_timeout: sec.limits.handshake_timeout,
        })
    }
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
mod tests {
    use super::*;
    use ps_core::auth::{Secret, SecretSource};

    fn secured(open_reads: bool) -> (Access, String) {
        let s = Secret::new(vec![5; 32], SecretSource::File).unwrap();
        let sec = Security {
            secret: Some(s.clone()),
            http_open_reads: open_reads,
            ..Default::default()
        };
        (Access::from_security(&sec), s.http_token())
    }

    #[test]
    fn open_without_security() {
        assert!(Access::open().check("POST", None, false).is_ok());
        assert!(Access::from_security(&Security::default())
            .check("DELETE", None, false)
            .is_ok());
    }

    #[test]
    fn a_secret_needs_the_token_or_a_certificate_and_reads_can_be_opened() {
        let (a, token) = secured(false);
        assert!(a.check("GET", None, false).is_err());
        assert!(a.check("POST", Some("Bearer nope"), false).is_err());
        assert!(
            a.check("POST", Some(&token), false).is_err(),
            "the Bearer scheme is required"
        );
        assert!(a.check("POST", Some(&format!("Bearer {token}")), false).is_ok());
        assert!(a.check("POST", None, true).is_ok(), "a client certificate is enough");
        let (a, token) = secured(true);
        assert!(a.check("GET", None, false).is_ok());
        assert!(a.check("DELETE", None, false).is_err());
        assert!(a.check("DELETE", Some(&format!("Bearer {token}")), false).is_ok());
    }

    #[test]
    fn certificates_without_a_secret_have_no_token() {
        let a = Access {
            secured: true,
            ..Access::default()
        };
        let e = a.check("GET", Some("Bearer anything"), false).unwrap_err();
        assert!(matches!(e, StatsError::Unauthorized(_)));
        assert!(e.to_string().contains("client certificate"), "{e}");
        assert!(a.check("GET", None, true).is_ok());
        use ps_core::tls::{CertRole as R, Roles};
        assert!(certified(&Roles(vec![R::Client])) && certified(&Roles(vec![R::Scheduler])));
        assert!(!certified(&Roles(vec![R::Worker])) && !certified(&Roles(vec![R::Server])));
    }

    #[test]
    fn beyond_loopback_needs_security_or_insecure() {
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(Access::open().check_listen(lo).is_ok());
        let e = Access::open().check_listen(any).unwrap_err();
        assert!(matches!(e, StatsError::Exposed(a) if a == any));
        let e = e.to_string();
        assert!(e.contains("--insecure") && e.contains("0.0.0.0:8080"), "{e}");
        assert!(Access::open().insecure(true).check_listen(any).is_ok());
        assert!(secured(false).0.check_listen(any).is_ok());
        assert!(Access::open().check_listen("[::1]:80".parse().unwrap()).is_ok());
    }

    #[test]
    fn bare_ports_bind_loopback() {
        assert_eq!(bind_addr("8080"), "127.0.0.1:8080");
        assert_eq!(bind_addr(":0"), "127.0.0.1:0");
        assert_eq!(bind_addr("0.0.0.0:80"), "0.0.0.0:80");
        assert_eq!(bind_addr("[::1]:80"), "[::1]:80");
    }
}
