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

/// Whether `host` is a host name or an IP address a node may advertise: an IPv4 or
/// IPv6 literal (in brackets or not), or a DNS name of at most 253 characters whose
/// dot-separated labels (1 to 63 characters) hold only ASCII letters, digits, `-` and
/// `_`. Anything else (HTML, spaces, control characters) is no address: the scheduler
/// refuses a registration advertising it.
pub fn valid_host(host: &str) -> bool {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if bare.parse::<IpAddr>().is_ok() {
        return true;
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            (1..=63).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
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

    #[test]
    fn host_names_and_addresses_are_valid_html_and_control_characters_are_not() {
        for ok in [
            "127.0.0.1",
            "::1",
            "[fd00::2]",
            "node-3.example",
            "node_3",
            "psrs-0.psrs.default.svc.cluster.local.",
            "localhost",
        ] {
            assert!(valid_host(ok), "{ok}");
        }
        let long = format!("{}.example", "a".repeat(64));
        for bad in [
            "",
            ".",
            "<img src=x onerror=alert(1)>",
            "a b",
            "node\n1",
            "node\u{1b}[31m",
            "a..b",
            "[not-an-ip]",
            "ünïcode",
            long.as_str(),
        ] {
            assert!(!valid_host(bad), "{bad:?}");
        }
        assert!(!valid_host(&"a.".repeat(130)));
    }
}
