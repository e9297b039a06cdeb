//! What a certificate says about its holder: the psrs roles it names (see
//! [`super::role`]), read with `x509-parser` from a peer's certificate after the
//! handshake (the chain was verified by rustls before).

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

/// The certificate's subject, for log lines (`CN=psrs worker, O=psrs`).
pub fn subject(cert: &CertificateDer<'_>) -> String {
    match x509_parser::parse_x509_certificate(cert) {
        Ok((_, x)) => x.subject().to_string(),
        Err(_) => "(unparsable certificate)".to_string(),
    }
}
