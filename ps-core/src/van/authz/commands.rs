//! The command-by-role table: which role may send each command to a node of which
//! role, derived from what the protocol sends (the van's receive path, the scheduler
//! core, the failover machines). The sender's role is the role of its node id (1 the
//! scheduler, even ids from 8 servers, odd ids from 9 workers); on a link with a
//! certificate, that id is bound to the certificate ([`super::origin`]), so the table
//! holds for certificates. `docs/security.md` carries the same table
//! ([`markdown`]; a test compares them).

use super::refusal::Refusal;
use crate::message::Command;
use crate::node::Role;

/// Which roles may send a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Senders {
    /// The scheduler (id 1: the active scheduler, or a candidate of the election).
    Scheduler,
    /// Servers and workers.
    Nodes,
    /// Workers.
    Workers,
    /// Any member: the scheduler, servers and workers.
    Members,
}

impl Senders {
    /// Whether a sender of role `r` is one of these.
    pub fn admit(self, r: Role) -> bool {
        match self {
            Senders::Scheduler => r == Role::Scheduler,
            Senders::Nodes => r != Role::Scheduler,
            Senders::Workers => r == Role::Worker,
            Senders::Members => true,
        }
    }

    /// In words, for log lines and the documentation.
    pub fn words(self) -> &'static str {
        match self {
            Senders::Scheduler => "the scheduler",
            Senders::Nodes => "servers and workers",
            Senders::Workers => "workers",
            Senders::Members => "the scheduler, servers and workers",
        }
    }
}

/// Where a command may arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// At a scheduler (the active one or a candidate).
    Scheduler,
    /// At a server or a worker.
    Node,
    /// Anywhere.
    Any,
}

impl At {
    fn holds(self, r: Role) -> bool {
        match self {
            At::Scheduler => r == Role::Scheduler,
            At::Node => r != Role::Scheduler,
            At::Any => true,
        }
    }

    fn words(self) -> &'static str {
        match self {
            At::Scheduler => "a scheduler",
            At::Node => "a server or worker",
            At::Any => "any node",
        }
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The command.
    pub cmd: Command,
    /// The message's `request` flag the row is about (None: either).
    pub request: Option<bool>,
    /// Where it arrives.
    pub at: At,
    /// Who may send it.
    pub from: Senders,
    /// What it is, in words.
    pub what: &'static str,
    /// What else is checked.
    pub note: &'static str,
}

const fn rule(
    cmd: Command,
    request: Option<bool>,
    at: At,
    from: Senders,
    what: &'static str,
    note: &'static str,
) -> Rule {
    Rule {
        cmd,
        request,
        at,
        from,
        what,
        note,
    }
}

/// Every command a node accepts, who may send it and where. A message no row
/// admits is refused; TERMINATE has no row (a van sends it only to itself).
pub const RULES: &[Rule] = &[
    rule(Command::AddNode, None, At::Scheduler, Senders::Nodes, "ADD_NODE registration",
        "one node registering itself, sender unset or its own id; its role named by the certificate; an id it claims is of its role; a valid host name"),
    rule(Command::AddNode, None, At::Node, Senders::Scheduler, "ADD_NODE node table",
        "also a refusal or an eviction (`reason`); every entry's id of its role"),
    rule(Command::Barrier, Some(true), At::Scheduler, Senders::Members, "BARRIER request", ""),
    rule(Command::Barrier, Some(false), At::Any, Senders::Scheduler, "BARRIER release", ""),
    rule(Command::Heartbeat, None, At::Scheduler, Senders::Nodes, "HEARTBEAT", ""),
    rule(Command::Heartbeat, None, At::Node, Senders::Scheduler, "HEARTBEAT reply",
        "also the scheduler's welcome to a node waiting for its id"),
    rule(Command::NodeDead, None, At::Any, Senders::Scheduler, "NODE_DEAD", ""),
    rule(Command::Leave, Some(true), At::Scheduler, Senders::Workers, "LEAVE (goodbye)", ""),
    rule(Command::Leave, Some(false), At::Node, Senders::Scheduler, "LEAVE reply", ""),
    rule(Command::Sync, None, At::Scheduler, Senders::Scheduler, "SYNC", "between scheduler candidates"),
    rule(Command::PeerBeat, None, At::Scheduler, Senders::Scheduler, "PEER_BEAT", "between scheduler candidates"),
    rule(Command::Campaign, None, At::Node, Senders::Scheduler, "CAMPAIGN (vote request)",
        "a scheduler candidate asks for a vote (or a pre-vote)"),
    rule(Command::Vote, None, At::Scheduler, Senders::Nodes, "VOTE", "a node's answer to a CAMPAIGN"),
    rule(Command::Ack, None, At::Any, Senders::Members, "ACK", "also before the sender has an id"),
    rule(Command::Empty, Some(true), At::Any, Senders::Members, "data request", ""),
    rule(Command::Empty, Some(false), At::Any, Senders::Members, "data answer",
        "only from a node this node sent a request on the same app and customer"),
];

fn matches(r: &Rule, cmd: Command, request: bool) -> bool {
    r.cmd == cmd && r.request.is_none_or(|q| q == request)
}

/// The row for `cmd` (with its `request` flag) from `from` (node `id`) arriving at a
/// node of role `at`, or why it is refused.
pub fn check(cmd: Command, request: bool, from: Role, id: i32, at: Role) -> Result<&'static Rule, Refusal> {
    let mut rows = RULES.iter().filter(|r| matches(r, cmd, request));
    let Some(first) = rows.clone().next() else {
        return Err(Refusal::NotForThisRole {
            what: "TERMINATE",
            id,
            at,
        });
    };
    let Some(row) = rows.find(|r| r.at.holds(at)) else {
        return Err(Refusal::NotForThisRole {
            what: first.what,
            id,
            at,
        });
    };
    if !row.from.admit(from) {
        return Err(Refusal::Command {
            what: row.what,
            from,
            id,
            allowed: row.from.words(),
            at,
        });
    }
    Ok(row)
}

/// The table as the Markdown rows `docs/security.md` shows (header included).
pub fn markdown() -> String {
    let mut s = String::from("| message | sent to | only from | also checked |\n|---|---|---|---|\n");
    for r in RULES {
        s += &format!("| {} | {} | {} | {} |\n", r.what, r.at.words(), r.from.words(), r.note);
    }
    s
}
