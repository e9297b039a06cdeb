//! The role a certificate names. A psrs certificate carries its role as a subject
//! alternative name URI, `psrs://role/NAME` (NAME one of `scheduler`, `server`,
//! `worker`, `client`), so any CA can issue one (cert-manager: `uris:`; OpenSSL:
//! `subjectAltName = URI:psrs://role/worker`). A node may join only as a role its
//! certificate names; `client` is for the HTTP API's users (`psrs job`).

use crate::node::Role;
use std::fmt;

/// The prefix of a role URI.
pub const ROLE_URI_PREFIX: &str = "psrs://role/";

/// A role a certificate can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CertRole {
    /// May join as the scheduler (or a standby scheduler), and serve the HTTP API.
    Scheduler,
    /// May join as a server.
    Server,
    /// May join as a worker.
    Worker,
    /// May use the HTTP API (submit and manage jobs); never joins the cluster.
    Client,
}

impl CertRole {
    /// Every role, in the order `psrs certs init` issues them.
    pub const ALL: [CertRole; 4] = [
        CertRole::Scheduler,
        CertRole::Server,
        CertRole::Worker,
        CertRole::Client,
    ];

    /// The role's name (`worker`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CertRole::Scheduler => "scheduler",
            CertRole::Server => "server",
            CertRole::Worker => "worker",
            CertRole::Client => "client",
        }
    }

    /// Parses a role's name.
    pub fn parse(s: &str) -> Option<CertRole> {
        CertRole::ALL.into_iter().find(|r| r.name() == s)
    }

    /// The SAN URI naming this role (`psrs://role/worker`).
    pub fn uri(self) -> String {
        format!("{ROLE_URI_PREFIX}{}", self.name())
    }

    /// The role a SAN URI names: None for a URI that is not a psrs role URI (a
    /// certificate may carry other URIs too), [`UnknownRole`] for `psrs://role/`
    /// followed by an unknown name.
    pub fn from_uri(uri: &str) -> Result<Option<CertRole>, UnknownRole> {
        match uri.strip_prefix(ROLE_URI_PREFIX) {
            None => Ok(None),
            Some(name) => CertRole::parse(name).map(Some).ok_or_else(|| UnknownRole {
                name: name.to_string(),
                uri: uri.to_string(),
            }),
        }
    }

    /// The certificate role that lets a node join as `role`.
    pub fn of_node(role: Role) -> CertRole {
        match role {
            Role::Scheduler => CertRole::Scheduler,
            Role::Server => CertRole::Server,
            Role::Worker => CertRole::Worker,
        }
    }
}

impl fmt::Display for CertRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A role URI (`psrs://role/NAME`) whose NAME is no psrs role: the certificate is
/// malformed for psrs. Defined beside the roles rather than in the room's `error.rs`,
/// which names the roles itself ([`TlsError::WrongRole`](super::TlsError::WrongRole))
/// and takes this error in through a `From`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown psrs role '{name}' in the certificate URI '{uri}'")]
pub struct UnknownRole {
    /// The name after the prefix.
    pub name: String,
    /// The whole URI.
    pub uri: String,
}

/// The roles one certificate names (most name one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roles(pub Vec<CertRole>);

impl Roles {
    /// Whether these roles let a node join as `role`.
    pub fn admit(&self, role: Role) -> bool {
        self.0.contains(&CertRole::of_node(role))
    }

    /// Whether one of them is `role`.
    pub fn has(&self, role: CertRole) -> bool {
        self.0.contains(&role)
    }

    /// Whether they name a node role (scheduler, server or worker): only such a
    /// certificate opens a node link (a `client` one is for the HTTP API alone).
    pub fn names_node_role(&self) -> bool {
        self.0.iter().any(|r| *r != CertRole::Client)
    }
}

impl fmt::Display for Roles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no psrs role");
        }
        let names: Vec<&str> = self.0.iter().map(|r| r.name()).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_foreign_uris_are_ignored() {
        for r in CertRole::ALL {
            assert_eq!(CertRole::from_uri(&r.uri()), Ok(Some(r)));
            assert_eq!(CertRole::parse(r.name()), Some(r));
        }
        assert_eq!(CertRole::from_uri("spiffe://cluster/ns/x"), Ok(None));
        let e = CertRole::from_uri("psrs://role/admin").unwrap_err();
        assert_eq!(
            e,
            UnknownRole {
                name: "admin".into(),
                uri: "psrs://role/admin".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "unknown psrs role 'admin' in the certificate URI 'psrs://role/admin'"
        );
        assert_eq!(CertRole::parse("Worker"), None);
    }

    #[test]
    fn a_role_admits_only_its_own_node_role() {
        let w = Roles(vec![CertRole::Worker]);
        assert!(w.admit(Role::Worker));
        assert!(!w.admit(Role::Server));
        assert!(!w.admit(Role::Scheduler));
        assert!(!Roles(vec![CertRole::Client]).admit(Role::Worker));
        assert_eq!(
            Roles(vec![CertRole::Server, CertRole::Worker]).to_string(),
            "server,worker"
        );
        assert_eq!(Roles::default().to_string(), "no psrs role");
        assert!(!Roles(vec![CertRole::Client]).names_node_role());
        assert!(!Roles::default().names_node_role());
        assert!(Roles(vec![CertRole::Client, CertRole::Worker]).names_node_role());
    }
}
