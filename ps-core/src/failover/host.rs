//! What the failover shell needs of the van it serves. The van implements it and lends
//! itself to every call of the shell, so the shell never names the van.

use crate::message::Message;
use std::io;

/// The van, as the failover shell sees it.
pub trait Host {
    /// Milliseconds since the van was created (the clock every rule is fed).
    fn now_ms(&self) -> u64;
    /// The Unix time now in milliseconds, for log lines (the van clock's).
    fn unix_ms(&self) -> u64 {
        crate::van::system_unix_ms()
    }
    /// Sends `msg` to `msg.meta.recver` like any other message of the van (through
    /// the failover's gate and stamp, tracked by the resender when it is on).
    fn send(&self, msg: Message) -> io::Result<usize>;
    /// Sends `msg`, already stamped by the failover machine, as it is (tracked by
    /// the resender when it is on): the machine's own messages and the acts it held.
    fn send_stamped(&self, msg: Message) -> io::Result<usize>;
    /// Opens, or points anew, the van's link `key` to `host:port`.
    fn connect(&self, key: i32, host: &str, port: u16) -> io::Result<()>;
    /// The process (incarnation) this node holds for node `id`, from the node tables
    /// it took (None if it knows none).
    fn holder(&self, id: i32) -> Option<u64>;
    /// The scheduler's node table, exported (None on a process that is no scheduler).
    fn export_core(&self) -> Option<Vec<u8>>;
    /// This scheduler takes over as the active one with the node table `core` (as
    /// exported by the active scheduler it follows) and the application's state `app`
    /// (as the active one replicated it; empty if none) at `now_ms`.
    fn take_over(&self, core: &[u8], app: &[u8], now_ms: u64);
}
