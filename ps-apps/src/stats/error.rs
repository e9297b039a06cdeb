//! Why the HTTP server refused a caller or could not start, by kind: the HTTP status
//! of a refusal follows the kind ([`StatsError::http_status`]), and so does a
//! command's exit status, never the wording.

use ps_core::config::ConfigError;
use ps_core::tls::TlsError;
use std::net::SocketAddr;

/// An error of the statistics and API server.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// The caller lacks the credentials the server asks for: no client certificate,
    /// no or a wrong bearer token (401; the text says what is needed).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The caller may not do this from where it is: a `Host` that is not a name of
    /// the API (DNS rebinding), an `Origin` of another site on a change, a job that
    /// runs code on a cluster that runs none (403; the text says which).
    #[error("{0}")]
    Forbidden(String),
    /// A change (POST, DELETE, ...) without `Content-Type: application/json` (415).
    #[error("{0}")]
    NotJson(String),
    /// The request cannot be read: a body that is not UTF-8, broken off or too slow
    /// (400).
    #[error("{0}")]
    BadRequest(String),
    /// The request's body is larger than the server takes (413).
    #[error("{0}")]
    TooLarge(String),
    /// Listening on this address beyond loopback without security or `--insecure`
    /// is refused (bad input: the address or the security settings).
    #[error(
        "refusing to serve the HTTP API on {0} without security: anyone who reaches it could run jobs as this user; set PS_TLS_CA/PS_TLS_CERT/PS_TLS_KEY or PS_SECRET_FILE, listen on 127.0.0.1, or pass --insecure"
    )]
    Exposed(SocketAddr),
    /// The security settings cannot be used (names the variable).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTPS configuration cannot be made from this node's credentials.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The server could not start: the address does not resolve or cannot be bound, a
    /// thread or socket directory could not be made (names the address).
    #[error("{0}")]
    Io(String),
}

impl StatsError {
    /// The HTTP status of this kind of error when it answers a request: 400 an unreadable
    /// request, 401 a caller without credentials, 403 a forbidden place, 413 a body too large, 415
    /// not JSON, 500 otherwise.
    pub fn http_status(&self) -> u16 {
        match self {
            StatsError::Unauthorized(_) => 401,
            StatsError::BadRequest(_) => 400,
            StatsError::Forbidden(_) => 403,
            StatsError::TooLarge(_) => 413,
            StatsError::NotJson(_) => 415,
            StatsError::Exposed(_) | StatsError::Config(_) | StatsError::Tls(_) | StatsError::Io(_) => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_message_and_the_status_follows_the_kind() {
        let e = StatsError::Unauthorized("wrong bearer token");
        assert_eq!((e.http_status(), e.to_string().as_str()), (401, "wrong bearer token"));
        // a failure whose text speaks of a token is still what its kind says
        assert_eq!(
            StatsError::Io("cannot serve statistics: wrong bearer token".into()).http_status(),
            500
        );
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let x = StatsError::Exposed(any).to_string();
        assert!(
            x.starts_with("refusing to serve the HTTP API on 0.0.0.0:8080 without security"),
            "{x}"
        );
    }
}
