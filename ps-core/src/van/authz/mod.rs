//! Per-message authorization on node links. Every message a van receives is checked
//! here, on its decoded header, before anything acts on it (the transports only
//! frame and decrypt): the ZMQ van and the TCP van get the same rules, and a change of
//! a transport's encoding changes nothing here.
//!
//! - **Sender binding** ([`origin`]): a link is bound to the node id the scheduler
//!   gave the process that opened it. Before it has an id, a process may send only an
//!   ADD_NODE registration and ACKs with the sender unset; its first message with a
//!   sender binds the link, and every later one must carry that id. On a TLS link the
//!   id must be of a role the certificate names and, once this node's table holds
//!   the certificate the id registered with (the scheduler records the fingerprint
//!   of the link a registration came on: [`crate::node::Node::cert`]), the link's
//!   certificate must be that one.
//! - **The command table** ([`commands`]): each command only from the roles that send
//!   it, to the roles that take it; a data answer only from a node this node asked.
//! - **The active scheduler** ([`active`]): on a server or worker, a message in the
//!   scheduler's name over a TLS link must come from the certificate speaking for the
//!   scheduler at its epoch.
//! - **Registrations**: one node registering itself, of a role its certificate names,
//!   claiming no id of another role or another node's, advertising a valid host name.
//!
//! Pure: [`authorize`] takes what the node knows through [`Facts`]; the van's shell
//! answers those questions and logs refusals, rate-limited ([`log_limit`]). The
//! dialing side's check of the peer it dialed is [`expect`].

pub mod active;
pub mod commands;
pub mod expect;
pub mod log_limit;
pub mod origin;
pub mod refusal;

pub use active::ActiveScheduler;
pub use expect::Expect;
pub use log_limit::LogLimit;
pub use origin::{Origin, PeerCert};
pub use refusal::Refusal;

use crate::failover::Epoch;
use crate::message::{Command, Meta};
use crate::node::{id_role, Role, EMPTY_ID, SCHEDULER};

/// What the receiving node knows that decides about a message.
pub trait Facts {
    /// The fingerprint of the certificate node `id` registered with, as this node's
    /// table holds it (None: not in the table; 0: no certificate).
    fn registered(&self, id: i32) -> Option<u64>;
    /// Whether this node sent node `peer` a data request on `app` and `customer`.
    fn asked(&self, peer: i32, app: i32, customer: i32) -> bool;
    /// On a server or worker: whether the certificate of fingerprint `fp` speaks for
    /// the scheduler at `epoch` ([`ActiveScheduler::check`]); `cmd` names the message
    /// in the refusal.
    fn speaks_for_scheduler(&self, cmd: Command, epoch: Epoch, fp: u64) -> Result<(), Refusal>;
}

/// Whether the message of header `meta`, received by a node of role `at` over a link
/// described by `origin` (None: a transport without per-link state, the ZMQ van),
/// may be handled. Binds the link to the message's sender on the way.
pub fn authorize(origin: Option<&mut Origin>, meta: &Meta, at: Role, facts: &impl Facts) -> Result<(), Refusal> {
    let cmd = meta.control.cmd;
    if cmd == Command::Terminate {
        return Err(Refusal::Terminate);
    }
    let cert = origin.as_ref().and_then(|o| o.cert.clone());
    let sender = meta.sender;
    if sender == EMPTY_ID {
        let bound = origin.as_ref().and_then(|o| o.bound());
        return match cmd {
            _ if bound.is_some() => Err(Refusal::NoSender { cmd }),
            Command::Ack => Ok(()),
            Command::AddNode => registration(meta, None, cert.as_ref()).and(match at {
                Role::Scheduler => Ok(()),
                _ => Err(Refusal::NoSender { cmd }),
            }),
            _ => Err(Refusal::NoSender { cmd }),
        };
    }
    let role = id_role(sender).ok_or(Refusal::NotANodeId { cmd, sender })?;
    if let Some(o) = origin {
        let registered = if sender == SCHEDULER {
            None
        } else {
            facts.registered(sender)
        };
        o.bind(cmd, sender, role, registered)?;
    }
    commands::check(cmd, meta.request, role, sender, at)?;
    match cmd {
        Command::AddNode if at == Role::Scheduler => registration(meta, Some(sender), cert.as_ref())?,
        Command::AddNode => table(meta)?,
        Command::Empty if !meta.request && !facts.asked(sender, meta.app_id, meta.customer_id) => {
            return Err(Refusal::Unasked {
                sender,
                app: meta.app_id,
                customer: meta.customer_id,
            })
        }
        _ => {}
    }
    if let (SCHEDULER, Some(c)) = (sender, &cert) {
        if at != Role::Scheduler {
            let epoch = Epoch {
                term: meta.control.term,
                candidate: meta.control.candidate,
            };
            facts.speaks_for_scheduler(cmd, epoch, c.fingerprint)?;
        }
    }
    Ok(())
}

/// Characters of a refused host name shown in the log line.
const SHOWN: usize = 64;

/// An ADD_NODE at a scheduler from `sender` (None: before it has an id) over a link
/// with `cert`: one node registering itself.
fn registration(meta: &Meta, sender: Option<i32>, cert: Option<&PeerCert>) -> Result<(), Refusal> {
    let bad = |why: String| Refusal::BadRegistration {
        sender: sender.map_or_else(|| "a process without an id".into(), |s| format!("node {s}")),
        why,
    };
    let [n] = meta.control.nodes.as_slice() else {
        return Err(bad(format!("it registers {} nodes", meta.control.nodes.len())));
    };
    if let Some(c) = cert.filter(|c| !c.roles.admit(n.role)) {
        return Err(Refusal::RegistersRole {
            registers: n.role,
            names: c.roles.clone(),
        });
    }
    match sender {
        None if n.id != EMPTY_ID => return Err(bad(format!("it claims id {} before it has one", n.id))),
        Some(s) if n.id != s => return Err(bad(format!("it registers node {}", n.id))),
        Some(s) if id_role(s) != Some(n.role) => return Err(bad(format!("it registers id {s} as a {}", n.role))),
        _ => {}
    }
    if !crate::addr::valid_host(&n.hostname) {
        let shown: String = n.hostname.chars().take(SHOWN).collect();
        return Err(bad(format!(
            "it advertises {shown:?}{}, which is no host name or IP address",
            if n.hostname.chars().count() > SHOWN { "..." } else { "" }
        )));
    }
    Ok(())
}

/// A node table from the scheduler: every entry's id of its role.
fn table(meta: &Meta) -> Result<(), Refusal> {
    match meta.control.nodes.iter().find(|n| id_role(n.id) != Some(n.role)) {
        Some(n) => Err(Refusal::BadTable { id: n.id, role: n.role }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
