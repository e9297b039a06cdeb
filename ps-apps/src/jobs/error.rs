//! Why the jobs cluster refused or failed something, by kind: the HTTP status of the
//! jobs API follows the kind ([`JobsError::http_status`]), and so does a command's
//! exit status, never the wording of the message.

use crate::pyrunner::RunnerError;
use crate::stats::StatsError;
use crate::train::TrainError;
use ps_core::PostofficeError;

/// An error of the jobs cluster: the API, the scheduler's state, a worker's or a
/// server's loop.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// The request is wrong: bad JSON, bad options, a file that is missing or not a
    /// dataset (400).
    #[error("{0}")]
    BadRequest(String),
    /// The cluster does not run this kind of job: one that runs the submitter's code
    /// (`runner`, `pythonpath`, `torch`) on a cluster started with `--no-code-jobs`
    /// (403).
    #[error("{0}")]
    Forbidden(String),
    /// No job has this id (404).
    #[error("no job {0:?}")]
    NoSuchJob(String),
    /// No job has this number in the job table (404).
    #[error("no job j{0}")]
    UnknownJob(u32),
    /// The job already ended: done, failed or cancelled (409).
    #[error("job {id} already ended ({state})")]
    Ended {
        /// The job's id.
        id: String,
        /// Its final state.
        state: String,
    },
    /// A state change of a job that is already in a final state (409): the job
    /// table changes no ended job.
    #[error("job j{num} is already {state}")]
    Final {
        /// The job's number.
        num: u32,
        /// Its final state, lower case.
        state: String,
    },
    /// A task's data does not fit the job's model (reported with the task).
    #[error("{0}")]
    BadData(String),
    /// A query took longer than its timeout (reported with the task).
    #[error("{0}")]
    Timeout(String),
    /// Stored state does not decode: the job table (500).
    #[error("{0}")]
    Corrupt(String),
    /// A job's outputs could not be written or read back (names the file; 500).
    #[error("{0}")]
    Io(String),
    /// The scheduler could not do it: saving the job table or a job's queues failed
    /// (500).
    #[error("{0}")]
    Internal(String),
    /// This scheduler stepped down while saving: another one acts now and the save
    /// was refused (see [`crate::master::StoreError::SteppedDown`]); nothing changed
    /// here, and the request belongs to the active scheduler (503).
    #[error("{0}")]
    SteppedDown(String),
    /// Training, the scheduler's answers, or reading a task failed (see
    /// [`TrainError`]'s kinds; 500).
    #[error(transparent)]
    Train(#[from] TrainError),
    /// The Python runner failed (see [`RunnerError`]'s kinds; 500).
    #[error(transparent)]
    Runner(#[from] RunnerError),
    /// The HTTP API could not start (see [`StatsError`]'s kinds; 500).
    #[error(transparent)]
    Stats(#[from] StatsError),
    /// An app could not register with the postoffice (500).
    #[error(transparent)]
    Register(#[from] PostofficeError),
}

/// A master's error as the jobs API answers it: the dataset or the job's options are
/// the request's fault (400), a save refused because this scheduler stepped down is
/// [`JobsError::SteppedDown`] (503), any other store or codec failure the scheduler's
/// (500).
impl From<crate::master::MasterError> for JobsError {
    fn from(e: crate::master::MasterError) -> JobsError {
        use crate::master::MasterError as M;
        if e.stepped_down() {
            return JobsError::SteppedDown(e.to_string());
        }
        match e {
            M::Dataset(_) | M::Config(_) => JobsError::BadRequest(e.to_string()),
            M::Corrupt(_) | M::Store(_) => JobsError::Internal(e.to_string()),
        }
    }
}

/// A model that cannot be built from a job's options, or data that does not fit it,
/// is the request's fault (400).
impl From<crate::model::ModelError> for JobsError {
    fn from(e: crate::model::ModelError) -> JobsError {
        JobsError::BadRequest(e.to_string())
    }
}

impl JobsError {
    /// Logs this error met while `doing` (e.g. "answering worker 9"): a step down
    /// ([`JobsError::SteppedDown`]) as a warning, since the active scheduler carries
    /// on, anything else as an error.
    pub fn log(&self, doing: &str) {
        match self {
            JobsError::SteppedDown(_) => log::warn!("jobs: {self}: stepped down while {doing}"),
            _ => log::error!("jobs: {self} (while {doing})"),
        }
    }

    /// The HTTP status of this kind of error.
    pub fn http_status(&self) -> u16 {
        match self {
            JobsError::BadRequest(_) => 400,
            JobsError::Forbidden(_) => 403,
            JobsError::NoSuchJob(_) | JobsError::UnknownJob(_) => 404,
            JobsError::Ended { .. } | JobsError::Final { .. } => 409,
            JobsError::SteppedDown(_) => 503,
            JobsError::BadData(_)
            | JobsError::Timeout(_)
            | JobsError::Corrupt(_)
            | JobsError::Io(_)
            | JobsError::Internal(_)
            | JobsError::Train(_)
            | JobsError::Runner(_)
            | JobsError::Stats(_)
            | JobsError::Register(_) => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_kind_not_the_text() {
        let ended = JobsError::Ended {
            id: "j3".into(),
            state: "cancelled".into(),
        };
        assert_eq!(
            (ended.http_status(), ended.to_string().as_str()),
            (409, "job j3 already ended (cancelled)")
        );
        // a message that happens to say "already" is still what its kind says
        assert_eq!(JobsError::Internal("already broken".into()).http_status(), 500);
        assert_eq!(JobsError::BadRequest("x".into()).http_status(), 400);
        assert_eq!(JobsError::NoSuchJob("j9".into()).to_string(), "no job \"j9\"");
        assert_eq!(JobsError::NoSuchJob("j9".into()).http_status(), 404);
        let unknown = JobsError::UnknownJob(9);
        assert_eq!(
            (unknown.http_status(), unknown.to_string().as_str()),
            (404, "no job j9")
        );
        let done = JobsError::Final {
            num: 1,
            state: "done".into(),
        };
        assert_eq!(
            (done.http_status(), done.to_string().as_str()),
            (409, "job j1 is already done")
        );
        let stale = JobsError::Corrupt("the stored job table is corrupt: EOF".into());
        assert_eq!(stale.http_status(), 500);
    }

    #[test]
    fn a_masters_error_maps_by_its_kind() {
        use crate::master::{MasterError, StoreError};
        let store = JobsError::from(MasterError::Store(StoreError::Failed(
            "cannot write /x: disk full".into(),
        )));
        assert_eq!(
            (store.http_status(), store.to_string().as_str()),
            (500, "cannot write /x: disk full")
        );
        assert_eq!(JobsError::from(MasterError::Config("bad".into())).http_status(), 400);
        // a save refused to a scheduler that stepped down is not the scheduler's failure
        let refused = JobsError::from(MasterError::Store(StoreError::SteppedDown(
            "this scheduler is not active (term 2 is)".into(),
        )));
        assert!(matches!(refused, JobsError::SteppedDown(_)), "{refused:?}");
        assert_eq!(
            (refused.http_status(), refused.to_string().as_str()),
            (503, "this scheduler is not active (term 2 is)")
        );
        let missing = crate::recordio::index(std::path::Path::new("/nonexistent/psrs/x.rio")).unwrap_err();
        assert_eq!(JobsError::from(MasterError::Dataset(missing)).http_status(), 400);
    }

    #[test]
    fn wrapped_errors_keep_their_text() {
        let t = JobsError::from(TrainError::Unanswered("the scheduler did not answer for 1s: x".into()));
        assert!(matches!(t, JobsError::Train(TrainError::Unanswered(_))));
        assert_eq!(
            (t.http_status(), t.to_string().as_str()),
            (500, "the scheduler did not answer for 1s: x")
        );
        let r = JobsError::from(RunnerError::Raised("ValueError: bad".into()));
        assert_eq!(r.to_string(), "ValueError: bad");
    }
}
