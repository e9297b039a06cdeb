//! A simulated scheduler candidate's application: the training coordinator. The
//! scheduler itself (node table, barriers, liveness, the election, the state streamed
//! to the standbys) is psrs's own van; on top, while active, the master answers the
//! workers as the coordinator does ([`ps_apps::train::coordinator::answer`]), saving
//! every change through the replicated store (the standbys hold it before a reply
//! leaves), resuming from the replicated state each time this candidate takes over.

use crate::process::{Changes, NodeLink};
use crate::transport::SimTransport;
use ps_apps::master::{
    decode_queues, encode_queues, Chunk, Master, MasterConfig, MasterRequest, MemStore, ReplicatedStore, Store,
    StoreError,
};
use ps_apps::recordio::ChunkIndex;
use ps_apps::train::coordinator::{answer, decode, encode, MASTER_APP};
use ps_core::message::{Message, Meta};
use ps_core::node::{id_role, Role, ALL_GROUP};
use ps_core::van::Transport;
use ps_core::Postoffice;
use std::sync::Arc;

/// Planted bugs of the scheduler side (for the simulator's own tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerBugs {
    /// A master resuming from its store forgets one pending task.
    pub forget_pending: bool,
    /// The coordinator answers the workers straight through the transport, around
    /// the van's gate (no lease, no state on the standbys first).
    pub no_lease: bool,
}

/// The replicated store, with the planted bug: one pending task forgotten on load.
struct Forgetful(Box<dyn Store>);

impl Store for Forgetful {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.0.load()?.map(forget_one_pending))
    }
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError> {
        self.0.save(state)
    }
}

/// A scheduler candidate's application.
pub struct Scheduler {
    /// Its postoffice.
    pub node: NodeLink,
    /// This candidate's slot.
    pub slot: usize,
    /// The master, once this candidate first acted with a node table.
    pub master: Option<Master>,
    mcfg: MasterConfig,
    tasks: usize,
    joined: bool,
    started: bool,
    /// Released from the final barrier.
    pub finished: bool,
    /// Declarations of deaths since the world last looked (this scheduler's own
    /// liveness decided them).
    pub declared: usize,
    next_master_tick: u64,
    bugs: SchedulerBugs,
    /// Its end of the network (the planted bug sends around the van).
    net: Arc<SimTransport>,
}

impl Scheduler {
    /// Candidate `slot`'s application over `node`, for a job of `tasks` tasks per pass
    /// over `passes` passes.
    pub fn new(
        node: NodeLink,
        net: Arc<SimTransport>,
        slot: usize,
        (tasks, passes): (usize, u64),
        bugs: SchedulerBugs,
    ) -> Scheduler {
        Scheduler {
            node,
            slot,
            master: None,
            mcfg: MasterConfig {
                chunks_per_task: 1,
                num_epochs: passes,
                timeout_multiplier: 4.0,
                timeout_floor_ms: 2_000,
                max_retries: 3,
            },
            tasks,
            joined: false,
            started: false,
            finished: false,
            declared: 0,
            next_master_tick: 0,
            bugs,
            net,
        }
    }

    fn po(&self) -> &Arc<Postoffice> {
        &self.node.po
    }

    /// True while this candidate is the active scheduler.
    pub fn is_active(&self) -> bool {
        self.po().van().scheduler_epoch().1
    }

    /// What changed in its postoffice (after every step it took part in): the node
    /// table (first: the start barrier, or, taking over, the master at once) and the
    /// barriers (the start's: the master starts; the final one: done).
    pub fn on_changes(&mut self, c: Changes, now: u64) {
        if c.table && !self.joined {
            self.joined = true;
            if self.node.me().is_recovery {
                // a candidate that took over skips the start barrier
                self.started = true;
                self.start_master(now);
            } else {
                self.node.barrier(ALL_GROUP);
            }
        }
        if c.released.is_some() {
            if self.started {
                self.finished = true;
            } else {
                self.started = true;
                self.start_master(now);
            }
        }
    }

    /// This candidate took over again: the master resumes from `state`, the state
    /// the active one before replicated.
    pub fn on_took_over(&mut self, state: &[u8], now: u64) {
        if state.is_empty() {
            return;
        }
        if let Some(m) = self.master.as_mut() {
            if let Err(e) = m.resume_from(state, now) {
                log::error!("master: {e}");
            }
        }
    }

    /// Nodes declared dead (workers' tasks are requeued).
    pub fn on_dead(&mut self, ids: &[i32]) {
        self.declared += 1;
        if let Some(m) = self.master.as_mut() {
            for &id in ids.iter().filter(|&&id| id_role(id) == Some(Role::Worker)) {
                let _ = m.worker_dead(id);
            }
        }
    }

    /// Becoming the serving scheduler: the master resumes from the state replicated
    /// to this candidate (or starts the job), and waits in the final barrier.
    fn start_master(&mut self, now: u64) {
        if self.master.is_none() {
            let store = ReplicatedStore::new(Box::new(MemStore::default()), Arc::clone(self.po().van()));
            let store: Box<dyn Store> = match self.bugs.forget_pending {
                true => Box::new(Forgetful(Box::new(store))),
                false => Box::new(store),
            };
            match Master::new(self.mcfg.clone(), store, now) {
                Ok(mut m) => {
                    if m.queues().dataset.is_none() {
                        let chunks = (0..self.tasks)
                            .map(|i| Chunk {
                                path: "sim".into(),
                                index: ChunkIndex {
                                    idx: i,
                                    offset: i as u64 * 100,
                                    len: 100,
                                    records: 10,
                                },
                            })
                            .collect();
                        let _ = m.report_chunks(vec!["sim".into()], chunks);
                    }
                    self.master = Some(m);
                }
                Err(e) => log::error!("master: {e}"),
            }
        }
        self.node.barrier(ALL_GROUP);
    }

    /// A request to the master (its app's customer).
    pub fn on_data(&mut self, msg: Message, now: u64) {
        if msg.meta.app_id != MASTER_APP || !msg.meta.request {
            return;
        }
        let Some(Ok(req)) = msg.data.first().map(|b| decode::<MasterRequest>(b)) else {
            return;
        };
        let van = Arc::clone(self.po().van());
        let Some(master) = self.master.as_mut() else { return };
        let sender = msg.meta.sender;
        let alive = !(id_role(sender) == Some(Role::Worker) && self.node.po.dead_nodes().contains(&sender));
        let (epoch, _) = van.scheduler_epoch();
        let (reply, _) = answer(master, sender, alive, epoch.term, req, now);
        let mut r = Message {
            meta: Meta {
                request: false,
                recver: sender,
                recver_incarnation: msg.meta.incarnation,
                ..msg.meta.clone()
            },
            data: vec![encode(&reply)],
        };
        r.meta.control = Default::default();
        if self.bugs.no_lease {
            // around the van: stamped with the term, as the van stamps, but never
            // held for the lease or the standbys
            r.meta.sender = ps_core::node::SCHEDULER;
            r.meta.incarnation = van.my_node().incarnation;
            r.meta.control.term = epoch.term;
            r.meta.control.candidate = epoch.candidate;
            let mut frames = vec![r.encode_meta()];
            frames.extend(r.data.iter().cloned());
            let _ = self.net.send(sender, frames);
            return;
        }
        self.node.send(r);
    }

    /// The master's timeouts, every 100 ms.
    pub fn tick(&mut self, now: u64) {
        if now >= self.next_master_tick {
            self.next_master_tick = now + 100;
            if let Some(m) = self.master.as_mut() {
                let _ = m.tick(now);
            }
        }
    }
}

/// The planted bug: the stored queues with one pending task dropped.
fn forget_one_pending(bytes: Vec<u8>) -> Vec<u8> {
    let Ok(mut q) = decode_queues(&bytes) else { return bytes };
    if let Some(&id) = q.pending.keys().next() {
        q.pending.remove(&id);
    }
    encode_queues(&q).unwrap_or(bytes)
}
