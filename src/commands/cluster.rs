//! `psrs cluster`: a long-running cluster that runs jobs as they are submitted (run on
//! every node, e.g. `scripts/local.sh 2 2 psrs cluster --stats-addr 127.0.0.1:8080`).
//! The scheduler serves the jobs API and dashboard on `--stats-addr`; servers hold each
//! training job's parameters; workers take tasks of the job they are assigned to.

use clap::{Args as ClapArgs, ValueEnum};
use ps_apps::jobs::service::{now_ms, ApiOptions, JobService};
use ps_apps::jobs::{FairMode, JobScheduler, SchedulerConfig, StoreFactory};
use ps_apps::master::{FileStore, ReplicatedSet, Store};
use ps_apps::pyrunner::RunnerConfig;
use ps_core::Role;
use std::path::PathBuf;
use std::sync::Arc;

/// Fair-time modes.
#[derive(Clone, Copy, ValueEnum)]
pub enum Scheduling {
    /// Job i gets n·S_i/ΣS_j workers (S: its smoothed seconds per query).
    Local,
    /// Balance the jobs' expected query rates (dynamic programming).
    Global,
}

/// Arguments of `psrs cluster`.
#[derive(ClapArgs)]
pub struct Args {
    /// Serve the jobs API, the dashboard and the statistics on this address
    /// (scheduler), e.g. 127.0.0.1:8080.
    #[arg(long, default_value = "127.0.0.1:8080")]
    stats_addr: String,
    /// How the workers are split among running jobs.
    #[arg(long, value_enum, default_value = "local")]
    scheduling: Scheduling,
    /// Reallocate the workers at least this often, ms (also on every arrival, end and
    /// worker death).
    #[arg(long, default_value_t = 2000)]
    realloc_ms: u64,
    /// Directory for the job table, the jobs' queues and batches (scheduler) and the
    /// jobs' checkpoints (servers). A restarted scheduler resumes the jobs found there.
    #[arg(long, default_value = "psrs-cluster")]
    work_dir: PathBuf,
    /// Directory for inference jobs' finished batches until they are joined into the
    /// job's output (scheduler; default: the work dir). With standby schedulers on other
    /// hosts, give a directory every scheduler candidate reaches (a shared file system):
    /// a standby that takes over joins the batches the old active one saved there.
    /// With --data-dir, jobs' outputs (`out`) must also be inside it (a path with `..`
    /// or leading out through a symbolic link is refused).
    #[arg(long)]
    outputs_dir: Option<PathBuf>,
    /// The Python interpreter of the workers' runners (inference jobs with `--torch` or
    /// `--runner`), e.g. a virtualenv's bin/python with torch installed (worker).
    #[arg(long, env = "PSRS_PYTHON", default_value = "python3")]
    python: String,
    /// Threads each worker's runner gives torch (`torch.set_num_threads`; worker).
    #[arg(long, default_value_t = 1)]
    runner_threads: usize,
    /// Memory the models held by a worker's runner may take together, MB (0: no
    /// limit). Every running job's model is warmed in the background; beyond the budget
    /// the least recently used are dropped, never the model of the job the worker is on
    /// (worker).
    #[arg(long, default_value_t = 2048)]
    runner_memory_mb: u64,
    /// Python modules each worker's runner imports in the background as soon as the
    /// worker starts, comma-separated (libraries the models use, e.g.
    /// torch,transformers.modeling_utils): a job's model then only has to be built (worker).
    #[arg(long, value_delimiter = ',')]
    runner_preload: Vec<String>,
    /// Worker-seconds a job must be owed before a worker moves to it between the two
    /// whole splits nearest fair time's real-valued ideal (scheduler): the split
    /// alternates between them in proportion, and an ideal that wobbles moves nobody.
    #[arg(long, default_value_t = ps_apps::jobs::share::DEFAULT_HYSTERESIS_WS, value_parser = positive)]
    hysteresis_ws: f64,
    /// Time constant of the smoothing of the jobs' seconds per query, seconds
    /// (scheduler): a query this old weighs 1/e of a new one.
    #[arg(long, default_value_t = ps_apps::jobs::cost::DEFAULT_TAU_MS as f64 / 1000.0, value_parser = positive)]
    cost_smoothing_s: f64,
    /// Confine jobs' inputs (datasets, models) to this directory (and --outputs-dir),
    /// and their outputs to --outputs-dir (needed with it). Required when --stats-addr
    /// is beyond loopback.
    #[arg(long, requires = "outputs_dir")]
    data_dir: Option<PathBuf>,
    /// Allow --stats-addr beyond loopback without security (no certificates, no
    /// cluster secret): the API's token then crosses the network in plain text.
    #[arg(long)]
    insecure: bool,
    /// A name the API is reached by (a browser's or client's Host), besides IP
    /// addresses, localhost and the name in --stats-addr; repeatable. Requests
    /// addressed to any other name are refused (DNS rebinding).
    #[arg(long = "api-host", value_name = "NAME")]
    api_hosts: Vec<String>,
    /// Refuse jobs that run the submitter's code (`--runner`, `--pythonpath`,
    /// `--torch`): 403 with one line. Training jobs and inference with psrs model
    /// files still run.
    #[arg(long)]
    no_code_jobs: bool,
}

/// A positive, finite number (clap's parser for the fair-time options).
fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// An API listening beyond loopback (`--stats-addr`) needs security (certificates or
/// a cluster secret) or `--insecure`, and its jobs' paths confined (`--data-dir`,
/// `--outputs-dir`). Checked before the scheduler joins, so a wrong deployment stops
/// at once with one line instead of after the cluster has formed.
fn check_api_exposure(a: &Args, secured: bool) -> Result<(), super::error::CliError> {
    use std::net::ToSocketAddrs;
    let addr = ps_apps::stats::bind_addr(&a.stats_addr);
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| format!("--stats-addr {addr}: {e}"))?
        .collect();
    if addrs.iter().all(|s| s.ip().is_loopback()) {
        return Ok(());
    }
    if !secured && !a.insecure {
        // the same rule and one-line error as the HTTP server's when it binds
        addrs
            .iter()
            .try_for_each(|s| ps_apps::stats::Access::new(None, false).check_listen(*s))?;
    }
    if a.data_dir.is_none() || a.outputs_dir.is_none() {
        return Err(format!(
            "--stats-addr {addr} is beyond loopback: give --data-dir and --outputs-dir (jobs may then read and write only there)"
        )
        .into());
    }
    Ok(())
}

/// Runs this node's role of the cluster until it is killed.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    let runner = RunnerConfig {
        python: a.python.clone(),
        threads: a.runner_threads,
        memory_budget_mb: a.runner_memory_mb,
        preload: a
            .runner_preload
            .iter()
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect(),
    };
    runner.validate()?;

    let cfg = super::read_config()?;
    if cfg.role == Role::Scheduler {
        check_api_exposure(&a, cfg.security.is_on())?;
    }
    let po = super::join(cfg)?;
    std::fs::create_dir_all(&a.work_dir).map_err(|e| format!("{}: {e}", a.work_dir.display()))?;
    match po.role() {
        Role::Scheduler => {
            let dir = a.work_dir.clone();
            let file = move |name: &str| Box::new(FileStore::new(dir.join(format!("{name}.state")))) as Box<dyn Store>;
            let stores: StoreFactory = if po.config().schedulers.len() > 1 {
                // standby schedulers get the job table and every job's queues before the
                // active one acts on them; a standby that took over resumes from them
                let van = Arc::clone(po.van());
                let received = van.replicated_app_state();
                let set = ReplicatedSet::new(received.as_deref(), Arc::new(move |b| Ok(van.replicate_app(b)?)))?;
                Box::new(move |name| set.open(name, file(name)))
            } else {
                Box::new(file)
            };
            let cfg = SchedulerConfig {
                outputs_dir: a.outputs_dir.clone().unwrap_or_else(|| a.work_dir.clone()),
                mode: match a.scheduling {
                    Scheduling::Local => FairMode::Local,
                    Scheduling::Global => FairMode::Global,
                },
                realloc_every_ms: a.realloc_ms.max(100),
                num_servers: po.num_servers(),
                hysteresis_ws: a.hysteresis_ws,
                cost_tau_ms: (a.cost_smoothing_s * 1000.0).round().max(1.0) as u64,
                paths: ps_apps::jobs::paths::JobPaths::new(a.data_dir.as_deref(), a.outputs_dir.as_deref())?,
            };
            let sched = JobScheduler::new(cfg, stores, now_ms())?;
            let opts = ApiOptions {
                http: super::http_options(a.insecure, a.api_hosts.clone(), &a.work_dir),
                code_jobs: !a.no_code_jobs,
            };
            let _svc = JobService::start(&po, sched, &a.stats_addr, &opts)?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        Role::Server => Ok(ps_apps::jobs::server::run(&po, &a.work_dir)?),
        Role::Worker => Ok(ps_apps::jobs::worker::run(&po, runner)?),
    }
}
