use super::*;
use crate::node::{Role, SCHEDULER};
use proptest::prelude::*;

/// ps-lite's view of a header: `PBMeta` with ps-lite's fields only (what its parser
/// keeps; psrs's fields are unknown to it and skipped).
#[derive(Clone, PartialEq, prost::Message)]
struct LiteMeta {
    #[prost(int32, optional, tag = "1")]
    head: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "2")]
    body: Option<Vec<u8>>,
    #[prost(message, optional, tag = "3")]
    control: Option<LiteControl>,
    #[prost(bool, optional, tag = "4")]
    request: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    push: Option<bool>,
    #[prost(bool, optional, tag = "6")]
    simple_app: Option<bool>,
    #[prost(int32, optional, tag = "7")]
    app_id: Option<i32>,
    #[prost(int32, optional, tag = "8")]
    timestamp: Option<i32>,
    #[prost(int32, repeated, packed = "true", tag = "9")]
    data_type: Vec<i32>,
    #[prost(int32, optional, tag = "10")]
    customer_id: Option<i32>,
    #[prost(int32, optional, tag = "11")]
    data_size: Option<i32>,
    #[prost(bool, optional, tag = "12")]
    pull: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LiteControl {
    #[prost(int32, required, tag = "1")]
    cmd: i32,
    #[prost(message, repeated, tag = "2")]
    node: Vec<LiteNode>,
    #[prost(int32, optional, tag = "3")]
    barrier_group: Option<i32>,
    #[prost(uint64, optional, tag = "4")]
    msg_sig: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct LiteNode {
    #[prost(int32, required, tag = "1")]
    role: i32,
    #[prost(int32, optional, tag = "2")]
    id: Option<i32>,
    #[prost(string, optional, tag = "3")]
    hostname: Option<String>,
    #[prost(int32, optional, tag = "4")]
    port: Option<i32>,
}

fn node(role: Role, id: i32, port: u16, incarnation: u64) -> Node {
    Node {
        role,
        id,
        hostname: "127.0.0.1".into(),
        port,
        is_recovery: false,
        incarnation,
        cert: 0,
    }
}

/// A KV push from worker 9 to server 10 with every psrs field set.
fn push() -> Message {
    Message {
        meta: Meta {
            head: 3,
            app_id: 0,
            customer_id: 0,
            timestamp: 77,
            sender: 9,
            recver: 10,
            request: true,
            push: true,
            version: 12,
            status: 0,
            key_sig: u64::MAX - 5,
            range: 1,
            incarnation: 0xfeed_beef_0000_0001,
            recver_incarnation: 5,
            ..Default::default()
        },
        data: vec![
            Bytes::from(vec![1u8; 16]),
            Bytes::from(vec![2u8; 8]),
            Bytes::from(vec![3u8; 8]),
        ],
    }
}

fn with_identity(id: &[u8], frames: Vec<Bytes>) -> Vec<Bytes> {
    let mut all = vec![Bytes::copy_from_slice(id)];
    all.extend(frames);
    all
}

/// `m` sent by node `m.sender` of incarnation `m.incarnation` to a psrs node, and
/// decoded there.
fn round_trip(m: &Message) -> Message {
    let id =
        super::super::identity::identity(m.meta.sender, m.meta.incarnation, Default::default()).unwrap_or_default();
    decode(with_identity(&id, encode(m)), m.meta.recver).unwrap()
}

#[test]
fn psrs_messages_round_trip_with_every_field() {
    let p = push();
    assert_eq!(round_trip(&p), p);
    let mut pull_resp = push();
    pull_resp.meta.request = false;
    pull_resp.meta.status = -1;
    pull_resp.meta.range = 0;
    assert_eq!(round_trip(&pull_resp), pull_resp);
    let mut simple = Message {
        meta: Meta {
            head: 1,
            app_id: 2,
            customer_id: 2,
            timestamp: 4,
            sender: SCHEDULER,
            recver: 8,
            request: true,
            simple_app: true,
            incarnation: 3,
            ..Default::default()
        },
        data: vec![Bytes::from_static(b"test")],
    };
    assert_eq!(round_trip(&simple), simple);
    simple.data.clear();
    assert_eq!(round_trip(&simple), simple);
    // a scheduler's data message carries its failover epoch in the control part
    simple.meta.control.term = 3;
    simple.meta.control.candidate = 1;
    simple.meta.control.lease_ms = 99;
    assert_eq!(round_trip(&simple), simple);
    let lite = LiteMeta::decode(encode(&simple)[0].clone()).unwrap();
    assert_eq!(
        lite.control.map(|c| c.cmd),
        Some(0),
        "ps-lite reads command EMPTY: data"
    );
}

#[test]
fn every_control_command_round_trips() {
    let all = [
        Command::Terminate,
        Command::AddNode,
        Command::Barrier,
        Command::Ack,
        Command::Heartbeat,
        Command::NodeDead,
        Command::Sync,
        Command::PeerBeat,
        Command::Leave,
        Command::Campaign,
        Command::Vote,
    ];
    for c in all {
        let mut m = Message::control(9, c);
        m.meta.sender = SCHEDULER;
        m.meta.incarnation = 7;
        m.meta.timestamp = 3;
        m.meta.request = c == Command::Barrier;
        m.meta.control = Control {
            cmd: c,
            nodes: vec![node(Role::Server, 8, 4000, 11), node(Role::Worker, EMPTY_ID, 4001, 13)],
            barrier_group: 7,
            msg_sig: 99,
            reason: "why".into(),
            term: 4,
            candidate: 1,
            origin: 2,
            seq: 40,
            silence_ms: 12,
            lease_ms: 1234,
            granted: true,
            view: 0x5eed,
        };
        m.data = vec![Bytes::from_static(b"state")];
        assert_eq!(round_trip(&m), m, "{c:?}");
    }
}

#[test]
fn ps_lite_reads_psrs_headers_as_its_own() {
    // a KV push: ps-lite's fields as its PackMeta writes them, keys/vals/lens typed
    let lite = LiteMeta::decode(encode(&push())[0].clone()).unwrap();
    assert_eq!(
        lite.app_id,
        Some(0),
        "an app id is always present (ps-lite: has_app_id)"
    );
    assert_eq!(
        (lite.head, lite.timestamp, lite.request, lite.push),
        (Some(3), Some(77), Some(true), Some(true))
    );
    assert_eq!(lite.data_type, vec![8, 11, 3]);
    assert_eq!(lite.data_size, Some(32));
    // a barrier release names its group and app 0 (ps-lite releases app 0's barriers)
    let mut rel = Message::control(9, Command::Barrier);
    rel.meta.control.barrier_group = 7;
    let lite = LiteMeta::decode(encode(&rel)[0].clone()).unwrap();
    let c = lite.control.unwrap();
    assert_eq!((c.cmd, c.barrier_group, lite.app_id), (3, Some(7), Some(0)));
    // psrs's own commands reach ps-lite as heartbeats naming no node: ignored there
    let mut dead = Message::control(9, Command::NodeDead);
    dead.meta.control.nodes = vec![node(Role::Server, 8, 4000, 11)];
    let c = LiteMeta::decode(encode(&dead)[0].clone()).unwrap().control.unwrap();
    assert_eq!((c.cmd, c.node.len()), (5, 0));
    // a heartbeat names the sender, as ps-lite's do (the scheduler answers it)
    let mut hb = Message::control(SCHEDULER, Command::Heartbeat);
    hb.meta.control.nodes = vec![node(Role::Worker, 9, 4001, 13)];
    let c = LiteMeta::decode(encode(&hb)[0].clone()).unwrap().control.unwrap();
    assert_eq!(
        (c.cmd, c.node[0].role, c.node[0].id, c.node[0].port),
        (5, 1, Some(9), Some(4001))
    );
    // SimpleApp's body is the header's body
    let mut s = Message::default();
    s.meta.simple_app = true;
    s.meta.request = true;
    s.data = vec![Bytes::from_static(b"test")];
    let frames = encode(&s);
    assert_eq!(frames.len(), 1);
    assert_eq!(
        LiteMeta::decode(frames[0].clone()).unwrap().body.as_deref(),
        Some(&b"test"[..])
    );
}

/// ps-lite's `PackMeta` for a KV push from its worker, in field order (tag, value).
fn ps_lite_push_header(timestamp: i32) -> Vec<u8> {
    let mut b = vec![0x08, 0x00]; // head 0
    b.extend([0x20, 0x01]); // request
    b.extend([0x28, 0x01]); // push
    b.extend([0x30, 0x00]); // simple_app false
    b.extend([0x38, 0x00]); // app_id 0
    b.extend([0x40, timestamp as u8]); // timestamp
    b.extend([0x4a, 0x02, 0x08, 0x09]); // data_type [UINT64, FLOAT], packed
    b.extend([0x50, 0x01]); // customer_id 1
    b.extend([0x58, 0x0c]); // data_size 12
    b.extend([0x60, 0x00]); // pull false
    b.extend([0x68, 0x00]); // priority 0
    b
}

#[test]
fn a_ps_lite_push_decodes_with_ps_lite_meanings() {
    let frames = vec![
        Bytes::from_static(b"ps11"),
        Bytes::from(ps_lite_push_header(5)),
        Bytes::from(vec![0u8; 8]),
        Bytes::from(vec![0u8; 4]),
    ];
    let m = decode(frames, 10).unwrap();
    assert_eq!((m.meta.sender, m.meta.recver), (11, 10));
    assert_eq!((m.meta.app_id, m.meta.customer_id, m.meta.timestamp), (0, 1, 5));
    assert!(m.meta.request && m.meta.push && !m.meta.pull);
    assert_eq!(m.meta.incarnation, 0, "a ps-lite process has no incarnation");
    assert_eq!(m.meta.range, 1, "a request to server 10 is about its range, rank 1");
    assert_eq!(m.data.len(), 2);
    // its answer, from server 10 to a psrs worker: the server's rank
    let mut resp = ps_lite_push_header(5);
    resp[3] = 0; // request false
    let m = decode(vec![Bytes::from_static(b"ps10"), Bytes::from(resp)], 9).unwrap();
    assert!(!m.meta.request);
    assert_eq!(m.meta.range, 1);
}

#[test]
fn ps_lite_control_messages_decode() {
    // a barrier release from ps-lite's scheduler: its group field is not set by ps-lite
    let rel = LiteMeta {
        app_id: Some(0),
        timestamp: Some(9),
        request: Some(false),
        customer_id: Some(0),
        control: Some(LiteControl {
            cmd: 3,
            barrier_group: Some(-12345),
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = decode(with_identity(b"ps1", vec![Bytes::from(rel.encode_to_vec())]), 9).unwrap();
    assert_eq!((m.meta.sender, m.meta.control.cmd), (1, Command::Barrier));
    assert_eq!(m.meta.control.barrier_group, RELEASE_ALL);
    // a registration from a node without an id yet (libzmq's identity)
    let add = LiteMeta {
        head: Some(i32::MAX),
        timestamp: Some(0),
        customer_id: Some(i32::MAX),
        control: Some(LiteControl {
            cmd: 2,
            node: vec![LiteNode {
                role: 1,
                id: Some(i32::MAX),
                hostname: Some("10.0.0.3".into()),
                port: Some(45000),
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = decode(
        with_identity(&[0, 0x80, 0, 0, 0x29], vec![Bytes::from(add.encode_to_vec())]),
        SCHEDULER,
    )
    .unwrap();
    assert_eq!(m.meta.sender, EMPTY_ID);
    assert_eq!(m.meta.control.cmd, Command::AddNode);
    assert_eq!(
        m.meta.control.nodes,
        vec![Node {
            hostname: "10.0.0.3".into(),
            ..node(Role::Worker, EMPTY_ID, 45000, 0)
        }]
    );
}

#[test]
fn malformed_headers_are_clear_errors() {
    let err = |frames: Vec<Bytes>| decode(frames, 8).unwrap_err().to_string();
    let id = Bytes::from_static(b"ps9");
    assert_eq!(decode(vec![id.clone()], 8).unwrap_err(), WireError::Empty);
    let e = err(vec![id.clone(), Bytes::from_static(b"garbage")]);
    assert!(e.contains("not a ps-lite header"), "{e}");
    let e = err(vec![id.clone(), Bytes::new()]);
    assert!(e.contains("without an app_id"), "{e}");
    let ctl = |c: LiteControl| {
        let m = LiteMeta {
            control: Some(c),
            ..Default::default()
        };
        vec![id.clone(), Bytes::from(m.encode_to_vec())]
    };
    let e = err(ctl(LiteControl {
        cmd: 6,
        ..Default::default()
    }));
    assert!(e.contains("unknown control command 6"), "{e}");
    let bad_node = |role, port| LiteControl {
        cmd: 2,
        node: vec![LiteNode {
            role,
            port: Some(port),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(err(ctl(bad_node(7, 1))).contains("node role 7"));
    assert!(err(ctl(bad_node(0, 70000))).contains("node port 70000"));
    assert!(err(ctl(bad_node(0, -1))).contains("node port -1"));
    let mut psrs_cmd = PbControl {
        cmd: cmd::HEARTBEAT,
        psrs_cmd: Some(99),
        ..Default::default()
    };
    let pb = |c: &PbControl| {
        let m = PbMeta {
            control: Some(c.clone()),
            ..Default::default()
        };
        vec![id.clone(), Bytes::from(m.encode_to_vec())]
    };
    assert!(err(pb(&psrs_cmd)).contains("unknown psrs control command 99"));
    psrs_cmd.psrs_cmd = Some(6);
    assert_eq!(decode(pb(&psrs_cmd), 8).unwrap().meta.control.cmd, Command::NodeDead);
    let mut many = with_identity(b"ps9", encode(&push()));
    many.extend(vec![Bytes::new(); MAX_DATA_FRAMES]);
    assert!(matches!(decode(many, 8), Err(WireError::TooManyFrames(_))));
    let huge = vec![0u8; MAX_META_BYTES as usize + 1];
    assert!(err(vec![id, Bytes::from(huge)]).contains("above"));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(header in proptest::collection::vec(any::<u8>(), 0..512), n in 0usize..4) {
        let mut frames = vec![Bytes::from_static(b"ps9"), Bytes::from(header)];
        frames.extend((0..n).map(|_| Bytes::from_static(b"x")));
        let _ = decode(frames, 8);
    }

    #[test]
    fn mutated_headers_never_panic(pos in 0usize..400, val in any::<u8>(), cut in 0usize..400) {
        let mut dead = Message::control(9, Command::NodeDead);
        dead.meta.control.nodes = vec![node(Role::Server, 8, 4000, 11)];
        dead.meta.control.reason = "left".into();
        for m in [push(), dead] {
            let mut h = encode(&m)[0].to_vec();
            let n = h.len();
            h[pos % n] = val;
            h.truncate(cut.min(n));
            let _ = decode(vec![Bytes::from_static(b"ps1:ab"), Bytes::from(h)], 8);
        }
    }
}
