//! The scheduler's side of training: the master served over SimpleApp, its timeout
//! ticker, dead-worker requeueing, progress reporting and the statistics endpoint.

use super::error::TrainError;
use super::pacer::Pacer;
use crate::master::{Master, MasterRequest, MasterResponse, QueueSnapshot};
use crate::stats::{base_snapshot, Snapshot, StatsServer, TrainStat};
use bincode::Options;
use bytes::Bytes;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;
use ps_core::node::id_role;
use ps_core::simple_app::{SimpleApp, SimpleData};
use ps_core::{Postoffice, Role};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The SimpleApp id of the master service.
pub const MASTER_APP: i32 = 1;
/// The head of master requests.
pub const MASTER_HEAD: i32 = 1;

/// Encodes a master message.
pub fn encode<T: serde::Serialize>(v: &T) -> Bytes {
    Bytes::from(
        bincode::DefaultOptions::new()
            .serialize(v)
            .expect("master messages serialize"),
    )
}

/// Decodes a master message from untrusted bytes; [`TrainError::Malformed`] if it
/// does not decode.
pub fn decode<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, TrainError> {
    bincode::DefaultOptions::new()
        .with_limit(64 << 20)
        .deserialize(b)
        .map_err(|e| TrainError::Malformed(format!("malformed master message: {e}")))
}

/// How the coordinator reports.
#[derive(Clone, Debug)]
pub struct CoordinatorOptions {
    /// Off a terminal, at most one `progress:` line this often (0: one per finished
    /// task); the line completing the job is always logged.
    pub progress_every: Duration,
    /// The statistics server's options (`--insecure`, `--api-host`, where a token
    /// made at start is kept and published).
    pub http: crate::stats::HttpOptions,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        CoordinatorOptions {
            progress_every: Duration::from_secs(5),
            http: crate::stats::HttpOptions::default(),
        }
    }
}

#[derive(Default)]
struct Progress {
    examples: u64,
    loss_sum: f64,
    correct: u64,
    version: u64,
    history: Vec<(f64, f64)>,
    last_done: u64,
    last_given_up: usize,
    /// Shown on a terminal (hidden otherwise: the progress lines are the record).
    bar: Option<ProgressBar>,
    /// Which updates become `progress:` lines.
    pacer: Option<Pacer>,
    /// The end-of-job report was printed.
    reported: bool,
}

/// The running coordinator; stops its threads when dropped.
pub struct Coordinator {
    _app: SimpleApp,
    _stats: Option<StatsServer>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Coordinator {
    /// Serves `master` on this (scheduler) node; statistics on `stats_addr` if given;
    /// default options. Fails as [`Coordinator::start_with`] does.
    pub fn start(
        po: &Arc<Postoffice>,
        master: Master,
        stats_addr: Option<&str>,
        job: String,
    ) -> Result<Coordinator, TrainError> {
        Coordinator::start_with(po, master, stats_addr, job, CoordinatorOptions::default())
    }

    /// [`Coordinator::start`] with options. When the job completes, the master's
    /// [`Master::final_report`] is printed once (stdout) and logged. Fails with
    /// [`TrainError::Register`] if the master's app cannot register,
    /// [`TrainError::Stats`] if the statistics server cannot start.
    pub fn start_with(
        po: &Arc<Postoffice>,
        master: Master,
        stats_addr: Option<&str>,
        job: String,
        opts: CoordinatorOptions,
    ) -> Result<Coordinator, TrainError> {
        let master = Arc::new(Mutex::new(master));
        let progress = Arc::new(Mutex::new(Progress {
            pacer: Some(Pacer::new(opts.progress_every.as_millis() as u64)),
            ..Progress::default()
        }));
        let epoch = Instant::now();
        let (m, p) = (Arc::clone(&master), Arc::clone(&progress));
        let po2 = Arc::clone(po);
        let dead_nodes = move |id: i32| id_role(id) == Some(Role::Worker) && po2.dead_nodes().contains(&id);
        let handle = move |req: &SimpleData, resp: &ps_core::simple_app::Responder| {
            let now = epoch.elapsed().as_millis() as u64;
            let reply = match decode::<MasterRequest>(&req.body) {
                Ok(r) => {
                    if let MasterRequest::GetTask { report: Some(rep), .. }
                    | MasterRequest::Leaving { report: Some(rep), .. } = &r
                    {
                        let mut p = p.lock();
                        p.examples += rep.examples;
                        p.loss_sum += rep.loss_sum;
                        p.correct += rep.correct;
                        p.version = p.version.max(rep.version);
                        if rep.examples > 0 {
                            p.history
                                .push((now as f64 / 1000.0, rep.loss_sum / rep.examples as f64));
                        }
                    }
                    let mut m = m.lock();
                    // a request handled after its sender's death must not hand it a task
                    let alive = !dead_nodes(req.sender);
                    if let Err(e) = m.sender_liveness(req.sender, alive) {
                        log::error!("master: {e}");
                    }
                    let out = m.handle(req.sender, r, now);
                    let mut p = p.lock();
                    report_progress(&m.snapshot(), &mut p, now);
                    if m.complete() && !p.reported {
                        p.reported = true;
                        let report = m.final_report();
                        log::info!("{report}");
                        println!("{report}");
                    }
                    out
                }
                Err(e) => {
                    log::warn!("from {}: {e}", req.sender);
                    MasterResponse::Error(e.to_string())
                }
            };
            if let Err(e) = resp.response(req, encode(&reply)) {
                log::warn!("master reply to {} not sent: {e}", req.sender);
            }
        };
        let app = SimpleApp::new(po, MASTER_APP, Some(Box::new(handle)), None)?;
        let (m, po3) = (Arc::clone(&master), Arc::clone(po));
        po.on_node_dead(move |ids| {
            for &id in ids.iter().filter(|&&id| id_role(id) == Some(Role::Worker)) {
                match m.lock().worker_dead(id) {
                    Ok(n) if po3.departed_nodes().contains(&id) => {
                        log::info!("worker {id} left: {n} of its tasks requeued")
                    }
                    Ok(n) => log::warn!("worker {id} is dead: {n} of its tasks requeued"),
                    Err(e) => log::error!("cannot requeue the tasks of dead worker {id}: {e}"),
                }
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, m2) = (Arc::clone(&stop), Arc::clone(&master));
        let ticker = std::thread::Builder::new()
            .name("master-tick".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if let Err(e) = m2.lock().tick(epoch.elapsed().as_millis() as u64) {
                        log::error!("master: {e}");
                    }
                }
            })
            .map_err(|e| TrainError::Thread(e.to_string()))?;
        let stats = match stats_addr {
            None => None,
            Some(addr) => {
                let sec = crate::stats::HttpSecurity::from_security(&po.config().security, &opts.http)?;
                let (po, m, p) = (Arc::clone(po), Arc::clone(&master), Arc::clone(&progress));
                let srv = StatsServer::start(
                    addr,
                    Arc::new(move || snapshot(&po, &m.lock().snapshot(), &p.lock(), epoch, &job)),
                    sec,
                )?;
                log::info!(
                    "statistics at {}://{}/ (JSON /stats.json, Prometheus /metrics)",
                    srv.scheme(),
                    srv.addr()
                );
                println!("stats: {}", srv.url());
                Some(srv)
            }
        };
        Ok(Coordinator {
            _app: app,
            _stats: stats,
            stop,
            ticker: Some(ticker),
        })
    }
}

fn report_progress(s: &QueueSnapshot, p: &mut Progress, now_ms: u64) {
    if s.total_done == p.last_done && s.given_up == p.last_given_up {
        return;
    }
    p.last_given_up = s.given_up;
    p.last_done = s.total_done;
    let total = s.tasks_per_epoch as u64 * s.num_epochs;
    let (loss, accuracy) = match p.examples {
        0 => (0.0, 0.0),
        n => (p.loss_sum / n as f64, p.correct as f64 / n as f64),
    };
    let mut line = format!(
        "pass {}/{}, train loss {loss:.4}, train accuracy {accuracy:.4}, {} failed",
        s.epoch + 1,
        s.num_epochs,
        s.failed
    );
    if s.skipped_records > 0 {
        line += &format!(", {} records skipped", s.skipped_records);
    }
    let bar = p.bar.get_or_insert_with(|| {
        let bar = ProgressBar::new(total);
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(style) = ProgressStyle::with_template("tasks [{bar:30}] {pos}/{len} {msg} ({eta})") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    bar.set_position(s.total_done.min(total));
    bar.set_message(line.clone());
    let last = s.finished || s.total_done + s.given_up as u64 >= total;
    if bar.is_hidden() {
        if p.pacer.as_mut().is_none_or(|pc| pc.due(now_ms, last)) {
            log::info!("progress: {}/{} tasks, {line}", s.total_done, total);
        }
    } else {
        log::debug!("progress: {}/{} tasks, {line}", s.total_done, total);
    }
    if s.finished {
        bar.finish();
    }
}

fn snapshot(po: &Postoffice, q: &QueueSnapshot, p: &Progress, epoch: Instant, job: &str) -> Snapshot {
    let up = epoch.elapsed().as_secs_f64();
    Snapshot {
        queues: (q.tasks_per_epoch > 0).then(|| q.clone()),
        train: TrainStat {
            examples: p.examples,
            examples_per_sec: if up > 0.0 { p.examples as f64 / up } else { 0.0 },
            loss: (p.examples > 0).then(|| p.loss_sum / p.examples as f64),
            loss_history: p.history.iter().rev().take(500).rev().copied().collect(),
            accuracy: (p.examples > 0).then(|| p.correct as f64 / p.examples as f64),
            version: p.version,
        },
        ..base_snapshot(po, up, job.to_string())
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
