//! The files `psrs certs` writes, as a pure list (the command writes them): a cluster
//! CA (`ca.pem`, `ca-key.pem`) and one certificate and key per role
//! (`scheduler.pem`, `scheduler-key.pem`, ...), or one more certificate for a role.

use super::error::TlsError;
use super::issue::{Ca, Request};
use super::role::CertRole;

/// One file to write.
#[derive(Clone, Debug)]
pub struct File {
    /// Its name inside the directory.
    pub name: String,
    /// Its PEM text.
    pub text: String,
    /// A private key: readable by its owner only.
    pub private: bool,
}

/// The CA certificate's file name.
pub const CA_CERT: &str = "ca.pem";
/// The CA key's file name.
pub const CA_KEY: &str = "ca-key.pem";

/// The files of a new cluster: a fresh CA valid `days` days and a certificate for
/// every role (valid as long), each also valid for `hosts`.
pub fn init(days: u32, hosts: &[String]) -> Result<Vec<File>, TlsError> {
    let ca = Ca::generate(days)?;
    let mut files = vec![
        File {
            name: CA_CERT.into(),
            text: ca.cert_pem(),
            private: false,
        },
        File {
            name: CA_KEY.into(),
            text: ca.key_pem(),
            private: true,
        },
    ];
    for role in CertRole::ALL {
        files.extend(issue(&ca, role, role.name(), days, hosts)?);
    }
    Ok(files)
}

/// A certificate for `role` signed by `ca`, as `NAME.pem` and `NAME-key.pem`.
pub fn issue(ca: &Ca, role: CertRole, name: &str, days: u32, hosts: &[String]) -> Result<Vec<File>, TlsError> {
    let mut req = Request::new(role, days);
    req.hosts = hosts.to_vec();
    let leaf = ca.issue(&req)?;
    Ok(vec![
        File {
            name: format!("{name}.pem"),
            text: leaf.cert_pem,
            private: false,
        },
        File {
            name: format!("{name}-key.pem"),
            text: leaf.key_pem,
            private: true,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::{peer, pem, Credentials};

    #[test]
    fn init_makes_a_ca_and_a_certificate_per_role_that_work_together() {
        let files = init(30, &["node1.example".to_string(), "10.0.0.7".to_string()]).unwrap();
        let get = |n: &str| files.iter().find(|f| f.name == n).unwrap();
        assert_eq!(files.len(), 2 + 2 * CertRole::ALL.len());
        assert!(get(CA_KEY).private && !get(CA_CERT).private && get("worker-key.pem").private);
        for role in CertRole::ALL {
            let c = get(&format!("{role}.pem"));
            let k = get(&format!("{role}-key.pem"));
            let creds =
                Credentials::from_pem(c.text.as_bytes(), k.text.as_bytes(), get(CA_CERT).text.as_bytes()).unwrap();
            creds.require(role).unwrap();
            let der = &pem::certs(c.text.as_bytes(), "x").unwrap()[0];
            assert_eq!(peer::roles(der).unwrap().0, vec![role]);
        }
        // more certificates from the CA files
        let ca = Ca::from_pem(&get(CA_CERT).text, &get(CA_KEY).text).unwrap();
        let more = issue(&ca, CertRole::Worker, "worker-7", 1, &[]).unwrap();
        assert_eq!(more[0].name, "worker-7.pem");
        Credentials::from_pem(
            more[0].text.as_bytes(),
            more[1].text.as_bytes(),
            get(CA_CERT).text.as_bytes(),
        )
        .unwrap()
        .require(CertRole::Worker)
        .unwrap();
    }
}
