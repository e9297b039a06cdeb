//! Only members get in: the cluster secret (from which the shared-secret mode derives
//! the cluster's CA, see [`crate::tls`]) and the door of a listening socket
//! (connections and handshakes in progress per peer, failed-handshake rate limit). The
//! settings (secret, resource limits) are read by the configuration
//! (`config::Security`). Everything here is pure: no sockets, time passed in; the shell
//! is `van::tcp::guard` (TCP van) and the places that enforce a limit. Secret files
//! are read only when their owner alone may access them ([`private_file`]).

mod error;
pub mod gate;
pub mod private_file;
pub mod secret;

pub use error::AuthError;
pub use secret::{Secret, SecretSource};
