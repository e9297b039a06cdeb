//! `psrs job`: the client of a cluster's jobs API (`--api http://HOST:PORT` or
//! `PSRS_API`): submit training and inference jobs, list them, show one, wait for one
//! to end, cancel one. Everything goes through the HTTP/JSON API, so curl does too.

use super::api_client::ApiClient;
use clap::{Args as ClapArgs, Subcommand};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Arguments of `psrs job`.
#[derive(ClapArgs)]
pub struct Args {
    /// The scheduler's API (its --stats-addr).
    #[arg(long, global = true, env = "PSRS_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Submit a job.
    #[command(subcommand)]
    Submit(Submit),
    /// List every job.
    List,
    /// Show one job (JSON).
    Status {
        /// The job's id.
        id: String,
    },
    /// Wait until a job ends; fails unless it is done.
    Wait {
        /// The job's id.
        id: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600)]
        timeout_s: u64,
    },
    /// Cancel a job.
    Cancel {
        /// The job's id.
        id: String,
    },
}

#[derive(Subcommand)]
enum Submit {
    /// A training job: the options of `psrs train`.
    Train(Box<super::train::Args>),
    /// An inference job: a psrs model file, a TorchScript file or a Python function
    /// over a dataset.
    Infer(InferArgs),
}

/// Arguments of `psrs job submit infer`.
#[derive(ClapArgs)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["model", "torch", "runner"]))]
struct InferArgs {
    /// A model file psrs wrote (`--out` of a training job or of `psrs train`).
    #[arg(long)]
    model: Option<String>,
    /// A torch.export program (`torch.export.save`, .pt2) or a TorchScript file
    /// (`torch.jit.save`): float32 [N, features] in, logits [N, classes] out; run in
    /// each worker's Python runner.
    #[arg(long)]
    torch: Option<String>,
    /// A Python function `module:function`: a list of inputs in, one output per input
    /// out (a string, a number or a list of them); run in each worker's Python runner.
    #[arg(long)]
    runner: Option<String>,
    /// A directory put first on the runner's sys.path (with --runner).
    #[arg(long, requires = "runner")]
    pythonpath: Option<String>,
    /// The dataset: RecordIO files, comma-separated, or (with --runner) one directory
    /// whose files are the inputs, in sorted order.
    #[arg(long)]
    data: String,
    /// Where the outputs go (CSV in dataset order: `index,class,probability,label`, or
    /// `index,output...` for --runner).
    #[arg(long)]
    out: String,
    /// Chunks per batch ("query") of a RecordIO dataset.
    #[arg(long, default_value_t = 1)]
    chunks_per_task: usize,
    /// Inputs per call of the TorchScript model or function; for a directory also the
    /// files per query.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// The TorchScript model's input width (needed for sparse examples).
    #[arg(long, requires = "torch")]
    dim: Option<usize>,
    /// A query times out after this many ms at least, or four times the job's pace if
    /// longer (retried elsewhere; a runner still on it is killed).
    #[arg(long, default_value_t = 60_000)]
    task_timeout_ms: u64,
    /// Failures or timeouts after which a query is given up (the job then fails).
    #[arg(long, default_value_t = 3)]
    max_retries: u32,
}

impl InferArgs {
    /// The job's JSON (`POST /jobs`).
    fn body(&self) -> Value {
        let mut v = serde_json::json!({
            "kind": "infer", "data": self.data, "out": self.out,
            "chunks_per_task": self.chunks_per_task, "batch": self.batch,
            "task_timeout_ms": self.task_timeout_ms, "max_retries": self.max_retries,
        });
        for (k, x) in [
            ("model", &self.model),
            ("torch", &self.torch),
            ("runner", &self.runner),
            ("pythonpath", &self.pythonpath),
        ] {
            if let Some(x) = x {
                v[k] = x.as_str().into();
            }
        }
        if let Some(d) = self.dim {
            v["dim"] = d.into();
        }
        v
    }
}

fn fmt_opt(v: &Value, d: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.d$}"))
}

fn line(j: &Value) -> String {
    format!(
        "{:<5} {:<6} {:<10} workers {:<3} progress {:>5.1}%  q/s {:>7}  accuracy {}{}",
        j["id"].as_str().unwrap_or("?"),
        j["kind"].as_str().unwrap_or("?"),
        j["state"].as_str().unwrap_or("?"),
        j["workers"],
        j["progress"].as_f64().unwrap_or(0.0) * 100.0,
        fmt_opt(&j["queries_per_s"], 2),
        fmt_opt(&j["accuracy"], 4),
        j["error"].as_str().map(|e| format!("  error: {e}")).unwrap_or_default(),
    )
}

/// Runs the client.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    let c = ApiClient::from_env(&a.api)?;
    let base = c.base.clone();
    match a.cmd {
        Cmd::Submit(s) => {
            let body = match s {
                Submit::Train(t) => {
                    let mut v = serde_json::to_value(t.job_spec()).map_err(|e| e.to_string())?;
                    v["kind"] = "train".into();
                    v
                }
                Submit::Infer(i) => i.body(),
            };
            let j = c.request("POST", &format!("{base}/jobs"), Some(&body.to_string()))?;
            emit(j["id"].as_str().unwrap_or("?"));
        }
        Cmd::List => {
            for j in c
                .request("GET", &format!("{base}/jobs"), None)?
                .as_array()
                .into_iter()
                .flatten()
            {
                emit(&line(j));
            }
        }
        Cmd::Status { id } => {
            let j = c.request("GET", &format!("{base}/jobs/{id}"), None)?;
            emit(&serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?);
        }
        Cmd::Cancel { id } => emit(&line(&c.request("DELETE", &format!("{base}/jobs/{id}"), None)?)),
        Cmd::Wait { id, timeout_s } => {
            let start = Instant::now();
            loop {
                let j = c.request("GET", &format!("{base}/jobs/{id}"), None)?;
                match j["state"].as_str() {
                    Some("done") => {
                        emit(&line(&j));
                        return Ok(());
                    }
                    Some("failed") | Some("cancelled") => return Err(line(&j).into()),
                    _ if start.elapsed() > Duration::from_secs(timeout_s) => {
                        return Err(format!("job {id} did not end within {timeout_s} s").into())
                    }
                    _ => std::thread::sleep(Duration::from_millis(200)),
                }
            }
        }
    }
    Ok(())
}

/// Writes one line to standard output. A reader that went away (`psrs job list | head`)
/// ends the command quietly with success, as other Unix tools do, instead of a panic.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{text}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("psrs job: writing to standard output: {e}");
        std::process::exit(1);
    }
}
