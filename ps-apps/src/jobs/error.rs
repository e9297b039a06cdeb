//! Why the jobs API refused or failed a request, by kind: the HTTP status follows the
//! kind ([`JobsError::http_status`]), never the wording of the message.

/// An error of the jobs API.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobsError {
    /// The request is wrong: bad JSON, bad options, a file that is missing or not a
    /// dataset (400).
    #[error("{0}")]
    BadRequest(String),
    /// No job has this id (404).
    #[error("no job {0:?}")]
    NoSuchJob(String),
    /// The job already ended: done, failed or cancelled (409).
    #[error("job {id} already ended ({state})")]
    Ended {
        /// The job's id.
        id: String,
        /// Its final state.
        state: String,
    },
    /// The scheduler could not do it: saving the job table or a job's queues failed
    /// (500).
    #[error("{0}")]
    Internal(String),
}

/// A master's error as the jobs API answers it: the dataset or the job's options are
/// the request's fault (400), a store or codec failure the scheduler's (500).
impl From<crate::master::MasterError> for JobsError {
    fn from(e: crate::master::MasterError) -> JobsError {
        use crate::master::MasterError as M;
        match e {
            M::Dataset(_) | M::Config(_) => JobsError::BadRequest(e.to_string()),
            M::Corrupt(_) | M::Store(_) => JobsError::Internal(e.to_string()),
        }
    }
}

impl JobsError {
    /// The HTTP status of this kind of error.
    pub fn http_status(&self) -> u16 {
        match self {
            JobsError::BadRequest(_) => 400,
            JobsError::NoSuchJob(_) => 404,
            JobsError::Ended { .. } => 409,
            JobsError::Internal(_) => 500,
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
    }

    #[test]
    fn a_masters_error_maps_by_its_kind() {
        use crate::master::{MasterError, StoreError};
        let store = JobsError::from(MasterError::Store(StoreError("cannot write /x: disk full".into())));
        assert_eq!(
            (store.http_status(), store.to_string().as_str()),
            (500, "cannot write /x: disk full")
        );
        assert_eq!(JobsError::from(MasterError::Config("bad".into())).http_status(), 400);
        let missing = crate::recordio::index(std::path::Path::new("/nonexistent/psrs/x.rio")).unwrap_err();
        assert_eq!(JobsError::from(MasterError::Dataset(missing)).http_status(), 400);
    }
}
