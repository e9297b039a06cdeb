use super::*;
use crate::auth::SecretSource;
use crate::tls::issue::Issued;
use rustls::{ClientConnection, Connection, ServerConnection};
use time::{Duration, OffsetDateTime};

fn creds(ca: &Ca, role: CertRole) -> Credentials {
    from_issued(ca, ca.issue(&Request::new(role, 30)).unwrap())
}

fn from_issued(ca: &Ca, leaf: Issued) -> Credentials {
    Credentials::from_pem(
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        ca.cert_pem().as_bytes(),
    )
    .unwrap()
}

/// Moves bytes between the two sides until neither has anything to say; the first
/// error either side raises is returned.
fn pump(c: &mut Connection, s: &mut Connection) -> Result<(), rustls::Error> {
    for _ in 0..20 {
        let moved = carry(c, s)? | carry(s, c)?;
        if !moved {
            return Ok(());
        }
    }
    Ok(())
}

/// Carries what `from` has to send to `to`; true if there was anything.
fn carry(from: &mut Connection, to: &mut Connection) -> Result<bool, rustls::Error> {
    let mut buf = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut buf).unwrap();
    }
    let mut rd = &buf[..];
    while !rd.is_empty() {
        to.read_tls(&mut rd).unwrap();
        to.process_new_packets()?;
    }
    Ok(!buf.is_empty())
}

/// A full handshake in memory: the client dials with `client`, the server accepts with
/// `server`; returns the server's view of the client's roles.
fn handshake(client: &Credentials, server: &Credentials) -> Result<Roles, rustls::Error> {
    let mut c = Connection::Client(ClientConnection::new(client.client_config(), server_name("127.0.0.1"))?);
    let mut s = Connection::Server(ServerConnection::new(server.server_config())?);
    pump(&mut c, &mut s)?;
    assert!(!c.is_handshaking() && !s.is_handshaking());
    assert_eq!(s.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    let certs = s.peer_certificates().expect("a client certificate");
    Ok(peer::roles(&certs[0]).unwrap())
}

#[test]
fn a_worker_certificate_is_read_back_as_worker_after_the_handshake() {
    let ca = Ca::generate(30).unwrap();
    let (w, s) = (creds(&ca, CertRole::Worker), creds(&ca, CertRole::Server));
    let roles = handshake(&w, &s).unwrap();
    assert_eq!(roles, Roles(vec![CertRole::Worker]));
    assert!(roles.admit(crate::Role::Worker) && !roles.admit(crate::Role::Server));
    assert!(w.require(CertRole::Worker).is_ok());
    let e = w.require(CertRole::Server).unwrap_err();
    assert_eq!(e.to_string(), "the certificate names the role(s) worker, not server");
}

#[test]
fn a_certificate_of_another_ca_is_refused_both_ways() {
    let (ca, other) = (Ca::generate(30).unwrap(), Ca::generate(30).unwrap());
    let member = creds(&ca, CertRole::Server);
    let stranger = creds(&other, CertRole::Worker);
    let e = handshake(&stranger, &member).unwrap_err();
    assert!(matches!(e, rustls::Error::InvalidCertificate(_)), "{e}");
    let e = handshake(&member, &stranger).unwrap_err();
    assert!(matches!(e, rustls::Error::InvalidCertificate(_)), "{e}");
    // and a node is not even built from a certificate its own CA file does not sign
    let leaf = other.issue(&Request::new(CertRole::Worker, 1)).unwrap();
    let e = Credentials::from_pem(
        leaf.cert_pem.as_bytes(),
        leaf.key_pem.as_bytes(),
        ca.cert_pem().as_bytes(),
    )
    .unwrap_err();
    assert!(matches!(e, TlsError::Untrusted(_)), "{e}");
}

#[test]
fn an_expired_certificate_is_refused() {
    let ca = Ca::generate(30).unwrap();
    let now = OffsetDateTime::now_utc();
    let mut req = Request::new(CertRole::Worker, 1);
    req.not_before = now - Duration::days(10);
    req.not_after = now - Duration::days(1);
    let expired = ca.issue(&req).unwrap();
    let e = Credentials::from_pem(
        expired.cert_pem.as_bytes(),
        expired.key_pem.as_bytes(),
        ca.cert_pem().as_bytes(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("xpired"), "{e}");
    // presented by a peer that skipped its own check: refused by the handshake
    let member = creds(&ca, CertRole::Server);
    let trust = Trust::from_certs(vec![ca.cert().clone()], "test").unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(trust.verifier(true))
        .with_client_auth_cert(
            vec![expired.cert.clone()],
            PrivateKeyDer::Pkcs8(expired.key.clone_key()),
        )
        .unwrap();
    let mut c = Connection::Client(ClientConnection::new(Arc::new(cfg), server_name("127.0.0.1")).unwrap());
    let mut s = Connection::Server(ServerConnection::new(member.server_config()).unwrap());
    let e = pump(&mut c, &mut s).unwrap_err();
    assert!(
        matches!(
            e,
            rustls::Error::InvalidCertificate(rustls::CertificateError::Expired)
                | rustls::Error::InvalidCertificate(rustls::CertificateError::ExpiredContext { .. })
        ),
        "{e:?}"
    );
}

#[test]
fn nodes_of_one_secret_trust_each_other_and_not_another_secrets() {
    let a = Secret::new(vec![1; 32], SecretSource::File).unwrap();
    let b = Secret::new(vec![2; 32], SecretSource::File).unwrap();
    let (s, w) = (
        Credentials::from_secret(&a, CertRole::Scheduler).unwrap(),
        Credentials::from_secret(&a, CertRole::Worker).unwrap(),
    );
    assert_eq!(handshake(&w, &s).unwrap(), Roles(vec![CertRole::Worker]));
    let intruder = Credentials::from_secret(&b, CertRole::Worker).unwrap();
    assert!(handshake(&intruder, &s).is_err());
    assert!(handshake(&s, &intruder).is_err());
}

#[test]
fn a_certificate_without_a_role_or_with_a_foreign_key_is_refused() {
    let ca = Ca::generate(30).unwrap();
    // a leaf without the role URI, as a CA issuing for something else would make it
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["example.org".to_string()]).unwrap();
    let ca_key = rcgen::KeyPair::from_pem(&ca.key_pem()).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_der(ca.cert(), ca_key).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let e = Credentials::from_pem(
        cert.pem().as_bytes(),
        key.serialize_pem().as_bytes(),
        ca.cert_pem().as_bytes(),
    )
    .unwrap_err();
    assert!(matches!(e, TlsError::NoRole), "{e}");
    let (one, two) = (
        ca.issue(&Request::new(CertRole::Worker, 1)).unwrap(),
        ca.issue(&Request::new(CertRole::Worker, 1)).unwrap(),
    );
    let e = Credentials::from_pem(
        one.cert_pem.as_bytes(),
        two.key_pem.as_bytes(),
        ca.cert_pem().as_bytes(),
    )
    .unwrap_err();
    assert!(matches!(e, TlsError::Setup(_)), "{e}");
}

#[test]
fn the_http_server_takes_clients_with_or_without_a_certificate() {
    let ca = Ca::generate(30).unwrap();
    let sched = creds(&ca, CertRole::Scheduler);
    let client = creds(&ca, CertRole::Client);
    for id in [Some(&client), None] {
        let cfg = sched.trust().http_client_config(id).unwrap();
        let mut c = Connection::Client(ClientConnection::new(cfg, server_name("localhost")).unwrap());
        let mut s = Connection::Server(ServerConnection::new(sched.http_server_config().unwrap()).unwrap());
        pump(&mut c, &mut s).unwrap();
        assert!(!s.is_handshaking());
        let roles = s.peer_certificates().map(|c| peer::roles(&c[0]).unwrap());
        assert_eq!(roles, id.map(|_| Roles(vec![CertRole::Client])));
    }
    // a client trusting another CA refuses the server
    let other = Trust::from_certs(vec![Ca::generate(1).unwrap().cert().clone()], "other").unwrap();
    let mut c = Connection::Client(
        ClientConnection::new(other.http_client_config(None).unwrap(), server_name("localhost")).unwrap(),
    );
    let mut s = Connection::Server(ServerConnection::new(sched.http_server_config().unwrap()).unwrap());
    assert!(pump(&mut c, &mut s).is_err());
}
