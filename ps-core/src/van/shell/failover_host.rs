//! The van's side of scheduler failover: the [`Host`] it lends the failover shell
//! ([`crate::failover`]), and the failover queries the layers above ask the van.

use super::Van;
use crate::failover::{Epoch, FailoverError, Host, LockService};
use crate::message::Message;
use crate::protocol::peers::Peers;
use bytes::Bytes;
use std::io;
use std::sync::Arc;

impl Host for Van {
    fn now_ms(&self) -> u64 {
        Van::now_ms(self)
    }

    fn unix_ms(&self) -> u64 {
        self.clock.unix_ms()
    }

    fn send(&self, msg: Message) -> io::Result<usize> {
        Van::send(self, msg)
    }

    fn connect(&self, key: i32, host: &str, port: u16) -> io::Result<()> {
        self.transport.connect(key, host, port)
    }

    fn send_stamped(&self, msg: Message) -> io::Result<usize> {
        self.send_as_is(msg)
    }

    fn holder(&self, id: i32) -> Option<u64> {
        self.peers.read().holder(id)
    }

    fn export_core(&self) -> Option<Vec<u8>> {
        self.sched.as_ref().map(|c| c.lock().export())
    }

    fn take_over(&self, core: &[u8], app: &[u8], now_ms: u64) {
        self.me.write().is_recovery = true;
        let me = self.my_node();
        let adopted = self.sched.as_ref().map(|c| {
            let mut c = c.lock();
            c.adopt(core, me.clone(), now_ms).map(|actions| {
                let m = c.membership();
                let dead: Vec<_> = m.dead().iter().filter_map(|id| m.get(*id).cloned()).collect();
                (actions, m.table(), dead)
            })
        });
        let mut dead_ids = Vec::new();
        match adopted {
            Some(Ok((actions, table, dead))) => {
                // the deaths this candidate saw while it acted before are not the
                // table's: the table adopted says who is dead now
                let (peers, dead) = Peers::adopted(&table, &dead, &me);
                *self.peers.write() = peers;
                log::info!("took over with the node table's dead: {dead:?}");
                dead_ids = dead;
                self.execute(actions)
            }
            Some(Err(e)) => log::error!("{e}; waiting for the nodes to register again"),
            None => {}
        }
        // the layers above take the table's dead, and the application resumes from
        // the state the active one replicated (a scheduler that acted before holds
        // an older state of its own)
        if let Some(h) = self.handler() {
            h.on_took_over(&dead_ids, app);
        }
    }
}

impl Van {
    /// The epoch this process follows (its own while it is the active scheduler), and
    /// whether this process is the active scheduler.
    pub fn scheduler_epoch(&self) -> (Epoch, bool) {
        self.fo.scheduler_epoch()
    }

    /// A scheduler's failover state as an observer reads it (None on a node, or
    /// under a lock service).
    pub fn failover_state(&self) -> Option<crate::failover::StateView> {
        self.fo.state_view(self.now_ms())
    }

    /// The address of scheduler candidate `i`.
    pub fn scheduler_addr(&self, i: usize) -> String {
        self.fo.scheduler_addr(i)
    }

    /// Active scheduler: the application's new state (the master's queues) reaches the
    /// live standbys before this returns. Fails with [`FailoverError::NotActive`] if
    /// this scheduler is not active.
    pub fn replicate_app(&self, state: Bytes) -> Result<(), FailoverError> {
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
