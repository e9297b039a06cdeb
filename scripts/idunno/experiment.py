#!/usr/bin/env python3
"""IDunno's experiment on a psrs jobs cluster (run by scripts/idunno-experiment.sh).

For each fair-time mode (local, then global): a cluster of scheduler candidates (one
active, the others standbys), no servers and N workers, each worker with its Python
runner. A ResNet-50 job (batch 4) over random 224x224 JPEG images is submitted, then,
once it has finished a query, an ALBERT job (batch 8) over random sentences. Measured:
the second job's submission to its first query handed to a worker (IDunno's "start
executing queries") and to its first finished query; when each worker had the second
job's model warm, and the warm-up's cost (the loader's CPU time and wall time, the
model's bytes, the runners' resident memory before and after, read from /proc); both
jobs' seconds per query, workers and query rates sampled every second over a window
once both have a rate (the split each mode chose, the time-averaged split, the ideal
real-valued one, and the query-rate gap over 10 s rates and over 30 s windows); kill -9
of a worker holding a batch (several times, the worker restarted in between) to the
scheduler having requeued it and split the workers again (the worker gone from
/workers); and kill -9 of the active scheduler to a finished query on the standby that
took over. Prints every figure beside IDunno's, writes them as JSON (--json: `results`
per mode, and the raw samples), and fails (exit 1) naming every figure that is missing
or out of range.

`--quick` runs the same phases with shorter windows and fewer kills (about 6 minutes on
2 cores); `--smoke` runs them with tiny stand-in models (plain Python, no torch:
tiny_resnet.py, tiny_albert.py) on 4 workers in about 2 minutes, as CI does.
"""

import argparse
import json
import os
import random
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "lib"))
from ports import free_port  # noqa: E402  (scripts/lib/ports.py)

# IDunno's published figures: 10 workers, ResNet-50 batch 4, ALBERT batch 8.
IDUNNO = {
    "resnet_spq": 2.56,
    "albert_spq": 1.88,
    "ideal": (5.77, 4.23),
    "chosen": (6, 4),
    "gap_mean_pct": 5.614,
    "second_job_s": 3.0,
    "worker_recovery_s": 5.43,
    "scheduler_recovery_s": 8.0,
}

# The models each run uses: (module:function, batch) for the image job and the text job.
MODELS = {
    "idunno": (("idunno_resnet:classify", 4), ("idunno_albert:classify", 8)),
    "tiny": (("tiny_resnet:classify", 4), ("tiny_albert:classify", 8)),
}

# The libraries the real models use, imported by every runner as its worker starts
# (`psrs cluster --runner-preload`), as IDunno's runners held their models' code: a new
# job's warm-up then builds its model, without importing torch or transformers.
LIBRARIES = "torch,torchvision,transformers.modeling_utils"

# Presets; options given on the command line win.
PRESETS = {
    "full": dict(workers=10, schedulers=3, seconds=120, settle=30, worker_kills=3, between_kills=10,
                 images=3000, sentences=6000, models="idunno", heartbeat_interval=0.5, heartbeat_timeout=5.0,
                 realloc_ms=1000, preload=LIBRARIES),
    "quick": dict(workers=10, schedulers=2, seconds=60, settle=15, worker_kills=1, between_kills=5,
                  images=3000, sentences=6000, models="idunno", heartbeat_interval=0.5, heartbeat_timeout=5.0,
                  realloc_ms=1000, preload=LIBRARIES),
    "smoke": dict(workers=4, schedulers=2, seconds=45, settle=8, worker_kills=1, between_kills=2,
                  images=6000, sentences=12000, models="tiny", heartbeat_interval=0.5, heartbeat_timeout=3.0,
                  realloc_ms=1000, preload="hashlib"),
}

WORDS = (
    "the of and to in is was for on that with as by at from his her an which are be this had "
    "not but were have one all their they there been has when who will more no if out so said "
    "what up its about into than them can only other new some could time these two may then do "
    "first any my now such like our over man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people how "
    "too little state good very make world still own see men work long get here between both life "
    "being under never day same another know while last might us great old year off come since "
    "against go came right used take three house city river model cluster worker query image text"
).split()


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)




def sentences(txt, n, seed):
    if len(list(txt.glob("*.txt"))) == n:
        return
    log(f"making {n} random sentences in {txt}")
    for f in txt.glob("*.txt"):
        f.unlink()
    r = random.Random(seed)
    for i in range(n):
        words = [r.choice(WORDS) for _ in range(r.randint(8, 24))]
        (txt / f"s{i:05d}.txt").write_text(" ".join(words).capitalize() + ".\n")


def make_inputs(root, images, n_sentences, seed, models):
    """Random 224x224 JPEGs (tiny models: random sentences stand in for them) and random
    sentences, one per file (kept between runs)."""
    img, txt = root / ("images" if models == "idunno" else "tiny-images"), root / "sentences"
    img.mkdir(parents=True, exist_ok=True)
    txt.mkdir(parents=True, exist_ok=True)
    if models != "idunno":
        sentences(img, images, seed + 1)
        sentences(txt, n_sentences, seed)
        return img, txt
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    if len(list(img.glob("*.jpg"))) != images:
        log(f"making {images} random 224x224 JPEG images in {img}")
        for f in img.glob("*.jpg"):
            f.unlink()
        for i in range(images):
            # smooth random colour fields plus noise: photo-like file sizes
            base = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            up = np.kron(base, np.ones((28, 28, 1), dtype=np.uint8)).astype(np.int16)
            pix = np.clip(up + rng.integers(-40, 41, up.shape), 0, 255).astype(np.uint8)
            Image.fromarray(pix).save(img / f"img{i:05d}.jpg", quality=85)
    sentences(txt, n_sentences, seed)
    return img, txt


# The jobs API's token: written into every scheduler candidate's work dir before it
# starts (a cluster without security takes the token it finds there), so one token
# reaches whichever candidate is active.
TOKEN = os.environ.get("PSRS_API_TOKEN") or secrets.token_hex(24)


# The cluster's API is on loopback: never through a proxy from the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(url, method="GET", body=None, timeout=5):
    """One API request with the run's API token: its JSON answer (raises if it fails)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with OPENER.open(req, timeout=timeout) as r:
        return json.loads(r.read())


def call(url, method="GET", body=None, timeout=5):
    """One API request with the run's API token; None if it fails."""
    try:
        return request(url, method, body, timeout)
    except (OSError, ValueError):
        return None


def proc_stat(pid):
    """(resident bytes, CPU seconds) of a process, from /proc; None if it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return rss, cpu
    except (OSError, ValueError, IndexError):
        return None


def pss_mb(pids):
    """The proportional set size of `pids` together (shared pages split among the
    processes sharing them), MB, from /proc/PID/smaps_rollup."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def children(pids):
    """The live child processes of `pids` (the workers' Python runners)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid in pids:
            out.append(int(d.name))
    return out


class Cluster:
    """Scheduler candidates, workers; every process killed by its pid at the end."""

    def __init__(self, args, mode, work):
        self.args, self.mode, self.work = args, mode, work
        work.mkdir(parents=True, exist_ok=True)
        self.ports = [free_port() for _ in range(args.schedulers)]
        self.http = [f"127.0.0.1:{free_port()}" for _ in range(args.schedulers)]
        self.env = dict(
            os.environ,
            DMLC_PS_ROOT_URI="127.0.0.1",
            DMLC_PS_ROOT_PORT=str(self.ports[0]),
            DMLC_NUM_SERVER="0",
            DMLC_NUM_WORKER=str(args.workers),
            DMLC_NODE_HOST="127.0.0.1",
            PS_SCHEDULERS=",".join(f"127.0.0.1:{p}" for p in self.ports),
            PS_HEARTBEAT_INTERVAL=str(args.heartbeat_interval),
            PS_HEARTBEAT_TIMEOUT=str(args.heartbeat_timeout),
            PS_JOIN_TIMEOUT="120",
        )
        self.env.pop("RUST_LOG", None)
        self.scheds, self.workers = [], []
        self.n_logs = 0

    def _spawn(self, role, extra, env):
        self.n_logs += 1
        name = self.work / f"{self.n_logs:02d}-{role}.log"
        out = open(name, "wb")
        cmd = [self.args.psrs, "cluster", "--scheduling", self.mode, "--outputs-dir", str(self.work / "outputs")]
        cmd += ["--realloc-ms", str(self.args.realloc_ms)] + extra
        p = subprocess.Popen(cmd, env=dict(self.env, DMLC_ROLE=role, **env), stdout=out, stderr=out,
                             stdin=subprocess.DEVNULL)
        p.log = name
        return p

    def start(self):
        for k in range(len(self.ports)):
            env = {} if k == 0 else {"PS_SCHEDULER_STANDBY": "1", "DMLC_PS_ROOT_PORT": str(self.ports[k])}
            sched_work = self.work / f"sched{k}"
            sched_work.mkdir(parents=True, exist_ok=True)
            fd = os.open(sched_work / "api-token", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(TOKEN + "\n")
            extra = ["--stats-addr", self.http[k], "--work-dir", str(sched_work)]
            self.scheds.append(self._spawn("scheduler", extra, env))
        for _ in range(self.args.workers):
            self.spawn_worker()

    def spawn_worker(self):
        extra = ["--work-dir", str(self.work / "workers"), "--python", self.args.python,
                 "--runner-threads", str(self.args.runner_threads)]
        if self.args.preload:
            extra += ["--runner-preload", self.args.preload]
        p = self._spawn("worker", extra, {})
        self.workers.append(p)
        return p

    def live_workers(self):
        return [p for p in self.workers if p.poll() is None]

    def memory_mb(self):
        """The cluster's memory now: every live process's and runner's PSS, MB."""
        live = [p.pid for p in self.scheds + self.workers if p.poll() is None]
        return pss_mb(live + children(set(live)))

    def respawn_exited(self):
        """Starts a new worker for each that exited on its own (e.g. declared dead when
        starved of CPU past the heartbeat timeout); returns how many."""
        gone = [p for p in self.workers if p.poll() is not None and not getattr(p, "killed", False)]
        for p in gone:
            p.killed = True
            log(f"worker {self.node_id(p)} exited by itself ({p.returncode}): {p.log}; starting another")
            self.spawn_worker()
        return len(gone)

    def dump_logs(self, lines=25):
        """Prints the last `lines` lines of every process's log (on a failure, so a run
        that stops names what the cluster was doing, not only what the experiment waited for)."""
        for k, h in enumerate(self.http):
            try:
                said = (request(f"http://{h}/stats.json") or {}).get("scheduler")
            except Exception as e:  # what the experiment's own calls hid
                said = repr(e)
            print(f"== scheduler candidate {k}'s http://{h}/stats.json: {said}", file=sys.stderr)
        for p in self.scheds + self.workers:
            state = "running" if p.poll() is None else f"exited {p.returncode}"
            tail = p.log.read_text(errors="replace").splitlines()[-lines:]
            print(f"== {p.log} ({state}), last {len(tail)} lines:", file=sys.stderr)
            for line in tail:
                print(f"   {line}", file=sys.stderr)

    def node_id(self, p):
        m = re.search(r"worker\[(\d+)\]@", p.log.read_text(errors="replace"))
        return int(m.group(1)) if m else None

    def kill(self, p):
        p.killed = True
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()

    def stop(self):
        for p in self.scheds + self.workers:
            self.kill(p)

    def active(self):
        """(index, API base) of the candidate serving as the active scheduler."""
        for k, h in enumerate(self.http):
            if self.scheds[k].poll() is None:
                st = call(f"http://{h}/stats.json", timeout=2)
                if st and (st.get("scheduler") or {}).get("active"):
                    return k, f"http://{h}"
        return None, None

    def submit(self, api, runner, data, out, batch):
        """Submits an inference job with `psrs job` (as a user would); returns its id."""
        cmd = [self.args.psrs, "job", "--api", api, "submit", "infer", "--runner", runner,
               "--pythonpath", str(HERE), "--data", str(data), "--out", str(out), "--batch", str(batch),
               "--task-timeout-ms", str(self.args.task_timeout_ms), "--max-retries", "10"]
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"psrs job submit: {r.stderr.strip() or r.stdout.strip()}")
        return r.stdout.strip().splitlines()[-1]


def until(pred, what, limit):
    t = time.monotonic()
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() - t > limit:
            raise RuntimeError(f"timed out after {limit} s waiting for {what}")
        time.sleep(0.05)


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def global_ideal(jobs, n):
    """The real-valued C_1 (C_2 = n - C_1) equalizing the expected query rates
    Q/(e + S·R/C) of two jobs (bisection), or None."""
    (a, b) = jobs

    def qps(j, c):
        if j["R"] <= 0:
            return j["Q"] / max(j["e"], 1e-9)
        return j["Q"] / (j["e"] + j["S"] * j["R"] / c) if c > 0 else 0.0

    lo, hi = 1e-6, n - 1e-6
    if (qps(a, lo) - qps(b, n - lo)) * (qps(a, hi) - qps(b, n - hi)) > 0:
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        if (qps(a, mid) - qps(b, n - mid)) * (qps(a, lo) - qps(b, n - lo)) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def warmup_figures(view, submitted_ms, rss_before, rss_after, runner_cpu):
    """The second job's warm-up on every worker: when each had the model ready (after
    the submission), the loader's wall and CPU time, the model's bytes, the runners'
    growth in resident memory."""
    models = view.get("models") or []
    ready = [(m["ready_ms"] - submitted_ms) / 1000 for m in models if m.get("ready_ms")]
    mb = 1 << 20
    grew = [rss_after[p] - rss_before[p] for p in rss_after if p in rss_before]
    return {
        "workers_ready": len(ready),
        "ready_after_s": sorted(ready),
        "ready_after_median_s": med(ready),
        "ready_after_max_s": max(ready) if ready else None,
        "load_s_median": med([m["load_s"] for m in models if m["state"] == "ready"]),
        "load_cpu_s_median": med([m["cpu_s"] for m in models if m["state"] == "ready"]),
        "model_mb": med([m["bytes"] / mb for m in models if m["state"] == "ready"]),
        "loader_rss_growth_mb_median": med([m["rss_growth"] / mb for m in models if m["state"] == "ready"]),
        "runner_rss_before_mb_median": med([v / mb for v in rss_before.values()]),
        "runner_rss_after_mb_median": med([v / mb for v in rss_after.values()]),
        "runner_rss_growth_mb_median": med([g / mb for g in grew]),
        "runners_cpu_s_during": runner_cpu,
    }


def run_mode(args, mode, img, txt):
    work = Path(args.work_dir) / mode
    # a fresh cluster: no job table, queue or log of an earlier run
    shutil.rmtree(work, ignore_errors=True)
    c = Cluster(args, mode, work)
    res = {"mode": mode}
    (first_model, first_batch), (second_model, second_batch) = MODELS[args.models]
    try:
        c.start()
        # a worker starved of CPU past the heartbeat timeout while the cluster forms exits;
        # the scheduler admits a replacement in its place
        exited = [0]

        def up(pred):
            exited[0] += c.respawn_exited()
            return pred()

        until(lambda: up(lambda: c.active()[1]), "the jobs API", 120)
        _, api = c.active()
        n = args.workers
        until(lambda: up(lambda: len(call(f"{api}/workers") or []) == n), f"{n} workers", 300)
        log(f"{mode}: cluster up ({n} workers, {args.schedulers} scheduler candidates)")
        jr = c.submit(api, first_model, img, work / "first.csv", first_batch)
        until(lambda: (call(f"{api}/jobs/{jr}") or {}).get("first_query_ms"), "the first job's first query", 900)
        # every runner holds the first job's model: their memory and CPU before the second
        def ready_everywhere(job):
            models = (call(f"{api}/jobs/{job}") or {}).get("models") or []
            return sum(m["state"] == "ready" for m in models) >= n

        until(lambda: ready_everywhere(jr), "the first job's model on every worker", 600)
        runners = children({p.pid for p in c.live_workers()})
        before = {p: proc_stat(p) for p in runners}
        ja = c.submit(api, second_model, txt, work / "second.csv", second_batch)
        sub = (call(f"{api}/jobs/{ja}") or {}).get("submitted_ms")
        log(f"{mode}: {ja} submitted")
        first = until(lambda: (call(f"{api}/jobs/{ja}") or {}).get("first_query_ms"), "the second job's first query",
                      900)
        v = call(f"{api}/jobs/{ja}")
        res["second_job_s"] = (v["first_task_ms"] - sub) / 1000
        res["second_job_done_s"] = (first - sub) / 1000
        log(f"{mode}: second job submitted -> first query handed out {res['second_job_s']:.2f} s, "
            f"finished {res['second_job_done_s']:.2f} s")
        # the warm-up everywhere (a worker whose load fails or hangs shows in the figures)
        try:
            until(lambda: ready_everywhere(ja), "the second job's model on every worker", 300)
        except RuntimeError as e:
            log(f"{mode}: {e}")
        after = {p: proc_stat(p) for p in runners}
        res["memory_mb"] = [c.memory_mb()]
        cpu = sum(after[p][1] - before[p][1] for p in runners if before.get(p) and after.get(p))
        res["warmup"] = warmup_figures(call(f"{api}/jobs/{ja}") or {}, sub,
                                       {p: before[p][0] for p in runners if before.get(p)},
                                       {p: after[p][0] for p in runners if after.get(p)}, cpu)
        w = res["warmup"]
        log(f"{mode}: the second job's model ready on {w['workers_ready']} workers, "
            f"{w['ready_after_median_s']} s (median) after its submission")

        def both():
            js = call(f"{api}/jobs") or []
            d = {j["id"]: j for j in js}
            return d.get(jr), d.get(ja)

        until(lambda: all(j and j["seconds_per_query"] for j in both()), "both jobs' rates", 600)
        log(f"{mode}: both jobs measured; settling {args.settle} s")
        time.sleep(args.settle)
        res["workers_exited_by_themselves"] = exited[0] + c.respawn_exited()
        until(lambda: len(call(f"{api}/workers") or []) == n, f"{n} workers", 300)
        samples = []
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            r, a = both()
            now = time.time() * 1000
            res["workers_exited_by_themselves"] += c.respawn_exited()
            if r and a and r["state"] == "running" and a["state"] == "running":
                samples.append({
                    "loadavg": float(open("/proc/loadavg").read().split()[0]),
                    "t": time.monotonic(),
                    "done": (r["tasks_done"], a["tasks_done"]),
                    "workers": (r["workers"], a["workers"]),
                    "qps": (r["queries_per_s"], a["queries_per_s"]),
                    "spq": (r["seconds_per_query"], a["seconds_per_query"]),
                    "smoothed_spq": (r.get("smoothed_seconds_per_query"), a.get("smoothed_seconds_per_query")),
                    "ideal_workers": (r.get("ideal_workers"), a.get("ideal_workers")),
                    "load": [{"Q": j["tasks_total"], "R": j["tasks_total"] - j["tasks_done"],
                              "e": (now - j["started_ms"]) / 1000, "S": j["seconds_per_query"]}
                             for j in (r, a)],
                })
            if len(samples) % 10 == 0:
                res["memory_mb"].append(c.memory_mb())
            time.sleep(1)
        res["samples"] = samples
        log(f"{mode}: {len(samples)} samples")

        # a worker holding a batch, killed; the batch requeued and the workers split
        # again when the scheduler drops it from /workers; restarted before the next
        kills = []
        if any(j and j["state"] != "running" for j in both()):
            log(f"{mode}: a job ended before the kills (a faster machine: give more --images/--sentences)")
        for _ in range(args.worker_kills):
            held = {w["id"] for w in (call(f"{api}/workers") or []) if w.get("task")}
            victims = [p for p in c.workers if p.poll() is None and c.node_id(p) in held]
            if not victims:
                log(f"{mode}: no worker holds a batch; skipping a kill")
                continue
            p = random.choice(victims)
            nid = c.node_id(p)
            t = time.monotonic()
            c.kill(p)
            until(lambda: nid not in {w["id"] for w in (call(f"{api}/workers", timeout=1) or [{"id": nid}])},
                  "the dead worker dropped", 120)
            kills.append(time.monotonic() - t)
            log(f"{mode}: worker {nid} kill -9 -> requeued + reallocated {kills[-1]:.2f} s")
            c.spawn_worker()
            until(lambda: c.respawn_exited() or len(call(f"{api}/workers") or []) == n, "the replacement worker", 300)
            until(lambda: len(call(f"{api}/workers") or []) == n, "the replacement worker", 300)
            time.sleep(args.between_kills)
        res["worker_kills_s"] = kills

        # the active scheduler, killed; a standby takes over and a query finishes there
        takeovers = []
        for _ in range(len(c.ports) - 1):
            k, api = c.active()
            if k is None:
                break
            done = sum(j["tasks_done"] for j in both() if j)
            if any(j and j["state"] != "running" for j in both()):
                log(f"{mode}: a job ended; no scheduler kill")
                break
            t = time.monotonic()
            c.kill(c.scheds[k])

            def progress():
                for h in c.http:
                    js = call(f"http://{h}/jobs", timeout=1)
                    if js and sum(j["tasks_done"] for j in js if j["id"] in (jr, ja)) > done:
                        return True
                return False

            until(progress, "progress on a standby", 300)
            takeovers.append(time.monotonic() - t)
            log(f"{mode}: active scheduler kill -9 -> a query finished on the standby {takeovers[-1]:.2f} s")
            _, api = until(lambda: c.active()[1] and c.active(), "the new active scheduler", 60)
        res["scheduler_kills_s"] = takeovers
        for j in (jr, ja):
            call(f"{api}/jobs/{j}", "DELETE")
    except BaseException:
        c.dump_logs()
        raise
    finally:
        c.stop()
    return res


def summary(res, n):
    """A mode's figures (what figures.json's `results` holds for it)."""
    s = res["samples"]
    workers = [x["workers"] for x in s]
    spq = [x["spq"] for x in s]
    gaps10 = [abs(a - b) / max(a, b) * 100 for a, b in (x["qps"] for x in s) if max(a, b) > 0]
    # over 30 s windows: queries finished between samples 30 s apart
    gaps30 = []
    for i, x in enumerate(s):
        old = [y for y in s[:i] if x["t"] - y["t"] >= 30]
        if old:
            y = old[-1]
            qa, qb = (x["done"][k] - y["done"][k] for k in (0, 1))
            if max(qa, qb) > 0:
                gaps30.append(abs(qa - qb) / max(qa, qb) * 100)
    ideal_local = [n * a / (a + b) for a, b in spq if a and b]
    ideal_global = [global_ideal(x["load"], n) for x in s]
    ideal_sched = [x["ideal_workers"][0] for x in s if x["ideal_workers"][0] is not None]
    chosen = {}
    for w in workers:
        chosen[tuple(w)] = chosen.get(tuple(w), 0) + 1
    most = max(chosen, key=chosen.get) if chosen else None
    kills, takeovers = res.get("worker_kills_s", []), res.get("scheduler_kills_s", [])
    return {
        "second_job_s": res.get("second_job_s"),
        "second_job_done_s": res.get("second_job_done_s"),
        "gap_median_pct": med(gaps30),
        "gap_max_pct": max(gaps30) if gaps30 else None,
        "gap_window_s": 30,
        "gap10_median_pct": med(gaps10),
        "gap10_max_pct": max(gaps10) if gaps10 else None,
        "chosen": f"{most[0]}/{most[1]}" if most else None,
        "chosen_share": (chosen[most] / len(workers)) if most else None,
        "mean_workers": (statistics.mean(w[0] for w in workers), statistics.mean(w[1] for w in workers))
        if workers else None,
        "allocations": {f"{a}/{b}": k for (a, b), k in sorted(chosen.items())},
        "ideal": med(ideal_local if res["mode"] == "local" else ideal_global),
        "ideal_scheduler": med(ideal_sched),
        "first_spq": med([x[0] for x in spq]),
        "second_spq": med([x[1] for x in spq]),
        "qps": (med([x["qps"][0] for x in s]), med([x["qps"][1] for x in s])),
        "worker_recovery_s": med(kills),
        "worker_recovery_max_s": max(kills) if kills else None,
        "worker_recoveries_s": kills,
        "scheduler_recovery_s": med(takeovers),
        "scheduler_recovery_max_s": max(takeovers) if takeovers else None,
        "scheduler_recoveries_s": takeovers,
        "samples": len(s),
        "loadavg_median": med([x["loadavg"] for x in s]),
        "workers_exited_by_themselves": res.get("workers_exited_by_themselves", 0),
        "memory_mb_max": max(res.get("memory_mb") or [0]) or None,
        "warmup": res.get("warmup"),
    }


def problems(results, args):
    """Every figure of `results` that is missing or out of range (empty: all sane)."""
    out = []
    n = args.workers

    def num(mode, key, lo, hi, v=None):
        v = results[mode].get(key) if v is None else v
        if not isinstance(v, (int, float)) or v != v or not lo <= v <= hi:
            out.append(f"{mode}: {key} = {v!r}, not within [{lo}, {hi}]")

    for mode in args.modes.split(","):
        r = results.get(mode)
        if not r:
            out.append(f"{mode}: no results")
            continue
        num(mode, "samples", max(5, args.seconds // 3), 10 ** 6)
        num(mode, "second_job_s", 0, 600)
        num(mode, "second_job_done_s", 0, 900)
        for k in ("gap_median_pct", "gap_max_pct", "gap10_median_pct", "gap10_max_pct"):
            num(mode, k, 0, 100)
        m = re.fullmatch(r"(\d+)/(\d+)", str(r.get("chosen")))
        if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1 or int(m.group(1)) + int(m.group(2)) > n:
            out.append(f"{mode}: chosen = {r.get('chosen')!r}, not a split of {n} workers with one each at least")
        num(mode, "ideal", 0, n)
        num(mode, "first_spq", 0, 3600)
        num(mode, "second_spq", 0, 3600)
        if args.worker_kills > 0:
            num(mode, "worker_recovery_s", 0, 300)
            num(mode, "worker_recovery_max_s", 0, 300)
        if args.schedulers > 1:
            num(mode, "scheduler_recovery_s", 0, 300)
            num(mode, "scheduler_recovery_max_s", 0, 300)
        w = r.get("warmup") or {}
        num(mode, "warmup.workers_ready", n, n, w.get("workers_ready"))
        num(mode, "warmup.ready_after_max_s", 0, 600, w.get("ready_after_max_s"))
        num(mode, "warmup.load_cpu_s_median", 0, 600, w.get("load_cpu_s_median"))
    return out


def fmt(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"


def report(results, args):
    n = args.workers
    rows = []
    print()
    print(f"IDunno's experiment on psrs: {n} workers, {'ResNet-50' if args.models == 'idunno' else 'tiny stand-ins'} "
          f"batch 4 + {'ALBERT-base' if args.models == 'idunno' else 'tiny text model'} batch 8 "
          f"(runner threads {args.runner_threads}, heartbeat {args.heartbeat_interval}/{args.heartbeat_timeout} s, "
          f"runners preload {args.preload or 'nothing'})")
    print(f"{'figure':<62} {'psrs':<40} IDunno")
    for m, s in results.items():
        ch = s["chosen"]
        ideal = s["ideal"]
        mw = s["mean_workers"]
        w = s.get("warmup") or {}
        rows += [
            (f"{m}: seconds per query, first / second job (median)",
             f"{fmt(s['first_spq'])} / {fmt(s['second_spq'])}", f"{IDUNNO['resnet_spq']} / {IDUNNO['albert_spq']}"),
            (f"{m}: workers, most held (share); time-averaged",
             f"{ch} ({fmt((s['chosen_share'] or 0) * 100, 0)}%); {fmt(mw[0] if mw else None)} / "
             f"{fmt(mw[1] if mw else None)}", "6 / 4"),
            (f"{m}: ideal real-valued split ({'n*S_i/sum S' if m == 'local' else 'equal expected rates'})",
             f"{fmt(ideal)} / {fmt(n - ideal) if ideal is not None else '-'}", "5.77 / 4.23"),
            (f"{m}: query-rate gap over 30 s windows, median / max",
             f"{fmt(s['gap_median_pct'], 1)}% / {fmt(s['gap_max_pct'], 1)}% ({s['samples']} samples)", "5.6% (mean)"),
            (f"{m}: the same over 10 s rates, median / max",
             f"{fmt(s['gap10_median_pct'], 1)}% / {fmt(s['gap10_max_pct'], 1)}%", ""),
            (f"{m}: second job's submission to its first query started / done",
             f"{fmt(s['second_job_s'])} s / {fmt(s['second_job_done_s'])} s", "~3 s (started)"),
            (f"{m}: second job's model ready on every worker, median / max",
             f"{fmt(w.get('ready_after_median_s'))} s / {fmt(w.get('ready_after_max_s'))} s "
             f"({w.get('workers_ready')} workers)", ""),
            (f"{m}: warm-up per runner: loader CPU / wall, model, runner memory",
             f"{fmt(w.get('load_cpu_s_median'))} s / {fmt(w.get('load_s_median'))} s, "
             f"{fmt(w.get('model_mb'), 0)} MB, +{fmt(w.get('runner_rss_growth_mb_median'), 0)} MB "
             f"(to {fmt(w.get('runner_rss_after_mb_median'), 0)} MB)", ""),
            (f"{m}: worker kill -9 to batch requeued + split again",
             f"median {fmt(s['worker_recovery_s'])} s, max {fmt(s['worker_recovery_max_s'])} s "
             f"({len(s['worker_recoveries_s'])} kills)", "5.43 s"),
            (f"{m}: active scheduler kill -9 to a query finished on a standby",
             f"median {fmt(s['scheduler_recovery_s'])} s, max {fmt(s['scheduler_recovery_max_s'])} s "
             f"({len(s['scheduler_recoveries_s'])} kills)", "~8 s"),
        ]
    for a, b, c in rows:
        print(f"{a:<62} {b:<40} {c}")
    for m, s in results.items():
        print(f"{m}: allocations seen (first/second job: samples): {s['allocations']}; query rates "
              f"{fmt(s['qps'][0], 3)} / {fmt(s['qps'][1], 3)} q/s; load average median {fmt(s['loadavg_median'], 1)} "
              f"on {os.cpu_count()} cores; workers that exited by themselves: {s['workers_exited_by_themselves']}; "
              f"the cluster's memory (PSS) at most {fmt(s['memory_mb_max'], 0)} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--psrs", required=True, help="the psrs binary")
    ap.add_argument("--python", default=sys.executable, help="the workers' Python (with torch, for the real models)")
    ap.add_argument("--work-dir", required=True, help="inputs, logs and outputs go here")
    ap.add_argument("--quick", action="store_true", help="shorter windows, fewer kills (about 6 minutes)")
    ap.add_argument("--smoke", action="store_true", help="tiny stand-in models on 4 workers (about 2 minutes)")
    ap.add_argument("--models", choices=sorted(MODELS), help="idunno (ResNet-50, ALBERT) or tiny (no torch)")
    ap.add_argument("--modes", default="local,global")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--schedulers", type=int, help="scheduler candidates (active + standbys)")
    ap.add_argument("--images", type=int)
    ap.add_argument("--sentences", type=int)
    ap.add_argument("--seconds", type=int, help="sampling window per mode")
    ap.add_argument("--settle", type=int, help="seconds between both rates known and sampling")
    ap.add_argument("--worker-kills", type=int)
    ap.add_argument("--between-kills", type=float)
    ap.add_argument("--runner-threads", type=int, default=1)
    ap.add_argument("--preload", help="modules each runner imports as its worker starts ('' for none)")
    ap.add_argument("--realloc-ms", type=int)
    ap.add_argument("--task-timeout-ms", type=int, default=600_000)
    ap.add_argument("--heartbeat-interval", type=float)
    ap.add_argument("--heartbeat-timeout", type=float)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    preset = "smoke" if args.smoke else "quick" if args.quick else "full"
    for k, v in PRESETS[preset].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.preset = preset
    random.seed(args.seed)
    # the API token `psrs job` and the experiment's requests send (PSRS_API_TOKEN), the
    # same for every process of the run
    os.environ["PSRS_API_TOKEN"] = TOKEN
    started = time.time()
    root = Path(args.work_dir)
    img, txt = make_inputs(root / "inputs", args.images, args.sentences, args.seed, args.models)
    raw = {m: run_mode(args, m, img, txt) for m in args.modes.split(",")}
    results = {m: summary(r, args.workers) for m, r in raw.items()}
    report(results, args)
    bad = problems(results, args)
    if args.json:
        out = {
            "command": " ".join(sys.argv),
            "preset": preset,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(started)),
            "duration_s": round(time.time() - started, 1),
            "cores": os.cpu_count(),
            "args": {k: v for k, v in vars(args).items()},
            "idunno": IDUNNO,
            "results": results,
            "problems": bad,
            "raw": raw,
        }
        Path(args.json).write_text(json.dumps(out, indent=1))
    if bad:
        print("\nthe experiment's figures are not all there or not sane:", file=sys.stderr)
        for b in bad:
            print(f"  {b}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
