//! A simulated scheduler candidate's application: psrs's own training coordinator
//! ([`Coordinator::driven`]: the master answering the workers, its timeouts, the
//! dead workers' tasks requeued, the replicated state resumed from at each
//! takeover). The scheduler itself (node table, barriers, liveness, the election,
//! the state streamed to the standbys) is psrs's own van. What the simulator adds:
//! the process's course as `psrs train` runs it (the start barrier, the coordinator
//! started once this candidate acts with a node table, the final barrier), the
//! job's dataset held by the master from the start (no file is read), the ticker's
//! period as timers, and the planted bugs.

use crate::process::NodeLink;
use crate::transport::SimTransport;
use crate::worker::DATASET;
use ps_apps::master::{
    decode_queues, encode_queues, Chunk, Master, MasterConfig, MasterPlanted, MemStore, ReplicatedStore, Store,
    StoreError,
};
use ps_apps::recordio::ChunkIndex;
use ps_apps::train::coordinator::{Coordinator, MASTER_APP, TICK_EVERY};
use ps_core::message::{Message, Meta};
use ps_core::protocol::course::Stage;
use ps_core::simple_app::SimpleData;
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
    /// The switches planted in the postoffice and van of every process (liveness,
    /// election).
    pub node: ps_core::config::Planted,
    /// The switches planted in the master.
    pub master: MasterPlanted,
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
    /// The training coordinator, once this candidate first acted with a node table.
    pub coordinator: Option<Coordinator>,
    mcfg: MasterConfig,
    tasks: usize,
    /// Declarations of deaths since the world last looked (this scheduler's own
    /// liveness decided them).
    pub declared: usize,
    /// Why the master's ticker failed, since the world last looked.
    pub tick_failures: Vec<String>,
    next_tick: u64,
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
            coordinator: None,
            mcfg: MasterConfig {
                chunks_per_task: 1,
                num_epochs: passes,
                timeout_multiplier: 4.0,
                timeout_floor_ms: 2_000,
                max_retries: 3,
                planted: bugs.master,
            },
            tasks,
            declared: 0,
            tick_failures: Vec::new(),
            next_tick: 0,
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

    /// After every step it took part in: its course moves on; once it runs (after
    /// the start barrier, or at once when it took over), the coordinator starts and
    /// the final barrier is entered, as `psrs train` does.
    pub fn after_step(&mut self) {
        if self.node.course() {
            self.start_coordinator();
            self.node.finalize();
        }
    }

    /// Released from the final barrier.
    pub fn finished(&self) -> bool {
        self.node.stage() == Stage::Done
    }

    /// The coordinator starts on the master (resuming from the state replicated to
    /// this candidate, as `psrs train` with standbys does; the dataset's chunks given
    /// if it holds none).
    fn start_coordinator(&mut self) {
        if self.coordinator.is_none() {
            let store = ReplicatedStore::new(Box::new(MemStore::default()), Arc::clone(self.po().van()));
            let store: Box<dyn Store> = match self.bugs.forget_pending {
                true => Box::new(Forgetful(Box::new(store))),
                false => Box::new(store),
            };
            let started = Master::new(self.mcfg.clone(), store, 0).and_then(|mut m| {
                if m.queues().dataset.is_none() {
                    m.report_chunks(vec![DATASET.into()], chunks(self.tasks))?;
                }
                Ok(m)
            });
            match started
                .map_err(|e| e.to_string())
                .and_then(|m| Coordinator::driven(self.po(), m).map_err(|e| e.to_string()))
            {
                Ok(c) => self.coordinator = Some(c),
                Err(e) => log::error!("master: {e}"),
            }
        }
    }

    /// The planted bug: the coordinator's answer to `msg` (a request to the master
    /// app) sent straight through the transport, around the van's gate, while this
    /// candidate believes it is active. False when it does not answer.
    pub fn answer_around(&self, msg: &Message) -> bool {
        let Some(c) = self.coordinator.as_ref().filter(|_| self.is_active()) else {
            return false;
        };
        let van = self.po().van();
        let (epoch, _) = van.scheduler_epoch();
        let data = SimpleData::from(msg);
        let mut r = Message {
            meta: Meta {
                head: data.head,
                app_id: MASTER_APP,
                customer_id: data.customer_id,
                timestamp: data.timestamp,
                recver: data.sender,
                recver_incarnation: data.incarnation,
                request: false,
                simple_app: true,
                sender: ps_core::node::SCHEDULER,
                incarnation: van.my_node().incarnation,
                ..Default::default()
            },
            data: vec![c.answer_request(&data)],
        };
        // stamped with the term, as the van stamps, but never held for the lease or
        // the standbys
        r.meta.control.term = epoch.term;
        r.meta.control.candidate = epoch.candidate;
        let mut frames = vec![r.encode_meta()];
        frames.extend(r.data.iter().cloned());
        let _ = self.net.send(data.sender, frames);
        true
    }

    /// The coordinator's ticker, every [`TICK_EVERY`] of the process's time.
    pub fn tick(&mut self, now: u64) {
        if now >= self.next_tick {
            self.next_tick = now + TICK_EVERY.as_millis() as u64;
            if let Some(Err(e)) = self.coordinator.as_ref().map(Coordinator::tick) {
                self.tick_failures.push(e.to_string());
            }
        }
    }
}

/// The simulated dataset: `n` chunks of one file, one task each.
fn chunks(n: usize) -> Vec<Chunk> {
    (0..n)
        .map(|i| Chunk {
            path: DATASET.into(),
            index: ChunkIndex {
                idx: i,
                offset: i as u64 * 100,
                len: 100,
                records: 10,
            },
        })
        .collect()
}

/// The planted bug: the stored queues with one pending task dropped.
fn forget_one_pending(bytes: Vec<u8>) -> Vec<u8> {
    let Ok(mut q) = decode_queues(&bytes) else { return bytes };
    if let Some(&id) = q.pending.keys().next() {
        q.pending.remove(&id);
    }
    encode_queues(&q).unwrap_or(bytes)
}
