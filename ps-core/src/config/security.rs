//! The security part of the node's configuration: certificates or the cluster secret and
//! the resource limits against a hostile or buggy peer, read once from `PS_*`
//! variables and validated.

use super::error::{err, ConfigError};
use crate::auth::secret::{self, Secret};
use std::collections::HashMap;
use std::time::Duration;

/// Resource limits; every refusal is logged with the limit's variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `PS_MAX_MESSAGE_BYTES`: largest message accepted (all frames; default 4 GiB).
    pub max_message_bytes: u64,
    /// `PS_MAX_FRAMES`: most frames per message, header included (default and most 65).
    pub max_frames: usize,
    /// `PS_MAX_KEYS`: most keys in one KV request (default 2^24).
    pub max_keys: usize,
    /// `PS_MAX_CONNS_PER_PEER`: most open incoming connections per peer address (TCP
    /// van; default 1024: every node of a host shares its address).
    pub max_conns_per_peer: usize,
    /// `PS_MAX_HELD_MESSAGES`: most messages held for customers not registered yet
    /// (default 10000); more are dropped.
    pub max_held_messages: usize,
    /// `PS_HANDSHAKE_TIMEOUT`: seconds a new connection may take to say HELLO and
    /// finish the handshake (TCP van; default 10); a silent one is closed.
    pub handshake_timeout: Duration,
    /// `PS_AUTH_MAX_FAILURES`: failed handshakes from one address within 10 s after
    /// which it is refused for 10 s (default 20).
    pub max_auth_failures: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_message_bytes: 4 << 30,
            max_frames: 1 + crate::message::MAX_DATA_FRAMES,
            max_keys: 1 << 24,
            max_conns_per_peer: 1024,
            max_held_messages: 10_000,
            handshake_timeout: Duration::from_secs(10),
            max_auth_failures: 20,
        }
    }
}

/// A message that breaks the [`Limits`]: dropped by the van that received it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    /// No frames, or more than `PS_MAX_FRAMES`.
    #[error("{frames} frames in a message (PS_MAX_FRAMES {max})")]
    Frames {
        /// Frames in the message (header included).
        frames: usize,
        /// The limit.
        max: usize,
    },
    /// More bytes than `PS_MAX_MESSAGE_BYTES`.
    #[error("a {bytes}-byte message is above the {max}-byte limit (PS_MAX_MESSAGE_BYTES)")]
    Bytes {
        /// Bytes in the message.
        bytes: u64,
        /// The limit.
        max: u64,
    },
}

impl Limits {
    /// Whether a message of `frames` frames (header included) and `bytes` bytes in all
    /// is within the limits; the error is one line naming the variable. Both vans
    /// check every message they receive with it (the TCP van before allocating).
    pub fn check_message(&self, frames: usize, bytes: u64) -> Result<(), LimitError> {
        if frames == 0 || frames > self.max_frames {
            return Err(LimitError::Frames {
                frames,
                max: self.max_frames,
            });
        }
        if bytes > self.max_message_bytes {
            return Err(LimitError::Bytes {
                bytes,
                max: self.max_message_bytes,
            });
        }
        Ok(())
    }
}

/// Certificates, the cluster secret and limits.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Security {
    /// The cluster secret (`PS_SECRET_FILE` wins over `PS_SECRET`); None: open.
    pub secret: Option<Secret>,
    /// Resource limits.
    pub limits: Limits,
    /// `PS_HTTP_OPEN_READS` (default 0): with a secret, HTTP reads (GET) need no token.
    pub http_open_reads: bool,
    /// `PS_TLS_CA`, `PS_TLS_CERT`, `PS_TLS_KEY`: certificates (they win over the
    /// secret for the links; the secret, if also set, then only gives the HTTP token).
    pub tls: Option<crate::tls::TlsFiles>,
}

fn get<'a>(vars: &'a HashMap<String, String>, var: &str) -> Option<&'a str> {
    vars.get(var).map(|s| s.trim()).filter(|s| !s.is_empty())
}

fn count(vars: &HashMap<String, String>, var: &str, default: u64) -> Result<u64, ConfigError> {
    match get(vars, var) {
        None => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(err(var, format!("'{v}' is not a positive whole number"))),
        },
    }
}

impl Security {
    /// Reads the variables (the secret file is read here, once).
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<Security, ConfigError> {
        let secret = secret::from_vars(
            get(vars, "PS_SECRET_FILE"),
            get(vars, "PS_SECRET"),
            crate::auth::private_file::read,
        )?;
        let d = Limits::default();
        let timeout = match get(vars, "PS_HANDSHAKE_TIMEOUT") {
            None => d.handshake_timeout,
            Some(v) => match v.parse::<f64>() {
                Ok(s) if s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
                _ => {
                    return Err(err(
                        "PS_HANDSHAKE_TIMEOUT",
                        format!("'{v}' is not a number of seconds in (0, 3600]"),
                    ))
                }
            },
        };
        let limits = Limits {
            max_message_bytes: count(vars, "PS_MAX_MESSAGE_BYTES", d.max_message_bytes)?,
            max_frames: count(vars, "PS_MAX_FRAMES", d.max_frames as u64)? as usize,
            max_keys: count(vars, "PS_MAX_KEYS", d.max_keys as u64)? as usize,
            max_conns_per_peer: count(vars, "PS_MAX_CONNS_PER_PEER", d.max_conns_per_peer as u64)? as usize,
            max_held_messages: count(vars, "PS_MAX_HELD_MESSAGES", d.max_held_messages as u64)? as usize,
            handshake_timeout: timeout,
            max_auth_failures: count(vars, "PS_AUTH_MAX_FAILURES", d.max_auth_failures as u64)? as usize,
        };
        let http_open_reads = match get(vars, "PS_HTTP_OPEN_READS") {
            None | Some("0") => false,
            Some("1") => true,
            Some(v) => return Err(err("PS_HTTP_OPEN_READS", format!("'{v}' is not 0 or 1"))),
        };
        let tls = crate::tls::settings::from_vars(
            |v| get(vars, v).map(str::to_string),
            |p, private| match private {
                true => crate::auth::private_file::read(p),
                false => std::fs::read(p),
            },
        )?;
        let s = Security {
            secret,
            limits,
            http_open_reads,
            tls,
        };
        Ok(s)
    }

    /// Checks the values, and that the van `van_type` can honour the secret.
    pub fn validate(&self, van_type: &str) -> Result<(), ConfigError> {
        let most = 1 + crate::message::MAX_DATA_FRAMES;
        if self.limits.max_frames < 2 || self.limits.max_frames > most {
            return Err(err(
                "PS_MAX_FRAMES",
                format!("{} is outside 2..={most}", self.limits.max_frames),
            ));
        }
        if self.limits.max_message_bytes < 4096 {
            return Err(err("PS_MAX_MESSAGE_BYTES", "must be at least 4096"));
        }
        if self.tls.is_some() && van_type != "tcp" {
            return Err(err(
                "PS_TLS_CA",
                format!("the {van_type} van has no TLS; set DMLC_PS_VAN_TYPE=tcp to use certificates"),
            ));
        }
        if let Some(s) = &self.secret {
            if van_type != "tcp" {
                let var = match s.source {
                    secret::SecretSource::File => "PS_SECRET_FILE",
                    secret::SecretSource::Env => "PS_SECRET",
                };
                return Err(err(
                    var,
                    format!("the {van_type} van cannot authenticate nodes; set DMLC_PS_VAN_TYPE=tcp to use a cluster secret"),
                ));
            }
        }
        Ok(())
    }

    /// Whether links are secured (certificates or a cluster secret).
    pub fn is_on(&self) -> bool {
        self.tls.is_some() || self.secret.is_some()
    }

    /// The credentials of a node joining as `role`: from the certificate files, whose
    /// certificate must name the role, else derived from the cluster secret; None on
    /// an open cluster. Errors name the variable.
    pub fn credentials(&self, role: crate::tls::CertRole) -> Result<Option<crate::tls::Credentials>, ConfigError> {
        if let Some(files) = &self.tls {
            let c = files.credentials()?;
            c.require(role).map_err(|e| {
                err(
                    "PS_TLS_CERT",
                    format!("'{}': {e}", files.identity.as_ref().map_or("", |i| i.0 .0.as_str())),
                )
            })?;
            return Ok(Some(c));
        }
        match &self.secret {
            Some(s) => crate::tls::Credentials::from_secret(s, role)
                .map(Some)
                .map_err(|e| err(self.secret_var(), e.to_string())),
            None => Ok(None),
        }
    }

    fn secret_var(&self) -> &'static str {
        match self.secret.as_ref().map(|s| s.source) {
            Some(secret::SecretSource::Env) => "PS_SECRET",
            _ => "PS_SECRET_FILE",
        }
    }

    /// Logs once where the cluster stands: open, or how links are secured (and a
    /// warning when the secret came from the environment).
    pub fn log_once(&self) {
        if let Some(s) = &self.secret {
            if s.source == secret::SecretSource::Env {
                log::warn!("the cluster secret comes from PS_SECRET (visible in the process environment); prefer PS_SECRET_FILE");
            }
        }
        match (&self.tls, &self.secret) {
            (None, None) => {
                log::info!("no security (PS_TLS_* or PS_SECRET_FILE): the cluster is open to anyone who can reach its ports")
            }
            (Some(_), _) => log::info!("links run TLS 1.3 with the certificates of PS_TLS_CA/PS_TLS_CERT"),
            (None, Some(_)) => log::info!(
                "links run TLS 1.3 with a CA derived from the cluster secret (every holder of the secret may take any role)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_and_overrides() {
        let s = Security::from_vars(&vars(&[])).unwrap();
        assert_eq!(s, Security::default());
        assert!(!s.is_on());
        s.validate("zmq").unwrap();
        let s = Security::from_vars(&vars(&[
            ("PS_SECRET", "0123456789abcdef"),
            ("PS_MAX_KEYS", "10"),
            ("PS_MAX_FRAMES", "3"),
            ("PS_HANDSHAKE_TIMEOUT", "0.5"),
        ]))
        .unwrap();
        assert!(s.secret.is_some() && s.is_on());
        assert_eq!((s.limits.max_keys, s.limits.max_frames), (10, 3));
        assert_eq!(s.limits.handshake_timeout, Duration::from_millis(500));
        s.validate("tcp").unwrap();
    }

    #[test]
    fn messages_are_checked_against_the_limits() {
        let l = Limits {
            max_frames: 3,
            max_message_bytes: 100,
            ..Limits::default()
        };
        assert_eq!(l.check_message(3, 100), Ok(()));
        assert_eq!(l.check_message(0, 0), Err(LimitError::Frames { frames: 0, max: 3 }));
        assert!(l
            .check_message(4, 10)
            .unwrap_err()
            .to_string()
            .contains("4 frames in a message (PS_MAX_FRAMES 3)"));
        assert!(l
            .check_message(1, 101)
            .unwrap_err()
            .to_string()
            .contains("101-byte message is above the 100-byte limit"));
    }

    #[test]
    fn errors_name_the_variable() {
        for (var, val) in [
            ("PS_MAX_KEYS", "0"),
            ("PS_MAX_MESSAGE_BYTES", "lots"),
            ("PS_TLS_CA", "/nonexistent/ca.pem"),
            ("PS_HANDSHAKE_TIMEOUT", "-1"),
            ("PS_SECRET", "short"),
            ("PS_SECRET_FILE", "/nonexistent/psrs-secret"),
        ] {
            let e = Security::from_vars(&vars(&[(var, val)])).unwrap_err();
            assert_eq!(e.var, var, "{e}");
        }
        let s = Security::from_vars(&vars(&[("PS_MAX_FRAMES", "1000")])).unwrap();
        assert_eq!(s.validate("tcp").unwrap_err().var, "PS_MAX_FRAMES");
        let s = Security::from_vars(&vars(&[("PS_SECRET", "0123456789abcdef")])).unwrap();
        let e = s.validate("zmq").unwrap_err();
        assert_eq!(e.var, "PS_SECRET");
        assert!(e.to_string().contains("DMLC_PS_VAN_TYPE=tcp"), "{e}");
    }
}
