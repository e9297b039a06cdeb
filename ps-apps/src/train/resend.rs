//! Requests to the servers that survive a server's replacement: each request is sent
//! again when a server was replaced since it was sent (the dead one may have
//! acknowledged it and never answered), and a pull also after [`ATTEMPT`] without an
//! answer; a push is not resent on a mere timeout (a slow server would apply it
//! twice). Several requests can be in flight at once (a push and the pull behind it),
//! each resent on its own. Used by `psrs train`'s workers and `psrs.torch`'s.

use bytemuck::Pod;
use ps_core::kv::{KVWorker, KvError, KvRequest, ServerReply};
use ps_core::node::{id_role, id_to_rank};
use ps_core::{Postoffice, Role};
use std::time::{Duration, Instant};

/// How long a pull waits for an answer before it is sent again.
pub const ATTEMPT: Duration = Duration::from_secs(3);

/// How often a waiting request checks whether a server was replaced.
const POLL: Duration = Duration::from_millis(50);

/// Per server rank (of `n`): the incarnation of the process holding its id (0 if
/// unknown). A change means the server was replaced.
pub fn server_incarnations(po: &Postoffice, n: usize) -> Vec<u64> {
    let mut inc = vec![0; n];
    for node in po.nodes() {
        if id_role(node.id) != Some(Role::Server) {
            continue;
        }
        if let Some(slot) = id_to_rank(node.id).and_then(|r| inc.get_mut(r)) {
            *slot = node.incarnation;
        }
    }
    inc
}

/// One request to send: whether it may be resent on a timeout (a pull), and how to
/// build it (again).
pub struct Outgoing<'a, V: Pod> {
    /// A pull: resent after [`ATTEMPT`] without an answer.
    pub idempotent: bool,
    /// Builds the request.
    pub make: &'a dyn Fn() -> KvRequest<V>,
}

struct InFlight {
    ts: i32,
    sent: Instant,
    servers: Vec<u64>,
}

/// Sends every request, in order, and waits until each is answered, for at most
/// `timeout` in all (then a [`KvError::Transport`]); the answers in the order of
/// `reqs`. The first error (a server refusing a request) abandons the others, and so
/// does `interrupted()` returning true (checked every 50 ms while waiting).
pub fn exchange_all<V: Pod + Send + Sync>(
    kv: &KVWorker<V>,
    timeout: Duration,
    reqs: &[Outgoing<'_, V>],
    interrupted: &dyn Fn() -> bool,
) -> Result<Vec<Vec<ServerReply<V>>>, KvError> {
    let start = Instant::now();
    let n = kv.ranges().len();
    let send = |o: &Outgoing<'_, V>| -> Result<InFlight, KvError> {
        let servers = server_incarnations(kv.postoffice(), n);
        let ts = kv.request((o.make)(), None)?;
        Ok(InFlight {
            ts,
            sent: Instant::now(),
            servers,
        })
    };
    let mut flying = Vec::with_capacity(reqs.len());
    for o in reqs {
        flying.push(Some(send(o)?));
    }
    let mut out: Vec<Option<Vec<ServerReply<V>>>> = reqs.iter().map(|_| None).collect();
    let abandon_all = |flying: &[Option<InFlight>]| {
        for f in flying.iter().flatten() {
            kv.abandon(f.ts);
        }
    };
    while let Some(i) = flying.iter().position(Option::is_some) {
        let f = flying[i].as_ref().expect("in flight");
        // the first request still flying waits a while, the others are only checked
        if let Some(r) = kv.try_wait(f.ts, POLL) {
            flying[i] = None;
            match r {
                Ok(replies) => out[i] = Some(replies),
                Err(e) => {
                    abandon_all(&flying);
                    return Err(e);
                }
            }
            continue;
        }
        if interrupted() {
            abandon_all(&flying);
            return Err(KvError::Transport("interrupted".into()));
        }
        if start.elapsed() >= timeout {
            abandon_all(&flying);
            return Err(KvError::Transport(format!(
                "the servers did not answer within {timeout:?}"
            )));
        }
        let now = server_incarnations(kv.postoffice(), n);
        for (j, slot) in flying.iter_mut().enumerate() {
            let Some(f) = slot else { continue };
            let replaced = now != f.servers;
            if replaced || (reqs[j].idempotent && f.sent.elapsed() >= ATTEMPT) {
                let why = if replaced { "a server was replaced" } else { "no answer" };
                log::warn!("request {}: {why} after {:?}; sending it again", f.ts, f.sent.elapsed());
                kv.abandon(f.ts);
                *slot = None;
                match send(&reqs[j]) {
                    Ok(again) => *slot = Some(again),
                    Err(e) => {
                        abandon_all(&flying);
                        return Err(e);
                    }
                }
            }
        }
    }
    Ok(out.into_iter().map(|r| r.unwrap_or_default()).collect())
}

/// A worker's idle notices (it holds no task: sync versions must not wait for its
/// gradient until it pushes again): sent to every server without waiting for the
/// answers (a dead server must not hold the worker), once per idle spell, and again
/// to a server replaced since (the replacement does not know).
#[derive(Debug, Default)]
pub struct IdleNotice {
    /// The server incarnations the last notice went to (None: none since the last push).
    sent: Option<Vec<u64>>,
}

impl IdleNotice {
    /// Sends the notice (command `cmd`) unless this idle spell's already went out; the
    /// key-value layer's error if it cannot be sent.
    pub fn send<V: Pod + Send + Sync>(&mut self, kv: &KVWorker<V>, cmd: i32) -> Result<(), KvError> {
        let n = kv.ranges().len();
        let servers = server_incarnations(kv.postoffice(), n);
        if self.sent.as_ref() == Some(&servers) {
            return Ok(());
        }
        let mut req = KvRequest::new(ps_core::kv::KVPairs::<V>::default(), cmd, false, false);
        req.only = vec![true; n];
        let ts = kv.request(req, None)?;
        kv.abandon(ts);
        self.sent = Some(servers);
        Ok(())
    }

    /// The worker pushed: its idle spell is over.
    pub fn end(&mut self) {
        self.sent = None;
    }
}
