#!/usr/bin/env python3
"""IDunno's experiment on a psrs jobs cluster (run by scripts/idunno-experiment.sh).

For each fair-time mode (local, then global): a cluster of three scheduler candidates
(one active, two standbys), no servers and 10 workers, each worker with its Python
runner. A ResNet-50 job (batch 4) over random 224x224 JPEG images is submitted, then,
once it has finished a query, an ALBERT job (batch 8) over random sentences. Measured:
the second job's submission to its first finished query; both jobs' seconds per query,
workers and query rates sampled every second over a window once both have a rate (the
allocation each mode chose, the ideal real-valued one, and the query-rate gap over time);
kill -9 of a worker holding a batch (several times, the worker restarted in between) to
the scheduler having requeued it and reallocated (the worker gone from /workers); and
kill -9 of the active scheduler (twice) to a finished query on the standby that took
over. Prints every figure beside IDunno's and writes them as JSON (--json).
"""

import argparse
import json
import os
import random
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_inputs(root, images, sentences, seed):
    """Random 224x224 JPEGs and random sentences, one per file (kept between runs)."""
    import numpy as np
    from PIL import Image

    img, txt = root / "images", root / "sentences"
    img.mkdir(parents=True, exist_ok=True)
    txt.mkdir(parents=True, exist_ok=True)
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
    if len(list(txt.glob("*.txt"))) != sentences:
        log(f"making {sentences} random sentences in {txt}")
        for f in txt.glob("*.txt"):
            f.unlink()
        r = random.Random(seed)
        for i in range(sentences):
            words = [r.choice(WORDS) for _ in range(r.randint(8, 24))]
            (txt / f"s{i:05d}.txt").write_text(" ".join(words).capitalize() + ".\n")
    return img, txt


# The jobs API's token: written into every scheduler candidate's work dir before it
# starts (a cluster without security takes the token it finds there), so one token
# reaches whichever candidate is active.
TOKEN = secrets.token_hex(24)


def call(url, method="GET", body=None, timeout=5):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


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
        p = self._spawn("worker", extra, {})
        self.workers.append(p)
        return p

    def respawn_exited(self):
        """Starts a new worker for each that exited on its own (e.g. declared dead when
        starved of CPU past the heartbeat timeout); returns how many."""
        gone = [p for p in self.workers if p.poll() is not None and not getattr(p, "killed", False)]
        for p in gone:
            p.killed = True
            log(f"worker {self.node_id(p)} exited by itself ({p.returncode}): {p.log}; starting another")
            self.spawn_worker()
        return len(gone)

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


def run_mode(args, mode, img, txt):
    work = Path(args.work_dir) / mode
    c = Cluster(args, mode, work)
    res = {"mode": mode}
    try:
        c.start()
        until(lambda: c.active()[1], "the jobs API", 120)
        _, api = c.active()
        n = args.workers
        until(lambda: len(call(f"{api}/workers") or []) == n, f"{n} workers", 300)
        log(f"{mode}: cluster up ({n} workers, {args.schedulers} scheduler candidates)")
        common = {"kind": "infer", "pythonpath": str(HERE), "task_timeout_ms": args.task_timeout_ms,
                  "max_retries": 10}
        ra = call(f"{api}/jobs", "POST", dict(common, runner="idunno_resnet:classify", data=str(img),
                                               out=str(work / "resnet.csv"), batch=4), timeout=60)
        assert ra and "id" in ra, f"submit: {ra}"
        jr = ra["id"]
        until(lambda: (call(f"{api}/jobs/{jr}") or {}).get("first_query_ms"), "ResNet-50's first query", 900)
        rb = call(f"{api}/jobs", "POST", dict(common, runner="idunno_albert:classify", data=str(txt),
                                               out=str(work / "albert.csv"), batch=8), timeout=60)
        assert rb and "id" in rb, f"submit: {rb}"
        ja = rb["id"]
        first = until(lambda: (call(f"{api}/jobs/{ja}") or {}).get("first_query_ms"), "ALBERT's first query", 900)
        res["second_job_s"] = (first - rb["submitted_ms"]) / 1000
        log(f"{mode}: ALBERT submitted -> first finished query {res['second_job_s']:.1f} s")

        def both():
            js = call(f"{api}/jobs") or []
            d = {j["id"]: j for j in js}
            return d.get(jr), d.get(ja)

        until(lambda: all(j and j["seconds_per_query"] for j in both()), "both jobs' rates", 600)
        log(f"{mode}: both jobs measured; settling {args.settle} s")
        time.sleep(args.settle)
        res["workers_exited_by_themselves"] = c.respawn_exited()
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
                    "load": [{"Q": j["tasks_total"], "R": j["tasks_total"] - j["tasks_done"],
                              "e": (now - j["started_ms"]) / 1000, "S": j["seconds_per_query"]}
                             for j in (r, a)],
                })
            time.sleep(1)
        res["samples"] = samples
        log(f"{mode}: {len(samples)} samples")

        # a worker holding a batch, killed; the batch requeued and the workers split
        # again when the scheduler drops it from /workers; restarted before the next
        kills = []
        for k in range(args.worker_kills):
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
    finally:
        c.stop()
    return res


def summary(res, n):
    s = res["samples"]
    workers = [x["workers"] for x in s]
    spq = [x["spq"] for x in s]
    gaps = [abs(a - b) / max(a, b) * 100 for a, b in (x["qps"] for x in s) if max(a, b) > 0]
    # the same over 30 s: queries finished between samples 30 s apart
    gaps30 = []
    for i, x in enumerate(s):
        old = [y for y in s[:i] if x["t"] - y["t"] >= 30]
        if old:
            y = old[-1]
            qa, qb = (x["done"][k] - y["done"][k] for k in (0, 1))
            if max(qa, qb) > 0:
                gaps30.append(abs(qa - qb) / max(qa, qb) * 100)
    local_ideal = [n * a / (a + b) for a, b in spq if a and b]
    glob = [global_ideal(x["load"], n) for x in s]
    chosen = {}
    for w in workers:
        chosen[w] = chosen.get(w, 0) + 1
    return {
        "resnet_spq": med([x[0] for x in spq]),
        "albert_spq": med([x[1] for x in spq]),
        "chosen": max(chosen, key=chosen.get) if chosen else None,
        "chosen_share": (max(chosen.values()) / len(workers)) if chosen else None,
        "allocations": {f"{a}/{b}": k for (a, b), k in sorted(chosen.items())},
        "ideal_local": med(local_ideal),
        "ideal_global": med(glob),
        "gap_median_pct": med(gaps),
        "gap_max_pct": max(gaps) if gaps else None,
        "gap30_median_pct": med(gaps30),
        "gap30_max_pct": max(gaps30) if gaps30 else None,
        "qps": (med([x["qps"][0] for x in s]), med([x["qps"][1] for x in s])),
    }


def fmt(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"


def report(results, args):
    n = args.workers
    rows = []
    kills = [k for r in results for k in r.get("worker_kills_s", [])]
    takeovers = [k for r in results for k in r.get("scheduler_kills_s", [])]
    for r in results:
        r["summary"] = summary(r, n)
    print()
    print(f"IDunno's experiment on psrs: {n} workers, ResNet-50 batch 4 + ALBERT-base batch 8 "
          f"(runner threads {args.runner_threads}, heartbeat {args.heartbeat_interval}/{args.heartbeat_timeout} s)")
    print(f"{'figure':<58} {'psrs':<34} IDunno")
    for r in results:
        s, m = r["summary"], r["mode"]
        ch = s["chosen"]
        ideal = s["ideal_local"] if m == "local" else s["ideal_global"]
        rows += [
            (f"{m}: seconds per query ResNet-50 / ALBERT (median)",
             f"{fmt(s['resnet_spq'])} / {fmt(s['albert_spq'])}", f"{IDUNNO['resnet_spq']} / {IDUNNO['albert_spq']}"),
            (f"{m}: workers ResNet-50 / ALBERT (most often; share)",
             f"{ch[0]} / {ch[1]} ({s['chosen_share'] * 100:.0f}% of samples)" if ch else "-", "6 / 4"),
            (f"{m}: ideal real-valued split ({'n*S_i/sum S' if m == 'local' else 'equal expected rates'})",
             f"{fmt(ideal)} / {fmt(n - ideal) if ideal is not None else '-'}", "5.77 / 4.23"),
            (f"{m}: query-rate gap over time, median / max (10 s rates)",
             f"{fmt(s['gap_median_pct'], 1)}% / {fmt(s['gap_max_pct'], 1)}% ({len(r['samples'])} samples)",
             "5.6% (mean)"),
            (f"{m}: the same over 30 s windows, median / max",
             f"{fmt(s['gap30_median_pct'], 1)}% / {fmt(s['gap30_max_pct'], 1)}%", ""),
            (f"{m}: second job's submission to its first finished query", f"{fmt(r['second_job_s'], 1)} s", "~3 s"),
        ]
    rows += [
        ("worker kill -9 to batch requeued + allocation updated",
         f"median {fmt(med(kills))} s, max {fmt(max(kills) if kills else None)} s ({len(kills)} kills)", "5.43 s"),
        ("active scheduler kill -9 to a query finished on the standby",
         f"median {fmt(med(takeovers))} s, max {fmt(max(takeovers) if takeovers else None)} s "
         f"({len(takeovers)} kills)", "~8 s"),
    ]
    for a, b, c in rows:
        print(f"{a:<58} {b:<34} {c}")
    loads = [x["loadavg"] for r in results for x in r["samples"]]
    print(f"load average (1 min) while sampling: median {fmt(med(loads), 1)}, max {fmt(max(loads) if loads else None, 1)} "
          f"on {os.cpu_count()} cores")
    for r in results:
        live = [sum(x["workers"]) for x in r["samples"]]
        print(f"{r['mode']}: workers allocated per sample min {min(live) if live else '-'}; workers that exited "
              f"by themselves (starved past the heartbeat timeout) and were restarted: "
              f"{r.get('workers_exited_by_themselves', 0)}")
    for r in results:
        print(f"{r['mode']}: allocations seen (ResNet-50/ALBERT: samples): {r['summary']['allocations']}; "
              f"query rates {fmt(r['summary']['qps'][0], 3)} / {fmt(r['summary']['qps'][1], 3)} q/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--psrs", required=True, help="the psrs binary")
    ap.add_argument("--python", default=sys.executable, help="the workers' Python (with torch)")
    ap.add_argument("--work-dir", required=True, help="inputs, logs and outputs go here")
    ap.add_argument("--modes", default="local,global")
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--schedulers", type=int, default=3, help="scheduler candidates (active + standbys)")
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--sentences", type=int, default=6000)
    ap.add_argument("--seconds", type=int, default=120, help="sampling window per mode")
    ap.add_argument("--settle", type=int, default=30, help="seconds between both rates known and sampling")
    ap.add_argument("--worker-kills", type=int, default=3)
    ap.add_argument("--between-kills", type=float, default=10)
    ap.add_argument("--runner-threads", type=int, default=1)
    ap.add_argument("--realloc-ms", type=int, default=2000)
    ap.add_argument("--task-timeout-ms", type=int, default=600_000)
    ap.add_argument("--heartbeat-interval", type=float, default=0.5)
    ap.add_argument("--heartbeat-timeout", type=float, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    random.seed(args.seed)
    root = Path(args.work_dir)
    img, txt = make_inputs(root / "inputs", args.images, args.sentences, args.seed)
    results = [run_mode(args, m, img, txt) for m in args.modes.split(",")]
    report(results, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))


if __name__ == "__main__":
    main()
