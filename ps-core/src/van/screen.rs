//! Roles enforced on a secured link: a message whose header registers nodes
//! (`ADD_NODE`) must come from a peer whose certificate names each of their roles
//! (the scheduler's certificate may name any: it sends the node table to everyone).
//! So a worker's certificate cannot join as a server or a scheduler. Pure: the van
//! calls it on each message it decoded from a link whose certificate it was given
//! (the transport passes the roles with the frames), so the header is decoded once.

use crate::message::{Command, Message};
use crate::node::Role;
use crate::tls::{CertRole, Roles};

/// A message registering a node of a role the sending link's certificate does not
/// name; `Display` is the one-line reason it is dropped (the link stays up).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("an ADD_NODE registering a {registers} from a peer whose certificate names {names}")]
pub struct NotItsRole {
    /// The role the message registers.
    pub registers: Role,
    /// The roles the certificate names.
    pub names: Roles,
}

/// Whether `msg`, from a peer whose certificate names `roles`, may be handled.
pub fn screen(roles: &Roles, msg: &Message) -> Result<(), NotItsRole> {
    if roles.has(CertRole::Scheduler) || msg.meta.control.cmd != Command::AddNode {
        return Ok(());
    }
    match msg.meta.control.nodes.iter().find(|n| !roles.admit(n.role)) {
        Some(n) => Err(NotItsRole {
            registers: n.role,
            names: roles.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Node, SCHEDULER};

    fn add_node(role: Role) -> Message {
        let mut m = Message::control(SCHEDULER, Command::AddNode);
        m.meta.control.nodes = vec![Node {
            role,
            id: -1,
            hostname: "127.0.0.1".into(),
            port: 1,
            is_recovery: false,
            incarnation: 1,
        }];
        m
    }

    #[test]
    fn a_worker_certificate_registers_only_workers() {
        let w = Roles(vec![CertRole::Worker]);
        assert_eq!(screen(&w, &add_node(Role::Worker)), Ok(()));
        let e = screen(&w, &add_node(Role::Server)).unwrap_err();
        assert_eq!(e.registers, Role::Server);
        let text = e.to_string();
        assert!(
            text.contains("registering a server") && text.contains("names worker"),
            "{text}"
        );
        assert!(screen(&w, &add_node(Role::Scheduler)).is_err());
        // one node of another role among several is enough to refuse the message
        let mut mixed = add_node(Role::Worker);
        mixed
            .meta
            .control
            .nodes
            .extend(add_node(Role::Server).meta.control.nodes);
        assert!(screen(&w, &mixed).is_err());
        // the scheduler sends the whole table; other messages pass
        assert_eq!(
            screen(&Roles(vec![CertRole::Scheduler]), &add_node(Role::Server)),
            Ok(())
        );
        assert_eq!(screen(&w, &Message::control(SCHEDULER, Command::Heartbeat)), Ok(()));
    }
}
