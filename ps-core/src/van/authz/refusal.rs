//! Why a message from a node link was refused: one line each, for the log (the
//! message is dropped; the link stays up).

use crate::message::Command;
use crate::node::Role;
use crate::tls::Roles;

/// Why a message was refused. `Display` is the one-line reason logged when it is
/// dropped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A TERMINATE: a van sends it only to itself, never over a link.
    #[error("TERMINATE from the wire (a van sends it only to itself)")]
    Terminate,
    /// A message other than a registration or an ACK, from a process without a node
    /// id yet.
    #[error("{} from a process without a node id (before registering it may send only ADD_NODE and ACK)", name(*cmd))]
    NoSender {
        /// The command.
        cmd: Command,
    },
    /// The sender field names no node (a group id, 0, a negative number).
    #[error("{} from {sender}, which is no node id", name(*cmd))]
    NotANodeId {
        /// The command.
        cmd: Command,
        /// The sender field.
        sender: i32,
    },
    /// The link carried messages from another node id before.
    #[error("{} from node {claimed} over the link of node {bound}", name(*cmd))]
    Rebound {
        /// The command.
        cmd: Command,
        /// The id the link is bound to.
        bound: i32,
        /// The id the message claims.
        claimed: i32,
    },
    /// The sender's id is of a role the link's certificate does not name.
    #[error("{} from {role} {id} over a link whose certificate names {names}", name(*cmd))]
    CertRole {
        /// The command.
        cmd: Command,
        /// The sender id.
        id: i32,
        /// The role of that id.
        role: Role,
        /// The roles the certificate names.
        names: Roles,
    },
    /// The link's certificate is not the one the sender id registered with.
    #[error("{} from node {id} over a link whose certificate is not the one node {id} registered with", name(*cmd))]
    NotItsCertificate {
        /// The command.
        cmd: Command,
        /// The sender id.
        id: i32,
    },
    /// A scheduler certificate that is not the one speaking for the active scheduler
    /// (at this epoch).
    #[error("{} in the scheduler's name over a link whose certificate is not the active scheduler's{epoch}", name(*cmd))]
    NotTheActiveScheduler {
        /// The command.
        cmd: Command,
        /// ` at term T (scheduler #C)` under an election, else empty.
        epoch: String,
    },
    /// The command may not come from the sender's role to this node's role.
    #[error("{what} from {from} {id}: only {allowed} may send it to a {at}")]
    Command {
        /// The command, as the table names it.
        what: &'static str,
        /// The sender's role.
        from: Role,
        /// The sender id.
        id: i32,
        /// Who may send it, in words.
        allowed: &'static str,
        /// This node's role.
        at: Role,
    },
    /// The command is never sent to a node of this role.
    #[error("{what} from node {id}: it is never sent to a {at}")]
    NotForThisRole {
        /// The command, as the table names it.
        what: &'static str,
        /// The sender id.
        id: i32,
        /// This node's role.
        at: Role,
    },
    /// An ADD_NODE registering a role the link's certificate does not name.
    #[error("an ADD_NODE registering a {registers} from a peer whose certificate names {names}")]
    RegistersRole {
        /// The role registered.
        registers: Role,
        /// The roles the certificate names.
        names: Roles,
    },
    /// An ADD_NODE registration that is not one node registering itself.
    #[error("ADD_NODE registration from {sender}: {why}")]
    BadRegistration {
        /// The sender field (`?` before an id).
        sender: String,
        /// What is wrong with it.
        why: String,
    },
    /// A node table entry filed under an id of another role.
    #[error("a node table listing id {id} as a {role}")]
    BadTable {
        /// The entry's id.
        id: i32,
        /// The entry's role.
        role: Role,
    },
    /// A data answer from a node this node never asked.
    #[error("data answer from node {sender} (app {app}, customer {customer}), which this node never asked")]
    Unasked {
        /// The sender id.
        sender: i32,
        /// The app id.
        app: i32,
        /// The customer id.
        customer: i32,
    },
}

/// The command's name as the protocol documents it.
fn name(cmd: Command) -> &'static str {
    match cmd {
        Command::Empty => "data message",
        Command::Terminate => "TERMINATE",
        Command::AddNode => "ADD_NODE",
        Command::Barrier => "BARRIER",
        Command::Ack => "ACK",
        Command::Heartbeat => "HEARTBEAT",
        Command::NodeDead => "NODE_DEAD",
        Command::Sync => "SYNC",
        Command::PeerBeat => "PEER_BEAT",
        Command::Leave => "LEAVE",
        Command::Campaign => "CAMPAIGN",
        Command::Vote => "VOTE",
    }
}

impl Refusal {
    /// A short name of the kind of refusal, the key of its log rate limit.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Terminate => "terminate",
            Refusal::NoSender { .. } => "no sender",
            Refusal::NotANodeId { .. } => "not a node id",
            Refusal::Rebound { .. } => "rebound",
            Refusal::CertRole { .. } => "certificate role",
            Refusal::NotItsCertificate { .. } => "not its certificate",
            Refusal::NotTheActiveScheduler { .. } => "not the active scheduler",
            Refusal::Command { .. } => "command",
            Refusal::NotForThisRole { .. } => "not for this role",
            Refusal::RegistersRole { .. } => "registers role",
            Refusal::BadRegistration { .. } => "bad registration",
            Refusal::BadTable { .. } => "bad table",
            Refusal::Unasked { .. } => "unasked",
        }
    }
}
