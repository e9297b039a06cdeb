//! The address rules as a pure function of the variables and a [`HostLookup`].

use super::host::{wildcard_for, HostLookup};
use crate::var_error::VarError;
use std::net::IpAddr;

/// The address variables of one node (`None` = unset).
#[derive(Clone, Copy, Debug, Default)]
pub struct AddrVars<'a> {
    /// True for the scheduler (it advertises `DMLC_PS_ROOT_URI`).
    pub is_scheduler: bool,
    /// `DMLC_PS_ROOT_URI`.
    pub root_uri: &'a str,
    /// `DMLC_NODE_HOST`.
    pub node_host: Option<&'a str>,
    /// `DMLC_INTERFACE`.
    pub interface: Option<&'a str>,
    /// `DMLC_BIND_HOST`.
    pub bind_host: Option<&'a str>,
}

/// Where a node listens and what it tells the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// The host the others connect to (a name stays a name).
    pub advertise: String,
    /// The IP the receiving socket binds.
    pub bind: String,
}

fn resolve(l: &dyn HostLookup, var: &'static str, host: &str) -> Result<Vec<IpAddr>, VarError> {
    l.resolve(host)
        .map_err(|e| VarError::new(var, format!("'{host}' does not resolve ({e})")))
}

/// The best of `ips` to talk to a peer at `towards`: same family, not link-local.
fn pick(ips: &[IpAddr], towards: IpAddr) -> Option<IpAddr> {
    let link_local = |ip: &IpAddr| matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80);
    let score = |ip: &IpAddr| (ip.is_ipv4() != towards.is_ipv4()) as u8 * 2 + link_local(ip) as u8;
    ips.iter().copied().min_by_key(score)
}

/// Applies the address rules (see the module documentation of [`crate::addr`]).
pub fn plan(v: &AddrVars<'_>, l: &dyn HostLookup) -> Result<Addresses, VarError> {
    let root_ips = resolve(l, "DMLC_PS_ROOT_URI", v.root_uri)?;
    let root = root_ips[0];
    let (var, advertise, adv_ips) = if let Some(h) = v.node_host {
        ("DMLC_NODE_HOST", h.to_string(), resolve(l, "DMLC_NODE_HOST", h)?)
    } else if let Some(i) = v.interface {
        let ip = pick(&l.interface_addrs(i), root)
            .ok_or_else(|| VarError::new("DMLC_INTERFACE", format!("no address on interface '{i}'")))?;
        ("DMLC_INTERFACE", ip.to_string(), vec![ip])
    } else if v.is_scheduler {
        ("DMLC_PS_ROOT_URI", v.root_uri.to_string(), root_ips.clone())
    } else {
        let ip = l.route_source(root).map_err(|e| {
            VarError::new(
                "DMLC_PS_ROOT_URI",
                format!("no route to the scheduler at {root} ({e}); set DMLC_NODE_HOST to this node's address"),
            )
        })?;
        ("DMLC_PS_ROOT_URI", ip.to_string(), vec![ip])
    };
    let local = l.local_addrs();
    let adv = pick(&adv_ips, root).expect("resolve returns at least one address");
    if adv.is_loopback() && !root.is_loopback() && !local.contains(&root) {
        return Err(VarError::new(
            var,
            format!(
                "'{advertise}' is a loopback address but the scheduler ({}) is on another host, which could not connect back; advertise an address the scheduler can reach, or unset it",
                v.root_uri
            ),
        ));
    }
    let bind = match v.bind_host {
        Some(b) => {
            let ips = resolve(l, "DMLC_BIND_HOST", b)?;
            pick(&ips, adv).expect("resolve returns at least one address")
        }
        None if local.contains(&adv) => adv,
        None => wildcard_for(adv),
    };
    Ok(Addresses {
        advertise,
        bind: bind.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A host with interfaces lo (127.0.0.1, ::1) and eth0 (10.0.0.5, fd00::5,
    /// fe80::5), routing everything through eth0, and a small name table.
    struct Fake {
        names: HashMap<&'static str, Vec<IpAddr>>,
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    impl Fake {
        fn new() -> Fake {
            let mut names = HashMap::new();
            names.insert("sched.lan", vec![ip("10.0.0.1")]);
            names.insert("me.public", vec![ip("203.0.113.7")]);
            names.insert("localhost", vec![ip("127.0.0.1"), ip("::1")]);
            names.insert("v6only", vec![ip("fd00::1")]);
            Fake { names }
        }
    }

    impl HostLookup for Fake {
        fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
            if let Ok(i) = host.trim_matches(|c| c == '[' || c == ']').parse() {
                return Ok(vec![i]);
            }
            self.names
                .get(host)
                .cloned()
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "Name or service not known"))
        }
        fn route_source(&self, to: IpAddr) -> std::io::Result<IpAddr> {
            Ok(match (to.is_loopback(), to.is_ipv4()) {
                (true, _) => to,
                (false, true) => ip("10.0.0.5"),
                (false, false) => ip("fd00::5"),
            })
        }
        fn interface_addrs(&self, name: &str) -> Vec<IpAddr> {
            match name {
                "lo" => vec![ip("127.0.0.1"), ip("::1")],
                "eth0" => vec![ip("fe80::5"), ip("fd00::5"), ip("10.0.0.5")],
                _ => vec![],
            }
        }
        fn local_addrs(&self) -> Vec<IpAddr> {
            [self.interface_addrs("lo"), self.interface_addrs("eth0")].concat()
        }
    }

    fn worker(root: &str) -> AddrVars<'_> {
        AddrVars {
            root_uri: root,
            ..Default::default()
        }
    }

    fn ok(v: AddrVars<'_>) -> (String, String) {
        let a = plan(&v, &Fake::new()).unwrap();
        (a.advertise, a.bind)
    }

    #[test]
    fn by_default_a_node_advertises_its_route_to_the_scheduler() {
        assert_eq!(ok(worker("10.0.0.1")), ("10.0.0.5".into(), "10.0.0.5".into()));
        assert_eq!(ok(worker("sched.lan")), ("10.0.0.5".into(), "10.0.0.5".into()));
        assert_eq!(ok(worker("127.0.0.1")), ("127.0.0.1".into(), "127.0.0.1".into()));
        assert_eq!(ok(worker("fd00::1")), ("fd00::5".into(), "fd00::5".into()));
        assert_eq!(ok(worker("v6only")), ("fd00::5".into(), "fd00::5".into()));
        assert_eq!(ok(worker("::1")), ("::1".into(), "::1".into()));
    }

    #[test]
    fn the_scheduler_advertises_the_root_uri() {
        let v = AddrVars {
            is_scheduler: true,
            ..worker("10.0.0.5")
        };
        assert_eq!(ok(v), ("10.0.0.5".into(), "10.0.0.5".into()));
        // a name of another host (NAT, a load balancer): bind every interface
        let v = AddrVars {
            is_scheduler: true,
            ..worker("sched.lan")
        };
        assert_eq!(ok(v), ("sched.lan".into(), "0.0.0.0".into()));
    }

    #[test]
    fn explicit_host_interface_and_bind() {
        let v = AddrVars {
            node_host: Some("me.public"),
            ..worker("sched.lan")
        };
        assert_eq!(ok(v), ("me.public".into(), "0.0.0.0".into()));
        let v = AddrVars {
            node_host: Some("me.public"),
            bind_host: Some("10.0.0.5"),
            ..worker("sched.lan")
        };
        assert_eq!(ok(v), ("me.public".into(), "10.0.0.5".into()));
        let v = AddrVars {
            interface: Some("eth0"),
            ..worker("10.0.0.1")
        };
        assert_eq!(ok(v), ("10.0.0.5".into(), "10.0.0.5".into()));
        let v = AddrVars {
            interface: Some("eth0"),
            ..worker("fd00::1")
        };
        assert_eq!(ok(v), ("fd00::5".into(), "fd00::5".into()));
        let v = AddrVars {
            node_host: Some("localhost"),
            ..worker("127.0.0.1")
        };
        assert_eq!(ok(v), ("localhost".into(), "127.0.0.1".into()));
    }

    #[test]
    fn errors_name_the_variable_and_the_value() {
        let cases: Vec<(AddrVars<'_>, &str, &str)> = vec![
            (
                worker("no.such.host"),
                "DMLC_PS_ROOT_URI",
                "'no.such.host' does not resolve",
            ),
            (
                AddrVars {
                    node_host: Some("nowhere.invalid"),
                    ..worker("10.0.0.1")
                },
                "DMLC_NODE_HOST",
                "'nowhere.invalid' does not resolve",
            ),
            (
                AddrVars {
                    interface: Some("eth9"),
                    ..worker("10.0.0.1")
                },
                "DMLC_INTERFACE",
                "'eth9'",
            ),
            (
                AddrVars {
                    node_host: Some("127.0.0.1"),
                    ..worker("sched.lan")
                },
                "DMLC_NODE_HOST",
                "loopback",
            ),
            (
                AddrVars {
                    interface: Some("lo"),
                    ..worker("10.0.0.1")
                },
                "DMLC_INTERFACE",
                "loopback",
            ),
            (
                AddrVars {
                    bind_host: Some("bad.invalid"),
                    ..worker("10.0.0.1")
                },
                "DMLC_BIND_HOST",
                "'bad.invalid'",
            ),
        ];
        for (v, var, says) in cases {
            let e = plan(&v, &Fake::new()).unwrap_err();
            assert_eq!(e.var, var, "{e:?}");
            assert!(e.reason.contains(says), "{e:?}");
        }
        // loopback is fine when the scheduler's address is this host's own
        let v = AddrVars {
            node_host: Some("127.0.0.1"),
            ..worker("10.0.0.5")
        };
        assert_eq!(ok(v), ("127.0.0.1".into(), "127.0.0.1".into()));
    }
}
