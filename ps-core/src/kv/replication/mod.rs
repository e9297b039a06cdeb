//! Replicated key ranges (`PS_REPLICAS=k`): primary-backup with fan-out. Range r is
//! held by servers r, r+1, …, r+k on the ring of ranks (the Parameter Server paper's
//! placement); a worker sends a range's requests to its first live holder (its
//! primary). The holder a push reaches applies it, forwards it to every other live
//! holder at once (a fan-out, not a chain: no holder forwards what it was forwarded), and
//! answers the worker once each applied it (or was declared dead): every answered push
//! is on every live copy, so when a server dies the next holder serves its range at
//! once. Each push carries a [`RequestId`] that every replica remembers for a window,
//! so a push the worker sends again after a failover is applied once anywhere.
//!
//! Each push is forwarded as the worker sent it (not an aggregate), with what the
//! forwarding holder answered the worker ([`KVMeta::forwarded`](crate::kv::KVMeta)):
//! the sum and SGD handles apply pushes one by one anyway, a forwarded push can be
//! acknowledged on its own, which is what exactly-once needs, and a handle whose
//! decisions depend on time (sync SGD's version timeouts) takes them from the answer
//! instead of its own clock.
//!
//! A replacement server copies its ranges from live replicas and rejoins ([`catchup`];
//! the application's state travels through [`RangeCopy`]).
//!
//! Pure parts: [`holders`] (who holds and who is primary for a range), [`dedup`] (the
//! request-id window), [`acks`] (answers held for the replicas' acknowledgements),
//! [`catchup`] (a replacement's copies), [`wire`] and [`copy_wire`] (headers). The
//! shells are `replica` and `rejoin` (server side); the worker side routes by
//! [`Holders::primary`] in `kv/worker.rs`.

pub mod acks;
pub mod catchup;
pub mod copy_wire;
pub mod dedup;
pub mod holders;
pub mod range_copy;
mod rejoin;
mod replica;
mod shared;
pub mod wire;

#[cfg(test)]
mod pending_tests;

pub use dedup::{DedupWindow, Outcome, RequestId, DEDUP_CAP, DEDUP_WINDOW_MS};
pub use holders::{dead_server_ranks, Holders};
pub use range_copy::RangeCopy;
pub(crate) use replica::serve;
pub use replica::Replication;
pub use wire::FORWARD_CUSTOMER;
