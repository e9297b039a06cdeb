"""The workers' side of tests/nodes/torch_node.py (imported only on workers, so the
scheduler and servers never load torch).

Scenarios (--scenario):
- exact: a tiny model (a Linear, an Embedding of 10**9 rows, a "sum" bag) trained STEPS
  steps with gradients known in advance (`grads_of` below) on rows that change from
  step to step (each step leaves some rows untouched), so the test can replay them in
  plain PyTorch with sparse gradients; workers print their values as JSON. Worker
  0 also checks bad input, init() twice and the bags.
- mismatch: worker 1's model has another shape than worker 0's.
- count: every step pushes a gradient of 1 for each dense value and for two rows (SGD,
  lr 1), through psrs.tasks(); workers print each step they finish, so a test that
  kills one can count what the servers must hold.
- stale: bounded staleness, worker 1 the slow one. In each round k the slow worker
  computes its gradient (as in count), then waits while the fast worker takes LAGS[k]
  steps, then pushes: its gradient is LAGS[k] versions old. The workers hand over
  through files in --handshake. In the rounds of --closure-rounds the slow worker steps
  with a closure (a rejected gradient is recomputed and pushed again). Workers print
  their steps, rejections and, per round, the versions the slow worker computed on.
- replay: one worker trains STEPS steps of known gradients with Adam; with --pause-at
  K it stops after step K until the file --resume exists (a test kills a server
  meanwhile), then goes on; it prints the final values.
- options: Monolith's row options, float16 rows, overlapped steps and prefetches.
- hot: tables with and without a cache of hot rows read the same ids and take the same
  gradients; each row read is matched to the servers' values of earlier steps.
"""

import json
import os
import time
from pathlib import Path

import numpy as np
import psrs
import torch
import torch.nn.functional as F
from torch import nn

ROWS = 10**9
# Each step touches some rows of each table and not others (two of the five embedding
# rows and one of the six bag rows get no gradient in a step, a different one each
# step), with repeats within a lookup and between the workers.
EMB_POOL = [5, 7, 11, ROWS - 1, 2**29 + 3]
BAG_POOL = [1, 2, 3, 4, 9, 500]


def emb_ids(k, r):
    """Step k's ids of worker r in the embedding (shape (2, 2) on worker 0, (1, 2) on 1)."""
    p = lambda j: EMB_POOL[(k + j) % len(EMB_POOL)]  # noqa: E731
    return [[p(0), p(1)], [p(3), p(0)]] if r == 0 else [[p(1), p(1)]]


def bag_ids(k, r):
    """Step k's bags of worker r (bags of 3: two on worker 0, one on 1)."""
    p = lambda j: BAG_POOL[(k + j) % len(BAG_POOL)]  # noqa: E731
    return [[p(0), p(1), p(2)], [p(3), p(0), p(0)]] if r == 0 else [[p(1), p(1), p(4)]]


def grads_of(k, r):
    """The step-k coefficients of worker r: the loss is sum(coef * output)."""
    s = (k + 1) * (r + 1)
    return {
        "w": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.1 * s - 0.2,
        "b": torch.tensor([0.3, -0.1]) * s,
        "emb": torch.ones(2 - r, 2, 4) * 0.05 * s + torch.arange(4) * 0.01 - 0.02 * k,
        "bag": torch.ones(2 - r, 3) * 0.03 * s - torch.arange(3) * 0.02,
    }


def loss_of(lin, emb, bag, k, r):
    """The step-k loss of worker r, over a Linear and two lookups (callables of ids)."""
    g = grads_of(k, r)
    return ((lin.weight * g["w"]).sum() + (lin.bias * g["b"]).sum()
            + (emb(torch.tensor(emb_ids(k, r))) * g["emb"]).sum()
            + (bag(torch.tensor(bag_ids(k, r))) * g["bag"]).sum())


def settings(name):
    """The optimizers of the exact scenario: (dense, embedding, bag)."""
    return {
        "sgd": (dict(optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=0.01),
                dict(optimizer="adagrad", lr=0.5), dict(optimizer="adam", lr=0.1)),
        "adam": (dict(optimizer="adam", lr=0.05), dict(optimizer="adam", lr=0.1, eps=1e-4),
                 dict(optimizer="sgd", lr=0.2, momentum=0.5)),
    }[name]


class Tiny(nn.Module):
    def __init__(self, pt, emb_opt, bag_opt, extra=False):
        super().__init__()
        self.lin = nn.Linear(3, 2 if not extra else 3)
        self.emb = pt.Embedding(ROWS, 4, init_std=0.5, **emb_opt)
        self.bag = pt.Embedding(1000, 3, init_std=0.5, mode="sum", **bag_opt)


def flat(model):
    return [float(v) for p in model.parameters() for v in p.detach().reshape(-1)]


def rows_of(emb, ids):
    with torch.no_grad():
        return emb(torch.tensor(ids)).tolist()


def expect(cond, what):
    if not cond:
        raise SystemExit(f"torch-node check failed: {what}")


def bad_input(pt, model):
    """Worker 0's checks of bad input and of the bags."""
    for ids, err, text in [(torch.tensor([1.5]), ValueError, "integer tensor"),
                           (torch.tensor([ROWS]), IndexError, "out of range"),
                           (torch.tensor([-1]), IndexError, "out of range")]:
        try:
            model.emb(ids)
            expect(False, f"{ids} was taken")
        except err as e:
            expect(text in str(e) and "\n" not in str(e), f"{ids}: {e}")
            print(f"refused: {e}", flush=True)
    with torch.no_grad():
        a = model.emb(torch.tensor([[3, 8]], dtype=torch.int32))
        b = model.emb(torch.tensor([[3, 8]]))
        expect(torch.equal(a, b) and a.shape == (1, 2, 4), "int32 ids")
        ids = torch.tensor([[1, 2, 2], [9, 4, 1]])
        summed = model.bag(ids)
        model.bag.mode = "mean"
        mean = model.bag(ids)
        model.bag.mode = None
        each = model.bag(ids)
        model.bag.mode = "sum"
        expect(each.shape == (2, 3, 3) and summed.shape == (2, 3), "bag shapes")
        expect(torch.allclose(each.sum(1), summed) and torch.allclose(each.mean(1), mean), "bags")
    print("bags ok", flush=True)
    try:
        pt.init()
        expect(False, "init() twice was taken")
    except psrs.Error as e:
        print(f"init twice: {e}", flush=True)


def exact(a, pt):
    r = pt.rank()
    dense_opt, emb_opt, bag_opt = settings(a.optimizers)
    torch.manual_seed(100 + r)  # every worker its own values: worker 0's must win
    model = Tiny(pt, emb_opt, bag_opt)
    mine = flat(model)
    opt = pt.DistributedOptimizer(model, mode=a.mode, **dense_opt)
    start = flat(model)
    if r == 0:
        bad_input(pt, model)
    emb_all, bag_all = sorted(EMB_POOL), sorted(BAG_POOL)
    model.bag.mode = None  # single rows, for the record
    first = {"emb": rows_of(model.emb, emb_all), "bag": rows_of(model.bag, bag_all)}
    model.bag.mode = "sum"
    for k in range(a.steps):
        opt.zero_grad()
        loss_of(model.lin, model.emb, model.bag, k, r).backward()
        opt.step()
    pt.barrier()
    opt.pull()
    model.bag.mode = None
    out = {"rank": r, "mine": mine, "start": start, "first": first, "final": flat(model),
           "emb": rows_of(model.emb, emb_all), "bag": rows_of(model.bag, bag_all), "emb_ids": emb_all,
           "bag_ids": bag_all, "versions": opt.versions, "rejected": opt.rejected}
    print("RESULT " + json.dumps(out), flush=True)


def mismatch(a, pt):
    r = pt.rank()
    model = Tiny(pt, {}, {}, extra=(r == 1))
    try:
        opt = pt.DistributedOptimizer(model, mode="async", lr=0.1)
    except ValueError as e:
        print(f"mismatch refused: {e}", flush=True)
        return
    for k in range(3):
        opt.zero_grad()
        loss_of(model.lin, model.emb, model.bag, k, 0).backward()
        opt.step()
    print(f"worker {r} trained", flush=True)


class Counter(nn.Module):
    def __init__(self, pt):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(6))
        self.emb = pt.Embedding(ROWS, 2, optimizer="sgd", lr=1.0, init_std=0.0)


COUNT_IDS = [11, ROWS - 3]


def count(a, pt):
    r = pt.rank()
    model = Counter(pt)
    opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=1.0, mode=a.mode)
    steps = 0
    for task in psrs.tasks(a.train):
        print(f"start task {task.id}", flush=True)
        x, _ = task.records()
        for _ in range(len(x)):
            opt.zero_grad()
            (model.w.sum() + model.emb(torch.tensor(COUNT_IDS)).sum()).backward()
            opt.step()
            steps += 1
            print(f"stepped {steps}", flush=True)
        print(f"done task {task.id}", flush=True)
    print(f"worker {r} finished", flush=True)
    pt.barrier()
    opt.pull()
    out = {"rank": r, "steps": steps, "w": [float(v) for v in model.w.detach()],
           "rows": rows_of(model.emb, COUNT_IDS), "blocks": [list(b) for b in block_ranges(6)],
           "versions": opt.versions, "rejected": opt.rejected}
    print("RESULT " + json.dumps(out), flush=True)


def wait_for(path, limit=60.0):
    end = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > end:
            raise SystemExit(f"torch-node: {path.name} did not appear within {limit} s")
        time.sleep(0.005)


def stale(a, pt):
    r = pt.rank()
    model = Counter(pt)
    opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=1.0, mode="bounded", staleness=a.staleness)
    hs = Path(a.handshake)
    lags = [int(x) for x in a.lags.split(",")]
    with_closure = {int(x) for x in a.closure_rounds.split(",") if x}

    def loss():
        return model.w.sum() + model.emb(torch.tensor(COUNT_IDS)).sum()

    steps, rounds = 0, []
    for k, lag in enumerate(lags):
        if r == 0:  # the fast worker: LAG steps while the slow one holds its gradient
            wait_for(hs / f"ready{k}")
            for _ in range(lag):
                opt.zero_grad()
                loss().backward()
                opt.step()
                steps += 1
            (hs / f"done{k}").touch()
            wait_for(hs / f"pushed{k}")
            continue
        before, pulled = opt.rejected, list(opt.versions)
        if k in with_closure:
            calls = []

            def closure():
                opt.zero_grad()
                lo = loss()
                lo.backward()
                calls.append(1)
                if len(calls) == 1:
                    (hs / f"ready{k}").touch()
                    wait_for(hs / f"done{k}")
                return lo

            opt.step(closure)
        else:
            opt.zero_grad()
            loss().backward()
            (hs / f"ready{k}").touch()
            wait_for(hs / f"done{k}")
            opt.step()
        steps += 1
        rounds.append({"lag": lag, "pulled": pulled, "rejected": opt.rejected - before})
        (hs / f"pushed{k}").touch()
    pt.barrier()
    opt.pull()
    out = {"rank": r, "steps": steps, "w": [float(v) for v in model.w.detach()],
           "rows": rows_of(model.emb, COUNT_IDS), "blocks": [list(b) for b in block_ranges(6)],
           "versions": opt.versions, "rejected": opt.rejected, "rounds": rounds}
    print("RESULT " + json.dumps(out), flush=True)


def block_ranges(n):
    """Which dense values each server holds (the layout's blocks)."""
    per = -(-n // psrs.num_servers())
    return [range(s * per, min(n, (s + 1) * per)) for s in range(psrs.num_servers())]


class Replay(nn.Module):
    def __init__(self, pt):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(-1, 1, 10))
        self.emb = pt.Embedding(ROWS, 3, optimizer="adam", lr=0.05, init_std=0.3)


def replay(a, pt):
    model = Replay(pt)
    opt = pt.DistributedOptimizer(model, optimizer="adam", lr=0.05, mode=a.mode)
    ids = torch.tensor([3, 17, ROWS - 5, 40])
    for k in range(a.steps):
        opt.zero_grad()
        coef = torch.sin(torch.arange(10, dtype=torch.float32) + k)
        rows = model.emb(ids[: 2 + k % 3])
        loss = (model.w * coef).sum() + (rows * torch.cos(torch.arange(3.0) * (k + 1))).sum()
        loss.backward()
        opt.step()
        print(f"stepped {k + 1}", flush=True)
        if a.pause_at == k + 1:
            print("paused", flush=True)
            while not os.path.exists(a.resume):
                time.sleep(0.05)
    with torch.no_grad():
        out = {"w": [float(v) for v in model.w], "rows": model.emb(ids).tolist(), "versions": opt.versions}
    print("RESULT " + json.dumps(out), flush=True)




class Options(nn.Module):
    """A table with Monolith's options (created after gradients in 2 steps, dropped
    after 3 steps untouched), and two tables of the same seed and updates, one
    travelling as float16."""

    def __init__(self, pt):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(6))
        self.filt = pt.Embedding(ROWS, 2, optimizer="sgd", lr=1.0, init_std=0.0, admit_after=2, expire_after=3)
        self.low = pt.Embedding(ROWS, 4, optimizer="sgd", lr=0.5, init_std=0.3, seed=11, fp16_wire=True)
        self.full = pt.Embedding(ROWS, 4, optimizer="sgd", lr=0.5, init_std=0.3, seed=11)


FILTER_IDS = [[1, 2], [1], [5], [5], [5]]  # the filtered table's ids in steps 1 to 5


def options(a, pt):
    """One worker, async with overlap=True and each next batch's rows prefetched: the
    filtered table's rows after steps 2 and 5, the float16 and float32 tables' rows, the
    dense values (each step's gradient is 1: every push must arrive once), and the
    exported model's rows for stored and never stored ids."""
    model = Options(pt)
    opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=1.0, mode="async", overlap=True)
    ids = [torch.tensor([k, ROWS - 1 - k, 3 * k]) for k in range(len(FILTER_IDS) + 1)]
    seen, checked, mismatched = {}, 0, 0
    for k, f in enumerate(FILTER_IDS):
        if k + 1 < len(FILTER_IDS):  # the next batch's rows, looked up while this one computes
            model.filt.prefetch(torch.tensor(FILTER_IDS[k + 1]))
            model.low.prefetch(ids[k + 1])
            model.full.prefetch(ids[k + 1])
        opt.zero_grad()
        coef = torch.sin(torch.arange(12, dtype=torch.float32) + k).reshape(3, 4)
        rows = model.full(ids[k])
        # a prefetched row equals the servers' unless a step in flight since updated it
        with torch.no_grad():
            fresh = model.full(ids[k])
        recent = {int(i) for j in (k - 1, k - 2) if j >= 0 for i in ids[j]}
        for i, row in enumerate(ids[k].tolist()):
            if row not in recent:
                checked += 1
                mismatched += int(not torch.equal(rows[i], fresh[i]))
        loss = (model.w.sum() + model.filt(torch.tensor(f)).sum() + (model.low(ids[k]) * coef).sum()
                + (rows * coef).sum())
        loss.backward()
        opt.step()
        if k + 1 in (2, 5):
            opt.synchronize()
            seen[k + 1] = rows_of(model.filt, [1, 2, 5])
    opt.pull()
    probe = torch.tensor([0, 1, ROWS - 1, 6, 12, 123456789])
    plain, stored = pt.exported(model)
    with torch.no_grad():
        out = {"w": [float(v) for v in model.w], "filt": seen, "half": model.low(probe).tolist(),
               "full": model.full(probe).tolist(), "exported_full": plain.full(probe).tolist(),
               "exported_half": plain.low(probe).tolist(), "exported_filt": plain.filt(torch.tensor([1, 5])).tolist(),
               "stored": stored, "rejected": opt.rejected, "checked": checked, "mismatched": mismatched,
               "hits": [model.filt.prefetch_hits, model.low.prefetch_hits, model.full.prefetch_hits]}
    print("RESULT " + json.dumps(out), flush=True)


HOT_STEPS, HOT_ROWS, HOT_STALENESS = 12, 3, 2


def hot_ids(k):
    """Step k's ids: 0 and 1 every step (the hot rows), 2 every other step, one of 3 to 7
    in turn."""
    return torch.tensor([0, 1, 3 + k % 5] + ([2] if k % 2 == 0 else []))


class Hot(nn.Module):
    """Four tables of the same seed and settings: no cache, a cache of staleness 0, a
    cache of staleness HOT_STALENESS, and one more read through prefetches."""

    def __init__(self, pt):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(2))
        kw = dict(optimizer="adagrad", lr=0.1, init_std=0.3, seed=5)
        self.plain = pt.Embedding(100, 4, **kw)
        self.zero = pt.Embedding(100, 4, hot_cache_rows=HOT_ROWS, hot_cache_staleness=0, **kw)
        self.hot = pt.Embedding(100, 4, hot_cache_rows=HOT_ROWS, hot_cache_staleness=HOT_STALENESS, **kw)
        self.pre = pt.Embedding(100, 4, hot_cache_rows=HOT_ROWS, hot_cache_staleness=HOT_STALENESS, **kw)


def server_rows(opt, emb, ids):
    """Rows `ids` as the servers hold them now (not through the cache)."""
    _, order, rows = opt._tables.lookup(emb._index, np.asarray(ids, dtype=np.int64), cached=False)
    return torch.from_numpy(rows)[torch.from_numpy(order)]


def hot(a, pt):
    """One worker, sync: each step the four tables read the step's ids and take the
    same gradient (the loss is linear in the rows: the gradients do not depend on the
    values read, so every table's rows on the servers must stay equal, whatever a cache
    served). Before each step the servers' rows are recorded; each row a cached table
    read is matched to the latest step whose server value it equals (its age)."""
    model = Hot(pt)
    opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=0.1, mode="sync")
    pool = list(range(8))
    history = {"hot": [], "pre": []}
    ages = {"hot": [], "pre": []}
    zero_equal, unmatched, max_rows, reads = True, 0, {"zero": 0, "hot": 0, "pre": 0}, 0
    for k in range(HOT_STEPS):
        ids = hot_ids(k)
        if k + 1 < HOT_STEPS:  # the next batch's rows, looked up while this one computes
            model.pre.prefetch(hot_ids(k + 1))
        for name in history:
            history[name].append(server_rows(opt, getattr(model, name), pool))
        opt.zero_grad()
        got = {name: getattr(model, name)(ids) for name in ("plain", "zero", "hot", "pre")}
        zero_equal &= torch.equal(got["zero"], got["plain"])
        for name in history:
            for i, row in enumerate(ids.tolist()):
                age = next((k - t for t in range(k, -1, -1) if torch.equal(history[name][t][row], got[name][i])), None)
                if age is None:
                    unmatched += 1
                else:
                    ages[name].append(age)
        reads += len(ids)
        coef = torch.cos(torch.arange(len(ids) * 4, dtype=torch.float32) + k).reshape(len(ids), 4)
        sum(((r * coef).sum() for r in got.values()), model.w.sum()).backward()
        opt.step()
        for name in max_rows:
            max_rows[name] = max(max_rows[name], getattr(model, name).hot_cache_stats["rows"])
    final = {name: server_rows(opt, getattr(model, name), pool).tolist() for name in ("plain", "zero", "hot", "pre")}
    out = {"zero_equal": bool(zero_equal), "unmatched": unmatched, "reads": reads, "max_rows": max_rows,
           "max_age": {n: max(v) for n, v in ages.items()}, "stale_reads": {n: sum(1 for x in v if x > 0)
                                                                            for n, v in ages.items()},
           "stats": {n: getattr(model, n).hot_cache_stats for n in ("zero", "hot", "pre")},
           "plain_stats": model.plain.hot_cache_stats, "prefetch_hits": model.pre.prefetch_hits, "final": final}
    print("RESULT " + json.dumps(out), flush=True)
