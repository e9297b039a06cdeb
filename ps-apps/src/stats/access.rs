//! Who may use the scheduler's HTTP port (statistics, dashboard, jobs API), as a pure
//! check of (method, `Authorization` header). Without a cluster secret everything is
//! open, as before. With one, every request needs `Authorization: Bearer TOKEN`, the
//! token derived from the secret (`Secret::http_token`); `PS_HTTP_OPEN_READS=1` opens
//! GET/HEAD (reads) to everyone, state-changing calls still need the token.

use ps_core::config::Security;

/// The access policy of one HTTP server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    token: Option<String>,
    open_reads: bool,
}

impl Access {
    /// Everything allowed (no cluster secret).
    pub fn open() -> Access {
        Access::default()
    }

    /// The policy of a node with these security settings.
    pub fn from_security(sec: &Security) -> Access {
        Access {
            token: sec.secret.as_ref().map(|s| s.http_token()),
            open_reads: sec.http_open_reads,
        }
    }

    /// Checks a request; the error is the one-line reason for a 401.
    pub fn check(&self, method: &str, authorization: Option<&str>) -> Result<(), &'static str> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        if self.open_reads && matches!(method, "GET" | "HEAD") {
            return Ok(());
        }
        let given = authorization
            .and_then(|a| a.trim().strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or("this cluster has a secret: send Authorization: Bearer TOKEN (`psrs job` does)")?;
        // constant time over the token's length
        let same =
            given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if same {
            Ok(())
        } else {
            Err("wrong bearer token")
        }
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
    fn open_without_a_secret() {
        assert_eq!(Access::open().check("POST", None), Ok(()));
        assert_eq!(
            Access::from_security(&Security::default()).check("DELETE", None),
            Ok(())
        );
    }

    #[test]
    fn a_secret_needs_the_token_and_reads_can_be_opened() {
        let (a, token) = secured(false);
        assert!(a.check("GET", None).is_err());
        assert!(a.check("POST", Some("Bearer nope")).is_err());
        assert!(a.check("POST", Some(&token)).is_err(), "the Bearer scheme is required");
        assert_eq!(a.check("POST", Some(&format!("Bearer {token}"))), Ok(()));
        let (a, token) = secured(true);
        assert_eq!(a.check("GET", None), Ok(()));
        assert!(a.check("DELETE", None).is_err());
        assert_eq!(a.check("DELETE", Some(&format!("Bearer {token}"))), Ok(()));
    }

    #[test]
    fn bare_ports_bind_loopback() {
        assert_eq!(bind_addr("8080"), "127.0.0.1:8080");
        assert_eq!(bind_addr(":0"), "127.0.0.1:0");
        assert_eq!(bind_addr("0.0.0.0:80"), "0.0.0.0:80");
        assert_eq!(bind_addr("[::1]:80"), "[::1]:80");
    }
}
