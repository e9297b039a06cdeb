//! The postoffice's side of a process's course ([`crate::protocol::course`]): its
//! node table and the barrier of every node are the course's gates; the course is
//! stepped without waiting (by a simulator), or waited through
//! ([`Postoffice::start`], [`Postoffice::finalize`]).

use super::{Asked, Postoffice};
use crate::node::ALL_GROUP;
use crate::protocol::course::{Gates, Stage};

impl Gates for Postoffice {
    type Ask = Asked;

    fn has_table(&self) -> bool {
        self.van.is_ready()
    }

    fn waits_at_start(&self) -> bool {
        Postoffice::waits_at_start(self)
    }

    fn enter(&self) -> Option<Asked> {
        self.barrier_begin(ALL_GROUP)
    }

    fn released(&self, ask: &mut Asked) -> bool {
        self.barrier_poll(ask)
    }
}

impl Postoffice {
    /// Moves this process's course on as far as it can go now, without waiting: the
    /// node table enters the start barrier, its release starts the application
    /// (true: start it now), the final barrier's release ends the course. What
    /// [`Postoffice::start`] and [`Postoffice::finalize`] wait through; a driver
    /// without threads calls it after every event instead.
    pub fn step_course(&self) -> bool {
        self.course.lock().step(self)
    }

    /// Where this process is in its course.
    pub fn course_stage(&self) -> Stage {
        self.course.lock().stage()
    }

    /// The application is done: with `final_barrier`, enters the final barrier
    /// ([`Stage::Finalizing`] until [`Postoffice::step_course`] sees it released),
    /// else the course ends at once.
    pub fn finish_course(&self, final_barrier: bool) {
        self.course.lock().finish(self, final_barrier);
    }

    /// Steps the course until it reaches `stage`, waiting for the barrier of every
    /// node between steps (a scheduler that acts anew is asked again at each step).
    pub(super) fn wait_course(&self, stage: Stage) {
        self.wait_steps(ALL_GROUP, || {
            self.step_course();
            self.course_stage() >= stage
        });
    }
}
