//! The van's side of scheduler failover: the [`Host`] it lends the failover shell
//! ([`crate::failover`]), and the failover queries the layers above ask the van.

use super::Van;
use crate::failover::{Epoch, Host, LockService};
use crate::message::Message;
use bytes::Bytes;
use std::cell::Cell;
use std::io;
use std::sync::Arc;

thread_local! {
    /// True on a transport's receiving thread: it must not wait for acks that only it
    /// could deliver.
    pub(super) static IN_RECV: Cell<bool> = const { Cell::new(false) };
}

impl Host for Van {
    fn now_ms(&self) -> u64 {
        Van::now_ms(self)
    }

    fn send(&self, msg: Message) -> io::Result<usize> {
        Van::send(self, msg)
    }

    fn connect(&self, key: i32, host: &str, port: u16) -> io::Result<()> {
        self.transport.connect(key, host, port)
    }

    fn flush(&self) {
        crate::van::cork::flush();
    }

    fn on_receiving_thread(&self) -> bool {
        IN_RECV.with(|r| r.get())
    }

    fn export_core(&self) -> Option<Vec<u8>> {
        self.sched.as_ref().map(|c| c.lock().export())
    }

    fn resume_watch(&self, now_ms: u64) {
        if let Some(core) = &self.sched {
            core.lock().resume_watch(now_ms);
        }
    }

    fn take_over(&self, core: &[u8], now_ms: u64) {
        self.me.write().is_recovery = true;
        let me = self.my_node();
        let adopted = self.sched.as_ref().map(|c| c.lock().adopt(core, me, now_ms));
        match adopted {
            Some(Ok(actions)) => self.execute(actions),
            Some(Err(e)) => log::error!("{e}; waiting for the nodes to register again"),
            None => {}
        }
    }
}

impl Van {
    /// The epoch this process follows (its own while it is the active scheduler), and
    /// whether this process is the active scheduler.
    pub fn scheduler_epoch(&self) -> (Epoch, bool) {
        self.fo.scheduler_epoch()
    }

    /// The address of scheduler candidate `i`.
    pub fn scheduler_addr(&self, i: usize) -> String {
        self.fo.scheduler_addr(i)
    }

    /// Active scheduler: the application's new state (the master's queues) reaches the
    /// live standbys before this returns. Fails if this scheduler is not active.
    pub fn replicate_app(&self, state: Bytes) -> Result<(), String> {
        self.fo.replicate_app(self, state)
    }

    /// The application state last received from the active scheduler (a standby that
    /// took over resumes from it), if any.
    pub fn replicated_app_state(&self) -> Option<Bytes> {
        self.fo.replicated_app_state()
    }

    /// Hands a scheduler's van the lock service `PS_ELECTION=etcd` needs (before
    /// [`Van::start`]); the binary builds it.
    pub fn set_lock_service(&self, ls: Arc<dyn LockService>) {
        self.fo.set_lock_service(ls);
    }

    /// Sends `m` (a copy each) to every scheduler candidate but this one; on a single
    /// scheduler, to the scheduler.
    pub(super) fn send_to_schedulers(&self, m: Message) {
        self.fo.send_to_schedulers(self, m);
    }

    /// Active scheduler: the node table changed; stream it to the standbys.
    pub(super) fn replicate_core(&self) {
        self.fo.replicate_core(self);
    }
}
