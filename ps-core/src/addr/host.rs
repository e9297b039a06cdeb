//! The questions address planning asks of the host, and address spelling.

use std::net::IpAddr;

/// The name-service and routing questions address planning asks (injected so the
/// rules are tested without a network).
pub trait HostLookup {
    /// The addresses `host` stands for (an IP literal stands for itself); an error
    /// is the name service's answer (its kind [`std::io::ErrorKind::NotFound`] when the
    /// name stands for no address).
    fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
    /// The local source address of this host's route to `to`; an error is the
    /// operating system's answer.
    fn route_source(&self, to: IpAddr) -> std::io::Result<IpAddr>;
    /// The addresses of the network interface `name` (empty if there is none).
    fn interface_addrs(&self, name: &str) -> Vec<IpAddr>;
    /// Every address of every local interface.
    fn local_addrs(&self) -> Vec<IpAddr>;
}

/// `host:port`, with an IPv6 literal in brackets (`[::1]:9000`).
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The wildcard address of `ip`'s family.
pub fn wildcard_for(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_literals_get_brackets() {
        assert_eq!(host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(host_port("::1", 80), "[::1]:80");
        assert_eq!(host_port("[fd00::2]", 80), "[fd00::2]:80");
        assert_eq!(host_port("node-3.example", 80), "node-3.example:80");
        assert_eq!(wildcard_for("fd00::1".parse().unwrap()).to_string(), "::");
        assert_eq!(wildcard_for("10.1.1.1".parse().unwrap()).to_string(), "0.0.0.0");
    }
}
