//! Only members get in: the cluster secret, the connection-start handshake (mutual
//! HMAC-SHA256 challenge-response over fresh nonces), sealed records (encrypted
//! links), the door of a listening socket (connections per peer, failed-handshake
//! rate limit) and the resource limits. Everything here is pure: no sockets, time
//! passed in; the shell is `van::guard` (TCP van) and the places that enforce a limit.

pub mod config;
pub mod gate;
pub mod handshake;
pub mod seal;
pub mod secret;

pub use config::{Limits, Security};
pub use secret::{Secret, SecretSource};
