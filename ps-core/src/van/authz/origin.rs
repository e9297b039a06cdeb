//! A link as the receiving van sees it: the certificate of the process that opened it
//! (TLS links) and the node id its messages bound it to. The first message with a
//! sender binds the link to that id; every later message must carry the same id. The
//! id must be of a role the certificate names, and when this node's table holds the
//! certificate the id registered with, the link's must be that one: a link speaks for
//! the node id the scheduler gave the process that opened it.

use super::refusal::Refusal;
use crate::message::Command;
use crate::node::{Role, SCHEDULER};
use crate::tls::Roles;

/// What a link's certificate says about the process that opened it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCert {
    /// The roles it names.
    pub roles: Roles,
    /// Its fingerprint ([`crate::tls::peer::fingerprint`]).
    pub fingerprint: u64,
}

/// One incoming link's sender identity. A transport keeps one per link and hands it
/// to the van with each message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The link's certificate (None: a link without TLS).
    pub cert: Option<PeerCert>,
    bound: Option<i32>,
}

impl Origin {
    /// A link with `cert` (None: without TLS), bound to no id yet.
    pub fn new(cert: Option<PeerCert>) -> Origin {
        Origin { cert, bound: None }
    }

    /// The node id the link is bound to, once a message carried one.
    pub fn bound(&self) -> Option<i32> {
        self.bound
    }

    /// A message `cmd` from node `id` (of role `role`) over this link, where this
    /// node's table says `id` registered with the certificate of fingerprint
    /// `registered` (None: not known here, or no certificate): binds the link to `id`
    /// or checks it is bound to it. The scheduler's id is not checked against a
    /// fingerprint here: it moves between candidates ([`super::active`] decides).
    pub fn bind(&mut self, cmd: Command, id: i32, role: Role, registered: Option<u64>) -> Result<(), Refusal> {
        if let Some(bound) = self.bound.filter(|&b| b != id) {
            return Err(Refusal::Rebound {
                cmd,
                bound,
                claimed: id,
            });
        }
        if let Some(c) = &self.cert {
            if !c.roles.admit(role) {
                return Err(Refusal::CertRole {
                    cmd,
                    id,
                    role,
                    names: c.roles.clone(),
                });
            }
            let other = registered.is_some_and(|fp| fp != 0 && fp != c.fingerprint);
            if id != SCHEDULER && other {
                return Err(Refusal::NotItsCertificate { cmd, id });
            }
        }
        self.bound = Some(id);
        Ok(())
    }
}
