//! Only members get in: the cluster secret, the connection-start handshake (mutual
//! HMAC-SHA256 challenge-response over fresh nonces), sealed records (encrypted
//! links), the door of a listening socket (connections per peer, failed-handshake
//! rate limit). The settings (secret, encryption, resource limits) are read by
//! the configuration (`config::Security`). Everything here is pure: no sockets, time
//! passed in; the shell is `van::tcp::guard` (TCP van) and the places that enforce a limit.

pub mod gate;
pub mod handshake;
pub mod seal;
pub mod secret;

pub use secret::{Secret, SecretSource};
