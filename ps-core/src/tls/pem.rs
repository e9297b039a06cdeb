//! Reading PEM text: certificates and a private key (PKCS#8, SEC1 or PKCS#1), with
//! errors naming what was read.

use super::error::TlsError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate in `pem` (at least one); `what` names the source in errors.
pub fn certs(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCertificate(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(what.to_string()));
    }
    Ok(certs)
}

/// The first private key in `pem`; `what` names the source in errors.
pub fn key(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| TlsError::NoKey(what.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_naming_the_source() {
        let e = certs(b"hello", "PS_TLS_CERT").unwrap_err();
        assert!(e.to_string().contains("PS_TLS_CERT"), "{e}");
        let e = key(
            b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "PS_TLS_KEY",
        )
        .unwrap_err();
        assert!(e.to_string().contains("PS_TLS_KEY"), "{e}");
    }
}
