//! A [`HostLookup`] that waits for a name to resolve: the name of a container or a
//! pod can resolve only some time after it starts (podman's and Kubernetes' DNS learn
//! of it asynchronously), so a node started at the same moment as its scheduler asks
//! again for a while before a name that does not resolve is an error.

use super::host::HostLookup;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a name that does not resolve is asked again before it is an error.
pub const RESOLVE_PATIENCE: Duration = Duration::from_secs(5);
/// The pause between two attempts.
const RESOLVE_EVERY: Duration = Duration::from_millis(250);

/// `inner`'s answers, with [`HostLookup::resolve`] tried again every 250 ms for up to
/// a patience (in attempts and in time, whichever ends first).
pub struct Patient<L> {
    inner: L,
    patience: Duration,
    sleep: fn(Duration),
}

impl<L: HostLookup> Patient<L> {
    /// `inner`, asked again for up to `patience`, sleeping between attempts.
    pub fn new(inner: L, patience: Duration) -> Patient<L> {
        Patient {
            inner,
            patience,
            sleep: std::thread::sleep,
        }
    }

    fn attempts(&self) -> u32 {
        (self.patience.as_millis() / RESOLVE_EVERY.as_millis()) as u32
    }
}

impl<L: HostLookup> HostLookup for Patient<L> {
    fn resolve(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            let err = match self.inner.resolve(host) {
                Ok(ips) => return Ok(ips),
                Err(e) => e,
            };
            if attempt >= self.attempts() || start.elapsed() >= self.patience {
                return Err(err);
            }
            if attempt == 0 {
                log::warn!(
                    "'{host}' does not resolve yet ({err}); asking again for up to {} s (a container's or pod's name can resolve only after it started)",
                    self.patience.as_secs_f64()
                );
            }
            attempt += 1;
            (self.sleep)(RESOLVE_EVERY);
        }
    }

    fn route_source(&self, to: IpAddr) -> std::io::Result<IpAddr> {
        self.inner.route_source(to)
    }

    fn interface_addrs(&self, name: &str) -> Vec<IpAddr> {
        self.inner.interface_addrs(name)
    }

    fn local_addrs(&self) -> Vec<IpAddr> {
        self.inner.local_addrs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::io::{Error, ErrorKind};

    /// Resolves `name` to 10.0.0.7 from its `late`-th question on.
    struct Late {
        late: u32,
        asked: Cell<u32>,
    }

    impl HostLookup for Late {
        fn resolve(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
            self.asked.set(self.asked.get() + 1);
            if self.asked.get() < self.late {
                return Err(Error::new(ErrorKind::NotFound, "no address"));
            }
            Ok(vec!["10.0.0.7".parse().unwrap()])
        }
        fn route_source(&self, to: IpAddr) -> std::io::Result<IpAddr> {
            Ok(to)
        }
        fn interface_addrs(&self, _name: &str) -> Vec<IpAddr> {
            Vec::new()
        }
        fn local_addrs(&self) -> Vec<IpAddr> {
            Vec::new()
        }
    }

    fn patient(late: u32) -> Patient<Late> {
        Patient {
            inner: Late {
                late,
                asked: Cell::new(0),
            },
            patience: RESOLVE_PATIENCE,
            sleep: |_| {},
        }
    }

    #[test]
    fn a_name_that_resolves_late_within_the_patience_resolves() {
        let p = patient(12);
        assert_eq!(
            p.resolve("scheduler").unwrap(),
            vec!["10.0.0.7".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(p.inner.asked.get(), 12);
    }

    #[test]
    fn a_name_that_never_resolves_is_the_name_services_error_after_the_patience() {
        let p = patient(u32::MAX);
        assert_eq!(p.resolve("nowhere").unwrap_err().kind(), ErrorKind::NotFound);
        // once, then every 250 ms for 5 s
        assert_eq!(p.inner.asked.get(), 21);
    }

    #[test]
    fn a_name_that_resolves_is_asked_once() {
        let p = patient(1);
        p.resolve("scheduler").unwrap();
        assert_eq!(p.inner.asked.get(), 1);
    }
}
