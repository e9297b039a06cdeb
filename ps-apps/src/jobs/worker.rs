//! A cluster worker: asks the scheduler for work, runs it, reports it, forever. A
//! training task goes through the job's own KV app on the servers; an inference task
//! predicts every record of its chunks with the job's saved model, or hands its inputs
//! to the worker's Python runner (a TorchScript model or the user's function), which
//! holds the models of every running job that needs one, warmed in the background as
//! soon as the scheduler lists the job ([`super::warmup`]); a finalize order evaluates a
//! finished training job on its test set and saves its model. A worker switches jobs
//! only between tasks, as the scheduler's answers say. A failed task (the runner
//! raised, died or hung) is reported with its reason and the worker goes on.

use super::error::JobsError;
use super::table::JobNum;
use super::user_infer::{self, Output};
use super::warmup::Warmup;
use super::wire::{job_app, Finished, JobsRequest, JobsResponse, Prediction, JOBS_APP, JOBS_HEAD};
use super::{InferSpec, TrainSpec, UpdateRule};
use crate::master::{Task, TaskReport};
use crate::model::Model;
use crate::pyrunner::{RunnerConfig, RunnerSlot};
use crate::train::coordinator::{decode, encode};
use crate::train::exchange::ParamExchange;
use crate::train::kv_exchange::KvExchange;
use crate::train::layout::Layout;
use crate::train::master_client::MasterClient;
use crate::train::minibatch::MinibatchLoop;
use crate::train::worker::{evaluate, read_examples, task_examples, train_task};
use crate::train::TrainError;
use ps_core::kv::KVWorker;
use ps_core::Postoffice;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long a cluster node keeps asking an unreachable scheduler (e.g. restarting).
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Sends `req` to the scheduler's jobs service; sent again as soon as the scheduler
/// was replaced (a standby took over, or it restarted) or after a silent attempt, for
/// at most `patience` in all. A scheduler that does not answer in that time, or an
/// answer that does not decode, is [`JobsError::Train`] of its kind.
pub fn call(client: &MasterClient, req: &JobsRequest, patience: Duration) -> Result<JobsResponse, JobsError> {
    Ok(decode(&client.call_bytes(encode(req), patience)?)?)
}

/// The client of the scheduler's jobs service ([`JobsError::Train`] if it cannot
/// register).
pub fn client(po: &Arc<Postoffice>) -> Result<MasterClient, JobsError> {
    Ok(MasterClient::on_app(po, JOBS_APP, JOBS_HEAD)?)
}

/// The worker's link to one training job's parameters.
struct TrainCtx {
    job: JobNum,
    ex: KvExchange,
    lp: MinibatchLoop,
}

fn train_ctx(po: &Arc<Postoffice>, job: JobNum, model: &Model, spec: &TrainSpec) -> Result<TrainCtx, JobsError> {
    let kv = KVWorker::<f32>::new(po, job_app(job)).map_err(TrainError::from)?;
    let ex = KvExchange::new(
        kv,
        Layout::new(model.num_params(), po.num_servers()),
        Duration::from_secs(30),
    );
    let lp = MinibatchLoop::new(ex.num_shards(), spec.mode == UpdateRule::Sync, spec.max_rejections);
    Ok(TrainCtx { job, ex, lp })
}

fn predict(model: &Model, params: &[f32], task: &Task) -> Result<(Vec<Prediction>, TaskReport), TrainError> {
    let examples = task_examples(task)?;
    let mut rep = TaskReport::default();
    let preds = examples
        .iter()
        .map(|e| {
            let probs = model.predict(params, e);
            let (class, prob) = probs
                .iter()
                .enumerate()
                .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
            let label = match model {
                Model::LogReg { .. } => f32::from(u8::from(e.label > 0.0)),
                _ => e.label,
            };
            rep.examples += 1;
            rep.correct += u64::from(label == class as f32);
            Prediction {
                class: class as u32,
                prob,
                label,
            }
        })
        .collect();
    Ok((preds, rep))
}

/// The test accuracy of the job's model as its servers hold it now (after pass `pass`).
fn evaluate_pass(ctx: &mut TrainCtx, model: &Model, spec: &TrainSpec, pass: u64) -> Result<Option<f64>, TrainError> {
    let Some(test) = &spec.test else { return Ok(None) };
    let params = ctx.ex.pull(None, &vec![None; ctx.ex.num_shards()])?.values;
    let ev = evaluate(model, &params, &read_examples(Path::new(test))?);
    log::info!("job j{} pass {} test accuracy {:.4}", ctx.job, pass + 1, ev.accuracy);
    Ok(Some(ev.accuracy))
}

fn finalize(ctx: &mut TrainCtx, model: &Model, spec: &TrainSpec) -> Result<Option<f64>, TrainError> {
    let params = ctx.ex.pull(None, &vec![None; ctx.ex.num_shards()])?.values;
    let mut accuracy = None;
    if let Some(test) = &spec.test {
        let ev = evaluate(model, &params, &read_examples(Path::new(test))?);
        println!(
            "job j{} final test accuracy {:.4} log-loss {:.4}",
            ctx.job, ev.accuracy, ev.log_loss
        );
        accuracy = Some(ev.accuracy);
    }
    if let Some(out) = &spec.out {
        crate::model::save(Path::new(out), model, &params)?;
        println!("job j{} model saved to {out}", ctx.job);
    }
    Ok(accuracy)
}

/// Leaves the current training job: tells its servers this worker holds no task (its
/// sync versions stop waiting for it), then drops the job's KV app.
fn leave(ctx: &mut Option<TrainCtx>) {
    if let Some(mut c) = ctx.take() {
        if let Err(e) = c.ex.idle() {
            log::debug!("idle notice to job j{} not sent: {e}", c.job);
        }
    }
}

/// A psrs model file loaded for an inference job.
type Loaded = Option<(JobNum, Model, Vec<f32>)>;

/// Runs one inference task: with the psrs model file (loaded once per job), or in the
/// Python runner. The error is one line: [`JobsError::BadRequest`] for a model file
/// that cannot be loaded, the task's or the runner's errors by their kinds.
fn infer(
    slot: &mut RunnerSlot,
    loaded: &mut Loaded,
    job: JobNum,
    spec: &InferSpec,
    task: &Task,
    timeout: Duration,
) -> Result<Finished, JobsError> {
    let (predictions, rows) = match &spec.model {
        Some(path) => {
            if loaded.as_ref().map(|l| l.0) != Some(job) {
                let (m, p) =
                    crate::model::load(Path::new(path)).map_err(|e| JobsError::BadRequest(format!("{path}: {e}")))?;
                *loaded = Some((job, m, p));
                log::info!("working on job j{job}");
            }
            let (_, m, p) = loaded.as_ref().expect("set above");
            let (preds, report) = predict(m, p, task)?;
            return Ok(Finished {
                job,
                task: task.id,
                report,
                predictions: Some(preds),
                rows: None,
                took_ms: 0,
            });
        }
        None => match user_infer::run(slot, job, spec, task, timeout)? {
            Output::Predictions(p) => (Some(p), None),
            Output::Rows(r) => (None, Some(r)),
        },
    };
    let mut report = TaskReport::default();
    if let Some(p) = &predictions {
        report.examples = p.len() as u64;
        report.correct = p.iter().filter(|x| x.label == x.class as f32).count() as u64;
    }
    if let Some(r) = &rows {
        report.examples = r.len() as u64;
    }
    Ok(Finished {
        job,
        task: task.id,
        report,
        predictions,
        rows,
        took_ms: 0,
    })
}

/// Runs the worker until the scheduler stays unreachable for [`PATIENCE`]
/// ([`JobsError::Train`] of kind [`TrainError::Unanswered`]); inference jobs with a
/// user's model run in a Python runner started with `runner`, whose models take at
/// most its memory budget (beyond it only the model of the job the worker is on).
pub fn run(po: &Arc<Postoffice>, runner: RunnerConfig) -> Result<(), JobsError> {
    let app = client(po)?;
    let mut ctx: Option<TrainCtx> = None;
    let mut loaded: Loaded = None;
    let mut warm = Warmup::new(runner.memory_budget_mb.saturating_mul(1 << 20));
    let preload = !runner.preload.is_empty();
    let mut slot = RunnerSlot::new(runner);
    if preload {
        // the libraries import while the worker waits for its first job
        if let Err(e) = slot.start(user_infer::LOAD_TIMEOUT) {
            log::warn!("the Python runner did not start: {e}");
        }
    }
    let mut finished: Option<Finished> = None;
    loop {
        let (models, failed) = warm.step(&mut slot);
        for (job, error) in failed {
            call(&app, &JobsRequest::LoadFailed { job, error }, PATIENCE)?;
        }
        let resp = call(
            &app,
            &JobsRequest::Next {
                finished: finished.clone(),
                models,
                catalog: warm.version(),
            },
            PATIENCE,
        )?;
        if let JobsResponse::Error(e) = &resp {
            log::warn!("scheduler: {e}; asking again");
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        finished = None;
        let start = std::time::Instant::now();
        let took = |start: std::time::Instant| (start.elapsed().as_millis() as u64).max(1);
        match resp {
            JobsResponse::Warm { catalog, jobs } => warm.set_catalog(catalog, &jobs),
            JobsResponse::Train { job, model, spec, task } => {
                warm.assign(None);
                if ctx.as_ref().map(|c| c.job) != Some(job) {
                    leave(&mut ctx); // the old job's KV app goes before the new one's comes
                    ctx = Some(train_ctx(po, job, &model, &spec)?);
                    log::info!("working on job j{job}");
                }
                let c = ctx.as_mut().expect("set above");
                c.lp.grad_scale = spec.lr_decay.powi(i32::try_from(task.epoch).unwrap_or(i32::MAX));
                match train_task(&model, &mut c.ex, &mut c.lp, &task, spec.batch) {
                    Ok(Some(report)) => {
                        finished = Some(Finished {
                            job,
                            task: task.id,
                            report,
                            predictions: None,
                            rows: None,
                            took_ms: took(start),
                        })
                    }
                    Ok(None) => {
                        let failed = JobsRequest::Failed {
                            job,
                            task: task.id,
                            error: None,
                        };
                        call(&app, &failed, PATIENCE)?;
                    }
                    Err(e) => {
                        log::warn!("job j{job} task {}: {e}", task.id);
                        ctx = None;
                        let failed = JobsRequest::Failed {
                            job,
                            task: task.id,
                            error: Some(e.to_string()),
                        };
                        call(&app, &failed, PATIENCE)?;
                    }
                }
            }
            JobsResponse::Prepare { job, .. } => {
                // the model loads in the runner's background (warmed first, being the
                // assigned job's); ask again shortly
                warm.assign(Some(job));
                std::thread::sleep(Duration::from_millis(50));
            }
            JobsResponse::Infer {
                job,
                spec,
                task,
                timeout_ms,
            } => {
                let timeout = Duration::from_millis(timeout_ms.max(1));
                if spec.user_model().is_some() {
                    warm.assign(Some(job));
                }
                let out = infer(&mut slot, &mut loaded, job, &spec, &task, timeout);
                if spec.user_model().is_some() {
                    warm.used(job);
                }
                match out {
                    Ok(f) => {
                        finished = Some(Finished {
                            took_ms: took(start),
                            ..f
                        })
                    }
                    Err(e) => {
                        log::warn!("job j{job} task {}: {e}", task.id);
                        let failed = JobsRequest::Failed {
                            job,
                            task: task.id,
                            error: Some(e.to_string()),
                        };
                        call(&app, &failed, PATIENCE)?;
                    }
                }
            }
            JobsResponse::Evaluate { job, model, spec, pass } => {
                warm.assign(None);
                if ctx.as_ref().map(|c| c.job) != Some(job) {
                    leave(&mut ctx);
                    ctx = Some(train_ctx(po, job, &model, &spec)?);
                }
                let c = ctx.as_mut().expect("set above");
                // holds no task while it evaluates: sync versions must not wait for it
                if let Err(e) = c.ex.idle() {
                    log::debug!("idle notice not sent: {e}");
                }
                let accuracy = evaluate_pass(c, &model, &spec, pass).unwrap_or_else(|e| {
                    log::warn!("job j{job}: evaluating pass {} failed: {e}", pass + 1);
                    None
                });
                call(&app, &JobsRequest::Evaluated { job, pass, accuracy }, PATIENCE)?;
            }
            JobsResponse::Finalize { job, model, spec } => {
                warm.assign(None);
                if ctx.as_ref().map(|c| c.job) != Some(job) {
                    drop(ctx.take());
                    ctx = Some(train_ctx(po, job, &model, &spec)?);
                }
                let out = finalize(ctx.as_mut().expect("set above"), &model, &spec);
                let (accuracy, error) = match out {
                    Ok(a) => (a, None),
                    Err(e) => (None, Some(e.to_string())),
                };
                call(&app, &JobsRequest::Finalized { job, accuracy, error }, PATIENCE)?;
                ctx = None;
            }
            _ => {
                if let Some(c) = ctx.as_mut() {
                    // holds no task: the job's sync versions must not wait for it
                    if let Err(e) = c.ex.idle() {
                        log::debug!("idle notice not sent: {e}");
                    }
                }
                std::thread::sleep(Duration::from_millis(50))
            }
        }
    }
}
