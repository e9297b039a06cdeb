//! Roles enforced on a secured link: a message whose header registers nodes
//! (`ADD_NODE`) must come from a peer whose certificate names each of their roles
//! (the scheduler's certificate may name any: it sends the node table to everyone).
//! So a worker's certificate cannot join as a server or a scheduler. Pure: the reader
//! thread calls it on every message of a link whose peer is not a scheduler.

use super::error::TcpError;
use crate::message::{Command, Message};
use crate::tls::{CertRole, Roles};
use bytes::Bytes;

/// Whether a message from a peer whose certificate names `roles` may be handed to the
/// van; [`TcpError::RoleNotCertified`] (one line) says why it is dropped.
pub fn screen(roles: &Roles, frames: &[Bytes]) -> Result<(), TcpError> {
    if roles.has(CertRole::Scheduler) {
        return Ok(());
    }
    let Some(head) = frames.first() else {
        return Ok(());
    };
    // malformed headers are the van's to report; only a decoded ADD_NODE matters here
    let Ok(m) = Message::decode(vec![head.clone()]) else {
        return Ok(());
    };
    if m.meta.control.cmd != Command::AddNode {
        return Ok(());
    }
    match m.meta.control.nodes.iter().find(|n| !roles.admit(n.role)) {
        Some(n) => Err(TcpError::RoleNotCertified {
            role: n.role,
            roles: roles.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Node, Role, SCHEDULER};

    fn add_node(role: Role) -> Vec<Bytes> {
        let mut m = Message::control(SCHEDULER, Command::AddNode);
        m.meta.control.nodes = vec![Node {
            role,
            id: -1,
            hostname: "127.0.0.1".into(),
            port: 1,
            is_recovery: false,
            incarnation: 1,
        }];
        vec![m.encode_meta()]
    }

    #[test]
    fn a_worker_certificate_registers_only_workers() {
        let w = Roles(vec![CertRole::Worker]);
        assert_eq!(screen(&w, &add_node(Role::Worker)), Ok(()));
        let e = screen(&w, &add_node(Role::Server)).unwrap_err();
        assert_eq!(
            e,
            TcpError::RoleNotCertified {
                role: Role::Server,
                roles: w.clone()
            }
        );
        assert!(screen(&w, &add_node(Role::Scheduler)).is_err());
        // a trailing data frame changes nothing
        let mut with_data = add_node(Role::Server);
        with_data.push(Bytes::from_static(b"x"));
        assert!(screen(&w, &with_data).is_err());
        // the scheduler sends the whole table; other messages pass
        assert_eq!(
            screen(&Roles(vec![CertRole::Scheduler]), &add_node(Role::Server)),
            Ok(())
        );
        let hb = Message::control(SCHEDULER, Command::Heartbeat).encode_meta();
        assert_eq!(screen(&w, &[hb]), Ok(()));
        assert_eq!(screen(&w, &[Bytes::from_static(b"garbage")]), Ok(()));
    }
}
