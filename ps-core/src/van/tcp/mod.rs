//! The TCP van: a [`Transport`](super::transport::Transport) over plain TCP, or over a
//! Unix socket to a node on the same host ([`stream`]). One outgoing link per peer
//! written by the sending thread ([`link`], [`wire`]; what the socket did not take is
//! finished by the drain thread, [`drain`]), one reader thread per incoming connection
//! ([`accept`], [`read`], optionally spinning before it sleeps, [`spin_read`]). A van's
//! own messages never wait for a connection to open ([`opening`]). Every
//! connection is admitted at the door ([`guard`]: TLS 1.3 with the cluster's
//! certificates when security is on; the roles a peer's certificate names go with its
//! messages to the van, which enforces them, [`crate::van::screen`]),
//! and large frames to a co-located peer may go through shared memory ([`shm`]).

mod accept;
#[cfg(test)]
mod cross_tests;
mod drain;
pub mod guard;
mod link;
#[cfg(test)]
mod local_socket_tests;
mod opening;
mod read;
pub mod shm;
pub mod spin_read;
pub mod stream;
pub mod transport;
mod wire;

pub use transport::TcpTransport;
