//! ps-core: the parameter-server core of psrs, modelled on ps-lite.
//!
//! Layers, bottom to top: [`message`] (the wire), [`van`] (transport and control
//! messages), [`postoffice`] (node ids, groups, barriers, customers), [`customer`] and
//! [`simple_app`] (request tracking), [`kv`] (sharded push/pull). Protocol decisions
//! live in [`protocol`] as plain state machines without sockets.

pub mod addr;
pub mod auth;
pub mod config;
pub mod customer;
pub mod error;
pub mod failover;
pub mod fuzzing;
mod held;
pub mod kv;
pub mod message;
pub mod node;
pub mod postoffice;
pub mod protocol;
pub mod simple_app;
pub mod tls;
pub mod van;
pub mod var_error;

#[cfg(test)]
mod fuzz_tests;

pub use config::Config;
pub use error::PostofficeError;
pub use message::{Message, Meta};
pub use node::{Node, Role};
pub use postoffice::Postoffice;
