//! A TCP van connection's socket: TCP, or, to a node on this host, a Unix socket
//! (`PS_LOCAL_SOCKET`, on by default). Both carry the same bytes (handshake, messages,
//! shared-memory offers); a Unix socket skips the loopback TCP stack (segments,
//! acknowledgements, the softirq that delivers them), which is most of the kernel's
//! cost per small message between two processes of one host.
//!
//! A node listening on TCP `ip:port` also listens on the abstract Unix socket
//! [`local_name`]`(ip:port)`: abstract names belong to the network namespace and vanish
//! with the socket (nothing is left behind in the file system when a process dies),
//! and only a process in the same network namespace can reach one, which is what
//! "the same host" means to an IP address. A node opening a link to an address of this
//! host tries that name first (then the wildcard listener's, for a node bound to all
//! interfaces) and falls back to TCP when there is none.

use crate::addr::{system::SystemLookup, HostLookup};
use crate::auth::gate::Peer;
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener, UnixStream};
use std::time::Duration;

/// An open connection of the TCP van.
#[derive(Debug)]
pub enum Stream {
    /// A TCP connection.
    Tcp(TcpStream),
    /// A Unix socket to a node on this host, with the TCP address it stands for (the
    /// peer's listening address on an outgoing link, loopback on an accepted one):
    /// what the guard's per-address limits and the logs see.
    Unix(UnixStream, SocketAddr),
}

/// True if `ip` is this host's: loopback or one of its interfaces' addresses.
pub fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || SystemLookup.local_addrs().contains(&ip)
}

/// The abstract Unix socket name that stands for the TCP listener at `addr`.
pub fn local_name(addr: SocketAddr) -> String {
    format!("psrs-van/{addr}")
}

/// Listens on the Unix socket standing for the TCP listener at `addr` (see the module
/// docs).
pub fn listen_local(addr: SocketAddr) -> io::Result<UnixListener> {
    UnixListener::bind_addr(&UnixAddr::from_abstract_name(local_name(addr))?)
}

/// Connects to `addr`, tuned ([`Stream::tune`]): through its Unix socket when `local`
/// and `addr` is an address of this host that has one ([`connect_local`]), over TCP
/// otherwise (within `timeout`; None: the system's).
pub fn connect(addr: SocketAddr, local: bool, timeout: Option<Duration>) -> io::Result<Stream> {
    let unix = (local && is_local(addr.ip())).then(|| connect_local(addr)).flatten();
    let s = match unix {
        Some(s) => s,
        None => Stream::Tcp(match timeout {
            Some(t) => TcpStream::connect_timeout(&addr, t)?,
            None => TcpStream::connect(addr)?,
        }),
    };
    s.tune();
    Ok(s)
}

/// Connects to the node listening on `addr`, an address of this host, through its Unix
/// socket: its own name first, then a wildcard listener's on the same port. `None` if
/// neither is there or its backlog is full (a stopped process): the caller connects
/// over TCP, with that path's timeout. Never blocks.
pub fn connect_local(addr: SocketAddr) -> Option<Stream> {
    let wildcards = [IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V6(Ipv6Addr::UNSPECIFIED)];
    std::iter::once(addr)
        .chain(wildcards.map(|ip| SocketAddr::new(ip, addr.port())))
        .find_map(|name| connect_now(&local_name(name)).ok())
        .map(|s| Stream::Unix(s, addr))
}

/// Connects to the abstract Unix socket `name` without blocking: a stream socket's
/// connect either lands in the listener's backlog at once or fails (`EAGAIN` when the
/// backlog is full, `ECONNREFUSED` when nothing listens). The address is laid out as
/// [`UnixAddr::from_abstract_name`] lays it out (a NUL, then the name, no terminator).
fn connect_now(name: &str) -> io::Result<UnixStream> {
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: socket() has no memory arguments; the descriptor is owned at once
    let fd = unsafe { libc::socket(libc::AF_UNIX, flags, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nobody else owns
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    if bytes.len() + 1 > sa.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "socket name too long"));
    }
    for (d, s) in sa.sun_path[1..].iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len()) as libc::socklen_t;
    // SAFETY: sa is a valid sockaddr_un of at least len bytes
    let r = unsafe { libc::connect(sock.as_raw_fd(), (&sa as *const libc::sockaddr_un).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let s = UnixStream::from(sock);
    s.set_nonblocking(false)?;
    Ok(s)
}

/// The pid of the process at the other end of Unix socket `s` (`SO_PEERCRED`).
fn peer_pid(s: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writes of the sizes given
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The address an accepted Unix connection stands for: loopback (the peer is on this
/// host; its own address is not known).
pub fn accepted_local() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Tcp(s)
    }
}

macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            Stream::Tcp($s) => $e,
            Stream::Unix($s, _) => $e,
        }
    };
}

impl Stream {
    /// The peer's address (for a Unix socket, the TCP address it stands for).
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr(),
            Stream::Unix(_, a) => Ok(*a),
        }
    }

    /// Whom this accepted connection's failed handshakes count against: the process at
    /// the other end of a Unix socket (its pid, from `SO_PEERCRED`), the socket alone
    /// for TCP from an address of this host (which every node of the host shares), the
    /// address for TCP from elsewhere.
    pub fn who(&self) -> Peer {
        match self {
            Stream::Unix(s, _) => peer_pid(s).map_or(Peer::Socket, Peer::Process),
            Stream::Tcp(s) => match s.peer_addr() {
                Ok(a) if !is_local(a.ip()) => Peer::Addr(a.ip()),
                _ => Peer::Socket,
            },
        }
    }

    /// True for a Unix socket.
    pub fn is_local(&self) -> bool {
        matches!(self, Stream::Unix(..))
    }

    /// Sets the socket options every link has: no Nagle delay on TCP.
    pub fn tune(&self) {
        if let Stream::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    /// Another handle to the same socket.
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s, a) => Stream::Unix(s.try_clone()?, *a),
        })
    }

    /// Reads without taking the bytes.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.peek(buf),
            // SAFETY: a valid, exclusively borrowed buffer of buf.len() bytes
            Stream::Unix(s, _) => {
                let n = unsafe { libc::recv(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_PEEK) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }
        }
    }

    /// Switches non-blocking mode.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        each!(self, s => s.set_nonblocking(on))
    }

    /// Sets the read timeout (None: none).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        each!(self, s => s.set_read_timeout(t))
    }

    /// Sets the write timeout (None: none).
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        each!(self, s => s.set_write_timeout(t))
    }

    /// Shuts down one or both directions.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        each!(self, s => s.shutdown(how))
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        each!(self, s => s.as_raw_fd())
    }
}

impl Read for &Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        each!(*self, s => (&*s).read(buf))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for &Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        each!(*self, s => (&*s).write(buf))
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        each!(*self, s => (&*s).write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&*self).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_local_listener_is_found_by_its_address_or_as_a_wildcard_and_tcp_otherwise() {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        assert!(connect_local(addr).is_none(), "nothing listens on the Unix name yet");
        let unix = listen_local(addr).unwrap();
        let mut out = connect_local(addr).expect("the listener's own name");
        assert!(out.is_local());
        assert_eq!(out.peer_addr().unwrap(), addr, "stands for the TCP address");
        let (inn, _) = unix.accept().unwrap();
        let mut inn = Stream::Unix(inn, accepted_local());
        out.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        assert_eq!(inn.peek(&mut got).unwrap(), 4, "peeked");
        inn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        assert!(
            listen_local(addr).is_err(),
            "one listener per name, as one per TCP address"
        );
        drop(unix);
        assert!(connect_local(addr).is_none(), "the name went with its socket");

        // a node bound to every interface is reached through the wildcard name
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), addr.port());
        let _wild = listen_local(any).unwrap();
        assert!(connect_local(addr).is_some_and(|s| s.is_local()));
    }

    /// A listener that stopped accepting (a stopped process) fills its backlog; a
    /// connect then fails at once (the caller uses TCP) instead of waiting for it.
    #[test]
    fn a_full_backlog_is_refused_without_waiting() {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp.local_addr().unwrap();
        let _unix = listen_local(addr).unwrap(); // never accepts
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            while kept.len() < 100_000 {
                match connect_local(addr) {
                    Some(s) => kept.push(s),
                    None => break,
                }
            }
            let _ = tx.send(kept.len());
        });
        let n = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a connect to a full backlog blocked");
        assert!(n > 0 && n < 100_000, "{n} connections before the backlog was full");
    }
}
