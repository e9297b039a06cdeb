//! psrs's [`Message`] to and from ps-lite's frames, pure. On the wire a message is the
//! sender's identity (added by the ROUTER socket that receives it; see
//! [`super::identity`]), a `PBMeta` header ([`super::pb`]) and the data frames as
//! they are: a KV message's keys (u64), values and, if any, lengths (i32), each one
//! frame, exactly as ps-lite's `KVWorker`/`KVServer` lay them out.
//!
//! What ps-lite has no field for travels in psrs's own fields (numbers from 1001),
//! which ps-lite skips; psrs's own commands travel as a HEARTBEAT naming no node, which
//! ps-lite ignores. What a ps-lite header lacks is filled in as ps-lite means it:
//! - the sender comes from the identity, the receiver is this node;
//! - no incarnation: the sender is a ps-lite process (incarnation 0);
//! - a KV message's key range is the server's rank (the receiver's for a request, the
//!   sender's for a response): a ps-lite server holds exactly its own range;
//! - a barrier release names no group (ps-lite's scheduler releases every barrier of
//!   the node): it becomes [`RELEASE_ALL`];
//! - SimpleApp's body (a header field in ps-lite) is psrs's first data frame.

use super::identity::sender_of;
use super::pb::{cmd, data_type, PbControl, PbMeta, PbNode};
use crate::message::{Command, Control, Message, Meta, WireError, MAX_DATA_FRAMES, MAX_META_BYTES, RELEASE_ALL};
use crate::node::{id_to_rank, Node, Role, EMPTY_ID};
use bytes::Bytes;
use prost::Message as _;

/// psrs's commands that ps-lite does not have, and their numbers in `psrs_cmd`.
const PSRS_COMMANDS: [(Command, i32); 6] = [
    (Command::NodeDead, 6),
    (Command::Sync, 7),
    (Command::PeerBeat, 8),
    (Command::Leave, 9),
    (Command::Campaign, 10),
    (Command::Vote, 11),
];

fn some_if<T: PartialEq + Default>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

fn role_number(r: Role) -> i32 {
    match r {
        Role::Server => 0,
        Role::Worker => 1,
        Role::Scheduler => 2,
    }
}

fn pb_node(n: &Node) -> PbNode {
    PbNode {
        role: role_number(n.role),
        id: Some(n.id),
        hostname: Some(n.hostname.clone()),
        port: Some(i32::from(n.port)),
        is_recovery: some_if(n.is_recovery),
        customer_id: None,
        incarnation: some_if(n.incarnation),
    }
}

/// The control part: present for a control message, and for a data message whose
/// control fields carry something (a scheduler's failover epoch): ps-lite reads a
/// control part of command EMPTY as none.
fn pb_control(c: &Control) -> Option<PbControl> {
    let (number, psrs_cmd) = match c.cmd {
        Command::Empty if *c == Control::default() => return None,
        Command::Empty => (cmd::EMPTY, None),
        Command::Terminate => (cmd::TERMINATE, None),
        Command::AddNode => (cmd::ADD_NODE, None),
        Command::Barrier => (cmd::BARRIER, None),
        Command::Ack => (cmd::ACK, None),
        Command::Heartbeat => (cmd::HEARTBEAT, None),
        other => (
            cmd::HEARTBEAT,
            PSRS_COMMANDS.iter().find(|(c, _)| *c == other).map(|(_, n)| *n),
        ),
    };
    let nodes: Vec<PbNode> = c.nodes.iter().map(pb_node).collect();
    let (node, psrs_nodes) = if psrs_cmd.is_some() {
        (Vec::new(), nodes)
    } else {
        (nodes, Vec::new())
    };
    Some(PbControl {
        cmd: number,
        node,
        barrier_group: if c.cmd == Command::Barrier {
            Some(c.barrier_group)
        } else {
            some_if(c.barrier_group)
        },
        msg_sig: some_if(c.msg_sig),
        psrs_cmd,
        reason: some_if(c.reason.clone()),
        term: some_if(c.term),
        candidate: some_if(c.candidate),
        origin: some_if(c.origin),
        seq: some_if(c.seq),
        silence_ms: some_if(c.silence_ms),
        lease_ms: some_if(c.lease_ms),
        granted: some_if(c.granted),
        psrs_nodes,
        view: some_if(c.view),
    })
}

/// ps-lite's data type of each of `data`'s frames: a KV message's keys, values and
/// lengths; raw bytes for anything else. (The element type of values is not known
/// here: it is `OTHER`; ps-lite reads the types only to print a message.)
fn frame_types(m: &Meta, data: &[Bytes]) -> Vec<i32> {
    let kv = !m.is_control() && !m.simple_app && m.status == 0 && data.len() <= 3;
    (0..data.len())
        .map(|i| match (kv, i) {
            (true, 0) => data_type::UINT64,
            (true, 1) => data_type::OTHER,
            (true, _) => data_type::INT32,
            (false, _) => data_type::CHAR,
        })
        .collect()
}

/// The frames of `msg` as ps-lite sends them: the `PBMeta` header, then the data
/// frames (not copied; SimpleApp's body goes into the header).
pub fn encode(msg: &Message) -> Vec<Bytes> {
    let m = &msg.meta;
    let body_in_header = m.simple_app && !m.is_control() && msg.data.len() == 1;
    let (body, data) = if body_in_header {
        (Some(msg.data[0].clone()), &msg.data[..0])
    } else {
        (None, &msg.data[..])
    };
    let size: usize = data.iter().map(Bytes::len).sum();
    let pb = PbMeta {
        head: some_if(m.head),
        body,
        control: pb_control(&m.control),
        request: some_if(m.request),
        push: some_if(m.push),
        simple_app: some_if(m.simple_app),
        app_id: Some(m.app_id),
        timestamp: Some(m.timestamp),
        data_type: frame_types(m, data),
        customer_id: some_if(m.customer_id),
        data_size: (!data.is_empty()).then(|| i32::try_from(size).unwrap_or(i32::MAX)),
        pull: some_if(m.pull),
        priority: None,
        incarnation: some_if(m.incarnation),
        recver_incarnation: some_if(m.recver_incarnation),
        version: some_if(m.version),
        status: some_if(m.status),
        key_sig: some_if(m.key_sig),
        range: some_if(m.range),
    };
    let mut frames = Vec::with_capacity(data.len() + 1);
    frames.push(Bytes::from(pb.encode_to_vec()));
    frames.extend(data.iter().cloned());
    frames
}

fn bad(why: impl Into<String>) -> WireError {
    WireError::BadMeta(why.into())
}

fn node_of(p: PbNode) -> Result<Node, WireError> {
    let role = match p.role {
        0 => Role::Server,
        1 => Role::Worker,
        2 => Role::Scheduler,
        r => return Err(bad(format!("node role {r} (ps-lite's roles are 0, 1 and 2)"))),
    };
    let port = p.port.unwrap_or(0);
    Ok(Node {
        role,
        id: p.id.unwrap_or(EMPTY_ID),
        hostname: p.hostname.unwrap_or_default(),
        port: u16::try_from(port).map_err(|_| bad(format!("node port {port}")))?,
        is_recovery: p.is_recovery.unwrap_or(false),
        incarnation: p.incarnation.unwrap_or(0),
        cert: 0, // no certificates on the ZMQ van
    })
}

fn control_of(c: PbControl, request: bool, from_psrs: bool) -> Result<Control, WireError> {
    let command = match (c.cmd, c.psrs_cmd) {
        (cmd::HEARTBEAT, Some(n)) => PSRS_COMMANDS
            .iter()
            .find(|(_, k)| *k == n)
            .map(|(c, _)| *c)
            .ok_or_else(|| bad(format!("unknown psrs control command {n}")))?,
        (cmd::EMPTY, _) => Command::Empty,
        (cmd::TERMINATE, _) => Command::Terminate,
        (cmd::ADD_NODE, _) => Command::AddNode,
        (cmd::BARRIER, _) => Command::Barrier,
        (cmd::ACK, _) => Command::Ack,
        (cmd::HEARTBEAT, _) => Command::Heartbeat,
        (n, _) => return Err(bad(format!("unknown control command {n}"))),
    };
    let pb_nodes = if c.psrs_cmd.is_some() { c.psrs_nodes } else { c.node };
    let nodes = pb_nodes.into_iter().map(node_of).collect::<Result<Vec<_>, _>>()?;
    let barrier_group = match command {
        // ps-lite's scheduler releases every barrier a node waits at, naming no group
        Command::Barrier if !request && !from_psrs => RELEASE_ALL,
        _ => c.barrier_group.unwrap_or(0),
    };
    Ok(Control {
        cmd: command,
        nodes,
        barrier_group,
        msg_sig: c.msg_sig.unwrap_or(0),
        reason: c.reason.unwrap_or_default(),
        term: c.term.unwrap_or(0),
        candidate: c.candidate.unwrap_or(0),
        origin: c.origin.unwrap_or(0),
        seq: c.seq.unwrap_or(0),
        silence_ms: c.silence_ms.unwrap_or(0),
        lease_ms: c.lease_ms.unwrap_or(0),
        granted: c.granted.unwrap_or(false),
        view: c.view.unwrap_or(0),
    })
}

fn rank_of(id: i32) -> i32 {
    id_to_rank(id).map_or(0, |r| i32::try_from(r).unwrap_or(0))
}

/// Decodes a message as a ROUTER socket of node `me` received it: the sender's
/// identity, the `PBMeta` header, then the data frames. Bytes that are not such a
/// message are a [`WireError`] with the reason; nothing here panics, and the header
/// is decoded only up to [`MAX_META_BYTES`].
pub fn decode(mut frames: Vec<Bytes>, me: i32) -> Result<Message, WireError> {
    if frames.len() < 2 {
        return Err(WireError::Empty);
    }
    let mut data = frames.split_off(2);
    let header = frames.pop().unwrap_or_default();
    let identity = frames.pop().unwrap_or_default();
    if data.len() > MAX_DATA_FRAMES {
        return Err(WireError::TooManyFrames(data.len()));
    }
    if header.len() as u64 > MAX_META_BYTES {
        return Err(bad(format!(
            "a header of {} bytes, above {MAX_META_BYTES}",
            header.len()
        )));
    }
    let pb = PbMeta::decode(header).map_err(|e| bad(format!("not a ps-lite header: {e}")))?;
    let from_psrs = pb.incarnation.is_some();
    let request = pb.request.unwrap_or(false);
    let control = match pb.control {
        Some(c) => control_of(c, request, from_psrs)?,
        None => Control::default(),
    };
    let sender = sender_of(&identity);
    let simple_app = pb.simple_app.unwrap_or(false);
    let is_data = control.cmd == Command::Empty;
    let app_id = match pb.app_id {
        Some(a) => a,
        None if is_data => return Err(bad("a data message without an app_id")),
        None => 0,
    };
    let range = match pb.range {
        Some(r) => r,
        None if from_psrs || !is_data || simple_app => 0,
        None if request => rank_of(me),
        None => rank_of(sender),
    };
    if let Some(body) = pb.body.filter(|b| simple_app && !b.is_empty()) {
        if data.len() == MAX_DATA_FRAMES {
            return Err(WireError::TooManyFrames(data.len() + 1));
        }
        data.insert(0, body);
    }
    Ok(Message {
        meta: Meta {
            head: pb.head.unwrap_or(0),
            app_id,
            customer_id: pb.customer_id.unwrap_or(0),
            timestamp: pb.timestamp.unwrap_or(0),
            sender,
            recver: me,
            request,
            push: pb.push.unwrap_or(false),
            pull: pb.pull.unwrap_or(false),
            simple_app,
            version: pb.version.unwrap_or(0),
            status: pb.status.unwrap_or(0),
            key_sig: pb.key_sig.unwrap_or(0),
            range,
            incarnation: pb.incarnation.unwrap_or(0),
            recver_incarnation: pb.recver_incarnation.unwrap_or(0),
            control,
        },
        data,
    })
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
