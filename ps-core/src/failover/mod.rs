//! Scheduler failover: which scheduler candidate is active, under which term, when a
//! standby takes over, when an old active steps down, and what the active one must
//! wait for before it acts.
//!
//! The room: the rules as pure state machines with time passed in ([`candidacy`],
//! [`follower`], [`outbox`], [`lease`], [`terms`], [`epoch`], [`locked`]),
//! unit-tested deterministically and driven by the simulator (`ps-sim`) exactly as
//! the van drives them; the failover state a van keeps ([`state`]) and the shell that
//! feeds the machines the van's messages and carries out their decisions ([`shell`],
//! [`leased`]); the door to an external lock service ([`lock_service`]) and etcd's
//! implementation of it (`etcd`, with the `etcd` cargo feature).
//!
//! Why the van imports this room and not the other way round: the van owns a
//! [`Failover`] and lends it a [`Host`], the few things the shell needs of the van
//! (the clock, sending, connecting a link, the scheduler's node table, taking over).
//! The shell never names the van, so the arrows run one way: van -> failover ->
//! config, message, node, protocol. The election settings (`PS_SCHEDULERS`,
//! `PS_ELECTION`) are read by the configuration (`config::ElectionMode`).
//!
//! The embedded election, in one place (see [`candidacy`] for why it is safe):
//! - `PS_SCHEDULERS=host:port,host:port,…` lists every scheduler candidate; each
//!   process knows every candidate. The first scheduler starts active; the others
//!   run with `PS_SCHEDULER_STANDBY=1` and follow it.
//! - An [`Epoch`] (term, candidate) is carried on every message a scheduler sends;
//!   term `t` belongs to one candidate alone ([`terms`]). Nodes follow the best
//!   epoch they have heard ([`Follower`]) and drop messages of lower ones (fencing).
//! - The active scheduler acts only under its [`Lease`]: a majority of the servers
//!   and workers echoed a message it sent within the heartbeat timeout less an
//!   interval. Its acts (replies, tables, barrier releases, death notices) wait in
//!   the [`Outbox`] until every standby heard within the standby timeout holds the
//!   state they were decided on, and the lease holds.
//! - The active streams its whole state (node table, the master's queues) to the
//!   standbys with a sequence number; a standby behind another standby of the same
//!   epoch catches up from it, and the active sends the whole state again to a
//!   standby that has not acknowledged it.
//! - A standby that has not heard the active one for the timeout (plus a wait by its
//!   rank), or an active one without its lease for that long, campaigns: it asks
//!   every node for its vote and takes over with a majority.
//! - Barrier counts are not carried: a stale count could release a later barrier
//!   early. Nodes repeat their pending barrier requests to the new active instead.

pub mod candidacy;
pub mod epoch;
pub mod error;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod follower;
pub mod host;
pub mod lease;
pub mod leased;
pub mod lock_service;
pub mod locked;
pub mod outbox;
pub mod shell;
pub mod state;
pub mod terms;
pub mod view;

pub use candidacy::{is_act, voters, Candidacy, Out, Timing};
pub use epoch::{candidate_key, is_candidate_key, Epoch};
pub use error::FailoverError;
pub use follower::{Ballot, Follower, Heard, STALE_VOTE_TIMEOUTS};
pub use host::Host;
pub use lease::Lease;
pub use lock_service::LockService;
pub use locked::{Lock, LockCandidate, LockDecision};
pub use outbox::Outbox;
pub use shell::StateView;
pub use state::Failover;
pub use view::View;
