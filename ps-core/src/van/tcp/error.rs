//! Why the TCP van drops what a peer sent on a secured link, by kind.

use crate::node::Role;
use crate::tls::Roles;

/// A refusal of the TCP van.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TcpError {
    /// A peer registered a node of a role its certificate does not name (refused: the
    /// message is dropped, the link stays up).
    #[error("an ADD_NODE registering a {role} from a peer whose certificate names {roles}")]
    RoleNotCertified {
        /// The role the message registers.
        role: Role,
        /// The roles the peer's certificate names.
        roles: Roles,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::CertRole;

    #[test]
    fn the_text_is_the_message_and_the_kind_is_the_variant() {
        let e = TcpError::RoleNotCertified {
            role: Role::Server,
            roles: Roles(vec![CertRole::Worker]),
        };
        assert_eq!(
            e.to_string(),
            "an ADD_NODE registering a server from a peer whose certificate names worker"
        );
    }
}
