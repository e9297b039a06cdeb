//! What a certificate says about its holder: the psrs roles it names (see
//! [`super::role`]), read with `x509-parser` from a peer's certificate after the
//! handshake (the chain was verified by rustls before), and its fingerprint, which
//! ties a node id to the certificate it registered with.

use super::error::TlsError;
use super::role::{CertRole, Roles};
use rustls::pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;

/// The psrs roles `cert` names (possibly none).
pub fn roles(cert: &CertificateDer<'_>) -> Result<Roles, TlsError> {
    let (_, x) = x509_parser::parse_x509_certificate(cert).map_err(|e| TlsError::BadCertificate(e.to_string()))?;
    let san = x
        .subject_alternative_name()
        .map_err(|e| TlsError::BadCertificate(format!("subject alternative names: {e}")))?;
    let mut out = Vec::new();
    for name in san.iter().flat_map(|s| s.value.general_names.iter()) {
        if let GeneralName::URI(uri) = name {
            if let Some(r) = CertRole::from_uri(uri)? {
                if !out.contains(&r) {
                    out.push(r);
                }
            }
        }
    }
    out.sort();
    Ok(Roles(out))
}

/// The fingerprint of `cert`: the first 8 bytes (little-endian) of the SHA-256 of its
/// DER encoding, never 0 (0 stands for "no certificate" in a node table). Two
/// processes share a fingerprint only if they hold the same certificate.
pub fn fingerprint(cert: &CertificateDer<'_>) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(cert.as_ref());
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes")).max(1)
}

/// The certificate's subject, for log lines (`CN=psrs worker, O=psrs`).
pub fn subject(cert: &CertificateDer<'_>) -> String {
    match x509_parser::parse_x509_certificate(cert) {
        Ok((_, x)) => x.subject().to_string(),
        Err(_) => "(unparsable certificate)".to_string(),
    }
}
