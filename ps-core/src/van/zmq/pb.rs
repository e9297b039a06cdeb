//! ps-lite's message header on the wire: `PBMeta`, `PBControl` and `PBNode` of ps-lite's
//! `src/meta.proto` (proto2), as prost messages with the same field numbers and types.
//! psrs's own fields are numbered from 1001 up: ps-lite's parser skips fields it does
//! not know, so a ps-lite process reads a psrs header as if they were not there.

use bytes::Bytes;

/// First field number of psrs's own fields in each message.
pub const PSRS_FIELDS_FROM: u32 = 1001;

/// ps-lite's `Control::Command` numbers (`include/ps/internal/message.h`).
pub mod cmd {
    /// Not a control message.
    pub const EMPTY: i32 = 0;
    /// A van asks its own receiving thread to stop.
    pub const TERMINATE: i32 = 1;
    /// Registration, and the node table.
    pub const ADD_NODE: i32 = 2;
    /// A barrier request or release.
    pub const BARRIER: i32 = 3;
    /// Acknowledges a message by signature.
    pub const ACK: i32 = 4;
    /// A heartbeat (ps-lite updates the heartbeat of each node it names, and does
    /// nothing for one that names none).
    pub const HEARTBEAT: i32 = 5;
}

/// ps-lite's `DataType` numbers, one per data frame in `PBMeta.data_type`.
pub mod data_type {
    /// `char` (raw bytes).
    pub const CHAR: i32 = 0;
    /// `int8_t`.
    pub const INT8: i32 = 1;
    /// `int16_t`.
    pub const INT16: i32 = 2;
    /// `int32_t` (the lens frame).
    pub const INT32: i32 = 3;
    /// `int64_t`.
    pub const INT64: i32 = 4;
    /// `uint8_t`.
    pub const UINT8: i32 = 5;
    /// `uint16_t`.
    pub const UINT16: i32 = 6;
    /// `uint32_t`.
    pub const UINT32: i32 = 7;
    /// `uint64_t` (the keys frame).
    pub const UINT64: i32 = 8;
    /// `float`.
    pub const FLOAT: i32 = 9;
    /// `double`.
    pub const DOUBLE: i32 = 10;
    /// Any other type.
    pub const OTHER: i32 = 11;
}

/// ps-lite's `PBNode`: one node of a registration or node table. Role numbers are
/// ps-lite's `Node::Role`: server 0, worker 1, scheduler 2.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbNode {
    /// The node role.
    #[prost(int32, required, tag = "1")]
    pub role: i32,
    /// Node id (ps-lite's empty value `INT_MAX` before the scheduler assigns one).
    #[prost(int32, optional, tag = "2")]
    pub id: Option<i32>,
    /// Host name or IP address others connect to.
    #[prost(string, optional, tag = "3")]
    pub hostname: Option<String>,
    /// Port of the node's receiving socket.
    #[prost(int32, optional, tag = "4")]
    pub port: Option<i32>,
    /// The node took over a dead node's id.
    #[prost(bool, optional, tag = "5")]
    pub is_recovery: Option<bool>,
    /// The customer that registered (ps-lite registers once per customer).
    #[prost(int32, optional, tag = "10")]
    pub customer_id: Option<i32>,
    /// psrs: the node's process incarnation (absent for a ps-lite process).
    #[prost(fixed64, optional, tag = "1001")]
    pub incarnation: Option<u64>,
}

/// ps-lite's `PBControl`: the control part of a message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbControl {
    /// ps-lite's command number ([`cmd`]).
    #[prost(int32, required, tag = "1")]
    pub cmd: i32,
    /// Nodes of an ADD_NODE or HEARTBEAT.
    #[prost(message, repeated, tag = "2")]
    pub node: Vec<PbNode>,
    /// The group of a BARRIER.
    #[prost(int32, optional, tag = "3")]
    pub barrier_group: Option<i32>,
    /// The signature an ACK acknowledges.
    #[prost(uint64, optional, tag = "4")]
    pub msg_sig: Option<u64>,
    /// psrs: a command ps-lite does not have, carried as a HEARTBEAT naming no node.
    #[prost(int32, optional, tag = "1001")]
    pub psrs_cmd: Option<i32>,
    /// psrs: why an ADD_NODE was refused.
    #[prost(string, optional, tag = "1002")]
    pub reason: Option<String>,
    /// psrs: failover term.
    #[prost(uint64, optional, tag = "1003")]
    pub term: Option<u64>,
    /// psrs: failover candidate of the term.
    #[prost(uint32, optional, tag = "1004")]
    pub candidate: Option<u32>,
    /// psrs: the sending scheduler's own candidate index.
    #[prost(uint32, optional, tag = "1005")]
    pub origin: Option<u32>,
    /// psrs: scheduler state sequence.
    #[prost(uint64, optional, tag = "1006")]
    pub seq: Option<u64>,
    /// psrs: milliseconds since the node last heard its active scheduler.
    #[prost(uint64, optional, tag = "1007")]
    pub silence_ms: Option<u64>,
    /// psrs: the scheduler clock a lease counts from.
    #[prost(uint64, optional, tag = "1008")]
    pub lease_ms: Option<u64>,
    /// psrs: a vote is granted.
    #[prost(bool, optional, tag = "1009")]
    pub granted: Option<bool>,
    /// psrs: the nodes of a psrs command (kept out of `node`, which ps-lite reads).
    #[prost(message, repeated, tag = "1010")]
    pub psrs_nodes: Vec<PbNode>,
    /// psrs: the fingerprint of a node's view of the voters' processes.
    #[prost(uint64, optional, tag = "1011")]
    pub view: Option<u64>,
}

/// ps-lite's `PBMeta`: the header frame of every message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PbMeta {
    /// The application's head (KV: the command).
    #[prost(int32, optional, tag = "1")]
    pub head: Option<i32>,
    /// SimpleApp's body.
    #[prost(bytes = "bytes", optional, tag = "2")]
    pub body: Option<Bytes>,
    /// The control part (absent for data).
    #[prost(message, optional, tag = "3")]
    pub control: Option<PbControl>,
    /// A request (else the response to the request of the same timestamp).
    #[prost(bool, optional, tag = "4")]
    pub request: Option<bool>,
    /// KV: a push.
    #[prost(bool, optional, tag = "5")]
    pub push: Option<bool>,
    /// SimpleApp's message.
    #[prost(bool, optional, tag = "6")]
    pub simple_app: Option<bool>,
    /// The application.
    #[prost(int32, optional, tag = "7")]
    pub app_id: Option<i32>,
    /// The request's timestamp.
    #[prost(int32, optional, tag = "8")]
    pub timestamp: Option<i32>,
    /// ps-lite's data type of each data frame ([`data_type`]).
    #[prost(int32, repeated, packed = "true", tag = "9")]
    pub data_type: Vec<i32>,
    /// The customer.
    #[prost(int32, optional, tag = "10")]
    pub customer_id: Option<i32>,
    /// Bytes of all data frames.
    #[prost(int32, optional, tag = "11")]
    pub data_size: Option<i32>,
    /// KV: a pull.
    #[prost(bool, optional, tag = "12")]
    pub pull: Option<bool>,
    /// ps-lite's message priority (psrs sends none and reads none).
    #[prost(int32, optional, tag = "13")]
    pub priority: Option<i32>,
    /// psrs: the sending process's incarnation (absent: a ps-lite process sent it).
    #[prost(fixed64, optional, tag = "1001")]
    pub incarnation: Option<u64>,
    /// psrs: the incarnation the message is for.
    #[prost(fixed64, optional, tag = "1002")]
    pub recver_incarnation: Option<u64>,
    /// psrs: the application's version.
    #[prost(uint64, optional, tag = "1003")]
    pub version: Option<u64>,
    /// psrs: a response's status.
    #[prost(sint32, optional, tag = "1004")]
    pub status: Option<i32>,
    /// psrs: KV key-list signature.
    #[prost(fixed64, optional, tag = "1005")]
    pub key_sig: Option<u64>,
    /// psrs: KV key range (server rank) of the request.
    #[prost(int32, optional, tag = "1006")]
    pub range: Option<i32>,
}
