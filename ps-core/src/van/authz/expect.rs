//! What a node expects of the peer it dials: a certificate naming the role the node
//! table gives the id it dials (the scheduler's keys: the scheduler role), and, when
//! the table has it, the very certificate that id registered with. A certificate
//! naming no node role (a `client` one) opens no node link. Pure: the TCP van's
//! dialing side checks the certificate it was shown against it after the handshake.

use crate::failover::candidate_key;
use crate::node::{id_role, Node, Role, SCHEDULER};
use crate::tls::Roles;

/// What the dialed peer's certificate must show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    /// The key the link is known by (a node id, or one of the van's other keys).
    pub key: i32,
    /// The role it must name (None: any node role).
    pub role: Option<Role>,
    /// The fingerprint it must have (0: any).
    pub fingerprint: u64,
}

impl Expect {
    /// For a link known by `key`: the scheduler's id and the candidates' keys expect
    /// a scheduler, a node id its role; other keys (a node still without an id) any
    /// node role.
    pub fn of_key(key: i32) -> Expect {
        let role = if key == SCHEDULER || key <= candidate_key(0) {
            Some(Role::Scheduler)
        } else {
            id_role(key)
        };
        Expect {
            key,
            role,
            fingerprint: 0,
        }
    }

    /// For a link known by `key` to node `n`: its role and the certificate it
    /// registered with.
    pub fn of_node(key: i32, n: &Node) -> Expect {
        Expect {
            key,
            role: Some(n.role),
            fingerprint: if n.id == SCHEDULER { 0 } else { n.cert },
        }
    }

    /// Checks the dialed peer's certificate (its `roles` and `fingerprint`); the error
    /// is one line.
    pub fn check(&self, roles: &Roles, fingerprint: u64) -> Result<(), String> {
        if !roles.names_node_role() {
            return Err(format!(
                "its certificate names {roles}: no node role (a client certificate opens no node link)"
            ));
        }
        if let Some(r) = self.role.filter(|r| !roles.admit(*r)) {
            return Err(format!(
                "its certificate names {roles}, not {r} (the node table gives {} that role)",
                self.who()
            ));
        }
        if self.fingerprint != 0 && self.fingerprint != fingerprint {
            return Err(format!("its certificate is not the one {} registered with", self.who()));
        }
        Ok(())
    }

    fn who(&self) -> String {
        if self.key == SCHEDULER || self.key <= candidate_key(0) {
            "the scheduler".into()
        } else if self.key > 0 {
            format!("node {}", self.key)
        } else {
            "the node".into()
        }
    }
}
