//! Credentials and TLS: every link of the TCP van and the HTTP API run TLS 1.3
//! (rustls, `ring` provider), both sides authenticated by certificates of the
//! cluster's CA. A certificate names the role(s) its holder may take
//! ([`role`]); the scheduler refuses a node registering as another role.
//!
//! Two ways to get credentials, one protocol on the wire:
//! - certificates (`PS_TLS_CERT`, `PS_TLS_KEY`, `PS_TLS_CA`): made by `psrs certs`
//!   ([`issue`]) or by any CA that puts the role URI in them;
//! - the cluster secret (`PS_SECRET_FILE`): every node derives the same CA from the
//!   secret and issues itself a certificate for its role ([`Credentials::from_secret`]).
//!
//! Pure parts (roles, issuing, checking certificates, the configurations) live here;
//! the sockets are the van's (`van::guard`) and the HTTP server's.

pub mod bundle;
mod creds;
mod error;
pub mod issue;
pub mod peer;
pub mod pem;
pub mod role;
pub mod settings;
mod verify;

pub use creds::{provider, server_name, Credentials, Trust};
pub use error::TlsError;
pub use role::{CertRole, Roles, UnknownRole};
pub use settings::TlsFiles;
