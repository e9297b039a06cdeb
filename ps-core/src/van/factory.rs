//! Picks the transport named by the configuration.

use super::tcp::TcpTransport;
use super::transport::Transport;
use super::zmq::ZmqTransport;
use crate::config::ConfigError;
use std::sync::Arc;

/// Makes the transport named by `DMLC_PS_VAN_TYPE` for a node of `role`, with the
/// security settings `sec` (the TCP van's TLS credentials are made for the role)
/// (the ZMQ van takes only the limits: the configuration refuses a secret with it) and
/// the TCP van's reader threads spinning up to `spin` before they block (`PS_SPIN_US`;
/// the configuration refuses it with the ZMQ van, whose I/O thread is libzmq's), and
/// the TCP van's shared memory to peers on this host as `shm` says (`PS_SHM`; the ZMQ
/// van has none), and its links to nodes on this host over Unix sockets when
/// `local_socket` (`PS_LOCAL_SOCKET`; the ZMQ van always uses TCP). An unknown van type
/// or credentials that cannot be read are a [`ConfigError`] naming the variable.
pub fn create(
    kind: &str,
    role: crate::node::Role,
    sec: &crate::config::Security,
    spin: std::time::Duration,
    shm: &crate::config::ShmConfig,
    local_socket: bool,
) -> Result<Arc<dyn Transport>, ConfigError> {
    match kind {
        "zmq" => Ok(Arc::new(ZmqTransport::with_limits(&sec.limits))),
        "tcp" => Ok(Arc::new(
            TcpTransport::with_security(sec, sec.credentials(crate::tls::CertRole::of_node(role))?)
                .with_spin(spin)
                .with_shm(shm)
                .with_local_socket(local_socket),
        )),
        other => Err(ConfigError {
            role: Some(role),
            var: "DMLC_PS_VAN_TYPE".into(),
            reason: format!("unknown van type '{other}' (zmq or tcp)"),
        }),
    }
}
