//! Scheduler failover: which scheduler candidate is active, under which term, when a
//! standby takes over, when an old active steps down, and which standbys the active
//! must wait for before it acts.
//!
//! The room: the rules as pure state machines with time passed in ([`epoch`],
//! [`candidate`], [`election`], [`replicas`], [`view`]), unit-tested deterministically;
//! the failover state a van keeps ([`state`]) and the shell that feeds the rules the
//! van's messages and carries out their decisions ([`shell`], [`leased`]); the door to
//! an external lock service ([`lock_service`]) and etcd's implementation of it
//! (`etcd`, with the `etcd` cargo feature).
//!
//! Why the van imports this room and not the other way round: the van owns a
//! [`Failover`] and lends it a [`Host`], the few things the shell needs of the van
//! (the clock, sending, connecting a link, the scheduler's node table, taking over).
//! The shell never names the van, so the arrows run one way: van -> failover ->
//! config, message, node, protocol. The election settings (`PS_SCHEDULERS`,
//! `PS_ELECTION`) are read by the configuration (`config::ElectionMode`).
//!
//! The design, in one place:
//! - `PS_SCHEDULERS=host:port,host:port,…` lists every scheduler candidate; each
//!   process knows every candidate. The first scheduler starts active at term 1; the
//!   others run with `PS_SCHEDULER_STANDBY=1` and follow it.
//! - An [`Epoch`] (term, candidate) is carried on every message a scheduler sends.
//!   A higher term wins; at equal terms the lower candidate index wins. Nodes follow
//!   the best epoch they have heard ([`ActiveView`]) and drop messages of lower ones
//!   (fencing), so an old active cut off by a partition cannot hand out work.
//! - The active streams its whole state (node table, the master's queues) to the
//!   standbys with a sequence number and waits for their acks before it acts
//!   ([`Replicas`]); a standby silent for the heartbeat timeout is not waited for, and
//!   is caught up with the full state when it is heard again.
//! - Every message the active sends carries that sequence number; nodes report the
//!   highest one they saw, and how long the active has been silent, in heartbeats to
//!   every candidate. A standby ([`Candidate`]) takes over only when it has not heard
//!   the active for the timeout, a majority of nodes report the same silence, and no
//!   node saw a state newer than the one it holds: a standby that was merely cut off
//!   from a living active, or missed writes, never takes over.
//! - Barrier counts are not carried: a stale count could release a later barrier
//!   early. Nodes repeat their pending barrier requests to the new active instead.

pub mod candidacy;
pub mod candidate;
pub mod election;
pub mod epoch;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod follower;
pub mod gate;
pub mod host;
pub mod lease;
pub mod leased;
pub mod lock_service;
pub mod outbox;
pub mod replicas;
pub mod shell;
pub mod state;
pub mod terms;
pub mod view;

pub use candidacy::{is_act, voters, Candidacy, Out, Timing};
pub use candidate::{Candidate, Decision};
pub use election::{Election, Facts, Leased, Lock, Majority, Refusal, Vote};
pub use epoch::{candidate_key, Epoch};
pub use follower::{Ballot, Follower, STALE_VOTE_TIMEOUTS};
pub use gate::{LeaseChange, LeaseGate, MAX_HELD};
pub use host::Host;
pub use lease::Lease;
pub use lock_service::LockService;
pub use outbox::Outbox;
pub use replicas::Replicas;
pub use state::Failover;
pub use view::{ActiveView, Heard};
