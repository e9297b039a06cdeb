//! `psrs simple-app`: every worker sends requests to every node through SimpleApp;
//! each node answers with a body derived from the request and its own id, and the
//! worker checks every reply.

use bytes::Bytes;
use clap::Args as ClapArgs;
use ps_core::node::{ALL_GROUP, WORKER_GROUP};
use ps_core::simple_app::{SimpleApp, SimpleData};
use ps_core::Role;
use std::time::Duration;

/// Arguments of `psrs simple-app`.
#[derive(ClapArgs)]
pub struct Args {
    /// Requests each worker sends (each goes to every node).
    #[arg(long, default_value_t = 100)]
    requests: usize,
    /// Milliseconds to pause between requests.
    #[arg(long, default_value_t = 0)]
    interval_ms: u64,
}

fn expected_reply(head: i32, body: &[u8], node: i32) -> Vec<u8> {
    let mut r: Vec<u8> = body.iter().rev().copied().collect();
    r.extend_from_slice(format!("|{head}|{node}").as_bytes());
    r
}

/// Runs the exchange and finalizes; fails on any missing or wrong reply.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    let po = super::start_node()?;
    let me = po.my_id();
    let app = SimpleApp::new(
        &po,
        0,
        Some(Box::new(move |req: &SimpleData, resp| {
            let body = expected_reply(req.head, &req.body, me);
            if let Err(e) = resp.response(req, body) {
                log::warn!("reply to {} failed: {e}", req.sender);
            }
        })),
        None,
    )?;
    let mut checked = 0;
    if po.role() == Role::Worker {
        for i in 0..a.requests {
            let body = Bytes::from(format!("request {i} from {me}"));
            let replies = app
                .call(i as i32, body.clone(), ALL_GROUP, Duration::from_secs(30))
                .map_err(|e| format!("request {i}: {e}"))?;
            let mut nodes = po.node_ids(ALL_GROUP);
            nodes.sort();
            if replies.len() != nodes.len() {
                return Err(format!("request {i}: {} replies from {} nodes", replies.len(), nodes.len()).into());
            }
            for (r, node) in replies.iter().zip(&nodes) {
                if r.sender != *node || r.body != expected_reply(i as i32, &body, *node) {
                    return Err(format!("request {i}: wrong reply from {}: {:?}", r.sender, r.body).into());
                }
                checked += 1;
            }
            if a.interval_ms > 0 {
                std::thread::sleep(Duration::from_millis(a.interval_ms));
            }
        }
        println!("simple-app ok: worker {me} checked {checked} replies");
    }
    po.barrier(WORKER_GROUP + ps_core::node::SERVER_GROUP + ps_core::node::SCHEDULER);
    drop(app);
    po.finalize(true);
    Ok(())
}
