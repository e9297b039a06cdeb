//! Leaving the cluster on purpose (elastic workers): a worker says goodbye to the
//! scheduler (LEAVE) and waits for its answer; the scheduler's decisions are in
//! [`crate::protocol::scheduler::SchedulerCore::on_leave`]. The others hear of it as a
//! NODE_DEAD with reason [`LEFT`] and treat the worker as gone, not dead.

use super::Van;
use crate::message::{Command, Message};
use crate::node::SCHEDULER;
use crate::protocol::scheduler::LEFT;
use crate::van::error::VanError;
use std::time::{Duration, Instant};

/// How often a goodbye is sent again while unanswered (a lost message, a scheduler
/// taking over).
const RESEND: Duration = Duration::from_millis(500);

impl Van {
    /// Says goodbye to the scheduler and waits up to `timeout` for its answer. After
    /// it the scheduler and every node count this node as gone (not dead); the caller
    /// stops the van without a finalize barrier. [`VanError::Timeout`] when the
    /// scheduler does not answer in time, [`VanError::Io`] when the goodbye cannot be
    /// sent.
    pub fn leave(&self, timeout: Duration) -> Result<(), VanError> {
        let start = Instant::now();
        let mut done = self.goodbye.lock();
        while !*done {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(VanError::Timeout(format!(
                    "the scheduler did not answer the goodbye within {timeout:?}"
                )));
            }
            let mut m = Message::control(SCHEDULER, Command::Leave);
            m.meta.request = true;
            m.meta.timestamp = self.next_timestamp();
            parking_lot::MutexGuard::unlocked(&mut done, || self.send(m))
                .map_err(|e| VanError::Io(format!("goodbye not sent: {e}")))?;
            crate::van::cork::flush();
            self.goodbye_cv.wait_for(&mut done, left.min(RESEND));
        }
        Ok(())
    }

    /// A LEAVE: on the scheduler a goodbye to act on; on a node, the answer to its own.
    pub(super) fn on_leave(&self, msg: &Message) {
        match &self.sched {
            Some(s) if msg.meta.request => {
                let actions = s.lock().on_leave(msg.meta.sender, msg.meta.incarnation, self.now_ms());
                self.execute(actions);
            }
            None if !msg.meta.request => {
                *self.goodbye.lock() = true;
                self.goodbye_cv.notify_all();
            }
            _ => log::warn!("dropped an unexpected LEAVE from {}", msg.meta.sender),
        }
    }

    /// Workers that left (`ids`, the scheduler's own decision, or a NODE_DEAD with
    /// reason [`LEFT`]): the layer above is told they are gone, as it is of deaths.
    pub(super) fn on_left(&self, ids: Vec<i32>) {
        if ids.is_empty() {
            return;
        }
        log::info!("left the cluster (goodbye): {ids:?}");
        if let Some(h) = self.handler() {
            h.on_nodes_left(&ids);
        }
    }

    /// True if a NODE_DEAD says the nodes left on their own.
    pub(super) fn is_goodbye(msg: &Message) -> bool {
        msg.meta.control.reason == LEFT
    }
}
