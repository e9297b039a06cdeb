//! The errors of the credentials room; each `Display` is one line naming the file or
//! the peer's fault.

use super::role::{CertRole, Roles, UnknownRole};

/// A credentials or TLS set-up error.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read '{path}': {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write '{path}': {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// PEM text held no certificate.
    #[error("{0}: no PEM certificate in it")]
    NoCertificate(String),
    /// PEM text held no usable private key.
    #[error("{0}: no PEM private key (PKCS#8, SEC1 or PKCS#1) in it")]
    NoKey(String),
    /// A certificate that does not parse.
    #[error("malformed certificate: {0}")]
    BadCertificate(String),
    /// A certificate naming no psrs role.
    #[error("the certificate names no psrs role (a subject alternative name URI psrs://role/NAME)")]
    NoRole,
    /// A certificate whose roles do not include the one needed.
    #[error("the certificate names the role(s) {have}, not {want}")]
    WrongRole {
        /// What it names.
        have: Roles,
        /// What was needed.
        want: CertRole,
    },
    /// The certificate is not valid under the CA (wrong CA, expired, not yet valid...).
    #[error("the certificate is not valid under the CA: {0}")]
    Untrusted(String),
    /// Making a key or certificate failed.
    #[error("cannot make the certificate: {0}")]
    Issue(String),
    /// rustls refused the configuration (e.g. a key that does not match its certificate).
    #[error("TLS set-up: {0}")]
    Setup(#[from] rustls::Error),
}

/// A certificate naming an unknown psrs role is malformed.
impl From<UnknownRole> for TlsError {
    fn from(e: UnknownRole) -> TlsError {
        TlsError::BadCertificate(e.to_string())
    }
}

impl From<rcgen::Error> for TlsError {
    fn from(e: rcgen::Error) -> TlsError {
        TlsError::Issue(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_role_is_a_malformed_certificate() {
        let e = TlsError::from(UnknownRole {
            name: "admin".into(),
            uri: "psrs://role/admin".into(),
        });
        assert!(matches!(e, TlsError::BadCertificate(_)));
        assert_eq!(
            e.to_string(),
            "malformed certificate: unknown psrs role 'admin' in the certificate URI 'psrs://role/admin'"
        );
    }
}
