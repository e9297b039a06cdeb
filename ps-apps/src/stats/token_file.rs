//! The API's token on disk, as Jupyter keeps its own: a cluster without security makes
//! a random token at start (or takes the one it made before, so a restarted scheduler
//! keeps its dashboard's cookie valid) and keeps it in `WORK_DIR/api-token`, mode 0600.
//! It also publishes `api-PORT.json` (the address, the URL, the token, its pid; mode
//! 0600) in a per-user runtime directory (`$XDG_RUNTIME_DIR/psrs`, else
//! `~/.local/share/psrs/runtime`, mode 0700), so `psrs job` on the same host finds the
//! token of the API it is pointed at by itself ([`find_token`]). Entries of processes
//! that are gone are pruned when a new one is published.

use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The token file's name in the work dir.
pub const TOKEN_FILE: &str = "api-token";

/// A new random token: 24 bytes from the system's generator, in hex.
pub fn generate() -> io::Result<String> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| io::Error::other("the system's random generator failed"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Whether `t` is a token this module could have made (hex, 32 to 128 characters).
fn well_formed(t: &str) -> bool {
    (32..=128).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Writes `text` to `path` through a temporary file of mode 0600 renamed into place.
fn write_private(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// The token in `dir/api-token` if it is well formed and only its owner may read it;
/// else a new one, written there (mode 0600, `dir` made if missing).
pub fn load_or_create(dir: &Path) -> io::Result<String> {
    let path = dir.join(TOKEN_FILE);
    if let Ok(meta) = std::fs::metadata(&path) {
        let private = meta.permissions().mode() & 0o077 == 0;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let t = text.trim();
        if private && well_formed(t) {
            return Ok(t.to_string());
        }
        log::warn!(
            "{}: {}; making a new token",
            path.display(),
            if private { "not a token" } else { "others may read it" }
        );
    }
    std::fs::create_dir_all(dir)?;
    let t = generate()?;
    write_private(&path, &format!("{t}\n"))?;
    Ok(t)
}

/// What a running API publishes in the runtime directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The address it is bound to.
    pub addr: SocketAddr,
    /// Its dashboard's URL, token included.
    pub url: String,
    /// The token.
    pub token: String,
    /// The serving process.
    pub pid: u32,
}

/// The per-user directory of [`Entry`] files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeDir(pub PathBuf);

impl RuntimeDir {
    /// `$XDG_RUNTIME_DIR/psrs`, else `$HOME/.local/share/psrs/runtime`, else None;
    /// `var` reads a variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<RuntimeDir> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        if let Some(x) = set("XDG_RUNTIME_DIR") {
            return Some(RuntimeDir(Path::new(&x).join("psrs")));
        }
        set("HOME").map(|h| RuntimeDir(Path::new(&h).join(".local/share/psrs/runtime")))
    }

    fn file(&self, port: u16) -> PathBuf {
        self.0.join(format!("api-{port}.json"))
    }

    /// Writes `e` as `api-PORT.json` (the directory made with mode 0700), after
    /// removing the entries of processes that are gone. Returns the file.
    pub fn publish(&self, e: &Entry) -> io::Result<PathBuf> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.0)?;
        std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o700))?;
        self.prune();
        let path = self.file(e.addr.port());
        let text = serde_json::to_string(e).map_err(io::Error::other)?;
        write_private(&path, &format!("{text}\n"))?;
        Ok(path)
    }

    /// The entry for `port`, if its process still runs.
    pub fn lookup(&self, port: u16) -> Option<Entry> {
        let text = std::fs::read_to_string(self.file(port)).ok()?;
        let e: Entry = serde_json::from_str(&text).ok()?;
        alive(e.pid).then_some(e)
    }

    fn prune(&self) {
        let Ok(dir) = std::fs::read_dir(&self.0) else {
            return;
        };
        for f in dir.flatten() {
            let p = f.path();
            let name = f.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("api-") && name.ends_with(".json")) {
                continue;
            }
            let gone = std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str::<Entry>(&t).ok())
                .is_none_or(|e| !alive(e.pid));
            if gone {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// The host (without brackets) and port an API URL (`http://HOST:PORT/...`, a bare
/// `HOST:PORT`) points at; the port defaults to the scheme's.
pub fn authority(url: &str) -> Option<(String, u16)> {
    let full = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let uri: hyper::Uri = full.parse().ok()?;
    let a = uri.authority()?;
    let host = a.host().trim_start_matches('[').trim_end_matches(']').to_string();
    let port = a
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
    Some((host, port))
}

fn is_local(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether an API bound to `bound` is the one `host` names: the same address, or a
/// loopback name or address when it listens on loopback or on every address. A token
/// is never sent to a host that merely has the same port.
pub fn serves(bound: SocketAddr, host: &str) -> bool {
    if host.parse::<IpAddr>().is_ok_and(|ip| ip == bound.ip()) {
        return true;
    }
    is_local(host) && (bound.ip().is_loopback() || bound.ip().is_unspecified())
}

/// The token of the API at `url`, for a client on this host: the runtime directory's
/// entry for its port when that API is the one the URL names ([`serves`]), else, for
/// a loopback URL, `work_dir/api-token` (`psrs-cluster`, `psrs cluster`'s default work
/// dir, for a client started where the cluster was).
pub fn find_token(url: &str, runtime: Option<&RuntimeDir>, work_dir: &Path) -> Option<String> {
    let (host, port) = authority(url)?;
    if let Some(e) = runtime.and_then(|r| r.lookup(port)) {
        if serves(e.addr, &host) {
            return Some(e.token);
        }
    }
    if !is_local(&host) {
        return None;
    }
    let t = std::fs::read_to_string(work_dir.join(TOKEN_FILE)).ok()?;
    let t = t.trim();
    well_formed(t).then(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_private_and_kept() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("work");
        let t = load_or_create(&dir).unwrap();
        assert!(well_formed(&t) && t.len() == 48, "{t}");
        let meta = std::fs::metadata(dir.join(TOKEN_FILE)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(load_or_create(&dir).unwrap(), t, "kept across restarts");
        // a file others may read is replaced, as is one that holds no token
        std::fs::set_permissions(dir.join(TOKEN_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        let t2 = load_or_create(&dir).unwrap();
        assert_ne!(t2, t);
        std::fs::write(dir.join(TOKEN_FILE), "not a token").unwrap();
        std::fs::set_permissions(dir.join(TOKEN_FILE), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_ne!(load_or_create(&dir).unwrap(), t2);
        assert_ne!(generate().unwrap(), generate().unwrap());
    }

    #[test]
    fn urls_name_their_host_and_port() {
        assert_eq!(authority("http://127.0.0.1:8080"), Some(("127.0.0.1".into(), 8080)));
        assert_eq!(authority("https://h.example/jobs"), Some(("h.example".into(), 443)));
        assert_eq!(authority("http://[::1]:9/"), Some(("::1".into(), 9)));
        assert_eq!(authority("localhost:7"), Some(("localhost".into(), 7)));
        assert_eq!(authority("http://"), None);
    }

    #[test]
    fn an_entry_serves_its_own_address_and_loopback_names() {
        let lo: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lan: SocketAddr = "10.0.0.5:8080".parse().unwrap();
        assert!(serves(lo, "127.0.0.1") && serves(lo, "localhost") && serves(lo, "::1"));
        assert!(serves(any, "localhost") && serves(lan, "10.0.0.5"));
        assert!(!serves(lo, "10.0.0.5"), "another host with the same port");
        assert!(!serves(lo, "sched.example"));
        assert!(!serves(lan, "127.0.0.1"), "bound elsewhere: loopback is another server");
    }

    #[test]
    fn a_client_finds_the_token_of_the_api_it_names() {
        let d = tempfile::tempdir().unwrap();
        let rt = RuntimeDir(d.path().join("rt"));
        let e = Entry {
            addr: "127.0.0.1:18080".parse().unwrap(),
            url: "http://127.0.0.1:18080/?token=x".into(),
            token: "a".repeat(48),
            pid: std::process::id(),
        };
        rt.publish(&e).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&rt.0), 0o700);
        assert_eq!(mode(&rt.0.join("api-18080.json")), 0o600);
        let none = d.path().join("nothing");
        assert_eq!(
            find_token("http://127.0.0.1:18080", Some(&rt), &none),
            Some(e.token.clone())
        );
        assert_eq!(
            find_token("http://localhost:18080/", Some(&rt), &none),
            Some(e.token.clone())
        );
        assert_eq!(find_token("http://10.1.1.1:18080", Some(&rt), &none), None);
        assert_eq!(find_token("http://127.0.0.1:18081", Some(&rt), &none), None);
        // the work dir, for loopback only
        let work = d.path().join("work");
        let t = load_or_create(&work).unwrap();
        assert_eq!(find_token("http://127.0.0.1:18081", Some(&rt), &work), Some(t.clone()));
        assert_eq!(find_token("http://127.0.0.1:18081", None, &work), Some(t));
        assert_eq!(find_token("http://sched.example:18081", None, &work), None);
        // a gone process's entry is not used, and is pruned by the next publish
        let dead = Entry {
            addr: "127.0.0.1:18082".parse().unwrap(),
            pid: u32::MAX,
            ..e.clone()
        };
        rt.publish(&dead).unwrap();
        assert_eq!(rt.lookup(18082), None);
        rt.publish(&e).unwrap();
        assert!(!rt.0.join("api-18082.json").exists());
    }

    #[test]
    fn the_runtime_dir_follows_xdg_then_home() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(
            RuntimeDir::from_vars(vars(&[("XDG_RUNTIME_DIR", "/run/user/1"), ("HOME", "/h")])),
            Some(RuntimeDir("/run/user/1/psrs".into()))
        );
        assert_eq!(
            RuntimeDir::from_vars(vars(&[("XDG_RUNTIME_DIR", " "), ("HOME", "/h")])),
            Some(RuntimeDir("/h/.local/share/psrs/runtime".into()))
        );
        assert_eq!(RuntimeDir::from_vars(vars(&[])), None);
    }
}
