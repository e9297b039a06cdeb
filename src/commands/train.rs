//! `psrs train`: distributed training. Run the same command on every node (e.g. with
//! `scripts/local.sh`); the scheduler hosts the master, servers hold the model, workers
//! train.

use super::error::CliError;
use clap::{Args as ClapArgs, ValueEnum};
use ps_apps::jobs::{TrainSpec, UpdateRule};
use ps_apps::master::{FileStore, Master, MasterConfig, ReplicatedStore, Store};
use ps_apps::model::{first_example, Model, ModelError, ModelKind, ModelOptions};
use ps_apps::train::coordinator::{Coordinator, CoordinatorOptions};
use ps_apps::train::kv_exchange::KvExchange;
use ps_apps::train::layout::Layout;
use ps_apps::train::server::{ServerOptions, TrainServer};
use ps_apps::train::shard::Sgd;
use ps_apps::train::versions::{Mode, EVERY_LIVE_WORKER};
use ps_apps::train::worker::{self, WorkerOptions};
use ps_core::kv::KVWorker;
use ps_core::Role;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Update rules.
#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum Rule {
    /// Synchronous SGD on model versions.
    Sync,
    /// Apply each gradient at once.
    Async,
    /// Async, rejecting gradients more than --staleness versions old.
    Bounded,
}

/// Arguments of `psrs train`.
#[derive(ClapArgs)]
pub struct Args {
    /// Training data: RecordIO files, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    train: Vec<String>,
    /// Held-out RecordIO file: worker 0 reports accuracy on it after every pass.
    #[arg(long)]
    test: Option<PathBuf>,
    /// The model: softmax (softmax regression), mlp (one hidden ReLU layer), logreg
    /// (binary logistic regression on sparse features).
    #[arg(long, default_value = "softmax", value_parser = model_kind())]
    model: ModelKind,
    /// Hidden units of the MLP.
    #[arg(long, default_value_t = 128)]
    hidden: usize,
    /// Classes (dense models).
    #[arg(long, default_value_t = 10)]
    classes: usize,
    /// Input features (default: the length of the first example; required for logreg).
    #[arg(long)]
    dim: Option<usize>,
    /// Passes over the data.
    #[arg(long, default_value_t = 3)]
    epochs: u64,
    /// Examples per minibatch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Learning rate.
    #[arg(long, default_value_t = 0.1)]
    lr: f32,
    /// Momentum.
    #[arg(long, default_value_t = 0.0)]
    momentum: f32,
    /// L2 weight decay.
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f32,
    /// Learning-rate decay per pass: pass p (from 0) trains with lr * D^p (workers
    /// scale their gradients; 1 keeps the rate constant).
    #[arg(long, value_name = "D", default_value_t = 1.0)]
    lr_decay: f32,
    /// Update rule.
    #[arg(long, value_enum, default_value = "sync")]
    mode: Rule,
    /// Largest accepted gradient age in versions (bounded mode).
    #[arg(long, default_value_t = 4)]
    staleness: u64,
    /// Sync mode: apply what has arrived this many ms after a version's first gradient.
    #[arg(long, default_value_t = 500)]
    sync_timeout_ms: u64,
    /// Chunks per task.
    #[arg(long, default_value_t = 1)]
    chunks_per_task: usize,
    /// A task times out after this many ms at least (or 4x the average task time).
    #[arg(long, default_value_t = 10_000)]
    task_timeout_ms: u64,
    /// Timeouts or failures after which a task is given up.
    #[arg(long, default_value_t = 3)]
    max_retries: u32,
    /// Directory for the master's state and the servers' checkpoints. The scheduler
    /// resumes from the state found there (a restarted scheduler continues the job).
    #[arg(long, default_value = "psrs-work")]
    work_dir: PathBuf,
    /// Servers checkpoint their shard every this many versions.
    #[arg(long, default_value_t = 20)]
    checkpoint_every: u64,
    /// Where worker 0 saves the trained model.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Serve live statistics on this address (scheduler), e.g. 127.0.0.1:8080.
    #[arg(long)]
    stats_addr: Option<String>,
    /// Allow --stats-addr beyond loopback without security (no certificates, no
    /// cluster secret): the statistics' token then crosses the network in plain text.
    #[arg(long)]
    insecure: bool,
    /// A name the statistics are reached by (a browser's Host), besides IP addresses,
    /// localhost and the name in --stats-addr; repeatable.
    #[arg(long = "api-host", value_name = "NAME")]
    api_hosts: Vec<String>,
    /// etcd endpoints for the master's state instead of a local file (needs the `etcd` feature).
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// Seed of the initial parameters.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Scheduler, off a terminal: at most one `progress:` log line this often (0: one
    /// per finished task).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    progress_secs: f64,
    /// Rejected pushes in a row after which a task fails.
    #[arg(long, default_value_t = 20)]
    max_rejections: u32,
}

const KV_APP: i32 = 0;

/// `--model`'s parser: one of [`ModelKind::NAMES`] (listed in `--help`).
fn model_kind() -> impl clap::builder::TypedValueParser<Value = ModelKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(ModelKind::NAMES).map(|s| s.parse::<ModelKind>().expect("a listed name"))
}

impl Args {
    /// These options as a cluster's training job (`psrs job submit train`); the
    /// cluster-level ones (`--work-dir`, `--stats-addr`, `--etcd`) are not part of it.
    pub fn job_spec(&self) -> TrainSpec {
        TrainSpec {
            train: self.train.clone(),
            test: self.test.as_ref().map(|p| p.display().to_string()),
            model: self.model,
            hidden: self.hidden,
            classes: self.classes,
            dim: self.dim,
            epochs: self.epochs,
            batch: self.batch,
            lr: self.lr,
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            lr_decay: self.lr_decay,
            mode: match self.mode {
                Rule::Sync => UpdateRule::Sync,
                Rule::Async => UpdateRule::Async,
                Rule::Bounded => UpdateRule::Bounded,
            },
            staleness: self.staleness,
            sync_timeout_ms: self.sync_timeout_ms,
            chunks_per_task: self.chunks_per_task,
            task_timeout_ms: self.task_timeout_ms,
            max_retries: self.max_retries,
            checkpoint_every: self.checkpoint_every,
            out: self.out.as_ref().map(|p| p.display().to_string()),
            seed: self.seed,
            max_rejections: self.max_rejections,
        }
    }
}

fn model(a: &Args) -> Result<Model, ModelError> {
    ModelOptions {
        kind: a.model,
        dim: a.dim,
        hidden: a.hidden,
        classes: a.classes,
    }
    .build(|| first_example(&a.train[0]), "--dim")
}

/// What a worker can check before joining: the held-out set's first example fits the
/// model, and the model file can be written (rank 0 writes it at the very end).
fn check_worker_files(a: &Args, model: &Model) -> Result<(), CliError> {
    if let Some(test) = &a.test {
        let first = first_example(&test.display().to_string())?;
        model.check_example(&first).map_err(|why| {
            ModelError::Misfit(format!(
                "--test {}: its first example does not fit the model: {why}",
                test.display()
            ))
        })?;
    }
    if let Some(out) = &a.out {
        ps_apps::storage::check_writable(out)
            .map_err(|e| format!("--out {}: cannot write there: {e}", out.display()))?;
    }
    Ok(())
}

fn store(a: &Args) -> Result<Box<dyn Store>, CliError> {
    if !a.etcd.is_empty() {
        #[cfg(feature = "etcd")]
        {
            let s = ps_apps::master::etcd_store::EtcdStore::connect(
                &a.etcd,
                ps_apps::master::etcd_store::DEFAULT_KEY,
                ps_apps::master::etcd_store::DEFAULT_LOCK,
                Duration::from_secs(10),
                Duration::from_secs(60),
            )?;
            return Ok(Box::new(s));
        }
        #[cfg(not(feature = "etcd"))]
        return Err("--etcd: this psrs was built without the `etcd` feature (cargo build --features etcd)".into());
    }
    let path = a.work_dir.join("master.state");
    if path.exists() {
        log::info!("resuming the job state in {} (delete it to start over)", path.display());
    }
    Ok(Box::new(FileStore::new(path)))
}

/// A flag set by the first SIGTERM (the worker finishes its task and leaves the job);
/// a second SIGTERM ends the process at once (status 143).
fn leave_on_sigterm() -> Result<Arc<AtomicBool>, String> {
    use signal_hook::consts::SIGTERM;
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register_conditional_shutdown(SIGTERM, 143, Arc::clone(&flag))
        .and_then(|_| signal_hook::flag::register(SIGTERM, Arc::clone(&flag)))
        .map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    Ok(flag)
}

/// Runs this node's role of the training job.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    if a.batch == 0 || a.epochs == 0 || !a.lr.is_finite() || a.lr <= 0.0 {
        return Err("--batch, --epochs and --lr must be above 0".into());
    }
    if !(0.0..=86_400.0).contains(&a.progress_secs) {
        return Err(format!("--progress-secs {}: must be 0 to 86400", a.progress_secs).into());
    }
    if !(a.lr_decay.is_finite() && a.lr_decay > 0.0 && a.lr_decay <= 1.0) {
        return Err(format!("--lr-decay {}: must be in (0, 1]", a.lr_decay).into());
    }
    let cfg = super::read_config()?;
    let model = model(&a)?;
    if cfg.role == Role::Worker {
        check_worker_files(&a, &model)?;
    }
    let po = super::join(cfg)?;
    let layout = Layout::new(model.num_params(), po.num_servers());
    match po.role() {
        Role::Scheduler => {
            let cfg = MasterConfig {
                chunks_per_task: a.chunks_per_task,
                num_epochs: a.epochs,
                timeout_multiplier: 4.0,
                timeout_floor_ms: a.task_timeout_ms,
                max_retries: a.max_retries,
                planted: Default::default(),
            };
            let mut st = store(&a)?;
            if po.config().schedulers.len() > 1 {
                // standby schedulers get every change before the master acts on it
                st = Box::new(ReplicatedStore::new(st, Arc::clone(po.van())));
            }
            let master = Master::new(cfg, st, 0)?;
            log::info!(
                "training {} ({} parameters) for {} passes",
                model.name(),
                model.num_params(),
                a.epochs
            );
            let _c = Coordinator::start_with(
                &po,
                master,
                a.stats_addr.as_deref(),
                format!("{} on {}", model.name(), a.train.join(",")),
                CoordinatorOptions {
                    progress_every: Duration::from_secs_f64(a.progress_secs),
                    http: super::http_options(a.insecure, a.api_hosts.clone(), &a.work_dir),
                },
            )?;
            po.finalize(true);
        }
        Role::Server => {
            let mode = match a.mode {
                Rule::Sync => Mode::Sync {
                    grads_per_version: EVERY_LIVE_WORKER,
                    timeout_ms: a.sync_timeout_ms,
                },
                Rule::Async => Mode::Async,
                Rule::Bounded => Mode::Bounded { staleness: a.staleness },
            };
            let opts = ServerOptions {
                mode,
                sgd: Sgd {
                    lr: a.lr,
                    momentum: a.momentum,
                    weight_decay: a.weight_decay,
                },
                checkpoint_dir: Some(a.work_dir.join("checkpoints")),
                checkpoint_every: a.checkpoint_every.max(1),
                quorum: None,
            };
            let s = TrainServer::start(&po, KV_APP, &layout, &model.init(a.seed), opts)?;
            po.finalize(true);
            // what every copy of a range must agree on once the job is over
            for c in s.copies() {
                log::info!(
                    "key range {}: version {}, fingerprint {:08x}",
                    c.range,
                    c.version,
                    c.fingerprint
                );
            }
        }
        Role::Worker => {
            let kv = KVWorker::<f32>::new(&po, KV_APP)?;
            let mut ex = KvExchange::new(kv, layout, Duration::from_secs(120));
            let opts = WorkerOptions {
                train: a.train.clone(),
                test: a.test.clone(),
                batch: a.batch,
                sync: a.mode == Rule::Sync,
                max_rejections: a.max_rejections,
                out: a.out.clone(),
                master_patience: worker::MASTER_PATIENCE,
                lr_decay: a.lr_decay,
                leave: Some(leave_on_sigterm()?),
            };
            let result = worker::run(&po, model, &mut ex, &opts);
            drop(ex);
            if matches!(result, Ok(worker::Ending::Left)) {
                // gone, not dead: nothing waits for this worker any more
                return Ok(po.leave(Duration::from_secs(10))?);
            }
            po.finalize(true);
            result?;
        }
    }
    Ok(())
}
