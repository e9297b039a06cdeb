//! Tests of [`Van::send`]'s failures: a broken link loses a message the resender
//! tracks (it is sent again) instead of failing the send.

use super::*;
use crate::message::Meta;
use bytes::Bytes;
use std::collections::HashMap;

/// A transport whose every send fails with `kind`.
struct Failing(io::ErrorKind);

impl Transport for Failing {
    fn bind(&self, _host: &str, _port: u16) -> io::Result<u16> {
        Ok(0)
    }
    fn start(&self, _deliver: crate::van::Deliver) -> io::Result<()> {
        Ok(())
    }
    fn connect(&self, _peer: i32, _host: &str, _port: u16) -> io::Result<()> {
        Ok(())
    }
    fn disconnect(&self, _peer: i32) {}
    fn is_connected(&self, _peer: i32) -> bool {
        true
    }
    fn send(&self, _peer: i32, _frames: Vec<Bytes>) -> io::Result<usize> {
        Err(io::Error::new(self.0, "failing transport"))
    }
    fn close(&self) {}
}

fn van(resend: bool, kind: io::ErrorKind) -> Arc<Van> {
    let mut vars: HashMap<String, String> = [
        ("DMLC_ROLE", "worker"),
        ("DMLC_PS_ROOT_URI", "127.0.0.1"),
        ("DMLC_PS_ROOT_PORT", "9000"),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if resend {
        vars.insert("PS_RESEND".into(), "1".into());
    }
    Van::new(Config::from_vars(&vars).unwrap(), Arc::new(Failing(kind)))
}

fn request() -> Message {
    Message {
        meta: Meta {
            recver: 8,
            request: true,
            timestamp: 3,
            ..Default::default()
        },
        data: vec![Bytes::from_static(b"body")],
    }
}

#[test]
fn a_broken_link_loses_a_tracked_message_and_fails_an_untracked_one() {
    for kind in [io::ErrorKind::BrokenPipe, io::ErrorKind::ConnectionReset] {
        assert_eq!(
            van(true, kind).send(request()).unwrap(),
            0,
            "the resender has it: {kind:?} is a loss, not a failure"
        );
        assert_eq!(van(false, kind).send(request()).unwrap_err().kind(), kind);
    }
    let unknown = van(true, io::ErrorKind::NotConnected).send(request());
    assert_eq!(
        unknown.unwrap_err().kind(),
        io::ErrorKind::NotConnected,
        "no link to that node at all: the caller is told"
    );
}
