//! The scheduler's shell for a cluster of jobs: the [`JobScheduler`] served to workers
//! and servers over SimpleApp, its ticker (timeouts, periodic reallocation), node
//! deaths, and the HTTP API plus dashboard on the stats port.

use super::error::JobsError;
use super::scheduler::JobScheduler;
use super::wire::{JobsRequest, JOBS_APP};
use crate::stats::{base_snapshot, Api, HttpOptions, StatsServer};
use crate::train::coordinator::{decode, encode};
use parking_lot::Mutex;
use ps_core::node::id_role;
use ps_core::simple_app::{Responder, SimpleApp, SimpleData};
use ps_core::{Postoffice, Role};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (the scheduler's clock).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the operator chose for the jobs API.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// The HTTP server's options (`--insecure`, `--api-host`, where its token is kept).
    pub http: HttpOptions,
    /// Accept jobs that run the submitter's code (`runner`, `pythonpath`, `torch`);
    /// false: `--no-code-jobs`.
    pub code_jobs: bool,
}

impl Default for ApiOptions {
    fn default() -> ApiOptions {
        ApiOptions {
            http: HttpOptions::default(),
            code_jobs: true,
        }
    }
}

/// The running service; stops its threads when dropped.
pub struct JobService {
    _app: SimpleApp,
    http: StatsServer,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl JobService {
    /// Serves `sched` on this (scheduler) node, the API on `http_addr` (HTTPS with
    /// security on) with `opts`. Prints the dashboard's URL (with the token when one
    /// was made at start). Fails with [`JobsError::Register`] if the jobs app cannot
    /// register, [`JobsError::Stats`] if the HTTP API cannot start.
    pub fn start(
        po: &Arc<Postoffice>,
        mut sched: JobScheduler,
        http_addr: &str,
        opts: &ApiOptions,
    ) -> Result<JobService, JobsError> {
        let (epoch, _) = po.van().scheduler_epoch();
        let what = format!("scheduler #{} active (term {})", epoch.candidate, epoch.term.max(1));
        sched.note(now_ms(), super::history::EventKind::Takeover, what);
        let sched = Arc::new(Mutex::new(sched));
        let s = Arc::clone(&sched);
        let handle = move |req: &SimpleData, resp: &Responder| {
            let reply = match decode::<JobsRequest>(&req.body) {
                Ok(r) => s.lock().handle(req.sender, r, now_ms()),
                Err(e) => {
                    log::warn!("from {}: {e}", req.sender);
                    super::wire::JobsResponse::Error(e.to_string())
                }
            };
            if let Err(e) = resp.response(req, encode(&reply)) {
                log::warn!("jobs reply to {} not sent: {e}", req.sender);
            }
        };
        let app = SimpleApp::new(po, JOBS_APP, Some(Box::new(handle)), None)?;
        let s = Arc::clone(&sched);
        po.on_node_dead(move |ids| {
            let mut s = s.lock();
            for &id in ids {
                match id_role(id) {
                    Some(Role::Worker) => s.worker_dead(id, now_ms()),
                    Some(Role::Server) => s.server_dead(id, now_ms()),
                    _ => {}
                }
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, sc) = (Arc::clone(&stop), Arc::clone(&sched));
        let ticker = std::thread::Builder::new()
            .name("jobs-tick".into())
            .spawn(move || {
                while !s2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    sc.lock().tick(now_ms());
                }
            })
            .map_err(|e| JobsError::Internal(e.to_string()))?;
        let sa = Arc::clone(&sched);
        let code_jobs = opts.code_jobs;
        let api: Api = Arc::new(move |m, p, b| super::api::route_jobs(&mut sa.lock(), m, p, b, now_ms(), code_jobs));
        let (po2, started, sp) = (Arc::clone(po), Instant::now(), Arc::clone(&sched));
        let provider = Arc::new(move || {
            let n = sp.lock().table().active().count();
            base_snapshot(
                &po2,
                started.elapsed().as_secs_f64(),
                format!("cluster: {n} active job(s)"),
            )
        });
        let sec = crate::stats::HttpSecurity::from_security(&po.config().security, &opts.http)?;
        let http = StatsServer::start_with_api(http_addr, provider, Some(api), sec)?;
        log::info!("jobs API and dashboard at {}://{}/", http.scheme(), http.addr());
        println!("api: {}", http.url());
        Ok(JobService {
            _app: app,
            http,
            stop,
            ticker: Some(ticker),
        })
    }

    /// The HTTP address bound.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.http.addr()
    }
}

impl Drop for JobService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
