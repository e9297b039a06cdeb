//! Parameter tables: the servers' side of `psrs.torch` (and the worker's requests to
//! it). A user's PyTorch model lives on the servers as one *dense* vector (every
//! trainable parameter, flattened in `named_parameters()` order) and any number of
//! *embedding tables* whose rows are created as they are trained; the optimizer runs
//! on the servers with its per-value state.
//!
//! # Design
//!
//! **Keys** ([`keys`]). Server `s` holds the dense block `s` (the flattened vector cut
//! into one contiguous block per server, as `psrs train` cuts its parameters) under
//! one key, the first of its key range, whose values are the whole block. Row `id` of
//! table `t` lives on server `mix64(t << 40 | id) % n` under the key
//! `range(s).begin + 1 + (t << 40 | id)`: the hash spreads Zipf-distributed ids (hot
//! rows are the small ids) evenly, and a server's keys still sort (dense block first,
//! then rows by table and id), so one step is one push per server with a value count
//! per key.
//!
//! **A declared model** ([`spec`]). A server starts empty. Worker 0 declares the model
//! (update rule, dense parameter names and shapes, optimizer, each table's rows, width,
//! optimizer, initial deviation and seed) together with its initial dense values,
//! which are what every worker then pulls: worker 0's values are broadcast through the
//! servers. The other workers join: their model must equal the declared one, or the
//! server names the difference. A declaration to a server holding the same model keeps
//! the server's values, so a restarted worker 0 does not reset training.
//!
//! **Optimizers on the servers** ([`optim`]). SGD (momentum, weight decay), Adagrad
//! and Adam with torch's arithmetic. The dense block has one optimizer state per value
//! (and one step count); each stored row has its own state and step count. An
//! [`spec::TableSpec`] carries its own optimizer, so embeddings typically train with
//! Adagrad while the dense part uses SGD.
//!
//! **Rows on first update** ([`sparse`], [`init`]). No table is allocated up front: a
//! row is stored when a gradient is first applied to it; until then a lookup answers
//! its initial values, normal(0, `init_std`) computed from the table's seed and the
//! id. A replica or a replacement server therefore agrees on rows never stored, and a
//! table of 10^9 rows costs only the rows trained.
//!
//! **Versions** ([`shard`]). Each range's [`shard::TableShard`] keeps a
//! [`crate::train::versions::Versions`], the rule `psrs train`'s shards use: sync
//! (one gradient per live worker per version, applied as their mean; a push on an old
//! version rejected; a pull after version v held until v + 1 is applied; idle and dead
//! workers not waited for; a timeout), async, or bounded staleness. Dense and row
//! gradients of one push are taken or rejected together, and a push is checked whole
//! before any of it is taken.
//!
//! **A step** ([`client`], [`pack`]). The worker pushes one request per server (its
//! dense block's gradient and its rows', merged in key order; a dense-only model's
//! push shares the gradient buffer) tagged with the version it computed on, and right
//! behind it pulls the dense block: under sync the pull waits for the version the push
//! completed. Lookups pull only the unique rows of a batch. Requests are resent to a
//! replaced server ([`crate::train::resend`]).
//!
//! **Durability** ([`server`]). The whole shard (values, optimizer state, stored rows,
//! the sync version in progress) is checkpointed every N versions, restored by a
//! replacement server, and with `PS_REPLICAS` kept on every replica of the range: the
//! replication layer forwards each push to the others, who apply it the same way, and
//! a replacement copies the shard from a live replica. A server replaced with nothing
//! to restore answers "undeclared", and the workers declare the model to it again with
//! their current dense values.

pub mod client;
pub mod client_error;
pub mod error;
pub mod halves;
pub mod hot_cache;
pub mod init;
pub mod keys;
pub mod optim;
pub mod pack;
pub mod reader;
pub mod server;
pub mod shard;
pub mod sparse;
pub mod spec;
pub mod wire;

pub use error::TablesError;
