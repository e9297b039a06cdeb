"""Inference jobs with the user's own model in a jobs cluster (`psrs cluster`) of two
workers, each with its Python runner: a TorchScript model over a RecordIO dataset
(submitted with `psrs job submit infer --torch`) and a Python function over a directory
of files (submitted as JSON to `POST /jobs`), side by side. Their outputs are checked
against calling the model directly in this process: same classes, probabilities within
1e-5. The runners are SIGKILLed at four moments while the jobs run: every record and
file still appears exactly once, in dataset order, a failed batch shows in the job's
status, and both jobs' seconds per query are measured. Needs torch (a missing package fails the test, naming it)."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from cluster import free_port, psrs_bin

DIM, CLASSES, ROWS, PER_CHUNK, BATCH = 16, 5, 600, 20, 7
FILES, FILE_BATCH = 160, 4


def need(package):
    try:
        return importlib.import_module(package)
    except ImportError as e:
        pytest.fail(f"{package} is not installed ({e}): pip install {package} (scripts/test.sh installs it)")


def token(work):
    """The API's token: a cluster without security keeps it in its work dir."""
    return (work / "api-token").read_text().strip()


def get(api, path, work):
    req = urllib.request.Request(f"{api}{path}", headers={"Authorization": f"Bearer {token(work)}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def post(api, path, body, work):
    req = urllib.request.Request(f"{api}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {token(work)}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def children(pid):
    """Processes whose parent is `pid` (the worker's runner)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


FUNCTION = '''
import time
import torch

MODEL = torch.jit.load({model!r})
MODEL.eval()


def classify(paths):
    """Each file holds {dim} numbers: the model's class and its probability."""
    time.sleep(0.3)  # slow enough for a runner to be killed inside a batch
    x = torch.tensor([[float(v) for v in open(p).read().split()] for p in paths], dtype=torch.float32)
    with torch.no_grad():
        p = torch.softmax(MODEL(x), dim=1)
    best = p.max(dim=1)
    return [[int(c), float(v)] for c, v in zip(best.indices, best.values)]
'''


def test_torchscript_and_function_jobs_match_the_model_and_survive_runner_kills(tmp_path):
    torch = need("torch")
    psrs = need("psrs")
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(DIM, 32), torch.nn.ReLU(), torch.nn.Linear(32, CLASSES))
    model_path = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(model), str(model_path))
    direct = torch.jit.load(str(model_path))

    # a RecordIO dataset (labels 0..4), read back exactly as the workers read it
    rng = np.random.default_rng(3)
    feats = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    labels = rng.integers(0, CLASSES, ROWS)
    csv = tmp_path / "data.csv"
    csv.write_text("".join(f"{labels[i]}," + ",".join(f"{v:.5f}" for v in feats[i]) + "\n" for i in range(ROWS)))
    rio = tmp_path / "data.rio"
    subprocess.run([psrs_bin(), "convert", "--format", "csv", "--input", str(csv), "--out", str(rio),
                    "--per-chunk", str(PER_CHUNK)], check=True, capture_output=True)
    x, y = psrs.read_records(str(rio))
    assert x.shape == (ROWS, DIM) and list(y) == list(labels)

    # a directory of files, each a vector, and the function module
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    vecs = rng.normal(size=(FILES, DIM)).astype(np.float32)
    for i in range(FILES):
        (inputs / f"v{i:04d}.txt").write_text(" ".join(f"{v:.5f}" for v in vecs[i]))
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "usermodels.py").write_text(FUNCTION.format(model=str(model_path), dim=DIM))

    api_addr = f"127.0.0.1:{free_port()}"
    api = f"http://{api_addr}"
    port = free_port()
    env = dict(os.environ, DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_SERVER="0",
               DMLC_NUM_WORKER="2", DMLC_NODE_HOST="127.0.0.1", PS_HEARTBEAT_INTERVAL="0.2",
               PS_HEARTBEAT_TIMEOUT="5")
    env.pop("RUST_LOG", None)
    work = tmp_path / "work"
    args = [psrs_bin(), "cluster", "--stats-addr", api_addr, "--work-dir", str(work),
            "--python", sys.executable, "--realloc-ms", "500"]
    procs, logs = [], []
    deadline = time.monotonic() + 240

    def start(role):
        log = open(tmp_path / f"{role}{len(procs)}.log", "wb")
        logs.append(log.name)
        procs.append(subprocess.Popen(args, env=dict(env, DMLC_ROLE=role), stdout=log, stderr=log,
                                      stdin=subprocess.DEVNULL))
        return procs[-1]

    def dump():
        return "\n".join(f"--- {n}\n{open(n, errors='replace').read()[-5000:]}" for n in logs)

    def until(pred, what):
        while True:
            v = pred()
            if v:
                return v
            assert time.monotonic() < deadline, f"timed out waiting for {what}\n{dump()}"
            time.sleep(0.02)

    try:
        start("scheduler")
        workers = [start("worker"), start("worker")]

        def up():
            try:
                return get(api, "/jobs", work) == [] or True
            except OSError:
                return False

        until(up, "the API")
        out_t = tmp_path / "torch.csv"
        sub = subprocess.run([psrs_bin(), "job", "--api", api, "submit", "infer", "--torch", str(model_path),
                              "--data", str(rio), "--out", str(out_t), "--batch", str(BATCH)],
                             capture_output=True, text=True)
        assert sub.returncode == 0, sub.stderr
        jt = sub.stdout.strip()
        out_f = tmp_path / "function.csv"
        jf = post(api, "/jobs", {"kind": "infer", "runner": "usermodels:classify", "pythonpath": str(mods),
                                 "data": str(inputs), "out": str(out_f), "batch": FILE_BATCH}, work)["id"]

        errors, kills, measured = set(), [], set()

        def job(j):
            v = get(api, f"/jobs/{j}", work)
            if v.get("last_error"):
                errors.add(v["last_error"])
            if v.get("seconds_per_query") is not None:
                measured.add(j)
            return v

        def kill_runner(w):
            pids = until(lambda: children(workers[w].pid), f"worker {w}'s runner")
            os.kill(pids[0], signal.SIGKILL)
            kills.append(pids[0])

        # four kills, alternating workers: once the TorchScript job has begun, then as
        # the function's job passes 20%, 45% and 70% (mostly inside a batch: the function
        # sleeps 0.3 s per batch)
        until(lambda: job(jt)["progress"] >= 0.1, f"{jt} progress")
        kill_runner(0)
        for i, at in enumerate([0.2, 0.45, 0.7]):
            until(lambda: job(jf)["progress"] >= at, f"{jf} progress {at}")
            kill_runner((i + 1) % 2)
            time.sleep(0.1)
        ends = {j: until(lambda j=j: job(j) if job(j)["state"] in ("done", "failed") else None, f"{j} to end")
                for j in (jt, jf)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for j in (jt, jf):
        assert ends[j]["state"] == "done", f"{ends[j]}\n{dump()}"
    assert any("died" in e for e in errors), f"no failed batch seen in the status: {errors}\n{dump()}"
    assert measured == {jt, jf}, "fair time measured both jobs' seconds per query"

    # the TorchScript job: every record once, in order, as the model called here says
    with torch.no_grad():
        probs = torch.softmax(direct(torch.from_numpy(x)), dim=1).numpy()
    rows = [line.split(",") for line in out_t.read_text().splitlines()]
    assert rows[0] == ["index", "class", "probability", "label"]
    rows = rows[1:]
    assert [int(r[0]) for r in rows] == list(range(ROWS)), "every record once, in dataset order"
    for i, (_, cls, prob, label) in enumerate(rows):
        best = int(probs[i].argmax())
        if int(cls) != best:  # only a tie within float error may differ
            assert abs(probs[i][int(cls)] - probs[i][best]) < 1e-5, (i, cls, best, probs[i])
        assert abs(float(prob) - probs[i].max()) < 1e-5, (i, prob, probs[i].max())
        assert int(float(label)) == labels[i]
    accuracy = float(np.mean(probs.argmax(axis=1) == labels))
    assert abs(ends[jt]["accuracy"] - accuracy) < 1e-9, (ends[jt]["accuracy"], accuracy)

    # the function's job: one row per file, in sorted order, as the function says
    with torch.no_grad():
        fprobs = torch.softmax(direct(torch.tensor(
            [[float(v) for v in (inputs / f"v{i:04d}.txt").read_text().split()] for i in range(FILES)],
            dtype=torch.float32)), dim=1).numpy()
    rows = [line.split(",") for line in out_f.read_text().splitlines()]
    assert rows[0] == ["index", "output_0", "output_1"]
    rows = rows[1:]
    assert [int(r[0]) for r in rows] == list(range(FILES)), "every file once, in sorted order"
    for i, (_, cls, prob) in enumerate(rows):
        best = int(fprobs[i].argmax())
        if int(cls) != best:
            assert abs(fprobs[i][int(cls)] - fprobs[i][best]) < 1e-5
        assert abs(float(prob) - fprobs[i].max()) < 1e-5
    assert len(kills) == 4 and len(set(kills)) == 4, f"each kill hit a new runner: {kills}"
    assert ends[jf]["accuracy"] is None
