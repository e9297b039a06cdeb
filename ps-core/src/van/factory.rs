//! Picks the transport named by the configuration.

use super::tcp::TcpTransport;
use super::transport::Transport;
use super::zmq_transport::ZmqTransport;
use std::sync::Arc;

/// Makes the transport named by `DMLC_PS_VAN_TYPE`, with the security settings `sec`
/// (the ZMQ van takes only the limits: the configuration refuses a secret with it) and
/// the TCP van's reader threads spinning up to `spin` before they block (`PS_SPIN_US`;
/// the configuration refuses it with the ZMQ van, whose I/O thread is libzmq's), and
/// the TCP van's shared memory to peers on this host as `shm` says (`PS_SHM`; the ZMQ
/// van has none), and its links to nodes on this host over Unix sockets when
/// `local_socket` (`PS_LOCAL_SOCKET`; the ZMQ van always uses TCP).
pub fn create(
    kind: &str,
    sec: &crate::config::Security,
    spin: std::time::Duration,
    shm: &crate::config::ShmConfig,
    local_socket: bool,
) -> Result<Arc<dyn Transport>, String> {
    match kind {
        "zmq" => Ok(Arc::new(ZmqTransport::with_limits(&sec.limits))),
        "tcp" => Ok(Arc::new(
            TcpTransport::with_security(sec)
                .with_spin(spin)
                .with_shm(shm)
                .with_local_socket(local_socket),
        )),
        other => Err(format!("DMLC_PS_VAN_TYPE: unknown van type '{other}' (zmq or tcp)")),
    }
}
