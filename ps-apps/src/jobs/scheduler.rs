//! The cluster's scheduler state: the job table (saved through a `Store` before any
//! reply), one [`Master`] per active job (its task queues, saved through its own
//! store), each job's query rate and smoothed cost, where its model is ready, the live
//! workers and which job each works on (fair time's split, followed over time), and
//! which servers hold which training job's shards. Time is passed in (ms since the
//! Unix epoch), so the whole scheduler is driven deterministically in tests; the
//! network shell ([`super::service`]) only decodes, calls and encodes.

use super::assign::{self, WorkerId};
use super::cost::CostEstimate;
use super::error::JobsError;
use super::fairtime::{self, JobLoad};
use super::figures::{JobFigures, Tally};
use super::history::{Chart, EventKind, History, JobPoint};
use super::rate::RateWindow;
use super::readiness::Readiness;
use super::share::TimeShare;
use super::spec::{InferSpec, JobSpec};
use super::table::{Job, JobNum, JobState, JobTable};
use super::view::{JobView, WorkerView};
use crate::master::{Master, MasterConfig, MasterError, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// How the workers are split among jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairMode {
    /// `n·S_i/ΣS_j` workers for job i.
    Local,
    /// Balance the expected query rates over the jobs' lifetimes.
    Global,
}

/// Opens the store named `name` (`jobs` for the table, `job-N-T` for a job's queues).
pub type StoreFactory = Box<dyn Fn(&str) -> Box<dyn Store> + Send>;

/// The scheduler's settings.
pub struct SchedulerConfig {
    /// Where inference batches are kept until a job's outputs are joined (`psrs
    /// cluster --outputs-dir`): with standby schedulers on other hosts, a directory every
    /// candidate reaches, so a new active one joins the batches the old one saved.
    pub outputs_dir: PathBuf,
    /// Fair-time mode.
    pub mode: FairMode,
    /// Reallocate at least this often (besides arrivals, ends and deaths).
    pub realloc_every_ms: u64,
    /// Servers in the cluster (a training job starts once all of them hold it).
    pub num_servers: usize,
    /// Where jobs' files may be (`--data-dir`, `--outputs-dir`).
    pub paths: super::paths::JobPaths,
    /// Worker-seconds a job must be owed before a worker moves to it between the two
    /// whole splits nearest the ideal ([`TimeShare`]).
    pub hysteresis_ws: f64,
    /// Time constant of the smoothing of the jobs' seconds per query, ms
    /// ([`CostEstimate`]).
    pub cost_tau_ms: u64,
}

/// An active job's runtime state.
pub(super) struct Active {
    pub master: Master,
    pub rate: RateWindow,
    /// Seconds per query on each of its workers, smoothed (fair time's cost).
    pub cost: CostEstimate,
    /// Where its model is ready (jobs whose model a Python runner runs).
    pub models: Readiness,
    /// The worker finalizing a complete training job.
    pub finalizer: Option<WorkerId>,
    /// Tasks, passes, loss and accuracy so far.
    pub tally: Tally,
    /// The pass the queues were in when last looked at (a change: a pass completed).
    pub epoch: u64,
    /// Completed passes whose model is still to be evaluated on the test set.
    pub to_evaluate: std::collections::VecDeque<u64>,
    /// The worker evaluating a pass now, and the pass.
    pub evaluating: Option<(WorkerId, u64)>,
    /// The last failure of a query or of loading the model (one line).
    pub last_error: Option<String>,
    /// Failed loads of its model by Python runners.
    pub load_failures: u32,
}

/// The scheduler.
pub struct JobScheduler {
    pub(super) cfg: SchedulerConfig,
    pub(super) table: JobTable,
    table_store: Box<dyn Store>,
    stores: StoreFactory,
    pub(super) active: BTreeMap<JobNum, Active>,
    pub(super) workers: BTreeSet<WorkerId>,
    pub(super) assignment: BTreeMap<WorkerId, JobNum>,
    pub(super) hosting: BTreeMap<i32, BTreeSet<JobNum>>,
    last_alloc_ms: u64,
    /// The whole split over time.
    share: TimeShare<JobNum>,
    /// Each job's real-valued ideal share at the last reallocation.
    ideal: BTreeMap<JobNum, f64>,
    /// The version of the list of jobs whose models runners warm (changes when one
    /// starts or ends; a fresh scheduler's differs from any before it).
    pub(super) catalog: u64,
    /// The cluster over time, for the dashboard's charts.
    pub(super) history: History,
}

fn master_config(spec: &JobSpec) -> MasterConfig {
    match spec {
        JobSpec::Train(t) => MasterConfig {
            chunks_per_task: t.chunks_per_task,
            num_epochs: t.epochs,
            timeout_multiplier: 4.0,
            timeout_floor_ms: t.task_timeout_ms,
            max_retries: t.max_retries,
            planted: Default::default(),
        },
        JobSpec::Infer(i) => MasterConfig {
            // a directory's chunks are its files: a query is a batch of them
            chunks_per_task: if i.reads_directory() {
                i.batch
            } else {
                i.chunks_per_task
            },
            num_epochs: 1,
            timeout_multiplier: 4.0,
            timeout_floor_ms: i.task_timeout_ms,
            max_retries: i.max_retries,
            planted: Default::default(),
        },
    }
}

fn store_name(job: &Job) -> String {
    format!("job-{}-{}", job.num, job.submitted_ms)
}

impl JobScheduler {
    /// A scheduler resuming the jobs saved in the `jobs` store (each active job's
    /// queues from its own store: nothing finished is redone), or starting empty. A
    /// table that does not decode is [`JobsError::Corrupt`], a store that cannot load
    /// [`JobsError::Internal`].
    pub fn new(cfg: SchedulerConfig, stores: StoreFactory, now_ms: u64) -> Result<JobScheduler, JobsError> {
        let mut table_store = stores("jobs");
        let table = match table_store.load().map_err(MasterError::from)? {
            Some(b) => JobTable::decode(&b)?,
            None => JobTable::default(),
        };
        let mut active = BTreeMap::new();
        for job in table.active() {
            let master = Master::recover(stores(&store_name(job)), master_config(&job.spec), now_ms)?;
            log::info!("resuming job {} ({:?})", job.id(), job.state);
            let mut a = Active::new(master, cfg.cost_tau_ms);
            a.tally = Tally::resume(&job.figures);
            active.insert(job.num, a);
        }
        let share = TimeShare::new(cfg.hysteresis_ws);
        Ok(JobScheduler {
            cfg,
            table,
            table_store,
            stores,
            active,
            workers: BTreeSet::new(),
            assignment: BTreeMap::new(),
            hosting: BTreeMap::new(),
            last_alloc_ms: now_ms,
            share,
            ideal: BTreeMap::new(),
            catalog: now_ms.max(1),
            history: History::default(),
        })
    }

    /// The running jobs whose models a Python runner runs, oldest first (what workers
    /// warm).
    pub(super) fn catalog_jobs(&self) -> Vec<(JobNum, InferSpec)> {
        self.active
            .keys()
            .filter_map(|&num| match self.table.get(num).map(|j| &j.spec) {
                Some(JobSpec::Infer(i)) if i.user_model().is_some() => Some((num, i.clone())),
                _ => None,
            })
            .collect()
    }

    /// Job `num` started or ended: if a Python runner runs its model, the list of jobs
    /// to warm changed and gets a new version.
    fn catalog_changed(&mut self, num: JobNum, now_ms: u64) {
        let runs_in_python =
            matches!(self.table.get(num).map(|j| &j.spec), Some(JobSpec::Infer(i)) if i.user_model().is_some());
        if runs_in_python {
            self.catalog = (self.catalog + 1).max(now_ms);
        }
    }

    /// The job table.
    pub fn table(&self) -> &JobTable {
        &self.table
    }

    /// Applies `f` to a copy of the table, saves the copy, and only then adopts it. The
    /// error is `f`'s as it is, or [`JobsError::Internal`] when saving failed.
    pub(super) fn change<T>(&mut self, f: impl FnOnce(&mut JobTable) -> Result<T, JobsError>) -> Result<T, JobsError> {
        let mut copy = self.table.clone();
        let out = f(&mut copy)?;
        if copy != self.table {
            self.table_store.save(&copy.encode()).map_err(MasterError::from)?;
            self.table = copy;
        }
        Ok(out)
    }

    /// Accepts a job (the JSON of `POST /jobs`): checks it and its files, indexes its
    /// dataset into a new queue, saves both, then reallocates. The error is one line:
    /// [`JobsError::BadRequest`] for the request's fault (a path outside the
    /// directories jobs are confined to among them), [`JobsError::Internal`] when
    /// saving failed.
    pub fn submit(&mut self, body: &str, now_ms: u64) -> Result<JobView, JobsError> {
        let spec = JobSpec::from_json(body)?;
        self.cfg.paths.check(&spec)?;
        let model = spec.check_files()?;
        if let JobSpec::Infer(i) = &spec {
            let parent = std::path::Path::new(&i.out)
                .parent()
                .filter(|p| !p.as_os_str().is_empty());
            if let Some(p) = parent.filter(|p| !p.is_dir()) {
                return Err(JobsError::BadRequest(format!("\"out\": no directory {}", p.display())));
            }
        }
        let mut preview = self.table.clone();
        let num = preview.submit(spec.clone(), model, now_ms);
        let job = preview.get(num).expect("just added").clone();
        let mut master = Master::new(master_config(&spec), (self.stores)(&store_name(&job)), now_ms)?;
        // the files were read a moment ago: failing now is the files' fault (a
        // dataset error is a bad request, a failed save the scheduler's)
        match &spec {
            JobSpec::Train(t) => master.report_dataset(t.train.clone())?,
            JobSpec::Infer(i) if i.reads_directory() => {
                let files = super::directory::list_directory(std::path::Path::new(&i.data[0]))?;
                master.report_chunks(i.data.clone(), super::directory::file_chunks(&files))?
            }
            JobSpec::Infer(i) => master.report_dataset(i.data.clone())?,
        };
        self.change(|t| {
            *t = preview;
            Ok(())
        })?;
        self.active.insert(num, Active::new(master, self.cfg.cost_tau_ms));
        self.catalog_changed(num, now_ms);
        log::info!("job {} submitted: {} {}", job.id(), spec.kind(), job.model_name());
        let what = format!("{} submitted ({} {})", job.id(), spec.kind(), job.model_name());
        self.history.event(now_ms, EventKind::Submitted, what);
        self.reallocate(now_ms);
        Ok(self.view(num, now_ms).expect("just added"))
    }

    /// Cancels job `num` (saved before returning); its workers go to other jobs and its
    /// servers drop its shards at their next poll. A job that already ended is
    /// [`JobsError::Ended`] (or [`JobsError::Final`] from the table), one the table
    /// does not hold [`JobsError::NoSuchJob`]; a failed save [`JobsError::Internal`].
    pub fn cancel(&mut self, num: JobNum, now_ms: u64) -> Result<JobView, JobsError> {
        match self.table.get(num) {
            None => return Err(JobsError::NoSuchJob(format!("j{num}"))),
            Some(j) if j.state.is_final() => {
                return Err(JobsError::Ended {
                    id: j.id(),
                    state: format!("{:?}", j.state).to_lowercase(),
                })
            }
            Some(_) => {}
        }
        let progress = self.progress(num);
        let figures = self.final_figures(num, now_ms);
        self.change(|t| {
            t.cancel(num, now_ms)?;
            let j = t.jobs.get_mut(&num).expect("cancelled");
            (j.progress, j.figures) = (progress, figures);
            Ok(())
        })?;
        self.end(num, now_ms);
        log::info!("job j{num} cancelled");
        Ok(self.view(num, now_ms).expect("exists"))
    }

    /// The figures of job `num` as it ends at `now_ms`: its tallies, with the query
    /// rate and seconds per query over its whole run.
    pub(super) fn final_figures(&mut self, num: JobNum, now_ms: u64) -> JobFigures {
        let mut f = self.figures(num, now_ms);
        let Some(a) = self.active.get(&num) else { return f };
        let started = self.table.get(num).and_then(|j| j.started_ms).unwrap_or(now_ms);
        let run_s = now_ms.saturating_sub(started) as f64 / 1000.0;
        f.queries_per_s = if run_s > 0.0 { f.tasks_done as f64 / run_s } else { 0.0 };
        f.seconds_per_query = a.tally.mean_seconds_per_query();
        f
    }

    /// Job `num`'s figures now: live while it is active, as saved once it ended.
    pub(super) fn figures(&mut self, num: JobNum, now_ms: u64) -> JobFigures {
        let Some(a) = self.active.get_mut(&num) else {
            return self.table.get(num).map(|j| j.figures.clone()).unwrap_or_default();
        };
        let s = a.master.snapshot();
        let passes_done = if a.master.complete() { s.num_epochs } else { s.epoch };
        JobFigures {
            tasks_done: s.total_done,
            tasks_total: s.tasks_per_epoch as u64 * s.num_epochs,
            tasks_dispatched: a.tally.dispatched,
            passes_done,
            passes: s.num_epochs,
            queries_per_s: a.rate.queries_per_s(now_ms),
            seconds_per_query: a.rate.seconds_per_query(now_ms),
            first_query_ms: a.tally.first_query_ms,
            first_task_ms: a.tally.first_task_ms,
            per_pass: a.tally.per_pass(),
        }
    }

    /// Forgets an ended job's runtime state and gives its workers to the others.
    pub(super) fn end(&mut self, num: JobNum, now_ms: u64) {
        if let Some(j) = self.table.get(num) {
            let what = format!("{} {}", j.id(), format!("{:?}", j.state).to_lowercase());
            self.history.event(now_ms, EventKind::Ended, what);
        }
        self.active.remove(&num);
        self.assignment.retain(|_, j| *j != num);
        self.catalog_changed(num, now_ms);
        self.reallocate(now_ms);
    }

    /// Fraction of the job's tasks done (1 once done).
    pub(super) fn progress(&self, num: JobNum) -> f64 {
        match (self.active.get(&num), self.table.get(num)) {
            (Some(a), _) => {
                let s = a.master.snapshot();
                let total = (s.tasks_per_epoch as u64 * s.num_epochs).max(1);
                (s.total_done as f64 / total as f64).min(1.0)
            }
            (None, Some(j)) => j.progress,
            (None, None) => 0.0,
        }
    }

    /// Splits the live workers among the active jobs (the oldest jobs first while there
    /// are more jobs than workers): the fair-time mode's real-valued ideal from the
    /// jobs' smoothed seconds per query, followed over time with whole workers
    /// ([`TimeShare`]; the mode's own whole split when the present one is off), moving
    /// workers as little as possible.
    pub fn reallocate(&mut self, now_ms: u64) {
        self.last_alloc_ms = now_ms;
        let n = self.workers.len();
        let jobs: Vec<JobNum> = self.active.keys().copied().take(n.max(1)).collect();
        let s: Vec<f64> = jobs
            .iter()
            .map(|j| self.active[j].cost.seconds_per_query(now_ms).unwrap_or(f64::NAN))
            .collect();
        let (ideal, loads) = match self.cfg.mode {
            FairMode::Local => (fairtime::local_ideal(&s, n), Vec::new()),
            FairMode::Global => {
                let known: Vec<f64> = s.iter().copied().filter(|x| x.is_finite()).collect();
                let mean = if known.is_empty() {
                    1.0
                } else {
                    known.iter().sum::<f64>() / known.len() as f64
                };
                let loads: Vec<JobLoad> = jobs
                    .iter()
                    .zip(&s)
                    .map(|(&j, &x)| self.load(j, if x.is_finite() { x } else { mean }, now_ms))
                    .collect();
                (fairtime::global_ideal(&loads, n), loads)
            }
        };
        let ideal: BTreeMap<JobNum, f64> = jobs.iter().copied().zip(ideal).collect();
        let targets: BTreeMap<JobNum, usize> = if n == 0 || jobs.is_empty() {
            BTreeMap::new()
        } else {
            let mode = self.cfg.mode;
            self.share.update(now_ms, &ideal, n, || {
                let whole = match mode {
                    FairMode::Local => fairtime::local(&s, n),
                    FairMode::Global => fairtime::global(&loads, n),
                };
                jobs.iter().copied().zip(whole).collect()
            })
        };
        self.ideal = ideal;
        let next = assign::assign(&self.assignment, &targets, &self.workers);
        if next != self.assignment {
            log::info!("workers per job: {:?}", assign::counts(&next));
        }
        self.assignment = next;
    }

    fn load(&mut self, num: JobNum, s_per_query: f64, now_ms: u64) -> JobLoad {
        let started = self.table.get(num).and_then(|j| j.started_ms).unwrap_or(now_ms);
        let a = self.active.get_mut(&num).expect("active");
        let s = a.master.snapshot();
        let total = (s.tasks_per_epoch as u64 * s.num_epochs) as f64;
        JobLoad {
            total,
            elapsed_s: now_ms.saturating_sub(started) as f64 / 1000.0,
            s_per_query,
            remaining: (total - s.total_done as f64).max(0.0),
        }
    }

    /// Times out late tasks of every job and reallocates when the period has passed.
    pub fn tick(&mut self, now_ms: u64) {
        for (num, a) in self.active.iter_mut() {
            if let Err(e) = a.master.tick(now_ms) {
                e.log(&format!("timing out the tasks of job j{num}"));
            }
        }
        if now_ms >= self.last_alloc_ms + self.cfg.realloc_every_ms {
            self.reallocate(now_ms);
        }
        if self.history.due(now_ms) {
            self.sample(now_ms);
        }
    }

    /// Adds a sample to the history: each active job's rate and workers, each live
    /// worker's job.
    fn sample(&mut self, now_ms: u64) {
        let counts = assign::counts(&self.assignment);
        let jobs = self
            .active
            .iter_mut()
            .map(|(&num, a)| {
                let p = JobPoint {
                    queries_per_s: a.rate.queries_per_s(now_ms),
                    workers: counts.get(&num).copied().unwrap_or(0),
                };
                (format!("j{num}"), p)
            })
            .collect();
        let workers = self
            .workers
            .iter()
            .map(|&w| (w, self.assignment.get(&w).map(|j| format!("j{j}"))))
            .collect();
        self.history.sample(now_ms, jobs, workers);
    }

    /// Marks an event the shell saw (e.g. this scheduler took over) on the history.
    pub fn note(&mut self, now_ms: u64, kind: EventKind, text: String) {
        self.history.event(now_ms, kind, text);
    }

    /// The history for the dashboard's charts.
    pub fn chart(&self) -> Chart {
        self.history.chart()
    }

    /// Worker `id` died: its tasks go back to their queues at once, and the workers are
    /// split again.
    pub fn worker_dead(&mut self, id: WorkerId, now_ms: u64) {
        self.history
            .event(now_ms, EventKind::NodeDead, format!("worker {id} died"));
        self.workers.remove(&id);
        self.assignment.remove(&id);
        for (num, a) in self.active.iter_mut() {
            a.models.forget(id);
            a.cost.forget(id);
            match a.master.worker_dead(id) {
                Ok(n) => log::warn!("worker {id} is dead: {n} task(s) of job j{num} requeued"),
                Err(e) => e.log(&format!("requeueing job j{num}'s tasks of dead worker {id}")),
            }
            if a.finalizer == Some(id) {
                a.finalizer = None;
            }
            if let Some((w, pass)) = a.evaluating.filter(|e| e.0 == id) {
                debug_assert_eq!(w, id);
                a.to_evaluate.push_front(pass);
                a.evaluating = None;
            }
        }
        self.reallocate(now_ms);
    }

    /// Server `id` died: training jobs wait until its replacement holds their shards.
    pub fn server_dead(&mut self, id: i32, now_ms: u64) {
        self.history
            .event(now_ms, EventKind::NodeDead, format!("server {id} died"));
        self.hosting.remove(&id);
    }

    /// Every job, oldest first.
    pub fn views(&mut self, now_ms: u64) -> Vec<JobView> {
        let nums: Vec<JobNum> = self.table.jobs.keys().copied().collect();
        nums.into_iter().filter_map(|n| self.view(n, now_ms)).collect()
    }

    /// One job as clients see it.
    pub fn view(&mut self, num: JobNum, now_ms: u64) -> Option<JobView> {
        let progress = self.progress(num);
        let job = self.table.get(num)?.clone();
        let workers = self.assignment.values().filter(|&&j| j == num).count();
        let figures = self.figures(num, now_ms);
        let mut v = JobView::new(&job, workers, progress, figures);
        if let Some(a) = self.active.get(&num) {
            v.last_error = a.last_error.clone();
            v.smoothed_seconds_per_query = a.cost.seconds_per_query(now_ms);
            v.ideal_workers = self.ideal.get(&num).copied();
            v.model_ready_ms = a.models.first_ready_ms();
            v.models = a.models.views();
        }
        Some(v)
    }

    /// Each live worker's job and the task it holds.
    pub fn worker_views(&self) -> Vec<WorkerView> {
        self.workers
            .iter()
            .map(|&w| {
                let job = self.assignment.get(&w).copied();
                let task = self.active.iter().find_map(|(&j, a)| {
                    a.master
                        .queues()
                        .pending
                        .values()
                        .find(|e| e.worker == w)
                        .map(|e| (format!("j{j}"), e.task.id))
                });
                let holding = |state: crate::pyrunner::ModelState| {
                    self.active
                        .iter()
                        .filter(|(_, a)| a.models.state(w) == Some(state))
                        .map(|(j, _)| format!("j{j}"))
                        .collect()
                };
                WorkerView {
                    id: w,
                    job: job.map(|j| format!("j{j}")),
                    task: task.map(|t| format!("{} task {}", t.0, t.1)),
                    ready: holding(crate::pyrunner::ModelState::Ready),
                    loading: holding(crate::pyrunner::ModelState::Loading),
                }
            })
            .collect()
    }

    /// Whether a job is in the table and not finished.
    pub fn is_active(&self, num: JobNum) -> bool {
        self.table.get(num).is_some_and(|j| !j.state.is_final()) && self.active.contains_key(&num)
    }

    /// The state of a job.
    pub fn state(&self, num: JobNum) -> Option<JobState> {
        self.table.get(num).map(|j| j.state)
    }
}

impl Active {
    fn new(master: Master, cost_tau_ms: u64) -> Active {
        let epoch = master.queues().epoch;
        Active {
            master,
            rate: RateWindow::default(),
            cost: CostEstimate::new(cost_tau_ms),
            models: Readiness::default(),
            finalizer: None,
            tally: Tally::default(),
            epoch,
            to_evaluate: Default::default(),
            evaluating: None,
            last_error: None,
            load_failures: 0,
        }
    }
}
