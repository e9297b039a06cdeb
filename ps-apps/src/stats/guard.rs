//! How an HTTP server is guarded, from a node's security settings and the operator's
//! options: the access policy ([`Access`]), the HTTPS configuration, and where a
//! token made at start is kept ([`super::token_file`]).

use super::access::Access;
use super::error::StatsError;
use super::token_file::{self, RuntimeDir};
use ps_core::config::Security;
use ps_core::tls::CertRole;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The operator's options of an HTTP server (`psrs cluster`, `psrs train`).
#[derive(Clone, Debug, Default)]
pub struct HttpOptions {
    /// `--insecure`: allowed beyond loopback without security.
    pub insecure: bool,
    /// `--api-host NAME`: names the API is reached by (besides addresses and
    /// `localhost`).
    pub hosts: Vec<String>,
    /// Where a token made at start is kept (`api-token` in the work dir); None: only
    /// in memory and in the printed URL.
    pub token_dir: Option<PathBuf>,
    /// Where the API is published for `psrs job` on this host; None: nowhere.
    pub runtime: Option<RuntimeDir>,
}

/// How an HTTP server is guarded.
#[derive(Clone, Debug)]
pub struct HttpSecurity {
    /// Who may call.
    pub access: Access,
    /// The HTTPS configuration (this node's certificate; client certificates asked
    /// for, not required); None: plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// How long an HTTPS handshake may take (`PS_HANDSHAKE_TIMEOUT`).
    pub handshake_timeout: Duration,
    /// The token was made at start (no security): the printed URL carries it and it
    /// is published in `runtime`.
    pub made_token: bool,
    /// Where the API is published for clients on this host.
    pub runtime: Option<RuntimeDir>,
}

impl HttpSecurity {
    /// Plain HTTP on loopback with `token` (tests, benchmarks).
    pub fn with_token(token: &str) -> HttpSecurity {
        HttpSecurity {
            access: Access::new(Some(token.to_string()), false),
            tls: None,
            handshake_timeout: ps_core::config::Limits::default().handshake_timeout,
            made_token: false,
            runtime: None,
        }
    }

    /// The guard of a scheduler with these settings and options. With a secret the
    /// token is the secret's; without security, the one in `opts.token_dir` or a new
    /// one (written there); with certificates only, none. With security on the
    /// scheduler's credentials serve HTTPS. Credentials that cannot be read are
    /// [`StatsError::Config`], ones rustls refuses [`StatsError::Tls`], a token that
    /// cannot be kept [`StatsError::Io`] naming the directory.
    pub fn from_security(sec: &Security, opts: &HttpOptions) -> Result<HttpSecurity, StatsError> {
        let tls = match sec.credentials(CertRole::Scheduler)? {
            Some(c) => Some(c.http_server_config()?),
            None => None,
        };
        let made_token = sec.secret.is_none() && tls.is_none();
        let token = match (&sec.secret, made_token) {
            (Some(s), _) => Some(s.http_token()),
            (None, true) => Some(match &opts.token_dir {
                Some(dir) => token_file::load_or_create(dir)
                    .map_err(|e| StatsError::Io(format!("cannot keep the API's token in {}: {e}", dir.display())))?,
                None => token_file::generate().map_err(|e| StatsError::Io(e.to_string()))?,
            }),
            (None, false) => None,
        };
        let access = Access::new(token, tls.is_some())
            .open_reads(sec.http_open_reads)
            .insecure(opts.insecure)
            .hosts(opts.hosts.clone());
        Ok(HttpSecurity {
            access,
            tls,
            handshake_timeout: sec.limits.handshake_timeout,
            made_token,
            runtime: opts.runtime.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ps_core::auth::{Secret, SecretSource};

    #[test]
    fn the_token_follows_the_security() {
        let d = tempfile::tempdir().unwrap();
        let opts = HttpOptions {
            token_dir: Some(d.path().join("w")),
            ..HttpOptions::default()
        };
        let open = HttpSecurity::from_security(&Security::default(), &opts).unwrap();
        assert!(open.made_token && open.tls.is_none());
        let t = open.access.token().unwrap().to_string();
        let again = HttpSecurity::from_security(&Security::default(), &opts).unwrap();
        assert_eq!(again.access.token(), Some(t.as_str()), "kept in the work dir");
        let s = Secret::new(vec![7; 32], SecretSource::File).unwrap();
        let sec = Security {
            secret: Some(s.clone()),
            ..Default::default()
        };
        let secured = HttpSecurity::from_security(&sec, &opts).unwrap();
        assert!(!secured.made_token && secured.tls.is_some() && secured.access.secured());
        assert_eq!(secured.access.token(), Some(s.http_token().as_str()));
        // without a directory, a fresh token each time
        let a = HttpSecurity::from_security(&Security::default(), &HttpOptions::default()).unwrap();
        let b = HttpSecurity::from_security(&Security::default(), &HttpOptions::default()).unwrap();
        assert_ne!(a.access.token(), b.access.token());
    }
}
