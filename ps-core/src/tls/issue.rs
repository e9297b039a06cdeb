//! Making a cluster CA and the certificates it signs, with `rcgen`: a CA made at
//! random (`psrs certs init`) or derived from the cluster secret (shared-secret
//! mode: every node derives the same CA key from the secret and issues itself a
//! certificate for its role), and leaf certificates naming one role each (see
//! [`super::role`]). Keys are ECDSA P-256; a leaf is good for TLS clients and servers
//! alike (a node both dials and accepts links).

use super::error::TlsError;
use super::role::CertRole;
use crate::auth::Secret;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber, PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

/// The common name of a CA made by `psrs certs init`.
pub const CA_NAME: &str = "psrs cluster CA";
/// The common name of the CA derived from a cluster secret.
pub const SECRET_CA_NAME: &str = "psrs cluster CA (shared secret)";

/// A certificate authority that can issue role certificates.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert: CertificateDer<'static>,
    cert_pem: String,
}

/// A certificate and its private key, as issued.
pub struct Issued {
    /// The certificate (DER).
    pub cert: CertificateDer<'static>,
    /// The private key (PKCS#8 DER).
    pub key: PrivatePkcs8KeyDer<'static>,
    /// The certificate as PEM text.
    pub cert_pem: String,
    /// The private key as PEM text.
    pub key_pem: String,
}

/// What to put in a leaf certificate.
#[derive(Clone, Debug)]
pub struct Request {
    /// The role it names.
    pub role: CertRole,
    /// Host names and IP addresses it is also valid for (for HTTPS clients that check
    /// the name, e.g. a browser); `localhost` and 127.0.0.1 are always included.
    pub hosts: Vec<String>,
    /// Valid from.
    pub not_before: OffsetDateTime,
    /// Valid until.
    pub not_after: OffsetDateTime,
}

impl Request {
    /// A certificate for `role` valid from an hour ago (clocks differ a little) for
    /// `days` days.
    pub fn new(role: CertRole, days: u32) -> Request {
        let now = OffsetDateTime::now_utc();
        Request {
            role,
            hosts: Vec::new(),
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(i64::from(days)),
        }
    }
}

fn ca_params(name: &str, not_before: OffsetDateTime, not_after: OffsetDateTime) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(DnType::OrganizationName, "psrs");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = not_before;
    p.not_after = not_after;
    p
}

fn ca_from(params: CertificateParams, key: KeyPair) -> Result<Ca, TlsError> {
    let cert = params.self_signed(&key)?;
    Ok(Ca {
        issuer: Issuer::new(params, key),
        cert: cert.der().clone(),
        cert_pem: cert.pem(),
    })
}

impl Ca {
    /// A new CA with a fresh key, valid for `days` days from an hour ago.
    pub fn generate(days: u32) -> Result<Ca, TlsError> {
        let now = OffsetDateTime::now_utc();
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        ca_from(
            ca_params(CA_NAME, now - Duration::hours(1), now + Duration::days(i64::from(days))),
            key,
        )
    }

    /// The CA of the cluster secret: its key is derived from the secret (HKDF-SHA256,
    /// label `psrs cluster CA P-256`), its name and validity are fixed, so every node
    /// holding the secret derives the same trust anchor and every certificate one of
    /// them issues is trusted by the others.
    pub fn from_secret(secret: &Secret) -> Result<Ca, TlsError> {
        use p256::pkcs8::EncodePrivateKey;
        let mut counter = 0u32;
        let sk = loop {
            let label = format!("psrs cluster CA P-256 {counter}");
            // a scalar of zero or above the group order (odds ~2^-32) takes the next label
            match p256::SecretKey::from_slice(&secret.derive(b"psrs", &label)) {
                Ok(k) => break k,
                Err(_) => counter += 1,
            }
        };
        let der = sk.to_pkcs8_der().map_err(|e| TlsError::Issue(e.to_string()))?;
        let key =
            KeyPair::from_pkcs8_der_and_sign_algo(&PrivatePkcs8KeyDer::from(der.as_bytes()), &PKCS_ECDSA_P256_SHA256)?;
        let mut params = ca_params(
            SECRET_CA_NAME,
            rcgen::date_time_ymd(2024, 1, 1),
            rcgen::date_time_ymd(2124, 1, 1),
        );
        params.serial_number = Some(SerialNumber::from_slice(&[1]));
        ca_from(params, key)
    }

    /// The CA whose certificate and key are these PEM texts (`psrs certs issue`).
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| TlsError::Issue(format!("the CA key: {e}")))?;
        let cert = super::pem::certs(cert_pem.as_bytes(), "the CA certificate")?
            .into_iter()
            .next()
            .ok_or_else(|| TlsError::NoCertificate("the CA certificate".into()))?;
        let issuer = Issuer::from_ca_cert_der(&cert, key).map_err(|e| TlsError::BadCertificate(e.to_string()))?;
        Ok(Ca {
            issuer,
            cert,
            cert_pem: cert_pem.trim().to_string() + "\n",
        })
    }

    /// The CA's certificate (DER): the trust anchor to give every node.
    pub fn cert(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The CA's certificate as PEM text.
    pub fn cert_pem(&self) -> String {
        self.cert_pem.clone()
    }

    /// The CA's private key as PEM text (keep it off the cluster's machines).
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// Issues a leaf certificate with a fresh key.
    pub fn issue(&self, req: &Request) -> Result<Issued, TlsError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut p = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("psrs {}", req.role));
        dn.push(DnType::OrganizationName, "psrs");
        p.distinguished_name = dn;
        let mut sans = vec![SanType::URI(req.role.uri().try_into()?)];
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        hosts.extend(req.hosts.iter().cloned());
        hosts.dedup();
        for h in hosts {
            sans.push(match h.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(h.as_str().try_into()?),
            });
        }
        p.subject_alt_names = sans;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        p.use_authority_key_identifier_extension = true;
        let mut serial: [u8; 16] = rand::random();
        serial[0] &= 0x7f;
        p.serial_number = Some(SerialNumber::from_slice(&serial));
        p.not_before = req.not_before;
        p.not_after = req.not_after;
        let cert = p.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::SecretSource;

    #[test]
    fn the_secret_ca_is_the_same_for_one_secret_and_differs_for_another() {
        let a = Secret::new(vec![1; 32], SecretSource::File).unwrap();
        let b = Secret::new(vec![2; 32], SecretSource::File).unwrap();
        let (a1, a2, b1) = (
            Ca::from_secret(&a).unwrap(),
            Ca::from_secret(&a).unwrap(),
            Ca::from_secret(&b).unwrap(),
        );
        assert_eq!(a1.key_pem(), a2.key_pem());
        assert_ne!(a1.key_pem(), b1.key_pem());
        let spki = |c: &Ca| {
            let (_, x) = x509_parser::parse_x509_certificate(c.cert()).unwrap();
            x.public_key().raw.to_vec()
        };
        assert_eq!(spki(&a1), spki(&a2));
        assert_ne!(spki(&a1), spki(&b1));
    }

    #[test]
    fn a_ca_read_back_from_pem_issues_like_the_original() {
        let ca = Ca::generate(10).unwrap();
        let again = Ca::from_pem(&ca.cert_pem(), &ca.key_pem()).unwrap();
        assert_eq!(again.cert(), ca.cert());
        let leaf = again.issue(&Request::new(CertRole::Server, 1)).unwrap();
        assert!(leaf.cert_pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(leaf.key_pem.contains("PRIVATE KEY"));
        assert!(Ca::from_pem(&ca.cert_pem(), "not a key").is_err());
    }
}
