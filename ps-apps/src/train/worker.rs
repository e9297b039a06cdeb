//! A training worker: asks the master for tasks, reads their chunks, trains minibatch
//! by minibatch through the parameter servers, reports each task, and (rank 0)
//! evaluates the model after every pass and saves it at the end.

use super::error::TrainError;
use super::exchange::ParamExchange;
use super::master_client::MasterClient;
use super::minibatch::{BatchError, MinibatchLoop};
use super::task_loop::{Next, TaskLoop, Trained};
use crate::master::{Task, TaskReport};
use crate::model::metrics;
use crate::model::Model;
use crate::recordio::{self, Example};
use ps_core::Postoffice;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How long `psrs train`'s workers keep asking a master that does not answer.
pub const MASTER_PATIENCE: Duration = Duration::from_secs(120);

/// How a worker trains.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// Dataset files.
    pub train: Vec<String>,
    /// Held-out set (rank 0 evaluates on it).
    pub test: Option<PathBuf>,
    /// Examples per minibatch.
    pub batch: usize,
    /// Sync mode (pulls wait for the contributed version).
    pub sync: bool,
    /// Rejections after which a task fails.
    pub max_rejections: u32,
    /// Where rank 0 saves the model.
    pub out: Option<PathBuf>,
    /// How long to keep asking an unreachable master.
    pub master_patience: Duration,
    /// Learning-rate decay per pass: pass p's gradients are scaled by `lr_decay^p`
    /// (1.0: constant learning rate).
    pub lr_decay: f32,
    /// Set (e.g. by SIGTERM) to leave the job: the worker finishes its current task,
    /// reports it, tells the master it leaves and returns [`Ending::Left`].
    pub leave: Option<Arc<AtomicBool>>,
}

/// How [`run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The job is complete.
    Complete,
    /// The worker left the job on request ([`WorkerOptions::leave`]): its last task
    /// was reported; the caller says goodbye to the cluster (`Postoffice::leave`).
    Left,
}

/// What evaluation measured.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// Accuracy.
    pub accuracy: f64,
    /// Mean log-loss.
    pub log_loss: f64,
    /// AUC (binary models only).
    pub auc: Option<f64>,
}

/// Prints a pass's held-out figures (the line the launch scripts and tests read).
fn print_pass(pass: u64, ev: &Evaluation) {
    println!(
        "pass {pass} test accuracy {:.4} log-loss {:.4}",
        ev.accuracy, ev.log_loss
    );
}

/// Evaluates `params` on `examples`.
pub fn evaluate(model: &Model, params: &[f32], examples: &[Example]) -> Evaluation {
    let labels: Vec<usize> = examples.iter().map(|e| e.label.max(0.0) as usize).collect();
    let labels = match model {
        Model::LogReg { .. } => examples.iter().map(|e| usize::from(e.label > 0.0)).collect(),
        _ => labels,
    };
    let probs: Vec<Vec<f32>> = examples.iter().map(|e| model.predict(params, e)).collect();
    let pred: Vec<usize> = probs
        .iter()
        .map(|p| {
            p.iter()
                .enumerate()
                .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
                .0
        })
        .collect();
    let auc = matches!(model, Model::LogReg { .. }).then(|| {
        let scores: Vec<f32> = probs.iter().map(|p| p[1]).collect();
        metrics::auc(&scores, &labels.iter().map(|&l| l == 1).collect::<Vec<_>>())
    });
    Evaluation {
        accuracy: metrics::accuracy(&pred, &labels),
        log_loss: metrics::log_loss(&probs, &labels),
        auc,
    }
}

/// Reads every example of `path`: [`TrainError::Data`] if the file cannot be read,
/// [`TrainError::BadData`] for a record that is not an example.
pub fn read_examples(path: &Path) -> Result<Vec<Example>, TrainError> {
    recordio::read_all(path)?
        .iter()
        .map(|r| Example::decode(r).map_err(|e| TrainError::BadData(e.to_string())))
        .collect()
}

/// Reads every example of a task's chunks, in order (errors as [`read_task`]'s).
pub fn task_examples(t: &Task) -> Result<Vec<Example>, TrainError> {
    read_task(t, None)
}

/// Reads every example of a task's chunks, in order, each checked against `model`
/// if given; an error names the file and chunk: [`TrainError::Data`] for a chunk
/// that cannot be read, [`TrainError::BadData`] for an undecodable record or an
/// example that does not fit the model.
pub fn read_task(t: &Task, model: Option<&Model>) -> Result<Vec<Example>, TrainError> {
    let mut out = Vec::new();
    for c in &t.chunks {
        let at = || format!("{}: chunk {}", c.path, c.index.idx);
        for r in recordio::read_chunk(Path::new(&c.path), &c.index)? {
            let e = Example::decode(&r).map_err(|e| TrainError::BadData(format!("{}: {e}", at())))?;
            if let Some(m) = model {
                m.check_example(&e).map_err(|why| {
                    TrainError::BadData(format!("{}: an example does not fit the model: {why}", at()))
                })?;
            }
            out.push(e);
        }
    }
    Ok(out)
}

/// Trains one task minibatch by minibatch (`batch` examples each) through `ex`; the
/// report, or None if the task failed (too many rejected pushes in a row). A failed
/// exchange with the servers ([`TrainError::Kv`]), an unreadable chunk or data that
/// does not fit the model (as [`read_task`]) is an error.
pub fn train_task(
    model: &Model,
    ex: &mut impl ParamExchange,
    lp: &mut MinibatchLoop,
    task: &Task,
    batch: usize,
) -> Result<Option<TaskReport>, TrainError> {
    let examples = read_task(task, Some(model))?;
    train_examples(model, ex, lp, task, &examples, batch)
}

/// [`train_task`] on the task's examples, already read.
pub fn train_examples(
    model: &Model,
    ex: &mut impl ParamExchange,
    lp: &mut MinibatchLoop,
    task: &Task,
    examples: &[Example],
    batch: usize,
) -> Result<Option<TaskReport>, TrainError> {
    let mut rep = TaskReport::default();
    for b in examples.chunks(batch.max(1)) {
        match lp.step(model, ex, b) {
            Ok(o) => {
                rep.examples += b.len() as u64;
                rep.loss_sum += o.loss as f64 * b.len() as f64;
                rep.correct += o.correct as u64;
                rep.version = rep.version.max(o.version);
            }
            Err(BatchError::TooManyRejections(n)) => {
                log::warn!("task {} failed: {n} rejected pushes in a row", task.id);
                return Ok(None);
            }
            Err(BatchError::Exchange(e)) => return Err(e.into()),
        }
    }
    Ok(Some(rep))
}

/// Runs the worker until the master says the job is complete, or until it is asked to
/// leave ([`WorkerOptions::leave`]). A master that stays silent is
/// [`TrainError::Unanswered`], one that refuses the dataset [`TrainError::Master`];
/// the test set's and the servers' errors keep their kinds.
pub fn run(
    po: &Arc<Postoffice>,
    model: Model,
    ex: &mut impl ParamExchange,
    opts: &WorkerOptions,
) -> Result<Ending, TrainError> {
    let master = MasterClient::new(po)?;
    let me = po.my_id();
    let lead = po.my_rank() == 0 && !po.is_recovery();
    let test = match (&opts.test, lead) {
        (Some(p), true) => {
            let examples = read_examples(p)?;
            model.check_examples(&examples, &p.display().to_string())?;
            Some(examples)
        }
        _ => None,
    };
    let mut lp = MinibatchLoop::new(ex.num_shards(), opts.sync, opts.max_rejections);
    let mut epoch_seen = 0;
    let (mut tl, mut next) = TaskLoop::new(opts.train.clone(), opts.leave.clone());
    loop {
        next = match next {
            Next::Ask(req) => tl.answered(master.call(&req, opts.master_patience)?)?,
            Next::Train(task) => {
                if let Some(test) = &test {
                    if task.epoch > epoch_seen {
                        let params = ex.pull(None, &vec![None; ex.num_shards()])?.values;
                        print_pass(epoch_seen + 1, &evaluate(&model, &params, test));
                        epoch_seen = task.epoch;
                    }
                }
                lp.grad_scale = opts.lr_decay.powi(i32::try_from(task.epoch).unwrap_or(i32::MAX));
                let trained = match read_task(&task, Some(&model)) {
                    // a corrupt chunk fails this task (the master retries it, then
                    // gives it up and reports it); the job goes on
                    Err(error) => {
                        log::warn!("task {}: {error}", task.id);
                        Trained::Unreadable(error.to_string())
                    }
                    Ok(examples) => match train_examples(&model, ex, &mut lp, &task, &examples, opts.batch)? {
                        Some(rep) => Trained::Done(rep),
                        None => Trained::Failed,
                    },
                };
                tl.trained(&task, trained)
            }
            Next::Idle => {
                if let Err(e) = ex.idle() {
                    log::warn!("idle notice not sent: {e}");
                }
                tl.idled()
            }
            Next::Pause(d) => {
                std::thread::sleep(d);
                tl.paused()
            }
            Next::Complete => break,
            Next::Left => {
                println!("worker {me} trained {} tasks", tl.tasks());
                println!("worker {me} leaves the job");
                return Ok(Ending::Left);
            }
        };
    }
    let tasks = tl.tasks();
    println!("worker {me} trained {tasks} tasks");
    if lead {
        let params = ex.pull(None, &vec![None; ex.num_shards()])?.values;
        if let Some(test) = &test {
            let ev = evaluate(&model, &params, test);
            print_pass(epoch_seen + 1, &ev);
            print!("final test accuracy {:.4} log-loss {:.4}", ev.accuracy, ev.log_loss);
            if let Some(a) = ev.auc {
                print!(" auc {a:.4}");
            }
            println!();
        }
        if let Some(out) = &opts.out {
            crate::model::save(out, &model, &params)?;
            println!("model saved to {}", out.display());
        }
    }
    Ok(Ending::Complete)
}
