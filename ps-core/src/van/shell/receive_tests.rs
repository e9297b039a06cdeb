//! Tests of the receive path's hold: a data message from a process this node cannot
//! answer yet waits for the table that names it, with or without the resender.

use super::*;
use crate::message::Meta;
use crate::van::test_transport::{worker_config, Void};
use bytes::Bytes;

/// Collects the data messages the van hands up.
#[derive(Default)]
struct Upper {
    data: Mutex<Vec<Message>>,
}

impl VanHandler for Upper {
    fn on_data(&self, msg: Message) {
        self.data.lock().push(msg);
    }
    fn on_barrier_released(&self, _: i32) {}
    fn on_nodes_dead(&self, _: &[i32]) {}
    fn on_nodes_left(&self, _: &[i32]) {}
    fn on_nodes_changed(&self, _: &[Node], _: &[i32]) {}
    fn on_evicted(&self, _: &str) {}
}

fn server(incarnation: u64) -> Node {
    Node {
        role: Role::Server,
        id: 8,
        hostname: "127.0.0.1".into(),
        port: 9008,
        is_recovery: false,
        incarnation,
        cert: 0,
    }
}

/// The frames of a request from server 8's process `incarnation`.
fn request_from(incarnation: u64) -> Vec<Bytes> {
    let msg = Message {
        meta: Meta {
            sender: 8,
            recver: 9,
            request: true,
            timestamp: 1,
            incarnation,
            ..Default::default()
        },
        data: vec![Bytes::from_static(b"fetch")],
    };
    vec![msg.encode_meta(), msg.data[0].clone()]
}

#[test]
fn a_request_from_a_process_newer_than_the_table_waits_for_its_entry() {
    for resend in [false, true] {
        let extra: &[(&str, &str)] = if resend { &[("PS_RESEND", "1")] } else { &[] };
        let van = Van::new(worker_config(extra), Arc::new(Void { fail: None }));
        let upper = Arc::new(Upper::default());
        let weak: Weak<dyn VanHandler> = Arc::downgrade(&upper) as Weak<dyn VanHandler>;
        van.set_handler(weak);
        van.merge_table(vec![server(100)]);

        van.on_frames(request_from(100), None);
        assert_eq!(upper.data.lock().len(), 1, "the known process is answered at once");

        // a replacement took id 8; its request overtook the table naming it
        van.on_frames(request_from(200), None);
        assert_eq!(
            upper.data.lock().len(),
            1,
            "resend {resend}: an answer now would go to the earlier process's address"
        );
        van.merge_table(vec![server(200)]);
        let data = upper.data.lock();
        assert_eq!(data.len(), 2, "resend {resend}: handed up once the table names it");
        assert_eq!(data[1].meta.incarnation, 200);
    }
}
