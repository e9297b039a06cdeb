//! The HTTP server's limits, and its table of open connections as a pure structure.
//!
//! A connection is *pending* from its accept until a request on it shows credentials
//! (a client certificate of the cluster naming `client` or `scheduler`, the token, the
//! token's cookie); then it is *trusted*. Pending connections are cheap to drop and
//! are dropped first: a new connection from an address that already has
//! [`ConnLimits::pending_per_ip`] pending ones closes the oldest of them, and so does
//! one beyond [`ConnLimits::pending`] or [`ConnLimits::open`] in all. So connections
//! that never finish a request (slow handshakes, a header trickled a byte at a time)
//! cannot fill the table and lock members out, even from the members' own address: a
//! member's connection is the newest, and becomes trusted within one request. Only
//! when every open connection is trusted is a new one refused.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// Largest request head (request line and headers) in bytes; a larger one is
/// answered 431 and the connection closed. Also hyper's whole read buffer, so a
/// connection that has not finished its head holds at most this much.
pub const MAX_HEAD_BYTES: usize = 8 << 10;
/// Most header fields in a request.
pub const MAX_HEADERS: usize = 64;
/// Largest request body (a job's JSON) in bytes; a larger one is answered 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// A request head must arrive within this long of the connection's start or of the
/// previous answer (which also closes idle kept-alive connections).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A read or a write that makes no progress for this long fails (a body trickled, an
/// answer not read).
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections open at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open in all.
    pub open: usize,
    /// Pending (not yet trusted) connections in all.
    pub pending: usize,
    /// Pending connections from one address.
    pub pending_per_ip: usize,
}

impl Default for ConnLimits {
    fn default() -> ConnLimits {
        ConnLimits {
            open: 512,
            pending: 256,
            pending_per_ip: 64,
        }
    }
}

/// A connection's number in the table (increasing: a lower number is older).
pub type ConnId = u64;

/// What to do with a new connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Serve it as `id`; first close the connections in `evict` (pending ones, oldest
    /// first), already gone from the table.
    Admitted {
        /// The new connection's number.
        id: ConnId,
        /// Pending connections to close to make room.
        evict: Vec<ConnId>,
    },
    /// Every open connection is trusted and the table is full: close the new one.
    Full,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    ip: IpAddr,
    trusted: bool,
}

/// The open connections, by number.
#[derive(Debug, Default)]
pub struct ConnTable {
    limits: ConnLimits,
    next: ConnId,
    open: BTreeMap<ConnId, Entry>,
}

impl ConnTable {
    /// An empty table with these limits.
    pub fn new(limits: ConnLimits) -> ConnTable {
        ConnTable {
            limits,
            next: 0,
            open: BTreeMap::new(),
        }
    }

    /// Admits a connection from `ip`, making room by evicting pending connections
    /// (oldest first): one of `ip`'s own when it has too many pending, then any when
    /// the pending or the open ones are too many.
    pub fn admit(&mut self, ip: IpAddr) -> Admission {
        let mut evict = Vec::new();
        if self.pending_from(ip) >= self.limits.pending_per_ip.max(1) {
            evict.extend(self.evict_oldest(Some(ip)));
        }
        while self.pending() >= self.limits.pending.max(1) || self.open.len() >= self.limits.open.max(1) {
            match self.evict_oldest(None) {
                Some(id) => evict.push(id),
                None if self.open.len() >= self.limits.open.max(1) => return Admission::Full,
                None => break,
            }
        }
        let id = self.next;
        self.next += 1;
        self.open.insert(id, Entry { ip, trusted: false });
        Admission::Admitted { id, evict }
    }

    /// Marks `id` trusted: it showed credentials and is no longer evicted.
    pub fn trust(&mut self, id: ConnId) {
        if let Some(e) = self.open.get_mut(&id) {
            e.trusted = true;
        }
    }

    /// Forgets `id` (closed; a connection already evicted is ignored).
    pub fn close(&mut self, id: ConnId) {
        self.open.remove(&id);
    }

    /// Whether `id` is still in the table (not closed, not evicted).
    pub fn is_open(&self, id: ConnId) -> bool {
        self.open.contains_key(&id)
    }

    /// Connections open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether no connection is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Pending connections in all.
    pub fn pending(&self) -> usize {
        self.open.values().filter(|e| !e.trusted).count()
    }

    fn pending_from(&self, ip: IpAddr) -> usize {
        self.open.values().filter(|e| !e.trusted && e.ip == ip).count()
    }

    fn evict_oldest(&mut self, ip: Option<IpAddr>) -> Option<ConnId> {
        let id = self
            .open
            .iter()
            .find(|(_, e)| !e.trusted && ip.is_none_or(|ip| e.ip == ip))
            .map(|(&id, _)| id)?;
        self.open.remove(&id);
        Some(id)
    }
}

/// At most one log line per `every_ms` for a kind of event that an attacker can
/// repeat at will (refused requests, evicted connections): the first is logged, the
/// rest within the interval counted and reported with the next line.
#[derive(Clone, Debug)]
pub struct Quiet {
    every_ms: u64,
    last_ms: Option<u64>,
    held: u64,
}

impl Quiet {
    /// One line per `every_ms` at most.
    pub fn new(every_ms: u64) -> Quiet {
        Quiet {
            every_ms,
            last_ms: None,
            held: 0,
        }
    }

    /// Whether to log an event at `now_ms`: `Some(n)` to log it, `n` being the events
    /// held back since the last line; None to hold it back.
    pub fn allow(&mut self, now_ms: u64) -> Option<u64> {
        match self.last_ms {
            Some(t) if now_ms.saturating_sub(t) < self.every_ms => {
                self.held += 1;
                None
            }
            _ => {
                self.last_ms = Some(now_ms);
                Some(std::mem::take(&mut self.held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn admitted(a: Admission) -> (ConnId, Vec<ConnId>) {
        match a {
            Admission::Admitted { id, evict } => (id, evict),
            Admission::Full => panic!("refused"),
        }
    }

    #[test]
    fn an_address_with_too_many_pending_loses_its_oldest() {
        let mut t = ConnTable::new(ConnLimits {
            open: 100,
            pending: 100,
            pending_per_ip: 3,
        });
        let ids: Vec<_> = (0..3).map(|_| admitted(t.admit(ip(1))).0).collect();
        // another address is not affected
        assert_eq!(admitted(t.admit(ip(2))).1, Vec::<ConnId>::new());
        let (new, evict) = admitted(t.admit(ip(1)));
        assert_eq!(evict, vec![ids[0]], "the oldest pending of that address");
        assert!(!t.is_open(ids[0]) && t.is_open(new));
        // a trusted connection of the address is never evicted
        t.trust(ids[1]);
        let (_, evict) = admitted(t.admit(ip(1)));
        assert!(evict.is_empty(), "{evict:?}: one trusted, so only 3 pending now");
        let (_, evict) = admitted(t.admit(ip(1)));
        assert_eq!(evict, vec![ids[2]]);
        assert!(t.is_open(ids[1]));
    }

    #[test]
    fn a_full_table_evicts_pending_connections_and_refuses_only_when_all_are_trusted() {
        let mut t = ConnTable::new(ConnLimits {
            open: 4,
            pending: 3,
            pending_per_ip: 10,
        });
        let a = admitted(t.admit(ip(1))).0;
        let b = admitted(t.admit(ip(2))).0;
        let c = admitted(t.admit(ip(3))).0;
        // pending limit: the oldest pending anywhere goes
        let (d, evict) = admitted(t.admit(ip(4)));
        assert_eq!(evict, vec![a]);
        t.trust(b);
        t.trust(c);
        t.trust(d);
        let (e, evict) = admitted(t.admit(ip(5)));
        assert!(evict.is_empty());
        assert_eq!((t.len(), t.pending()), (4, 1));
        // open limit: the one pending connection goes
        let (f, evict) = admitted(t.admit(ip(6)));
        assert_eq!(evict, vec![e]);
        t.trust(f);
        assert_eq!(t.admit(ip(7)), Admission::Full, "all four trusted");
        t.close(b);
        assert!(matches!(t.admit(ip(7)), Admission::Admitted { .. }));
        // closing an evicted or unknown connection is harmless
        t.close(a);
        t.close(999);
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn a_slow_flood_from_one_address_leaves_room_for_a_member_of_that_address() {
        let mut t = ConnTable::new(ConnLimits::default());
        for _ in 0..1000 {
            admitted(t.admit(ip(1)));
        }
        assert_eq!(t.pending(), ConnLimits::default().pending_per_ip);
        let (member, _) = admitted(t.admit(ip(1)));
        t.trust(member);
        for _ in 0..1000 {
            admitted(t.admit(ip(1)));
        }
        assert!(t.is_open(member), "a trusted connection outlives any flood");
    }

    #[test]
    fn quiet_logs_once_per_interval_and_counts_the_rest() {
        let mut q = Quiet::new(1000);
        assert_eq!(q.allow(0), Some(0));
        assert_eq!(q.allow(10), None);
        assert_eq!(q.allow(999), None);
        assert_eq!(q.allow(1000), Some(2));
        assert_eq!(q.allow(5000), Some(0));
    }
}
