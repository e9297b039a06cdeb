//! The course every process of a job runs: it joins (gets its node table), waits at
//! the start barrier (a process that replaced a dead one skips it: the others passed
//! it long ago), runs its application, and waits at the final barrier.
//!
//! [`Course`] is the pure stepper: it asks its [`Gates`] whether the node has its
//! table and whether the barrier it entered was released, and never waits. The
//! postoffice waits between its steps ([`crate::Postoffice::start`],
//! [`crate::Postoffice::finalize`]); the simulator steps the very same course as its
//! events arrive.

/// Where a process is in its course (in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Waiting for its node table.
    Joining,
    /// In the start barrier.
    Starting,
    /// Its application runs.
    Running,
    /// In the final barrier.
    Finalizing,
    /// Released from the final barrier.
    Done,
}

/// What a course asks of its node: the node table and the barrier of every node.
pub trait Gates {
    /// A barrier request in flight, to be polled.
    type Ask;
    /// True once the node has its node table.
    fn has_table(&self) -> bool;
    /// True unless this process replaced a dead one (it joins a job that runs).
    fn waits_at_start(&self) -> bool;
    /// Enters the barrier of every node; None when there is nothing to wait for
    /// (released at once).
    fn enter(&self) -> Option<Self::Ask>;
    /// True once the barrier `ask` waits at was released.
    fn released(&self, ask: &mut Self::Ask) -> bool;
}

/// A process's course, stepped by whoever drives it.
#[derive(Debug)]
pub struct Course<A> {
    stage: Stage,
    start_barrier: bool,
    ask: Option<A>,
    passed_start: bool,
}

impl<A> Course<A> {
    /// A course at [`Stage::Joining`]; `start_barrier` false runs the application as
    /// soon as the table is there.
    pub fn new(start_barrier: bool) -> Course<A> {
        Course {
            stage: Stage::Joining,
            start_barrier,
            ask: None,
            passed_start: false,
        }
    }

    /// Where the course is.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// True once the course went through the start barrier (not when it was told
    /// not to wait there, nor for a replacement, which skips it).
    pub fn passed_start_barrier(&self) -> bool {
        self.passed_start
    }

    /// Moves on as far as `g` allows now, without waiting. True at the one step that
    /// moves the course to [`Stage::Running`]: the application starts then.
    pub fn step<G: Gates<Ask = A>>(&mut self, g: &G) -> bool {
        loop {
            match self.stage {
                Stage::Joining => {
                    if !g.has_table() {
                        return false;
                    }
                    if !self.start_barrier || !g.waits_at_start() {
                        self.stage = Stage::Running;
                        return true;
                    }
                    self.stage = Stage::Starting;
                    self.ask = g.enter();
                }
                Stage::Starting => {
                    if !self.left(g) {
                        return false;
                    }
                    self.stage = Stage::Running;
                    self.passed_start = true;
                    return true;
                }
                Stage::Finalizing => {
                    if self.left(g) {
                        self.stage = Stage::Done;
                    }
                    return false;
                }
                Stage::Running | Stage::Done => return false,
            }
        }
    }

    /// The application is done (or never ran): with `final_barrier` the final
    /// barrier is entered ([`Stage::Finalizing`] until [`Course::step`] sees it
    /// released), else the course is [`Stage::Done`].
    pub fn finish<G: Gates<Ask = A>>(&mut self, g: &G, final_barrier: bool) {
        if self.stage == Stage::Done {
            return;
        }
        self.ask = None;
        if final_barrier {
            self.stage = Stage::Finalizing;
            self.ask = g.enter();
        } else {
            self.stage = Stage::Done;
        }
    }

    /// True when the barrier in flight was released (or none was in flight).
    fn left<G: Gates<Ask = A>>(&mut self, g: &G) -> bool {
        let left = self.ask.as_mut().is_none_or(|a| g.released(a));
        if left {
            self.ask = None;
        }
        left
    }
}

#[cfg(test)]
#[path = "course_tests.rs"]
mod tests;
