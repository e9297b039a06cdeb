//! The training worker's task loop without I/O: what it asks the master, and what it
//! does with each answer. The worker ([`super::worker::run`]) carries each step out
//! (a request through the master client, a task through the parameter servers, an
//! idle notice, a pause) and hands the result back; the simulator drives the same
//! loop from its events.
//!
//! The loop: report the dataset, then ask for a task; train it and report it
//! (`Finish`, counted at most once per pass, from one attempt), or report it failed
//! or unreadable; when the master says wait, tell the servers this worker idles and
//! pause; when it says the job is complete, idle and end. A worker asked to leave
//! does so between tasks: it idles and tells the master it leaves.

use super::error::TrainError;
use crate::master::{MasterRequest, MasterResponse, Task, TaskReport};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The pause after the master said wait.
pub const WAIT_PAUSE: Duration = Duration::from_millis(50);
/// The pause after the master answered with an error.
pub const ERROR_PAUSE: Duration = Duration::from_millis(200);

/// What the worker does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Send this request to the master; its answer goes to [`TaskLoop::answered`].
    Ask(MasterRequest),
    /// Train this task; how it went goes to [`TaskLoop::trained`].
    Train(Task),
    /// Tell the servers no gradient of this worker is coming (their sync versions
    /// must not wait for it), then [`TaskLoop::idled`].
    Idle,
    /// Pause this long, then [`TaskLoop::paused`].
    Pause(Duration),
    /// The job is complete.
    Complete,
    /// The worker left the job: its last task was reported, the master told.
    Left,
}

/// How training a task went.
#[derive(Clone, Debug, PartialEq)]
pub enum Trained {
    /// Trained: the report goes to the master with the attempt.
    Done(TaskReport),
    /// Too many rejected pushes: the task failed (the master retries it).
    Failed,
    /// Its chunks could not be read, or do not fit the model (the master retries it,
    /// then gives it up and reports it).
    Unreadable(String),
}

/// The request whose answer is awaited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Dataset,
    Task,
    /// The result of this task was reported.
    Finish(u64),
    /// A failed or unreadable task was reported: the answer changes nothing.
    Notice,
    Leaving,
}

/// What follows the idle notice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterIdle {
    Pause,
    Leave,
    Complete,
}

/// The loop's state.
pub struct TaskLoop {
    asked: Option<Asked>,
    after_idle: Option<AfterIdle>,
    leave: Option<Arc<AtomicBool>>,
    tasks: u64,
}

impl TaskLoop {
    /// The loop of a worker training on the dataset files `paths`, leaving the job
    /// once `leave` is set (checked between tasks); its first step.
    pub fn new(paths: Vec<String>, leave: Option<Arc<AtomicBool>>) -> (TaskLoop, Next) {
        let lp = TaskLoop {
            asked: Some(Asked::Dataset),
            after_idle: None,
            leave,
            tasks: 0,
        };
        (lp, Next::Ask(MasterRequest::ReportDataset { paths }))
    }

    /// Tasks the master counted from this worker's attempts.
    pub fn tasks(&self) -> u64 {
        self.tasks
    }

    /// The next task asked for, or, when asked to leave, the goodbye (after an idle
    /// notice).
    fn next_task(&mut self) -> Next {
        if self.leave.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
            return self.idle(AfterIdle::Leave);
        }
        self.asked = Some(Asked::Task);
        Next::Ask(MasterRequest::GetTask {
            finished: None,
            report: None,
        })
    }

    fn idle(&mut self, then: AfterIdle) -> Next {
        self.after_idle = Some(then);
        Next::Idle
    }

    /// The master's answer to the last [`Next::Ask`]. A master that refuses the
    /// dataset is [`TrainError::Master`], as is an answer that does not fit the
    /// request.
    pub fn answered(&mut self, resp: MasterResponse) -> Result<Next, TrainError> {
        let unexpected = |r: &MasterResponse| TrainError::Master(format!("unexpected master reply {r:?}"));
        match (self.asked.take(), resp) {
            (Some(Asked::Dataset), MasterResponse::Error(e)) => Err(TrainError::Master(e)),
            (Some(Asked::Dataset), _) => {
                log::debug!("dataset reported");
                Ok(self.next_task())
            }
            (Some(Asked::Task), MasterResponse::Task(t)) => Ok(Next::Train(t)),
            (Some(Asked::Task), MasterResponse::Wait) => Ok(self.idle(AfterIdle::Pause)),
            (Some(Asked::Task), MasterResponse::NoMoreTasks) => Ok(self.idle(AfterIdle::Complete)),
            (Some(Asked::Task), MasterResponse::Error(e)) => {
                log::warn!("master: {e}; asking again");
                Ok(Next::Pause(ERROR_PAUSE))
            }
            (Some(Asked::Finish(id)), r) => {
                match r {
                    MasterResponse::Counted(true) => self.tasks += 1,
                    MasterResponse::Counted(false) => {
                        log::warn!("task {id} was counted from another attempt: not counted here")
                    }
                    MasterResponse::Error(e) => log::warn!("master: {e}; the result of task {id} is lost"),
                    other => return Err(unexpected(&other)),
                }
                Ok(self.next_task())
            }
            (Some(Asked::Notice), _) => Ok(self.next_task()),
            (Some(Asked::Leaving), _) => Ok(Next::Left),
            (None, r) => Err(unexpected(&r)),
            (Some(Asked::Task), r) => Err(unexpected(&r)),
        }
    }

    /// How training `task` (the last [`Next::Train`]) went: its report to the master.
    pub fn trained(&mut self, task: &Task, outcome: Trained) -> Next {
        let req = match outcome {
            Trained::Done(rep) => {
                // the task counts once per pass, from one attempt: this one, unless
                // another worker's attempt counted first (it was handed out again)
                self.asked = Some(Asked::Finish(task.id));
                return Next::Ask(MasterRequest::Finish {
                    task: task.id,
                    attempt: task.attempt,
                    report: Some(rep),
                });
            }
            Trained::Failed => MasterRequest::TaskFailed { task: task.id },
            Trained::Unreadable(error) => MasterRequest::TaskUnreadable { task: task.id, error },
        };
        self.asked = Some(Asked::Notice);
        Next::Ask(req)
    }

    /// The idle notice of the last [`Next::Idle`] went out (or failed: it is only
    /// a notice).
    pub fn idled(&mut self) -> Next {
        match self.after_idle.take() {
            Some(AfterIdle::Pause) => Next::Pause(WAIT_PAUSE),
            Some(AfterIdle::Complete) => Next::Complete,
            Some(AfterIdle::Leave) => {
                self.asked = Some(Asked::Leaving);
                Next::Ask(MasterRequest::Leaving {
                    finished: None,
                    report: None,
                })
            }
            None => self.next_task(),
        }
    }

    /// The pause of the last [`Next::Pause`] is over.
    pub fn paused(&mut self) -> Next {
        self.next_task()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::master::{Attempt, Task};

    fn task(id: u64) -> Task {
        Task {
            id,
            epoch: 0,
            chunks: Vec::new(),
            attempt: Attempt { term: 1, n: 1 },
        }
    }

    fn get_task() -> Next {
        Next::Ask(MasterRequest::GetTask {
            finished: None,
            report: None,
        })
    }

    #[test]
    fn reports_the_dataset_then_trains_and_reports_each_task() {
        let (mut lp, first) = TaskLoop::new(vec!["d".into()], None);
        assert_eq!(
            first,
            Next::Ask(MasterRequest::ReportDataset {
                paths: vec!["d".into()]
            })
        );
        assert_eq!(lp.answered(MasterResponse::Ok).unwrap(), get_task());
        assert_eq!(
            lp.answered(MasterResponse::Task(task(3))).unwrap(),
            Next::Train(task(3))
        );
        let rep = TaskReport {
            examples: 5,
            ..TaskReport::default()
        };
        let Next::Ask(MasterRequest::Finish { task: 3, report, .. }) = lp.trained(&task(3), Trained::Done(rep.clone()))
        else {
            panic!("the result is reported")
        };
        assert_eq!(report, Some(rep));
        assert_eq!(lp.answered(MasterResponse::Counted(true)).unwrap(), get_task());
        assert_eq!(lp.tasks(), 1);
        assert!(matches!(
            lp.trained(&task(4), Trained::Failed),
            Next::Ask(MasterRequest::TaskFailed { task: 4 })
        ));
        assert_eq!(lp.answered(MasterResponse::Ok).unwrap(), get_task());
        assert_eq!(lp.answered(MasterResponse::NoMoreTasks).unwrap(), Next::Idle);
        assert_eq!(lp.idled(), Next::Complete);
        assert_eq!(lp.tasks(), 1);
    }

    #[test]
    fn a_result_counted_from_another_attempt_is_not_counted_here() {
        let (mut lp, _) = TaskLoop::new(vec![], None);
        lp.answered(MasterResponse::Ok).unwrap();
        lp.answered(MasterResponse::Task(task(1))).unwrap();
        lp.trained(&task(1), Trained::Done(TaskReport::default()));
        assert_eq!(lp.answered(MasterResponse::Counted(false)).unwrap(), get_task());
        assert_eq!(lp.tasks(), 0);
    }

    #[test]
    fn a_wait_idles_then_pauses_and_an_error_pauses() {
        let (mut lp, _) = TaskLoop::new(vec![], None);
        lp.answered(MasterResponse::Ok).unwrap();
        assert_eq!(lp.answered(MasterResponse::Wait).unwrap(), Next::Idle);
        assert_eq!(lp.idled(), Next::Pause(WAIT_PAUSE));
        assert_eq!(lp.paused(), get_task());
        assert_eq!(
            lp.answered(MasterResponse::Error("x".into())).unwrap(),
            Next::Pause(ERROR_PAUSE)
        );
        assert_eq!(lp.paused(), get_task());
    }

    #[test]
    fn a_refused_dataset_or_a_foreign_answer_is_an_error() {
        let (mut lp, _) = TaskLoop::new(vec![], None);
        assert!(matches!(
            lp.answered(MasterResponse::Error("no".into())),
            Err(TrainError::Master(_))
        ));
        let (mut lp, _) = TaskLoop::new(vec![], None);
        lp.answered(MasterResponse::Ok).unwrap();
        assert!(matches!(
            lp.answered(MasterResponse::Counted(true)),
            Err(TrainError::Master(_))
        ));
    }

    #[test]
    fn a_worker_asked_to_leave_idles_and_says_goodbye_between_tasks() {
        let flag = Arc::new(AtomicBool::new(false));
        let (mut lp, _) = TaskLoop::new(vec![], Some(Arc::clone(&flag)));
        lp.answered(MasterResponse::Ok).unwrap();
        lp.answered(MasterResponse::Task(task(2))).unwrap();
        flag.store(true, Ordering::Relaxed);
        lp.trained(&task(2), Trained::Done(TaskReport::default()));
        assert_eq!(lp.answered(MasterResponse::Counted(true)).unwrap(), Next::Idle);
        assert!(matches!(lp.idled(), Next::Ask(MasterRequest::Leaving { .. })));
        assert_eq!(lp.answered(MasterResponse::Ok).unwrap(), Next::Left);
        assert_eq!(lp.tasks(), 1);
    }
}
