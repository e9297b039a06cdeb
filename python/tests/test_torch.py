"""psrs.torch on clusters of real processes (tests/nodes/torch_node.py in every role):
sync training equal to plain PyTorch replaying the same mean gradients (dense SGD with
momentum and Adam; rows of a 10**9-row table and of a bag, each step touching some
rows and not others, equal to nn.Embedding(sparse=True) with torch.optim.Adagrad and
torch.optim.SparseAdam, and SGD with momentum per row), worker 0's initial values broadcast, bad input refused in one line, a model
that differs between workers named, a worker killed mid-step at several moments
(nothing it or the others pushed is lost or half applied; its task is trained again),
and a server killed (a replica, or a replacement restoring its checkpoint, goes on
with the optimizer state: the values equal an uninterrupted run's), bounded
staleness (a slow worker's gradients rejected exactly when older than the bound, every
server holding exactly the pushes it took), and init() taking its role from Slurm's
variables. Fails (never skips) when torch is missing."""

import json
import random
import re
import subprocess
import sys
import time

import pytest

try:
    import torch
except ImportError as e:  # the test fails, naming the package
    pytest.fail(f"the torch package is not installed ({e}): pip install torch (scripts/test.sh installs it)",
                pytrace=False)

from cluster import HERE, Node, psrs_bin, py

sys.path.insert(0, str(HERE / "nodes"))
import torch_work  # noqa: E402  (the gradients the nodes push)

FAST = {"PS_HEARTBEAT_INTERVAL": "0.2", "PS_HEARTBEAT_TIMEOUT": "1"}


def result(node):
    m = re.search(r"^RESULT (.*)$", node.stdout(), re.M)
    assert m, f"{node.name} printed no result\n{node.stdout()[-3000:]}{node.stderr()[-3000:]}"
    return json.loads(m.group(1))


def close(a, b, what, tol=1e-5):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} {b.shape}"
    assert torch.allclose(a, b, atol=tol, rtol=tol), f"{what}: {a.tolist()} != {b.tolist()}"


class RowMomentumSGD:
    """SGD with momentum as psrs applies it to embedding rows: each row keeps its own
    velocity, which moves the row only in the steps the row has a gradient
    (v = momentum * v + g; p -= lr * v). torch's SGD on a sparse gradient decays and
    applies the velocity of every row ever touched, so it is not the reference here."""

    def __init__(self, params, lr, momentum):
        (self.p,) = params
        self.lr, self.momentum = lr, momentum
        self.v = torch.zeros_like(self.p)

    def step(self):
        g = self.p.grad.coalesce()
        idx, vals = g.indices()[0], g.values()
        with torch.no_grad():
            self.v[idx] = self.momentum * self.v[idx] + vals
            self.p[idx] -= self.lr * self.v[idx]


def reference(res0, optimizers, steps, workers=2):
    """Plain PyTorch replaying sync training: each step the mean of the workers'
    gradients, applied by torch.optim from worker 0's start values and the rows'
    initial values. The rows are an nn.Embedding / nn.EmbeddingBag with sparse=True
    (only the rows of the step's ids get a gradient), trained by torch.optim.Adagrad,
    torch.optim.SparseAdam, or RowMomentumSGD (psrs's formula)."""
    dense_opt, emb_opt, bag_opt = torch_work.settings(optimizers)
    lin = torch.nn.Linear(3, 2)
    start = torch.tensor(res0["start"])
    with torch.no_grad():
        lin.weight.copy_(start[:6].reshape(2, 3))
        lin.bias.copy_(start[6:])
    emb_w = torch.nn.Parameter(torch.tensor(res0["first"]["emb"]))
    bag_w = torch.nn.Parameter(torch.tensor(res0["first"]["bag"]))
    emb_at = {i: n for n, i in enumerate(res0["emb_ids"])}
    bag_at = {i: n for n, i in enumerate(res0["bag_ids"])}
    emb = lambda ids: F.embedding(ids.apply_(lambda i: emb_at[i]), emb_w, sparse=True)  # noqa: E731
    bag = lambda ids: F.embedding_bag(ids.apply_(lambda i: bag_at[i]), bag_w, mode="sum", sparse=True)  # noqa: E731

    def make(params, o, rows):
        o = dict(o)
        name = o.pop("optimizer")
        if rows and name == "adam":
            return torch.optim.SparseAdam(params, **o)
        if rows and name == "sgd" and o.get("momentum"):
            return RowMomentumSGD(params, **o)
        return {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adagrad": torch.optim.Adagrad}[name](params, **o)

    opts = [make(lin.parameters(), dense_opt, False), make([emb_w], emb_opt, True), make([bag_w], bag_opt, True)]
    params = [lin.weight, lin.bias, emb_w, bag_w]
    for k in range(steps):
        total = [None] * len(params)
        for r in range(workers):
            for p in params:
                p.grad = None
            torch_work.loss_of(lin, emb, bag, k, r).backward()
            total = [p.grad if t is None else t + p.grad for t, p in zip(total, params)]
        for t, p in zip(total, params):
            p.grad = t / workers
        assert emb_w.grad.is_sparse and bag_w.grad.is_sparse
        for o in opts:
            o.step()
    return [float(v) for v in torch.cat([lin.weight.detach().reshape(-1), lin.bias.detach()])], emb_w, bag_w


F = torch.nn.functional


@pytest.mark.parametrize("optimizers", ["sgd", "adam"])
def test_sync_training_equals_plain_pytorch_on_the_mean_gradients(cluster_factory, optimizers):
    """Dense SGD with momentum or Adam equal torch.optim's; embedding rows trained by
    Adagrad equal nn.Embedding(sparse=True) with torch.optim.Adagrad, by Adam
    torch.optim.SparseAdam (embedding and bag), by SGD with momentum psrs's per-row
    formula, over steps that leave different rows untouched (they do not move)."""
    steps = 6
    c = cluster_factory(2, 2, limit=120)
    node = py("torch_node.py", "--scenario", "exact", "--optimizers", optimizers, "--steps", str(steps))
    c.start(node, node, node)
    c.assert_ok()
    res = {r["rank"]: r for r in (result(w) for w in c.role("worker"))}
    r0, r1 = res[0], res[1]
    assert r0["mine"] != r1["mine"], "the workers made different initial values"
    assert r0["start"] == r0["mine"] and r1["start"] == r0["mine"], "every worker starts from worker 0's values"
    assert r0["first"] == r1["first"], "both saw the same initial rows"
    want, emb_w, bag_w = reference(r0, optimizers, steps)
    for r in (r0, r1):
        close(r["final"], want, "dense values")
        close(r["emb"], emb_w.detach(), "embedding rows")
        close(r["bag"], bag_w.detach(), "bag rows")
        assert r["versions"] == [steps, steps] and r["rejected"] == 0, r
    out = c.role("worker")[0].stdout() + c.role("worker")[1].stdout()
    assert out.count("refused: ") == 3 and "bags ok" in out, c.logs()
    assert "init twice: psrs.torch.init() was called already" in out, c.logs()
    for s in c.role("server"):
        m = re.search(r"server (\d) version (\d+) rows \[(\d+), (\d+)\]", s.stdout())
        assert m and int(m.group(2)) == steps, c.logs()
    stored = [sum(int(g) for g in re.findall(r"rows \[(\d+), ", s.stdout())) for s in c.role("server")]
    assert sum(stored) == len(r0["emb_ids"]), f"only the trained rows are stored: {stored}"


def test_torch_tensors_go_to_the_wire_without_a_copy(cluster_factory):
    c = cluster_factory(2, 1, limit=90)
    node = py("torch_kv_node.py")
    c.start(node, node, node)
    c.assert_ok()
    out = c.role("worker")[0].stdout()
    assert "torch kv ok" in out, c.logs()
    for line in ["contiguous float32: no copy", "requires_grad: no copy", "a contiguous slice: no copy",
                 "strided: converted once", "float64: converted once"]:
        assert line in out, out
    assert re.search(r"^refused: .*BFloat16", out, re.M), out


def test_a_model_that_differs_between_workers_is_named(cluster_factory):
    c = cluster_factory(1, 2, limit=90)
    node = py("torch_node.py", "--scenario", "mismatch")
    c.start(node, node, node)
    c.assert_ok()
    out = "".join(w.stdout() for w in c.role("worker"))
    assert "worker 0 trained" in out, c.logs()
    m = re.search(r"^mismatch refused: (.*)$", out, re.M)
    assert m, c.logs()
    assert m.group(1) == ("the model differs from the declared one: dense parameter lin.weight [3, 3] here "
                          "is lin.weight [2, 3] on the servers"), m.group(1)


@pytest.fixture
def small_dataset(tmp_path):
    """30 records in 10 chunks of 3."""
    csv = tmp_path / "d.csv"
    csv.write_text("".join(f"{i % 2},{i}\n" for i in range(30)))
    rio = tmp_path / "d.rio"
    subprocess.run([psrs_bin(), "convert", "--format", "csv", "--input", str(csv), "--out", str(rio),
                    "--per-chunk", "3"], check=True, capture_output=True)
    return str(rio)


def stepped(node):
    return len(re.findall(r"^stepped \d+$", node.stdout(), re.M))


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_worker_killed_mid_step_loses_nothing(cluster_factory, small_dataset, mode):
    """Kills worker 1 at three moments while both train, through psrs.tasks() (each step
    pushes 1 for every dense value and two rows, SGD lr 1). Every server holds each
    push whole or not at all. Async: each value is minus the pushes that reached its
    server: the survivor's steps plus the victim's finished ones, plus at most the one
    it was killed in. Sync: each version applies a mean of 1, so each value is minus
    its server's version, which counts every step of the survivor's that was taken.
    Every task is trained, the victim's unfinished one by the survivor."""
    epochs = 2
    for kill_after in random.Random(3 if mode == "async" else 4).sample(range(2, 25), 3):
        c = cluster_factory(2, 2, limit=120, env=FAST)
        node = py("torch_node.py", "--scenario", "count", "--mode", mode, "--train", small_dataset,
                  "--epochs", str(epochs))
        c.start(node, node, node)
        survivor, victim = c.role("worker")
        c.wait_until(lambda: stepped(victim) >= kill_after or victim.proc.poll() is not None, "the victim's steps")
        time.sleep(random.Random(kill_after).random() * 0.01)  # somewhere inside a step
        victim.kill()
        c.assert_ok([n for n in c.nodes if n is not victim])
        res = result(survivor)
        finished = stepped(victim)
        where = f"{mode}, killed after {finished} steps"
        for s, block in enumerate(res["blocks"]):
            vals = {res["w"][i] for i in block}
            assert len(vals) == 1, f"{where}: server {s} holds a half-applied push: {res['w']}"
            got = -vals.pop()
            if mode == "async":
                lower = res["steps"] + finished
                assert lower <= got <= lower + 1, f"{where}: server {s} applied {got} pushes, " \
                                                  f"expected {lower} or {lower + 1}\n{c.logs()}"
            else:
                assert got == res["versions"][s], f"{where}: server {s}: {got} vs version {res['versions']}"
                assert got >= res["steps"] - res["rejected"], f"{where}: {res}"
        for row in res["rows"]:
            assert len(set(row)) == 1, f"{where}: a half-applied row {row}"
            if mode == "async":
                assert res["steps"] + finished <= -row[0] <= res["steps"] + finished + 1, (where, row)
            else:
                assert -row[0] in res["versions"], (where, row, res["versions"])
        done = [int(t) for w in (survivor, victim) for t in re.findall(r"^done task (\d+)$", w.stdout(), re.M)]
        assert sorted(set(done)) == list(range(10 * epochs)), f"{where}: tasks done: {sorted(done)}\n{c.logs()}"
        started = set(re.findall(r"^start task (\d+)$", victim.stdout(), re.M))
        mine = set(re.findall(r"^done task (\d+)$", victim.stdout(), re.M))
        theirs = set(re.findall(r"^done task (\d+)$", survivor.stdout(), re.M))
        assert started - mine <= theirs, f"{where}: the victim's unfinished task was trained by the survivor"


def test_bounded_staleness_rejects_exactly_the_gradients_older_than_the_bound(cluster_factory, tmp_path):
    """Bounded mode, staleness 2, worker 1 slow: in each round it computes its gradient,
    then the fast worker takes LAG steps before it pushes (LAG 2 is the bound: taken;
    3 is one past it: rejected by both servers; the last round steps with a closure, so
    its rejected gradient is recomputed and taken). The fast worker's gradients are
    never more than one version old, so all are taken. Every push is 1 for each dense
    value and two rows (SGD, lr 1), so each server's values and rows are minus the
    pushes it took, which is its version: the fast worker's steps plus the slow
    worker's taken ones."""
    staleness, lags, closure_round = 2, [1, 2, 3, 0, 5, 2, 3], 6
    hs = tmp_path / "handshake"
    hs.mkdir()
    c = cluster_factory(2, 2, limit=120)
    node = py("torch_node.py", "--scenario", "stale", "--staleness", str(staleness), "--lags",
              ",".join(map(str, lags)), "--closure-rounds", str(closure_round), "--handshake", str(hs))
    c.start(node, node, node)
    c.assert_ok()
    res = {r["rank"]: r for r in (result(w) for w in c.role("worker"))}
    fast, slow = res[0], res[1]
    assert fast["steps"] == sum(lags) and fast["rejected"] == 0, fast
    taken = 0
    for k, (lag, rnd) in enumerate(zip(lags, slow["rounds"])):
        version = sum(lags[:k]) + taken
        assert rnd["pulled"] == [version, version], f"round {k}: computed on {rnd['pulled']}, not {version}"
        too_stale = lag > staleness
        assert rnd["rejected"] == (2 if too_stale else 0), \
            f"round {k}: a gradient {lag} versions old, bound {staleness}: {rnd['rejected']} servers rejected it"
        taken += 1 if (not too_stale or k == closure_round) else 0
    assert len(slow["rounds"]) == len(lags), slow
    version = sum(lags) + taken
    for r in (fast, slow):
        assert r["versions"] == [version, version], f"versions {r['versions']}, expected {version}: {res}"
        for s, block in enumerate(r["blocks"]):
            assert [r["w"][i] for i in block] == [-float(version)] * len(block), \
                f"server {s} holds {r['w']}: not the {version} pushes it took"
        assert r["rows"] == [[-float(version)] * 2] * 2, f"rows {r['rows']}, expected -{version}"
    for s in c.role("server"):
        assert re.search(rf"^server \d version {version} rows", s.stdout(), re.M), c.logs()


def test_init_takes_the_roles_from_slurms_variables(cluster_factory):
    """As under `srun -n 3` with DMLC_NUM_SERVER=1 and no DMLC_ROLE, DMLC_NUM_WORKER or
    DMLC_PS_ROOT_URI: task 0 is the scheduler, task 1 the server, task 2 the worker
    (the count of workers from SLURM_NTASKS, the scheduler's host the first of
    SLURM_JOB_NODELIST). The worker trains 3 steps and the server ends at version 3."""
    c = cluster_factory(1, 1, limit=90)
    node = py("torch_node.py", "--scenario", "replay", "--steps", "3")
    base = {k: v for k, v in c.env.items()
            if k not in ("DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_PS_ROOT_URI") and not k.startswith("SLURM_")}
    for procid, role in enumerate(["scheduler", "server", "worker"]):
        env = dict(base, SLURM_PROCID=str(procid), SLURM_NTASKS="3", SLURM_JOB_NODELIST="127.0.0.1,127.0.0.2")
        c.nodes.append(Node(role, node, env, c.dir, f"task{procid}"))
    c.assert_ok()
    scheduler, server, worker = c.nodes
    assert result(worker)["versions"] == [3], c.logs()
    assert re.search(r"^server 0 version 3 rows", server.stdout(), re.M), c.logs()
    assert "RESULT" not in scheduler.stdout() + server.stdout() and "version" not in scheduler.stdout(), c.logs()


def replay(cluster_factory, tmp_path, name, env=None, kill=None, checkpoints=True):
    """One worker trains the replay scenario on 2 servers; `kill(c, node)` (returning
    the node it killed) runs while the worker pauses after step 6, then the worker
    resumes. Its final values, and the cluster."""
    resume = tmp_path / f"{name}.resume"
    work = tmp_path / f"{name}-work"
    c = cluster_factory(2, 1, limit=120, env=dict(FAST, PS_VERBOSE="1", **(env or {})))
    node = py("torch_node.py", "--scenario", "replay", "--mode", "async", "--steps", "12", "--pause-at", "6",
              "--resume", str(resume), *(["--work-dir", str(work)] if checkpoints else []))
    c.start(node, node, node)
    (w,) = c.role("worker")
    c.wait_until(lambda: "paused" in w.stdout(), "the pause")
    killed = kill(c, node) if kill else None
    resume.write_text("go")
    c.assert_ok([n for n in c.nodes if n is not killed])
    return result(w), c


def test_a_killed_server_goes_on_with_its_optimizer_state(cluster_factory, tmp_path):
    """Adam on the dense values and the rows, async, one worker: killing server 1 while
    the worker pauses leaves the final values equal to an uninterrupted run's, whether
    its replica serves its range (PS_REPLICAS=1), a replacement copies it from the
    replica, or a replacement restores its checkpoint. Without the moments in the
    replica's copy or the checkpoint, the values would differ."""
    base, _ = replay(cluster_factory, tmp_path, "base")

    def kill_only(c, node):
        s = c.role("server")[1]
        s.kill()
        return s

    def replace(ready):
        """Kills server 1, starts a replacement and waits until it logged `ready`."""
        def kill(c, node):
            s = kill_only(c, node)
            c.wait_until(lambda: "declared dead" in c.role("scheduler")[0].stderr(), "the death")
            new = c.spawn("server", node)
            c.wait_until(lambda: ready in new.stderr(), ready)
            return s
        return kill

    for name, env, kill in [("replica", {"PS_REPLICAS": "1"}, kill_only),
                            ("replica-replaced", {"PS_REPLICAS": "1"}, replace("every key range copied")),
                            ("checkpoint", {}, replace("restored version 6 from its checkpoint"))]:
        got, c = replay(cluster_factory, tmp_path, name, env, kill)
        assert got["w"] == base["w"], f"{name}: dense values {got['w']} != {base['w']}\n{c.logs()}"
        assert got["rows"] == base["rows"], f"{name}: rows differ\n{c.logs()}"
    # no replica, no checkpoint: the replacement gets the model again from the worker
    # (its dense values as they were; the optimizer state and its rows start over)
    got, c = replay(cluster_factory, tmp_path, "nothing", {}, replace("started"), checkpoints=False)
    assert "hold no model: declaring it again from this worker's values" in c.logs(), c.logs()
    # The replacement's rank decides whether step 7 is taken: rank 0 holds none of
    # step 7's rows, so its push reaches the replacement before it holds the model and
    # is dropped (versions 8 to 12 taken); rank 1 holds rows 3 and 17, whose lookup
    # before the step finds it empty and declares the model, so step 7's push is taken.
    m = re.search(r"^server (\d+) version (\d+)", c.nodes[-1].stdout(), re.M)
    assert m, f"the replacement printed no version\n{c.logs()}"
    rank = int(m.group(1))
    assert got["w"] != base["w"], got
    assert got["versions"][rank] == {0: 5, 1: 6}[rank] and got["versions"][1 - rank] == 12, (rank, got)


def test_table_options_prefetch_overlapped_steps_and_the_exported_model(cluster_factory):
    """One worker, async with overlap=True (a step's push and pull run while the next
    batch computes) and each next batch's rows prefetched. Every push arrives once (the
    dense values are minus the steps). A table with admit_after=2 and expire_after=3
    creates a row only at its second step with a gradient (the first one's dropped)
    and drops it after 3 steps untouched. A float16 table ends within float16's
    precision of its float32 twin. The exported model (pt.exported) answers stored
    rows as the servers hold them and never stored rows with the servers' initial
    values."""
    c = cluster_factory(1, 1, limit=90)
    node = py("torch_node.py", "--scenario", "options")
    c.start(node, node, node)
    c.assert_ok()
    res = result(c.role("worker")[0])
    steps = len(torch_work.FILTER_IDS)
    assert res["w"] == [-float(steps)] * 6 and res["rejected"] == 0, res
    assert res["checked"] >= 5 and res["mismatched"] == 0, f"prefetched rows differ from the servers': {res}"
    # every step but the first took its rows from the prefetch (the lookups of other
    # ids between steps 2 and 3 left the filtered table's prefetch in place)
    assert res["hits"] == [steps - 1] * 3, res["hits"]
    # rows 1, 2, 5 of the filtered table (gradient 1 per step, lr 1, initial values 0)
    assert res["filt"]["2"] == [[-1.0, -1.0], [0.0, 0.0], [0.0, 0.0]], res["filt"]
    assert res["filt"]["5"] == [[0.0, 0.0], [0.0, 0.0], [-2.0, -2.0]], res["filt"]
    assert res["exported_filt"] == [[0.0, 0.0], [-2.0, -2.0]], res["exported_filt"]
    half, full = torch.tensor(res["half"]), torch.tensor(res["full"])
    ex_half, ex_full = torch.tensor(res["exported_half"]), torch.tensor(res["exported_full"])
    close(ex_full, full, "the exported float32 table (stored and initial rows)", tol=1e-6)
    assert not torch.equal(half, ex_half), "the float16 table's lookups travel as float16"
    close(half, ex_half, "the float16 table's lookups", tol=2e-3)
    close(ex_half, ex_full, "the float16 table against its float32 twin", tol=1e-2)
    # stored rows: 1 in the filtered table, 13 distinct ids in each of the others
    assert res["stored"] == 27, res["stored"]
    (s,) = c.role("server")
    assert re.search(r"^server 0 version 5 rows \[1, 13, 13\]", s.stdout(), re.M), s.stdout()


def test_a_hot_row_cache_serves_rows_at_most_its_staleness_old_and_drops_no_update(cluster_factory):
    """One worker, sync, four tables taking the same gradients (nodes/torch_work.py
    hot): without a cache, with a cache of staleness 0, with staleness 2, and with
    staleness 2 read through prefetches (3 rows each). Staleness 0 reads exactly what
    the uncached table reads, serves nothing and holds nothing. With staleness 2 every
    row read equals the servers' value of at most 2 steps before, the bound is reached
    (the hot rows are served from the cache for 2 steps), the cache never holds more
    than 3 rows, and every row read is counted as a hit or a pull. No update is lost:
    the servers end with every table's rows equal."""
    c = cluster_factory(1, 1, limit=180)
    node = py("torch_node.py", "--scenario", "hot")
    c.start(node, node, node)
    c.assert_ok()
    res = result(c.role("worker")[0])
    assert res["zero_equal"], "staleness 0 read other values than the uncached table"
    assert res["unmatched"] == 0, f"rows read that the servers never held: {res['unmatched']}"
    assert res["max_age"] == {"hot": 2, "pre": 2}, res["max_age"]
    assert res["stale_reads"]["hot"] > 0 and res["stale_reads"]["pre"] > 0, res["stale_reads"]
    assert res["max_rows"] == {"zero": 0, "hot": 3, "pre": 3}, res["max_rows"]
    st, reads = res["stats"], res["reads"]
    assert res["plain_stats"] is None
    assert st["zero"]["hits"] == 0 and st["zero"]["pulls"] == reads, st
    for name in ("hot", "pre"):
        assert st[name]["hits"] > 0 and st[name]["hits"] + st[name]["pulls"] == reads, (name, st)
    # ids 0 and 1 (every step, cached from step 1 at the latest) are served in 2 of
    # every 3 steps
    assert st["hot"]["hits"] >= 2 * 7, st
    # through prefetches planned a step ahead: served in every other step at least
    # (a row's prefetch counts on the pull of the one before)
    assert st["pre"]["hits"] >= 2 * 3, st
    assert res["prefetch_hits"] == 11, res["prefetch_hits"]
    final = res["final"]
    for name in ("zero", "hot", "pre"):
        assert final[name] == final["plain"], f"{name}'s rows differ from the uncached table's: {final}"
