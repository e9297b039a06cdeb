//! A node's credentials and the rustls configurations made from them: TLS 1.3 only,
//! `ring` as the crypto provider, both sides authenticated by certificates of the
//! cluster's CA. [`Trust`] is the CA alone (what a client of the HTTP API needs);
//! [`Credentials`] add this node's certificate and key.

use super::error::TlsError;
use super::issue::{Ca, Request};
use super::role::{CertRole, Roles};
use super::verify::ClusterServerVerifier;
use super::{peer, pem};
use crate::auth::Secret;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::sync::Arc;

/// Days a certificate a node issues itself in shared-secret mode is valid.
const SELF_ISSUED_DAYS: u32 = 3650;

/// The crypto provider of every psrs TLS connection: `ring`, AES-128-GCM first (the
/// fastest of TLS 1.3's suites with AES instructions).
pub fn provider() -> Arc<CryptoProvider> {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![
        rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
        rustls::crypto::ring::cipher_suite::TLS13_AES_256_GCM_SHA384,
        rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(p)
}

/// The server name a node's client connection presents: the peer's IP when `host` is
/// one (no SNI is sent for an IP), else the host name. Names are not verified (see
/// [`super::verify`]), so any valid name does.
pub fn server_name(host: &str) -> ServerName<'static> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(h.to_string()).unwrap_or_else(|_| ServerName::try_from("psrs").expect("a valid DNS name"))
}

/// The cluster's CA certificates: what a peer's certificate must chain to.
#[derive(Clone, Debug)]
pub struct Trust {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl Trust {
    /// Trusts the CA certificates in `ca_pem`; `what` names the source in errors.
    pub fn from_pem(ca_pem: &[u8], what: &str) -> Result<Trust, TlsError> {
        Trust::from_certs(pem::certs(ca_pem, what)?, what)
    }

    /// Trusts these CA certificates.
    pub fn from_certs(cas: Vec<CertificateDer<'static>>, what: &str) -> Result<Trust, TlsError> {
        let mut roots = RootCertStore::empty();
        for c in cas {
            roots
                .add(c)
                .map_err(|e| TlsError::BadCertificate(format!("{what}: not a usable CA certificate: {e}")))?;
        }
        Ok(Trust {
            roots: Arc::new(roots),
            provider: provider(),
        })
    }

    /// Checks that `chain` (leaf first) leads to this CA and is valid now.
    pub fn check(&self, chain: &[CertificateDer<'static>]) -> Result<(), TlsError> {
        let leaf =
            rustls::server::ParsedCertificate::try_from(&chain[0]).map_err(|e| TlsError::Untrusted(e.to_string()))?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &leaf,
            &self.roots,
            &chain[1..],
            UnixTime::now(),
            self.provider.signature_verification_algorithms.all,
        )
        .map_err(|e| TlsError::Untrusted(e.to_string()))
    }

    fn verifier(&self, need_role: bool) -> Arc<ClusterServerVerifier> {
        Arc::new(ClusterServerVerifier::new(
            Arc::clone(&self.roots),
            self.provider.signature_verification_algorithms,
            need_role,
        ))
    }

    /// A client configuration for the HTTP API: the server is checked against the CA
    /// (not its host name, see [`super::verify`]); `identity`, if given, is presented
    /// as the client certificate (else the client authenticates with a token).
    pub fn http_client_config(&self, identity: Option<&Credentials>) -> Result<Arc<ClientConfig>, TlsError> {
        let b = ClientConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .dangerous()
            .with_custom_certificate_verifier(self.verifier(false));
        let cfg = match identity {
            Some(id) => b.with_client_auth_cert(id.chain.clone(), id.key.clone_key())?,
            None => b.with_no_client_auth(),
        };
        Ok(Arc::new(cfg))
    }
}

/// This node's certificate and key with the cluster's CA, and the rustls
/// configurations of its links.
#[derive(Clone, Debug)]
pub struct Credentials {
    trust: Trust,
    chain: Vec<CertificateDer<'static>>,
    key: Arc<PrivateKeyDer<'static>>,
    roles: Roles,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl Credentials {
    /// Credentials from PEM texts: the certificate chain (leaf first), its key, and
    /// the CA. Fails, naming the part, when one does not parse, the key does not match
    /// the certificate, the certificate is not valid under the CA now (wrong CA,
    /// expired), or it names no psrs role.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8], ca_pem: &[u8]) -> Result<Credentials, TlsError> {
        let chain = pem::certs(cert_pem, "PS_TLS_CERT")?;
        let key = pem::key(key_pem, "PS_TLS_KEY")?;
        let trust = Trust::from_pem(ca_pem, "PS_TLS_CA")?;
        Credentials::new(trust, chain, key)
    }

    /// The credentials of a node with the cluster secret: the CA derived from the
    /// secret ([`Ca::from_secret`]) and a certificate for `role` issued to itself with
    /// a fresh key. Every holder of the secret can do the same for any role: in this
    /// mode all members are equal.
    pub fn from_secret(secret: &Secret, role: CertRole) -> Result<Credentials, TlsError> {
        let ca = Ca::from_secret(secret)?;
        let issued = ca.issue(&Request::new(role, SELF_ISSUED_DAYS))?;
        let trust = Trust::from_certs(vec![ca.cert().clone()], "the secret's CA")?;
        Credentials::new(trust, vec![issued.cert], PrivateKeyDer::Pkcs8(issued.key))
    }

    /// Credentials from parts (checked as [`Credentials::from_pem`] says).
    pub fn new(
        trust: Trust,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Credentials, TlsError> {
        trust.check(&chain)?;
        let roles = peer::roles(&chain[0])?;
        if roles.0.is_empty() {
            return Err(TlsError::NoRole);
        }
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&trust.roots), Arc::clone(&trust.provider))
                .build()
                .map_err(|e| TlsError::Untrusted(e.to_string()))?;
        let mut server = ServerConfig::builder_with_provider(Arc::clone(&trust.provider))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())?;
        // links are long-lived and never resumed
        server.send_tls13_tickets = 0;
        let mut client = ClientConfig::builder_with_provider(Arc::clone(&trust.provider))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .dangerous()
            .with_custom_certificate_verifier(trust.verifier(true))
            .with_client_auth_cert(chain.clone(), key.clone_key())?;
        client.resumption = rustls::client::Resumption::disabled();
        client.enable_sni = false;
        Ok(Credentials {
            trust,
            chain,
            key: Arc::new(key),
            roles,
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The fingerprint of this node's certificate ([`peer::fingerprint`]).
    pub fn fingerprint(&self) -> u64 {
        peer::fingerprint(&self.chain[0])
    }

    /// The roles this node's certificate names.
    pub fn roles(&self) -> &Roles {
        &self.roles
    }

    /// Fails unless this node's certificate names `role`.
    pub fn require(&self, role: CertRole) -> Result<(), TlsError> {
        if self.roles.has(role) {
            Ok(())
        } else {
            Err(TlsError::WrongRole {
                have: self.roles.clone(),
                want: role,
            })
        }
    }

    /// The CA these credentials trust.
    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// The configuration of the accepting side of a link: a client certificate of
    /// the CA is required.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.server)
    }

    /// The configuration of the dialing side of a link.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.client)
    }

    /// The configuration of the HTTPS API's server: this node's certificate; a client
    /// certificate of the CA is asked for but not required (a client without one
    /// authenticates with the bearer token).
    pub fn http_server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::clone(&self.trust.roots),
            Arc::clone(&self.trust.provider),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Untrusted(e.to_string()))?;
        let cfg = ServerConfig::builder_with_provider(Arc::clone(&self.trust.provider))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        Ok(Arc::new(cfg))
    }
}

#[cfg(test)]
#[path = "creds_tests.rs"]
mod tests;
