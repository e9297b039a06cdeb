//! `psrs simple-app`: every worker sends requests to every node through SimpleApp;
//! each node answers with a body derived from the request and its own id, and the
//! worker checks every reply. With `--scheduler-sends`, ps-lite's test_simple_app
//! (the psrs side of a cluster whose other nodes run it).

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
    /// ps-lite's test_simple_app instead: the scheduler sends `--requests` requests
    /// (head 1, body "test") to every node, itself included, and waits for every
    /// answer; every node answers each with an empty body and checks, once finalized,
    /// that it answered exactly `--requests` such requests.
    #[arg(long)]
    scheduler_sends: bool,
}

/// The request ps-lite's test_simple_app sends.
const PSLITE_HEAD: i32 = 1;
const PSLITE_BODY: &[u8] = b"test";

/// ps-lite's test_simple_app (see [`Args::scheduler_sends`]).
fn scheduler_sends(a: Args) -> Result<(), super::error::CliError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let po = super::start_node()?;
    let me = po.my_id();
    let (good, bad) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (g, b) = (Arc::clone(&good), Arc::clone(&bad));
    let app = SimpleApp::new(
        &po,
        0,
        Some(Box::new(move |req: &SimpleData, resp| {
            let counter = if req.head == PSLITE_HEAD && req.body == PSLITE_BODY {
                &g
            } else {
                &b
            };
            counter.fetch_add(1, Ordering::SeqCst);
            if let Err(e) = resp.response(req, Bytes::new()) {
                log::warn!("reply to {} failed: {e}", req.sender);
            }
        })),
        None,
    )?;
    if po.role() == Role::Scheduler {
        let ts = (0..a.requests)
            .map(|_| app.request(PSLITE_HEAD, Bytes::from_static(PSLITE_BODY), ALL_GROUP))
            .collect::<Result<Vec<i32>, _>>()
            .map_err(|e| format!("request not sent: {e}"))?;
        for t in ts {
            app.wait(t);
        }
    }
    po.finalize(true);
    drop(app);
    let (good, bad) = (good.load(Ordering::SeqCst), bad.load(Ordering::SeqCst));
    if good != a.requests || bad != 0 {
        return Err(format!(
            "node {me} answered {good} requests (head 1, body \"test\") and {bad} others; expected {}",
            a.requests
        )
        .into());
    }
    println!("simple-app ok: node {me} answered {good} requests");
    Ok(())
}

fn expected_reply(head: i32, body: &[u8], node: i32) -> Vec<u8> {
    let mut r: Vec<u8> = body.iter().rev().copied().collect();
    r.extend_from_slice(format!("|{head}|{node}").as_bytes());
    r
}

/// Runs the exchange and finalizes; fails on any missing or wrong reply.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    if a.scheduler_sends {
        return scheduler_sends(a);
    }
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
