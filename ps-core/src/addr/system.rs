//! [`HostLookup`] answered by the operating system: DNS through `getaddrinfo`, routes
//! through a connected (never sending) UDP socket, interfaces through `getifaddrs`.

use super::host::HostLookup;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// The operating system's answers.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemLookup;

impl HostLookup for SystemLookup {
    fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let addrs: Vec<IpAddr> = (bare, 0u16).to_socket_addrs()?.map(|a| a.ip()).collect();
        if addrs.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no address"));
        }
        Ok(addrs)
    }

    fn route_source(&self, to: IpAddr) -> std::io::Result<IpAddr> {
        let any: SocketAddr = match to {
            IpAddr::V4(_) => "0.0.0.0:0".parse().expect("literal"),
            IpAddr::V6(_) => "[::]:0".parse().expect("literal"),
        };
        let s = UdpSocket::bind(any)?;
        // connect() on UDP only picks the route and the source address.
        s.connect(SocketAddr::new(to, 9))?;
        Ok(s.local_addr()?.ip())
    }

    fn interface_addrs(&self, name: &str) -> Vec<IpAddr> {
        if_addrs::get_if_addrs()
            .unwrap_or_default()
            .into_iter()
            .filter(|i| i.name == name)
            .map(|i| i.ip())
            .collect()
    }

    fn local_addrs(&self) -> Vec<IpAddr> {
        if_addrs::get_if_addrs()
            .unwrap_or_default()
            .into_iter()
            .map(|i| i.ip())
            .collect()
    }
}

/// True if a TCP connection to `host:port` opens within `timeout` (it is closed at
/// once; psrs transports ignore such empty connections).
pub fn tcp_reachable(host: &str, port: u16, timeout: Duration) -> bool {
    let Ok(addrs) = (host.trim_start_matches('[').trim_end_matches(']'), port).to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| TcpStream::connect_timeout(&a, timeout).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_to_loopback_starts_at_loopback() {
        let l = SystemLookup;
        assert_eq!(
            l.route_source("127.0.0.1".parse().unwrap()).unwrap().to_string(),
            "127.0.0.1"
        );
        assert_eq!(
            l.resolve("127.0.0.1").unwrap(),
            vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(l.resolve("[::1]").unwrap(), vec!["::1".parse::<IpAddr>().unwrap()]);
        assert!(l.resolve("no.such.host.invalid").is_err());
        assert!(l.local_addrs().iter().any(|a| a.is_loopback()));
    }
}
