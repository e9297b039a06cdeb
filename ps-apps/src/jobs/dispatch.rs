//! The scheduler's answers to workers and servers: a worker reports what it finished
//! and the models its Python runner holds, and gets a task of the job it is assigned to
//! (so it moves between jobs only between tasks; for a model a Python runner runs,
//! only a worker whose runner has it ready gets the job's tasks, and every worker is
//! told which jobs' models to warm whenever that list changes); a complete inference job's
//! batches are joined into its output; a complete training job is finalized by one
//! worker; servers learn which training jobs' shards to hold.

use super::error::JobsError;
use super::outputs;
use super::scheduler::JobScheduler;
use super::spec::JobSpec;
use super::table::JobNum;
use super::wire::{Finished, JobsRequest, JobsResponse, ServerJob};
use crate::master::Reply;
use crate::pyrunner::ModelStatus;
use std::path::PathBuf;

/// A training job's table entry always holds its model: its absence is the
/// scheduler's fault.
fn no_model() -> JobsError {
    JobsError::Internal("a training job without a model".into())
}

impl JobScheduler {
    /// Answers a request from node `sender` at `now_ms`. Errors become
    /// [`JobsResponse::Error`] and change nothing.
    pub fn handle(&mut self, sender: i32, req: JobsRequest, now_ms: u64) -> JobsResponse {
        let out = match req {
            JobsRequest::Next {
                finished,
                models,
                catalog,
            } => self.next(sender, finished, &models, catalog, now_ms),
            JobsRequest::Failed { job, task, error } => match self.active.get_mut(&job) {
                Some(a) => {
                    let why = error.as_deref().unwrap_or("was reported failed");
                    if let Some(e) = &error {
                        log::warn!("job j{job} task {task} failed on worker {sender}: {e}");
                        a.last_error = Some(format!("task {task} on worker {sender}: {e}"));
                    }
                    a.master
                        .task_failed_because(sender, task, why)
                        .map(|_| JobsResponse::Ok)
                        .map_err(JobsError::from)
                }
                None => Ok(JobsResponse::Ok),
            },
            JobsRequest::LoadFailed { job, error } => self.load_failed(sender, job, &error, now_ms),
            JobsRequest::Finalized { job, accuracy, error } => self.finalized(job, accuracy, error, now_ms),
            JobsRequest::ServerPoll { hosting } => Ok(self.server_poll(sender, hosting)),
            JobsRequest::Evaluated { job, pass, accuracy } => self.evaluated(sender, job, pass, accuracy, now_ms),
        };
        out.unwrap_or_else(|e| {
            e.log(&format!("answering node {sender}"));
            JobsResponse::Error(e.to_string())
        })
    }

    fn batches_dir(&self, num: JobNum) -> PathBuf {
        let sub = self.table.get(num).map_or(0, |j| j.submitted_ms);
        self.cfg.outputs_dir.join(format!("job-{num}-{sub}-batches"))
    }

    /// Records a task `worker` finished: inference predictions are saved first, then
    /// the queue; its time counts in the job's rate and, as that worker's, in its cost:
    /// from its hand-out to this report (the worker's whole cycle, its query and its
    /// round trip: what its rate follows), or the worker's own measure of the query when
    /// the hand-out is not known here.
    fn record(&mut self, worker: i32, f: Finished, now_ms: u64) -> Result<(), JobsError> {
        let dir = self.batches_dir(f.job);
        let Some(a) = self.active.get_mut(&f.job) else {
            return Ok(()); // the job ended meanwhile
        };
        let q = a.master.queues();
        let took = q.pending.get(&f.task).map(|e| now_ms.saturating_sub(e.dispatched_ms));
        let epoch = f.task / (q.template.len().max(1) as u64);
        let known = q.pending.contains_key(&f.task)
            || q.todo.iter().any(|e| e.task.id == f.task)
            || q.failed.iter().any(|e| e.task.id == f.task);
        if !known {
            return Ok(()); // done already (a late duplicate) or of an earlier pass
        }
        if let Some(p) = &f.predictions {
            outputs::save_batch(&dir, f.task, p)?;
        }
        if let Some(r) = &f.rows {
            outputs::save_rows(&dir, f.task, r)?;
        }
        if a.master.finish_task(f.task, now_ms)? {
            let took = took.unwrap_or(f.took_ms);
            a.rate.record(now_ms, took);
            a.cost.record(worker, now_ms, took as f64 / 1000.0);
            a.tally
                .finished(epoch, now_ms, took, f.report.examples, f.report.loss_sum);
        }
        Ok(())
    }

    /// Saves the figures of the passes job `num` completed since last looked at (the
    /// table is saved once a pass, not once a task).
    fn passes_completed(&mut self, num: JobNum, now_ms: u64) -> Result<(), JobsError> {
        let has_test = matches!(self.table.get(num).map(|j| &j.spec), Some(JobSpec::Train(t)) if t.test.is_some());
        let Some(a) = self.active.get_mut(&num) else {
            return Ok(());
        };
        let epoch = a.master.queues().epoch;
        if epoch == a.epoch {
            return Ok(());
        }
        if has_test {
            // the last pass is evaluated by the finalizer
            a.to_evaluate.extend(a.epoch..epoch);
        }
        a.epoch = epoch;
        let figures = self.figures(num, now_ms);
        self.change(|t| {
            if let Some(j) = t.jobs.get_mut(&num) {
                j.figures.per_pass = figures.per_pass;
                j.figures.first_query_ms = figures.first_query_ms;
            }
            Ok(())
        })
    }

    /// `worker` asks for work, so it holds no task: one still pending on it (in any
    /// job) is one whose handing-out reply it never got (lost, or sent by a scheduler
    /// that died before it arrived). Requeued at once, without counting a timeout,
    /// rather than left to time out.
    fn requeue_lost(&mut self, worker: i32, now_ms: u64) -> Result<(), JobsError> {
        for (num, a) in self.active.iter_mut() {
            if a.master.queues().pending.values().any(|e| e.worker == worker) {
                let n = a.master.leaving(worker, None, now_ms)?;
                log::warn!(
                    "worker {worker} asked for work holding {n} task(s) of job j{num}: requeued (the reply was lost)"
                );
            }
        }
        Ok(())
    }

    /// Takes in the models `worker`'s runner holds (every running job whose model a
    /// runner runs: held or not).
    fn models_held(&mut self, worker: i32, models: &[ModelStatus], now_ms: u64) {
        for (&num, a) in self.active.iter_mut() {
            let s = models.iter().find(|m| m.job == num);
            if s.is_some() || a.models.state(worker).is_some() {
                a.models.report(worker, s, now_ms);
            }
        }
    }

    fn next(
        &mut self,
        worker: i32,
        finished: Option<Finished>,
        models: &[ModelStatus],
        catalog: u64,
        now_ms: u64,
    ) -> Result<JobsResponse, JobsError> {
        if self.workers.insert(worker) {
            log::info!("worker {worker} joined");
            self.reallocate(now_ms);
        }
        self.models_held(worker, models, now_ms);
        if let Some(f) = finished {
            let job = f.job;
            self.record(worker, f, now_ms)?;
            self.settle(job, now_ms)?;
        }
        self.requeue_lost(worker, now_ms)?;
        if catalog != self.catalog {
            return Ok(JobsResponse::Warm {
                catalog: self.catalog,
                jobs: self.catalog_jobs(),
            });
        }
        let Some(&num) = self.assignment.get(&worker) else {
            return Ok(JobsResponse::Wait);
        };
        let Some(job) = self.table.get(num).cloned() else {
            return Ok(JobsResponse::Wait);
        };
        if let JobSpec::Train(_) = job.spec {
            let holding = self.hosting.values().filter(|h| h.contains(&num)).count();
            if holding < self.cfg.num_servers {
                return Ok(JobsResponse::Wait);
            }
        }
        let a = self.active.get_mut(&num).expect("assigned jobs are active");
        if let (JobSpec::Train(t), None) = (&job.spec, a.evaluating) {
            if let Some(pass) = a.to_evaluate.pop_front() {
                a.evaluating = Some((worker, pass));
                return Ok(JobsResponse::Evaluate {
                    job: num,
                    model: job.model.ok_or_else(no_model)?,
                    spec: t.clone(),
                    pass,
                });
            }
        }
        if a.master.complete() {
            return match &job.spec {
                JobSpec::Train(t) if a.finalizer.is_none() => {
                    a.finalizer = Some(worker);
                    log::info!("job {}: every pass done; worker {worker} finalizes it", job.id());
                    Ok(JobsResponse::Finalize {
                        job: num,
                        model: job.model.ok_or_else(no_model)?,
                        spec: t.clone(),
                    })
                }
                _ => {
                    self.settle(num, now_ms)?;
                    Ok(JobsResponse::Wait)
                }
            };
        }
        if let JobSpec::Infer(i) = &job.spec {
            if i.user_model().is_some() && !a.models.is_ready(worker) {
                return Ok(JobsResponse::Prepare {
                    job: num,
                    spec: i.clone(),
                });
            }
        }
        let reply = a.master.get_task(worker, None, now_ms)?;
        self.passes_completed(num, now_ms)?;
        let task = match reply {
            Reply::Task(t) => t,
            Reply::Wait | Reply::NoMoreTasks => return Ok(JobsResponse::Wait),
        };
        let a = self.active.get_mut(&num).expect("assigned jobs are active");
        a.tally.handed_out(now_ms);
        let timeout_ms = a
            .master
            .queues()
            .pending
            .get(&task.id)
            .map_or(0, |e| e.deadline_ms.saturating_sub(e.dispatched_ms));
        a.rate.start(now_ms);
        self.change(|t| t.start(num, now_ms))?;
        Ok(match job.spec {
            JobSpec::Train(spec) => JobsResponse::Train {
                job: num,
                model: job.model.ok_or_else(no_model)?,
                spec,
                task,
            },
            JobSpec::Infer(spec) => JobsResponse::Infer {
                job: num,
                spec,
                task,
                timeout_ms,
            },
        })
    }

    /// A worker's runner could not load job `num`'s model: noted in the job's status;
    /// while no runner has ever had it ready, more than `max_retries` such failures fail
    /// the job (a module that does not import fails every worker alike).
    fn load_failed(&mut self, worker: i32, num: JobNum, error: &str, now_ms: u64) -> Result<JobsResponse, JobsError> {
        let Some(JobSpec::Infer(spec)) = self.table.get(num).map(|j| j.spec.clone()) else {
            return Ok(JobsResponse::Ok);
        };
        let Some(a) = self.active.get_mut(&num) else {
            return Ok(JobsResponse::Ok);
        };
        log::warn!("job j{num}: worker {worker} could not load the model: {error}");
        a.last_error = Some(format!("loading the model on worker {worker}: {error}"));
        a.load_failures += 1;
        if a.models.first_ready_ms().is_none() && a.load_failures > spec.max_retries {
            let why = format!("loading the model failed {} times: {error}", a.load_failures);
            log::error!("job j{num} failed: {why}");
            self.change(|t| t.fail(num, &why, now_ms))?;
            self.end(num, now_ms);
        }
        Ok(JobsResponse::Ok)
    }

    /// Ends a complete inference job: joins its batches into its output and records
    /// the accuracy (a missing batch fails the job).
    fn settle(&mut self, num: JobNum, now_ms: u64) -> Result<(), JobsError> {
        let Some(a) = self.active.get(&num) else { return Ok(()) };
        let Some(JobSpec::Infer(spec)) = self.table.get(num).map(|j| j.spec.clone()) else {
            return Ok(());
        };
        if !a.master.complete() {
            return Ok(());
        }
        let tasks = a.master.snapshot().tasks_per_epoch as u64;
        let dir = self.batches_dir(num);
        let given_up = &a.master.queues().given_up;
        let columns = if spec.runner.is_some() {
            outputs::Columns::Outputs
        } else {
            outputs::Columns::Predictions
        };
        let joined = match given_up.first() {
            Some(g) => Err(format!(
                "{} of {tasks} queries failed {} times; task {}: {}",
                given_up.len(),
                spec.max_retries + 1,
                g.task,
                g.reason
            )),
            None => outputs::join(&dir, tasks, std::path::Path::new(&spec.out), columns).map_err(|e| e.to_string()),
        };
        let figures = self.final_figures(num, now_ms);
        match joined {
            Ok(j) => {
                log::info!("job j{num} done: {} records written to {}", j.records, spec.out);
                self.change(|t| {
                    t.finish(num, j.accuracy, now_ms)?;
                    let job = t.jobs.get_mut(&num).expect("finished");
                    (job.progress, job.figures) = (1.0, figures);
                    Ok(())
                })?;
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(e) => {
                log::error!("job j{num} failed: {e}");
                self.change(|t| {
                    t.fail(num, &e, now_ms)?;
                    t.jobs.get_mut(&num).expect("failed").figures = figures;
                    Ok(())
                })?;
            }
        }
        self.end(num, now_ms);
        Ok(())
    }

    fn finalized(
        &mut self,
        num: JobNum,
        accuracy: Option<f64>,
        error: Option<String>,
        now_ms: u64,
    ) -> Result<JobsResponse, JobsError> {
        if !self.is_active(num) {
            return Ok(JobsResponse::Ok);
        }
        let progress = self.progress(num);
        if let (Some(acc), Some(a)) = (accuracy, self.active.get_mut(&num)) {
            // the final evaluation is the last pass's
            let last = a.master.snapshot().num_epochs.saturating_sub(1);
            a.tally.evaluated(last, acc);
        }
        let figures = self.final_figures(num, now_ms);
        match &error {
            None => self.change(|t| {
                t.finish(num, accuracy, now_ms)?;
                let job = t.jobs.get_mut(&num).expect("finished");
                (job.progress, job.figures) = (progress, figures);
                Ok(())
            })?,
            Some(e) => self.change(|t| {
                t.fail(num, e, now_ms)?;
                t.jobs.get_mut(&num).expect("failed").figures = figures;
                Ok(())
            })?,
        }
        log::info!("job j{num} ended: accuracy {accuracy:?}, error {error:?}");
        self.end(num, now_ms);
        Ok(JobsResponse::Ok)
    }

    /// A worker evaluated pass `pass` of job `num`: the accuracy joins the pass's
    /// figures (saved with them).
    fn evaluated(
        &mut self,
        worker: i32,
        num: JobNum,
        pass: u64,
        accuracy: Option<f64>,
        _now_ms: u64,
    ) -> Result<JobsResponse, JobsError> {
        let Some(a) = self.active.get_mut(&num) else {
            return Ok(JobsResponse::Ok);
        };
        if a.evaluating == Some((worker, pass)) {
            a.evaluating = None;
        }
        let Some(acc) = accuracy else {
            return Ok(JobsResponse::Ok);
        };
        a.tally.evaluated(pass, acc);
        let per_pass = a.tally.per_pass();
        self.change(|t| {
            if let Some(j) = t.jobs.get_mut(&num) {
                j.figures.per_pass = per_pass;
            }
            Ok(())
        })?;
        Ok(JobsResponse::Ok)
    }

    fn server_poll(&mut self, server: i32, hosting: Vec<JobNum>) -> JobsResponse {
        self.hosting.insert(server, hosting.into_iter().collect());
        let jobs = self
            .active
            .keys()
            .filter_map(|&num| {
                let job = self.table.get(num)?;
                match &job.spec {
                    JobSpec::Train(t) => Some(ServerJob {
                        job: num,
                        model: job.model?,
                        spec: t.clone(),
                        workers: self.assignment.values().filter(|&&j| j == num).count(),
                    }),
                    JobSpec::Infer(_) => None,
                }
            })
            .collect();
        JobsResponse::Servers(jobs)
    }
}
