//! How the active scheduler is chosen and where the scheduler candidates are
//! (`PS_SCHEDULERS`, `PS_ELECTION`, `PS_ETCD_ENDPOINTS`, `PS_ETCD_PREFIX`); the rules
//! that act on it are in [`crate::failover`].

use super::error::{err, ConfigError};

/// How the active scheduler is chosen (`PS_ELECTION`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ElectionMode {
    /// `embedded` (the default): the majority rule, state streamed between candidates.
    #[default]
    Embedded,
    /// `etcd`: the leased rule over an etcd lock with a lease of `PS_HEARTBEAT_TIMEOUT`;
    /// the node table and the application state are kept in etcd.
    Etcd {
        /// `PS_ETCD_ENDPOINTS`: `http://host:port,…`.
        endpoints: Vec<String>,
        /// `PS_ETCD_PREFIX` (default `/psrs`): the lock and the state keys live under it;
        /// one prefix per cluster.
        prefix: String,
    },
}

/// Reads `PS_ELECTION`, `PS_ETCD_ENDPOINTS` and `PS_ETCD_PREFIX`; the error names the
/// variable and is one line.
pub fn parse_election(
    mode: Option<&str>,
    endpoints: Option<&str>,
    prefix: Option<&str>,
) -> Result<ElectionMode, ConfigError> {
    match mode.unwrap_or("embedded") {
        "embedded" => Ok(ElectionMode::Embedded),
        "etcd" => {
            let endpoints: Vec<String> = endpoints
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(String::from)
                .collect();
            if endpoints.is_empty() {
                return Err(err(
                    "PS_ETCD_ENDPOINTS",
                    "not set; PS_ELECTION=etcd needs the etcd endpoints, e.g. http://10.0.0.5:2379",
                ));
            }
            let prefix = prefix.unwrap_or("/psrs").trim_end_matches('/').to_string();
            if !prefix.starts_with('/') {
                return Err(err("PS_ETCD_PREFIX", format!("'{prefix}' must start with '/'")));
            }
            Ok(ElectionMode::Etcd { endpoints, prefix })
        }
        other => Err(err("PS_ELECTION", format!("'{other}' is not embedded or etcd"))),
    }
}

/// Parses a `host:port,host:port` list of scheduler candidates (`PS_SCHEDULERS`); the
/// error names that variable and is one line.
pub fn parse_candidates(s: &str) -> Result<Vec<(String, u16)>, ConfigError> {
    let bad = |reason: String| err("PS_SCHEDULERS", reason);
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, port) = part
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("'{part}' is not host:port")))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad(format!("'{part}': '{port}' is not a port (1-65535)")))?;
        if host.is_empty() {
            return Err(bad(format!("'{part}' has no host")));
        }
        if out.iter().any(|(h, p)| h == host && *p == port) {
            return Err(bad(format!("'{part}' is listed twice")));
        }
        out.push((host.to_string(), port));
    }
    if out.is_empty() {
        return Err(bad("no scheduler listed".into()));
    }
    if out.len() > 16 {
        return Err(bad("more than 16 schedulers".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_lists() {
        assert_eq!(
            parse_candidates("a:1, b:2").unwrap(),
            vec![("a".to_string(), 1), ("b".to_string(), 2)]
        );
        for bad in ["", "a", "a:0", "a:x", ":5", "a:1,a:1", "a:70000"] {
            let e = parse_candidates(bad).unwrap_err();
            assert_eq!(e.var, "PS_SCHEDULERS");
            assert!(!e.to_string().contains('\n'), "{bad}: {e}");
        }
        let e = parse_candidates("a:1,a:1").unwrap_err();
        assert_eq!(
            (e.var.as_str(), e.reason.as_str()),
            ("PS_SCHEDULERS", "'a:1' is listed twice")
        );
        assert_eq!(parse_election(None, None, None), Ok(ElectionMode::Embedded));
        assert_eq!(
            parse_election(Some("etcd"), Some("http://a:1, http://b:2"), Some("/job/")),
            Ok(ElectionMode::Etcd {
                endpoints: vec!["http://a:1".into(), "http://b:2".into()],
                prefix: "/job".into()
            })
        );
        assert_eq!(
            parse_election(Some("etcd"), None, None).unwrap_err().var,
            "PS_ETCD_ENDPOINTS"
        );
        assert_eq!(parse_election(Some("raft"), None, None).unwrap_err().var, "PS_ELECTION");
        assert_eq!(
            parse_election(Some("etcd"), Some("h:1"), Some("x")).unwrap_err().var,
            "PS_ETCD_PREFIX"
        );
    }
}
