//! The door of a node's listening socket, as a pure struct (time is passed in as
//! milliseconds): connections per peer address, handshakes in progress per address
//! (a peer holding many slow handshakes open cannot take every slot), and a rate limit
//! on failed handshakes — a [`Peer`] that failed `max_failures` times within
//! `window_ms` is refused for `ban_ms`. Failures count against the peer that made
//! them: a remote address, or, on this host (whose nodes all share the loopback
//! address, and reach each other over Unix sockets, which have none), the process at
//! the other end of a Unix socket, or the socket alone for TCP from an address of this
//! host (closing it is the whole penalty): garbage from one local process does not
//! shut out the host's own nodes. Only a handshake that went wrong through the peer's
//! fault counts ([`HandshakeFailure::counts_against_peer`]): a peer that closed or
//! reset the connection mid-handshake (an honest node that gave up waiting, a port
//! probe) is not an authentication failure.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::IpAddr;

/// Whom a connection's failed handshakes count against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A host other than this one, by its address.
    Addr(IpAddr),
    /// The process (by pid) at the other end of a Unix socket on this host.
    Process(u32),
    /// TCP from an address of this host: the socket alone (never banned).
    Socket,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Addr(ip) => write!(f, "{ip}"),
            Peer::Process(pid) => write!(f, "process {pid}"),
            Peer::Socket => write!(f, "a socket of this host"),
        }
    }
}

/// Why a connection was refused at the door; `Display` is one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateRefusal {
    /// Too many failed handshakes from the address lately.
    RateLimited {
        /// Milliseconds until it is admitted again.
        remaining_ms: u64,
    },
    /// The address already holds the most connections allowed.
    TooManyConnections(usize),
    /// The address already has the most handshakes in progress allowed.
    TooManyHandshakes(usize),
}

impl fmt::Display for GateRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateRefusal::RateLimited { remaining_ms } => write!(
                f,
                "rate-limited after repeated failed handshakes ({remaining_ms} ms left)"
            ),
            GateRefusal::TooManyConnections(n) => {
                write!(f, "it already has {n} connections open (PS_MAX_CONNS_PER_PEER)")
            }
            GateRefusal::TooManyHandshakes(n) => {
                write!(f, "it already has {n} handshakes in progress")
            }
        }
    }
}

impl std::error::Error for GateRefusal {}

/// How a handshake on an accepted connection failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The peer closed before sending a byte (a port probe).
    Closed,
    /// The peer closed or reset the connection mid-handshake (it gave up waiting,
    /// or was killed).
    CutShort(String),
    /// The peer said nothing for the handshake timeout while holding the connection.
    Silent(std::time::Duration),
    /// The peer's bytes were refused: not TLS, a certificate of another CA, expired,
    /// without a role (the reason, one line).
    Refused(String),
    /// This side could not set up the socket.
    Local(String),
}

impl HandshakeFailure {
    /// True if the failure is the peer's doing and counts toward its rate limit: a
    /// refusal of what it sent, or holding a connection without speaking. A closed,
    /// cut or locally failed handshake is not an authentication failure.
    pub fn counts_against_peer(&self) -> bool {
        matches!(self, HandshakeFailure::Refused(_) | HandshakeFailure::Silent(_))
    }
}

impl fmt::Display for HandshakeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeFailure::Closed => write!(f, "closed before its handshake"),
            HandshakeFailure::CutShort(e) => write!(f, "handshake cut short by the peer: {e}"),
            HandshakeFailure::Silent(t) => write!(f, "silent for {t:?} (PS_HANDSHAKE_TIMEOUT)"),
            HandshakeFailure::Refused(r) => write!(f, "{r}"),
            HandshakeFailure::Local(e) => write!(f, "socket setup failed: {e}"),
        }
    }
}

impl std::error::Error for HandshakeFailure {}

/// Connection counts and failure history per peer address.
pub struct Gate {
    max_conns: usize,
    max_handshakes: usize,
    handshaking: HashMap<IpAddr, usize>,
    max_failures: usize,
    window_ms: u64,
    ban_ms: u64,
    conns: HashMap<IpAddr, usize>,
    failures: HashMap<Peer, VecDeque<u64>>,
    banned_until: HashMap<Peer, u64>,
}

/// Addresses remembered before old entries are pruned.
const PRUNE_AT: usize = 4096;

/// Handshakes in progress at once from one address (every node of a host shares its
/// address, and a starting cluster opens many links at once).
pub const MAX_HANDSHAKES_PER_PEER: usize = 256;

impl Gate {
    /// A gate allowing `max_conns` connections per address and `max_failures` failed
    /// handshakes per `window_ms` before a `ban_ms` ban.
    pub fn new(max_conns: usize, max_failures: usize, window_ms: u64, ban_ms: u64) -> Gate {
        Gate {
            max_conns,
            max_handshakes: MAX_HANDSHAKES_PER_PEER,
            handshaking: HashMap::new(),
            max_failures,
            window_ms,
            ban_ms,
            conns: HashMap::new(),
            failures: HashMap::new(),
            banned_until: HashMap::new(),
        }
    }

    /// A new connection from `ip`, made by `who`, at `now`: admitted (and counted
    /// until [`Gate::closed`]) or refused.
    pub fn admit(&mut self, ip: IpAddr, who: Peer, now: u64) -> Result<(), GateRefusal> {
        if let Some(&until) = self.banned_until.get(&who) {
            if now < until {
                return Err(GateRefusal::RateLimited {
                    remaining_ms: until - now,
                });
            }
            self.banned_until.remove(&who);
        }
        let n = self.conns.entry(ip).or_insert(0);
        if *n >= self.max_conns {
            return Err(GateRefusal::TooManyConnections(*n));
        }
        *n += 1;
        Ok(())
    }

    /// A handshake from `ip` starts: admitted (counted until [`Gate::handshake_done`])
    /// unless the address has [`MAX_HANDSHAKES_PER_PEER`] in progress.
    pub fn handshake_started(&mut self, ip: IpAddr) -> Result<(), GateRefusal> {
        let n = self.handshaking.entry(ip).or_insert(0);
        if *n >= self.max_handshakes {
            return Err(GateRefusal::TooManyHandshakes(*n));
        }
        *n += 1;
        Ok(())
    }

    /// A handshake from `ip` ended (either way).
    pub fn handshake_done(&mut self, ip: IpAddr) {
        if let Some(n) = self.handshaking.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.handshaking.remove(&ip);
            }
        }
    }

    /// A connection admitted from `ip` closed.
    pub fn closed(&mut self, ip: IpAddr) {
        if let Some(n) = self.conns.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.conns.remove(&ip);
            }
        }
    }

    /// A handshake by `who` failed at `now` as `how`; true if this failure starts a
    /// ban. Failures that do not count against the peer, and a socket of this host's
    /// ([`Peer::Socket`]), change nothing.
    pub fn failed(&mut self, who: Peer, how: &HandshakeFailure, now: u64) -> bool {
        if !how.counts_against_peer() || who == Peer::Socket {
            return false;
        }
        if self.failures.len() >= PRUNE_AT {
            let (w, b) = (self.window_ms, &self.banned_until);
            self.failures
                .retain(|k, v| v.back().is_some_and(|&t| now.saturating_sub(t) < w) || b.contains_key(k));
            self.banned_until.retain(|_, &mut until| until > now);
        }
        let f = self.failures.entry(who).or_default();
        f.push_back(now);
        while f.front().is_some_and(|&t| now.saturating_sub(t) >= self.window_ms) {
            f.pop_front();
        }
        if f.len() >= self.max_failures {
            f.clear();
            self.banned_until.insert(who, now + self.ban_ms);
            return true;
        }
        false
    }

    /// Connections currently counted for `ip`.
    pub fn connections(&self, ip: IpAddr) -> usize {
        self.conns.get(&ip).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad() -> HandshakeFailure {
        HandshakeFailure::Refused("a certificate of another CA".into())
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn who(last: u8) -> Peer {
        Peer::Addr(ip(last))
    }

    /// The connection_matrix stall: every local node's connection to a scheduler that
    /// was not accepting yet gave up at once; none of that is an authentication
    /// failure, so 127.0.0.1 stays admitted.
    #[test]
    fn peers_giving_up_mid_handshake_are_not_banned() {
        let mut g = Gate::new(1024, 3, 1000, 5000);
        for t in 0..100 {
            let cut = HandshakeFailure::CutShort("failed to fill whole buffer".into());
            assert!(!g.failed(who(1), &cut, t));
            assert!(!g.failed(who(1), &HandshakeFailure::Closed, t));
        }
        assert_eq!(g.admit(ip(1), who(1), 100), Ok(()));
        let silent = HandshakeFailure::Silent(std::time::Duration::from_secs(10));
        assert!(!g.failed(who(1), &silent, 200));
        assert!(!g.failed(who(1), &bad(), 300));
        assert!(g.failed(who(1), &HandshakeFailure::Refused("not TLS".into()), 400));
        assert!(g.admit(ip(1), who(1), 500).is_err(), "refusals and silence do count");
    }

    #[test]
    fn handshakes_in_progress_are_limited_per_address() {
        let mut g = Gate::new(1024, 3, 1000, 5000);
        g.max_handshakes = 2;
        assert_eq!(g.handshake_started(ip(1)), Ok(()));
        assert_eq!(g.handshake_started(ip(1)), Ok(()));
        assert_eq!(g.handshake_started(ip(1)), Err(GateRefusal::TooManyHandshakes(2)));
        assert_eq!(g.handshake_started(ip(2)), Ok(()), "other addresses are not affected");
        g.handshake_done(ip(1));
        assert_eq!(g.handshake_started(ip(1)), Ok(()));
        g.handshake_done(ip(9)); // never started: ignored
    }

    #[test]
    fn counts_connections_per_address() {
        let mut g = Gate::new(2, 3, 1000, 5000);
        assert_eq!(g.admit(ip(1), who(1), 0), Ok(()));
        assert_eq!(g.admit(ip(1), who(1), 0), Ok(()));
        assert_eq!(g.admit(ip(1), who(1), 0), Err(GateRefusal::TooManyConnections(2)));
        assert_eq!(g.admit(ip(2), who(2), 0), Ok(()));
        g.closed(ip(1));
        assert_eq!(g.connections(ip(1)), 1);
        assert_eq!(g.admit(ip(1), who(1), 0), Ok(()));
        g.closed(ip(9)); // never admitted: ignored
    }

    #[test]
    fn repeated_failures_ban_the_address_for_a_while() {
        let mut g = Gate::new(100, 3, 1000, 5000);
        assert!(!g.failed(who(1), &bad(), 0));
        assert!(!g.failed(who(1), &bad(), 100));
        // an old failure left the window: still two
        assert!(!g.failed(who(1), &bad(), 1050));
        assert!(g.failed(who(1), &bad(), 1060)); // three within 1000 ms
        assert_eq!(
            g.admit(ip(1), who(1), 2000),
            Err(GateRefusal::RateLimited { remaining_ms: 4060 })
        );
        assert_eq!(g.admit(ip(2), who(2), 2000), Ok(()), "other addresses are not affected");
        assert_eq!(g.admit(ip(1), who(1), 6060), Ok(()), "the ban ends");
        assert!(!g.failed(who(1), &bad(), 6100), "the count starts again");
    }

    /// Failures count against the process at the other end of a Unix socket, and
    /// not at all for TCP from this host: the host's own nodes, which share its
    /// loopback address, are never shut out by another local process's garbage.
    #[test]
    fn failures_on_this_host_count_against_the_process_not_the_address() {
        let mut g = Gate::new(100, 3, 1000, 5000);
        let lo = IpAddr::from([127, 0, 0, 1]);
        for t in 0..10 {
            assert!(!g.failed(Peer::Socket, &bad(), t), "a local TCP socket is never banned");
        }
        assert_eq!(g.admit(lo, Peer::Socket, 20), Ok(()));
        assert!(!g.failed(Peer::Process(77), &bad(), 30));
        assert!(!g.failed(Peer::Process(77), &bad(), 31));
        assert!(g.failed(Peer::Process(77), &bad(), 32));
        assert!(
            g.admit(lo, Peer::Process(77), 40).is_err(),
            "the garbage's process is banned"
        );
        assert_eq!(
            g.admit(lo, Peer::Process(78), 40),
            Ok(()),
            "another local process is not"
        );
        assert_eq!(g.admit(lo, Peer::Socket, 40), Ok(()), "nor local TCP");
        assert_eq!(Peer::Process(77).to_string(), "process 77");
    }

    #[test]
    fn memory_stays_bounded_under_many_addresses() {
        let mut g = Gate::new(1, 2, 10, 10);
        for i in 0..20_000u32 {
            g.failed(Peer::Addr(IpAddr::from(i.to_be_bytes())), &bad(), u64::from(i) * 100);
        }
        assert!(g.failures.len() <= PRUNE_AT + 1);
    }
}
