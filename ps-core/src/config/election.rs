//! How the active scheduler is chosen and where the scheduler candidates are
//! (`PS_SCHEDULERS`, `PS_ELECTION`, `PS_ETCD_ENDPOINTS`, `PS_ETCD_PREFIX`); the rules
//! that act on it are in [`crate::failover`].

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
) -> Result<ElectionMode, (&'static str, String)> {
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
                return Err((
                    "PS_ETCD_ENDPOINTS",
                    "not set; PS_ELECTION=etcd needs the etcd endpoints, e.g. http://10.0.0.5:2379".into(),
                ));
            }
            let prefix = prefix.unwrap_or("/psrs").trim_end_matches('/').to_string();
            if !prefix.starts_with('/') {
                return Err(("PS_ETCD_PREFIX", format!("'{prefix}' must start with '/'")));
            }
            Ok(ElectionMode::Etcd { endpoints, prefix })
        }
        other => Err(("PS_ELECTION", format!("'{other}' is not embedded or etcd"))),
    }
}

/// Parses a `host:port,host:port` list of scheduler candidates; the error is one line.
pub fn parse_candidates(s: &str) -> Result<Vec<(String, u16)>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, port) = part
            .rsplit_once(':')
            .ok_or_else(|| format!("'{part}' is not host:port"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("'{part}': '{port}' is not a port (1-65535)"))?;
        if host.is_empty() {
            return Err(format!("'{part}' has no host"));
        }
        if out.iter().any(|(h, p)| h == host && *p == port) {
            return Err(format!("'{part}' is listed twice"));
        }
        out.push((host.to_string(), port));
    }
    if out.is_empty() {
        return Err("no scheduler listed".into());
    }
    if out.len() > 16 {
        return Err("more than 16 schedulers".into());
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
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        assert_eq!(parse_election(None, None, None), Ok(ElectionMode::Embedded));
        assert_eq!(
            parse_election(Some("etcd"), Some("http://a:1, http://b:2"), Some("/job/")),
            Ok(ElectionMode::Etcd {
                endpoints: vec!["http://a:1".into(), "http://b:2".into()],
                prefix: "/job".into()
            })
        );
        assert_eq!(
            parse_election(Some("etcd"), None, None).unwrap_err().0,
            "PS_ETCD_ENDPOINTS"
        );
        assert_eq!(parse_election(Some("raft"), None, None).unwrap_err().0, "PS_ELECTION");
        assert_eq!(
            parse_election(Some("etcd"), Some("h:1"), Some("x")).unwrap_err().0,
            "PS_ETCD_PREFIX"
        );
    }
}
