//! The job table: every job submitted to the cluster and its state machine
//! `queued → running → done | failed | cancelled` (a queued job may also be cancelled
//! or fail). Finished states are final. Pure: times are passed in, and the whole table
//! serializes (JSON) so the shell saves it through a `Store` before replying.

use super::error::JobsError;
use super::figures::JobFigures;
use super::spec::JobSpec;
use crate::model::Model;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The number of a job (its id is `j` followed by it).
pub type JobNum = u32;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Accepted, not started (waiting for servers or workers).
    Queued,
    /// Workers are on it.
    Running,
    /// Finished.
    Done,
    /// Gave up; `error` says why.
    Failed,
    /// Cancelled by a client.
    Cancelled,
}

impl JobState {
    /// Done, failed or cancelled: nothing more happens to the job.
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Done | JobState::Failed | JobState::Cancelled)
    }
}

/// One job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Its number.
    pub num: JobNum,
    /// What was submitted.
    pub spec: JobSpec,
    /// The psrs model it trains or evaluates (resolved at submission); None for a model
    /// a Python runner runs.
    pub model: Option<Model>,
    /// Its state.
    pub state: JobState,
    /// Submission time (ms since the Unix epoch).
    pub submitted_ms: u64,
    /// When it started running.
    pub started_ms: Option<u64>,
    /// When it reached a final state.
    pub ended_ms: Option<u64>,
    /// Final test accuracy (training) or accuracy over the labelled records
    /// (inference), once known.
    pub accuracy: Option<f64>,
    /// Why it failed.
    pub error: Option<String>,
    /// Fraction of its tasks done when it ended (while active the scheduler computes
    /// it from the queues).
    #[serde(default)]
    pub progress: f64,
    /// What it did, saved when it ended (while active the scheduler tallies them; the
    /// passes it completed are saved as they complete).
    #[serde(default)]
    pub figures: JobFigures,
}

impl Job {
    /// Its id as clients see it: `j` and the number.
    pub fn id(&self) -> String {
        format!("j{}", self.num)
    }

    /// The model's name as the job list shows it.
    pub fn model_name(&self) -> String {
        match (&self.model, &self.spec) {
            (Some(m), _) => m.name(),
            (None, JobSpec::Infer(i)) => i.model_name(),
            (None, JobSpec::Train(_)) => "?".into(),
        }
    }
}

/// Parses a job id (`j7` or `7`).
pub fn parse_id(id: &str) -> Option<JobNum> {
    id.strip_prefix('j').unwrap_or(id).parse().ok()
}

/// Every job, by number.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobTable {
    /// The jobs.
    pub jobs: BTreeMap<JobNum, Job>,
    /// The number the next job gets.
    pub next: JobNum,
}

impl JobTable {
    /// Adds a queued job; returns its number.
    pub fn submit(&mut self, spec: JobSpec, model: Option<Model>, now_ms: u64) -> JobNum {
        self.next = self.next.max(1);
        let num = self.next;
        self.next += 1;
        self.jobs.insert(
            num,
            Job {
                num,
                spec,
                model,
                state: JobState::Queued,
                submitted_ms: now_ms,
                started_ms: None,
                ended_ms: None,
                accuracy: None,
                error: None,
                progress: 0.0,
                figures: JobFigures::default(),
            },
        );
        num
    }

    /// A job.
    pub fn get(&self, num: JobNum) -> Option<&Job> {
        self.jobs.get(&num)
    }

    /// Jobs not in a final state, oldest first.
    pub fn active(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values().filter(|j| !j.state.is_final())
    }

    fn change(&mut self, num: JobNum, to: JobState, now_ms: u64) -> Result<&mut Job, JobsError> {
        let job = self.jobs.get_mut(&num).ok_or(JobsError::UnknownJob(num))?;
        if job.state.is_final() {
            return Err(JobsError::Final {
                num,
                state: format!("{:?}", job.state).to_lowercase(),
            });
        }
        if to == JobState::Running && job.state == JobState::Running {
            return Ok(job);
        }
        job.state = to;
        if to == JobState::Running {
            job.started_ms = Some(now_ms);
        }
        if to.is_final() {
            job.ended_ms = Some(now_ms);
        }
        Ok(job)
    }

    /// A queued job starts running (no change if it runs already). Every state change
    /// fails with [`JobsError::UnknownJob`] for a number the table does not hold and
    /// [`JobsError::Final`] for a job that already ended.
    pub fn start(&mut self, num: JobNum, now_ms: u64) -> Result<(), JobsError> {
        self.change(num, JobState::Running, now_ms).map(|_| ())
    }

    /// A job finished, with its accuracy if measured.
    pub fn finish(&mut self, num: JobNum, accuracy: Option<f64>, now_ms: u64) -> Result<(), JobsError> {
        self.change(num, JobState::Done, now_ms)?.accuracy = accuracy;
        Ok(())
    }

    /// A job failed for `why` (one line).
    pub fn fail(&mut self, num: JobNum, why: &str, now_ms: u64) -> Result<(), JobsError> {
        self.change(num, JobState::Failed, now_ms)?.error = Some(why.lines().next().unwrap_or("").to_string());
        Ok(())
    }

    /// A client cancelled a job.
    pub fn cancel(&mut self, num: JobNum, now_ms: u64) -> Result<(), JobsError> {
        self.change(num, JobState::Cancelled, now_ms).map(|_| ())
    }

    /// The stored form (JSON).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("the job table serializes")
    }

    /// Reads the stored form; corrupt bytes are [`JobsError::Corrupt`].
    pub fn decode(bytes: &[u8]) -> Result<JobTable, JobsError> {
        serde_json::from_slice(bytes).map_err(|e| JobsError::Corrupt(format!("the stored job table is corrupt: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec::from_json(r#"{"kind":"infer","model":"m","data":"d","out":"o"}"#).unwrap()
    }

    const M: Option<Model> = Some(Model::LogReg { dim: 3 });

    #[test]
    fn state_machine() {
        let mut t = JobTable::default();
        let a = t.submit(spec(), M, 10);
        let b = t.submit(spec(), M, 11);
        assert_eq!((a, b), (1, 2));
        assert_eq!(t.get(a).unwrap().id(), "j1");
        assert_eq!(parse_id("j2"), Some(2));
        assert_eq!(parse_id("2"), Some(2));
        assert_eq!(parse_id("x"), None);
        t.start(a, 20).unwrap();
        t.start(a, 30).unwrap();
        assert_eq!(t.get(a).unwrap().started_ms, Some(20), "a second start changes nothing");
        t.finish(a, Some(0.9), 40).unwrap();
        assert_eq!(t.get(a).unwrap().state, JobState::Done);
        let e = t.cancel(a, 50).unwrap_err();
        assert!(matches!(e, JobsError::Final { num: 1, .. }));
        assert_eq!(e.to_string(), "job j1 is already done");
        t.cancel(b, 50).unwrap();
        assert!(t.fail(b, "x", 60).is_err());
        let e = t.start(9, 0).unwrap_err();
        assert!(matches!(e, JobsError::UnknownJob(9)));
        assert_eq!(e.to_string(), "no job j9");
        let c = t.submit(spec(), M, 70);
        t.fail(c, "disk full\nmore", 80).unwrap();
        assert_eq!(t.get(c).unwrap().error.as_deref(), Some("disk full"));
        assert_eq!(t.active().count(), 0);
    }

    #[test]
    fn round_trip_and_numbers_are_never_reused() {
        let mut t = JobTable::default();
        t.submit(spec(), M, 1);
        let back = JobTable::decode(&t.encode()).unwrap();
        assert_eq!(back, t);
        let mut back = back;
        assert_eq!(back.submit(spec(), M, 2), 2);
        let e = JobTable::decode(b"{").unwrap_err();
        assert!(matches!(e, JobsError::Corrupt(_)));
        assert!(e.to_string().contains("corrupt"));
    }
}
