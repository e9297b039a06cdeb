//! The scheduler's side of training: the master served over SimpleApp, its timeout
//! ticker, dead-worker requeueing, progress reporting and the statistics endpoint.

use super::error::TrainError;
use super::pacer::Pacer;
use crate::master::{Counted, Master, MasterError, MasterRequest, MasterResponse, QueueSnapshot, TaskReport};
use crate::stats::{base_snapshot, Snapshot, StatsServer, TrainStat};
use bincode::Options;
use bytes::Bytes;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;
use ps_core::node::id_role;
use ps_core::simple_app::{SimpleApp, SimpleData};
use ps_core::van::Van;
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
    /// No bar and no stdout: progress and the final report are log lines only.
    quiet: bool,
}

/// How often the master's timeouts are checked ([`Coordinator::tick`]).
pub const TICK_EVERY: Duration = Duration::from_millis(100);

/// The coordinator's clock: the van's, in ms since the coordinator started (the time
/// the master is told).
#[derive(Clone)]
struct Since {
    van: Arc<Van>,
    base: u64,
}

impl Since {
    fn now(&self) -> u64 {
        self.van.now_ms().saturating_sub(self.base)
    }
}

/// The running coordinator; stops its threads when dropped.
pub struct Coordinator {
    master: Arc<Mutex<Master>>,
    progress: Arc<Mutex<Progress>>,
    po: Arc<Postoffice>,
    clock: Since,
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
        let epoch = Instant::now();
        let mut c = Coordinator::serve(po, master, opts.progress_every, false)?;
        let stop = Arc::clone(&c.stop);
        let (m, clock) = (Arc::clone(&c.master), c.clock.clone());
        c.ticker = Some(
            std::thread::Builder::new()
                .name("master-tick".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK_EVERY);
                        // a save refused because it stepped down between the check
                        // and the save (the queues are unchanged) is logged as such:
                        // once, at the moment it stops acting
                        if let Err(e) = tick(&m, &clock) {
                            e.log("timing out tasks")
                        }
                    }
                })
                .map_err(|e| TrainError::Thread(e.to_string()))?,
        );
        let Some(addr) = stats_addr else { return Ok(c) };
        let sec = crate::stats::HttpSecurity::from_security(&po.config().security, &opts.http)?;
        let (po, m, p) = (Arc::clone(po), Arc::clone(&c.master), Arc::clone(&c.progress));
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
        c._stats = Some(srv);
        Ok(c)
    }

    /// The coordinator of a process whose steps a driver runs without threads (the
    /// simulator): the master's requests are answered on the thread that delivers
    /// them, nothing is printed (progress and the final report are log lines), there
    /// is no statistics server, and the driver calls [`Coordinator::tick`] every
    /// [`TICK_EVERY`]. Otherwise the very coordinator of [`Coordinator::start_with`].
    pub fn driven(po: &Arc<Postoffice>, master: Master) -> Result<Coordinator, TrainError> {
        Coordinator::serve(po, master, Duration::ZERO, true)
    }

    /// The master's timeouts at the van's time (the ticker thread's step), while this
    /// scheduler is the active one (nothing otherwise): the ids of the tasks timed
    /// out, or why the master could not save them.
    pub fn tick(&self) -> Result<Vec<u64>, MasterError> {
        tick(&self.master, &self.clock)
    }

    /// The master, for inspection.
    pub fn master(&self) -> parking_lot::MutexGuard<'_, Master> {
        self.master.lock()
    }

    /// The master's answer to request `req` now, encoded: what the coordinator's app
    /// answers (decoding, the sender's liveness, the term, progress and the final
    /// report included).
    pub fn answer_request(&self, req: &SimpleData) -> Bytes {
        answer_request(&self.master, &self.progress, &self.po, &self.clock, req)
    }

    /// Registers the master's app (its customer inline when `driven`, where nothing
    /// is printed either), the takeover and dead-node hooks.
    fn serve(
        po: &Arc<Postoffice>,
        master: Master,
        progress_every: Duration,
        driven: bool,
    ) -> Result<Coordinator, TrainError> {
        let master = Arc::new(Mutex::new(master));
        let progress = Arc::new(Mutex::new(Progress {
            pacer: Some(Pacer::new(progress_every.as_millis() as u64)),
            quiet: driven,
            ..Progress::default()
        }));
        let clock = Since {
            van: Arc::clone(po.van()),
            base: po.van().now_ms(),
        };
        let (m, p, po2, c) = (
            Arc::clone(&master),
            Arc::clone(&progress),
            Arc::clone(po),
            clock.clone(),
        );
        let handle = move |req: &SimpleData, resp: &ps_core::simple_app::Responder| {
            let reply = answer_request(&m, &p, &po2, &c, req);
            if let Err(e) = resp.response(req, reply) {
                log::warn!("master reply to {} not sent: {e}", req.sender);
            }
        };
        let app = match driven {
            true => SimpleApp::new_inline(po, MASTER_APP, Some(Box::new(handle)), None)?,
            false => SimpleApp::new(po, MASTER_APP, Some(Box::new(handle)), None)?,
        };
        // a scheduler that acted before and takes over again resumes from the state
        // the active one replicated, not from its own older one
        let (m, c) = (Arc::clone(&master), clock.clone());
        po.on_took_over(move |state| {
            if state.is_empty() {
                return;
            }
            if let Err(e) = m.lock().resume_from(state, c.now()) {
                log::error!("master: the replicated state cannot be resumed from: {e}");
            }
        });
        let (m, po3) = (Arc::clone(&master), Arc::clone(po));
        po.on_node_dead(move |ids| {
            for &id in ids.iter().filter(|&&id| id_role(id) == Some(Role::Worker)) {
                match m.lock().worker_dead(id) {
                    Ok(n) if po3.departed_nodes().contains(&id) => {
                        log::info!("worker {id} left: {n} of its tasks requeued")
                    }
                    Ok(n) => log::warn!("worker {id} is dead: {n} of its tasks requeued"),
                    Err(e) => e.log(&format!("requeueing the tasks of dead worker {id}")),
                }
            }
        });
        Ok(Coordinator {
            master,
            progress,
            po: Arc::clone(po),
            clock,
            _app: app,
            _stats: None,
            stop: Arc::new(AtomicBool::new(false)),
            ticker: None,
        })
    }
}

/// One step of the master's ticker, on the active scheduler only: a standby's queues
/// (or those of one that stepped down) are the active one's replicated state, which
/// it times out itself; changing them would be refused by the store at every tick.
fn tick(m: &Mutex<Master>, clock: &Since) -> Result<Vec<u64>, MasterError> {
    if !clock.van.scheduler_epoch().1 {
        return Ok(Vec::new());
    }
    m.lock().tick(clock.now())
}

/// The coordinator's handling of request `req`: decoded, answered by the master as
/// the active scheduler's ([`answer`]), progress taken in and reported, the final
/// report printed once the job completes; the reply encoded. A scheduler that is not
/// active leaves the master alone and answers with an error.
fn answer_request(m: &Mutex<Master>, p: &Mutex<Progress>, po: &Postoffice, clock: &Since, req: &SimpleData) -> Bytes {
    let now = clock.now();
    let (epoch, active) = po.van().scheduler_epoch();
    let reply = match decode::<MasterRequest>(&req.body) {
        // a request that reached this scheduler before it heard it no longer acts (it
        // was stopped, or cut off, with the request queued): the queues are the
        // active one's to change; the reply is dropped by the van (an act of a
        // candidate that is not active), and the worker asks the active one again
        Ok(_) if !active => {
            log::info!(
                "request of {} not answered: {epoch} is the active scheduler",
                req.sender
            );
            MasterResponse::Error(format!("this scheduler is not active ({epoch} is)"))
        }
        Ok(r) => {
            let mut m = m.lock();
            let alive = !(id_role(req.sender) == Some(Role::Worker) && po.dead_nodes().contains(&req.sender));
            let term = epoch.term;
            let (out, counted) = answer(&mut m, req.sender, alive, term, r, now);
            let mut p = p.lock();
            if let Some(rep) = counted {
                p.examples += rep.examples;
                p.loss_sum += rep.loss_sum;
                p.correct += rep.correct;
                p.version = p.version.max(rep.version);
                if rep.examples > 0 {
                    p.history
                        .push((now as f64 / 1000.0, rep.loss_sum / rep.examples as f64));
                }
            }
            report_progress(&m.snapshot(), &mut p, now);
            if m.complete() && !p.reported {
                p.reported = true;
                let report = m.final_report();
                log::info!("{report}");
                if !p.quiet {
                    println!("{report}");
                }
            }
            out
        }
        Err(e) => {
            log::warn!("from {}: {e}", req.sender);
            MasterResponse::Error(e.to_string())
        }
    };
    encode(&reply)
}

/// How the coordinator answers request `req` of node `sender` (`alive`: not declared
/// dead) at `now_ms`, as the active scheduler of `term`: the master's response, and
/// the report of a task counted now (what the statistics take in). A request
/// handled after its sender's death hands it no task; a result counts once per
/// pass ([`Master::finish_attempt`]); hand-outs name `term`.
pub fn answer(
    m: &mut Master,
    sender: i32,
    alive: bool,
    term: u64,
    req: MasterRequest,
    now_ms: u64,
) -> (MasterResponse, Option<TaskReport>) {
    m.set_term(term);
    if let Err(e) = m.sender_liveness(sender, alive) {
        e.log(&format!("taking in the liveness of node {sender}"));
    }
    match req {
        MasterRequest::Finish { task, attempt, report } => match m.finish_attempt(sender, task, attempt, now_ms) {
            Ok(c) => (
                MasterResponse::Counted(c.counts()),
                report.filter(|_| c == Counted::Now),
            ),
            Err(e) => {
                e.log(&format!("counting the result of node {sender}"));
                (MasterResponse::Error(e.to_string()), None)
            }
        },
        r => {
            let rep = match &r {
                MasterRequest::GetTask { report, .. } | MasterRequest::Leaving { report, .. } => report.clone(),
                _ => None,
            };
            (m.handle(sender, r, now_ms), rep)
        }
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
        if p.quiet || !std::io::stderr().is_terminal() {
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
