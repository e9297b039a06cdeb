//! Certificates and TLS for the tests that attack a secured cluster: `psrs certs`,
//! the variables that give a node a certificate, a TLS client that speaks the TCP
//! van's framing, and a verifier that accepts any server (the attacker tests only the
//! server's checks).

use ps_core::tls::Credentials;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command as Process;
use std::time::{Duration, Instant};

/// `psrs certs init --dir DIR`: a CA and a certificate per role.
pub fn certs_init(dir: &Path) {
    let st = Process::new(super::psrs_bin())
        .args(["certs", "init", "--dir"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "psrs certs init --dir {}", dir.display());
}

/// `psrs certs issue --role ROLE --dir DIR --name NAME`: one more certificate.
pub fn certs_issue(dir: &Path, role: &str, name: &str) {
    let st = Process::new(super::psrs_bin())
        .args(["certs", "issue", "--role", role, "--name", name, "--dir"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "psrs certs issue --role {role} --name {name}");
}

/// The variables giving a process the certificate `name` of the CA in `dir`.
pub fn tls_vars(dir: &Path, name: &str) -> [(&'static str, String); 3] {
    let p = |f: String| dir.join(f).display().to_string();
    [
        ("PS_TLS_CA", p("ca.pem".into())),
        ("PS_TLS_CERT", p(format!("{name}.pem"))),
        ("PS_TLS_KEY", p(format!("{name}-key.pem"))),
    ]
}

/// The credentials of certificate `name` of the CA in `dir`.
pub fn load(dir: &Path, name: &str) -> Credentials {
    let read = |f: String| std::fs::read(dir.join(f)).unwrap();
    Credentials::from_pem(
        &read(format!("{name}.pem")),
        &read(format!("{name}-key.pem")),
        &read("ca.pem".into()),
    )
    .unwrap()
}

/// How long the handshake may take: a node starved of the CPU answers late, and a
/// handshake cut short by the answer's `wait` would be a failure of the test, not of
/// the node.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(20);

/// A TLS client with `creds` on `s`: the handshake (up to [`HANDSHAKE_WAIT`]), `payload`
/// inside TLS, then what comes back (plaintext) until the peer closes or `wait` passes.
/// Err: the TLS error.
pub fn over_tls(mut s: TcpStream, creds: &Credentials, payload: &[u8], wait: Duration) -> Result<Vec<u8>, String> {
    s.set_read_timeout(Some(HANDSHAKE_WAIT)).map_err(|e| e.to_string())?;
    let mut conn = rustls::ClientConnection::new(creds.client_config(), ps_core::tls::server_name("127.0.0.1"))
        .map_err(|e| e.to_string())?;
    while conn.is_handshaking() {
        conn.complete_io(&mut s).map_err(|e| e.to_string())?;
    }
    s.set_read_timeout(Some(wait)).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, s);
    tls.write_all(payload).map_err(|e| e.to_string())?;
    tls.flush().map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + wait;
    while Instant::now() < end {
        match tls.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if got.is_empty() && e.kind() == std::io::ErrorKind::InvalidData => return Err(e.to_string()),
            Err(_) => return Ok(got),
        }
    }
    Ok(got)
}

/// Accepts any server certificate (the intruder only tests the server's checks).
#[derive(Debug)]
pub struct AnyServer;

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        ps_core::tls::provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
