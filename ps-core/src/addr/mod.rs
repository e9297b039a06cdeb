//! Which address a node advertises and which it binds.
//!
//! The rules (docs/operations.md, running across hosts):
//! - advertised: `DMLC_NODE_HOST` (a host name or an IP), else the address of
//!   `DMLC_INTERFACE`, else for the scheduler `DMLC_PS_ROOT_URI`, else the local address
//!   of this host's route to the scheduler (loopback only when the scheduler is on
//!   loopback);
//! - bound: `DMLC_BIND_HOST`, else the advertised address when it is one of this host's
//!   addresses, else the wildcard (`0.0.0.0`, or `::` for IPv6) — so a node behind NAT
//!   that advertises a public name binds every local interface;
//! - every name must resolve (within [`patient::RESOLVE_PATIENCE`]: a container's or
//!   pod's name can resolve only some time after it started), and a node may not
//!   advertise a loopback address to a scheduler that is on another host.
//!
//! [`plan`] decides from the variables and a [`HostLookup`]; [`system::SystemLookup`]
//! asks the operating system, through [`patient::Patient`] when a node reads its
//! configuration.

mod host;
pub mod patient;
mod plan;
pub mod system;

pub use host::{host_port, valid_host, wildcard_for, HostLookup};
pub use plan::{plan, AddrVars, Addresses};
