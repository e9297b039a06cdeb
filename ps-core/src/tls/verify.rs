//! How a node checks the certificate of the node it dials: the chain must lead to the
//! cluster's CA, be valid now and name a psrs role. Host names are not checked: a
//! node is known by the id the scheduler gave it, not by a name, and every
//! certificate the cluster's CA signed is a member (the accepting side checks the
//! dialer's certificate with rustls's `WebPkiClientVerifier` the same way).

use super::peer;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// Verifies a peer's certificate against the cluster's CA, without a host name.
#[derive(Debug)]
pub struct ClusterServerVerifier {
    roots: Arc<RootCertStore>,
    algs: WebPkiSupportedAlgorithms,
    /// Whether the certificate must name a psrs role (node links: yes; the HTTP API,
    /// whose server may hold any certificate of the CA: no).
    need_role: bool,
}

impl ClusterServerVerifier {
    /// A verifier trusting `roots`, checking signatures with `algs`.
    pub fn new(roots: Arc<RootCertStore>, algs: WebPkiSupportedAlgorithms, need_role: bool) -> ClusterServerVerifier {
        ClusterServerVerifier { roots, algs, need_role }
    }
}

impl ServerCertVerifier for ClusterServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        if self.need_role {
            match peer::roles(end_entity) {
                Ok(r) if !r.0.is_empty() => {}
                Ok(_) => {
                    return Err(Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                        Arc::new(super::error::TlsError::NoRole),
                    ))))
                }
                Err(e) => {
                    return Err(Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                        Arc::new(e),
                    ))))
                }
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}
