"""The Criteo-shaped CTR workload of torch_vs_ddp.py, trained by each system it compares:
one process of one configuration per call of a ``run_*`` function (the driver starts
them). Every system trains python/examples/dlrm.py's DLRM on the same stream of data
from python/examples/ctr_data.py's planted model (worker r draws its own batches from
seed 100 + r), with the same optimizers: Adagrad on the embedding rows, Adam on the
MLPs. Each process prints MEASURE lines (see torch_vs_ddp.report): its samples/s
after the warm-up steps, its peak memory and role, and worker 0 (rank 0) the test AUC
after every sample was trained, beside the planted model's (the best reachable).
"""

import itertools
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "examples"))

EMB_LR, MLP_LR, INIT_STD, DIM = 0.05, 0.001, 0.01, 16
TEST_ROWS = 100_000


def setup(a):
    """The cardinalities and the planted model of the run."""
    from ctr_data import Planted, cardinalities

    cards = cardinalities(a.scale)
    return cards, Planted(cards)


def rank_setup(a, rank):
    """A worker or rank process's start: one torch thread, torch's seed 1, and the
    run's cardinalities, planted model and this rank's batches."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(1)
    cards, planted = setup(a)
    return cards, planted, make_batches(planted, rank, a.samples, a.batch)


def make_batches(planted, rank, samples, batch):
    """This rank's batches: (counts float32 (b, 13), categories int32 (b, 26), labels
    float32 (b,)), drawn before training (not timed)."""
    import numpy as np
    import torch

    rng = np.random.default_rng(100 + rank)
    labels, ints, cats, _ = planted.sample(samples, rng)
    ints = torch.from_numpy(ints.astype(np.float32))
    cats = torch.from_numpy(cats.astype(np.int32))
    labels = torch.from_numpy(labels.astype(np.float32))
    return [(ints[s:s + batch], cats[s:s + batch], labels[s:s + batch]) for s in range(0, samples, batch)]


def test_auc(planted, predict):
    """The AUC of ``predict(counts, categories) -> logits`` on the test rows (drawn
    from seed 99), and the planted model's there."""
    import numpy as np
    import torch
    from ctr_data import auc

    labels, ints, cats, p = planted.sample(TEST_ROWS, np.random.default_rng(99))
    ints, cats = torch.from_numpy(ints.astype(np.float32)), torch.from_numpy(cats)
    with torch.no_grad():
        out = torch.cat([predict(ints[s:s + 8192], cats[s:s + 8192]) for s in range(0, TEST_ROWS, 8192)])
    return auc(out.numpy(), labels), auc(p, labels)


def train(batches, step, warmup):
    """Runs ``step(batch, next batch or None)`` over every batch; samples/s after the
    first ``warmup`` batches."""
    n, start = 0, None
    for i, b in enumerate(batches):
        if i == warmup:
            start = time.perf_counter()
        step(b, batches[i + 1] if i + 1 < len(batches) else None)
        if start is not None:
            n += len(b[-1])
    return n / max(time.perf_counter() - start, 1e-9) if start is not None else 0.0


def dlrm(emb, cards, a):
    from dlrm import DLRM, sizes

    return DLRM(emb, cards, DIM, sizes(a.bottom), sizes(a.top))


def torch_dlrm(cards, a, sparse=True):
    """The torch baselines' model: every field's rows in one nn.Embedding (values
    normal(0, INIT_STD); a sparse gradient unless ``sparse`` is False) inside the
    DLRM. Returns (the embedding, the model)."""
    from torch import nn

    emb = nn.Embedding(sum(cards), DIM, sparse=sparse)
    nn.init.normal_(emb.weight, 0.0, INIT_STD)
    return emb, dlrm(emb, cards, a)


def loss_of(model, b):
    import torch
    import torch.nn.functional as F

    ints, cats, y = b
    return F.binary_cross_entropy_with_logits(model(ints, cats.to(torch.int64)), y)


def run_psrs(a, report):
    import psrs.torch as pt

    if not pt.init():
        report("psrs", 0.0, role="server" if "version" in pt.server_stats() else "scheduler")
        return
    import torch

    rank = pt.rank()
    cards, planted, batches = rank_setup(a, rank)
    emb = pt.Embedding(max(sum(cards), a.table_rows), DIM, optimizer="adagrad", lr=EMB_LR, init_std=INIT_STD,
                       fp16_wire=a.fp16, hot_cache_rows=a.hot_cache_rows, hot_cache_staleness=a.hot_cache_staleness)
    model = dlrm(emb, cards, a)
    overlap = a.mode != "sync" and not a.no_overlap
    opt = pt.DistributedOptimizer(model, optimizer="adam", lr=MLP_LR, mode=a.mode, overlap=overlap)

    def step(b, nxt):
        if overlap and nxt is not None:
            emb.prefetch(nxt[1].to(torch.int64) + model.offsets)  # looked up while b computes
        opt.zero_grad()
        loss_of(model, b).backward()
        opt.step()

    rate = train(batches, step, a.warmup)
    opt.synchronize()
    cache = emb.hot_cache_stats
    report("psrs", rate, **({} if cache is None else {"cache_hits": cache["hits"], "cache_pulls": cache["pulls"]}))
    pt.barrier()
    if rank == 0:
        opt.pull()
        model.eval()
        got, best = test_auc(planted, model)
        report("psrs", rate, auc=got, best_auc=best)


def run_ddp(a, report, rank, port):
    """One DDP rank (gloo): the table as nn.Embedding(sparse=True) (or dense with
    --dense-grad: DDP allreduces the whole table's gradient every step)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    cards, planted, batches = rank_setup(a, rank)
    emb, inner = torch_dlrm(cards, a, sparse=not a.dense_grad)
    # a dense table's gradient shares DDP's buckets (one 2.2 GB copy fewer per rank)
    model = DDP(inner, gradient_as_bucket_view=a.dense_grad)
    step = torch_step(model, emb, inner)

    what = "ddp-dense" if a.dense_grad else "ddp"
    rate = train(batches, step, a.warmup)
    report(what, rate, role="rank")
    if rank == 0 and not a.dense_grad:
        inner.eval()
        got, best = test_auc(planted, inner)
        report(what, rate, role="rank", auc=got, best_auc=best)
    dist.destroy_process_group()


def run_alone(a, report, rank, port):
    """One of --procs processes that train the DDP rank's model and step alone: no
    process group, nothing communicated, each its own table and MLPs on its own
    batches. The sum of their rates is DDP's arithmetic without its allreduce: the
    rate DDP would reach were its communication free. Their models are not one
    model, so no AUC."""
    cards, planted, batches = rank_setup(a, rank)
    emb, model = torch_dlrm(cards, a)
    report("alone", train(batches, torch_step(model, emb, model), a.warmup), role="rank")


def run_bound(a, report, rank, port):
    """One of --procs processes that run only what no system can leave out of a step:
    the MLPs' and the dot interaction's forward and backward, on the batch's counts and
    embeddings already in memory (no lookup, no optimizer, nothing communicated). The
    sum of their rates bounds every configuration's on this machine with this model."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    cards, planted, batches = rank_setup(a, rank)
    model = dlrm(nn.Identity(), cards, a)
    looked_up = [torch.randn(a.batch, len(cards), DIM) * INIT_STD for _ in range(32)]
    steps = itertools.count()

    def step(b, _):
        ints, _, y = b
        e = looked_up[next(steps) % len(looked_up)][:len(y)].detach().requires_grad_(True)
        model.zero_grad()
        F.binary_cross_entropy_with_logits(model.interact(model.bottom(torch.log1p(ints)), e), y).backward()

    report("bound", train(batches, step, a.warmup), role="rank")


def torch_step(model, emb, inner):
    """One training step of the torch baselines: Adagrad on the embedding's rows, Adam
    on `inner`'s other parameters (the MLPs), the loss of `model` (`inner` or its DDP
    wrapper)."""
    import torch

    opts = [torch.optim.Adagrad(emb.parameters(), lr=EMB_LR),
            torch.optim.Adam([p for n, p in inner.named_parameters() if not n.startswith("emb.")], lr=MLP_LR)]

    def step(b, _):
        for o in opts:
            o.zero_grad()
        loss_of(model, b).backward()
        for o in opts:
            o.step()
    return step


def run_single(a, report):
    """One process, every core's torch threads, the workers' samples all together."""
    import torch

    torch.manual_seed(1)
    cards, planted = setup(a)
    batches = make_batches(planted, 0, a.samples * a.procs, a.batch * a.procs)
    emb, model = torch_dlrm(cards, a)
    step = torch_step(model, emb, model)

    rate = train(batches, step, a.warmup)
    report("single", rate, role="process")
    model.eval()
    got, best = test_auc(planted, model)
    report("single", rate, role="process", auc=got, best_auc=best)


def run_torchrec(a, report, rank, port):
    """One TorchRec rank (gloo, CPU): the 26 fields as 26 tables of an
    EmbeddingBagCollection sharded table-wise over the ranks (TorchRec on CPU
    allows no row-wise sharding), trained by FBGEMM's fused
    Adagrad in the backward pass; the MLPs by Adam under DDP (DistributedModelParallel
    wraps them)."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torchrec import EmbeddingBagCollection, EmbeddingBagConfig, KeyedJaggedTensor
    from torchrec.distributed import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
    from torchrec.distributed.types import ShardingType
    from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
    from torchrec.optim.keyed import KeyedOptimizerWrapper
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(a.procs), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(a.procs))
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    cards, planted, batches = rank_setup(a, rank)
    names = [f"c{f}" for f in range(len(cards))]
    tables = [EmbeddingBagConfig(name=f"t{f}", embedding_dim=DIM, num_embeddings=n, feature_names=[names[f]],
                                 init_fn=lambda w: nn.init.normal_(w, 0.0, INIT_STD))
              for f, n in enumerate(cards)]
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
    apply_optimizer_in_backward(torch.optim.Adagrad, ebc.parameters(), {"lr": EMB_LR})

    class Sharded(nn.Module):
        """The DLRM with the collection's pooled embeddings in place of its lookup."""

        def __init__(self):
            super().__init__()
            self.ebc = ebc
            self.dense = dlrm(nn.Identity(), cards, a)

        def forward(self, ints, kjt):
            x = self.dense.bottom(torch.log1p(ints))
            pooled = self.ebc(kjt).to_dict()
            e = torch.stack([pooled[n] for n in names], 1)
            return self.dense.interact(x, e)

    model = Sharded()
    constraints = {f"t{f}": ParameterConstraints(sharding_types=[ShardingType.TABLE_WISE.value])
                   for f in range(len(cards))}
    planner = EmbeddingShardingPlanner(topology=Topology(world_size=a.procs, compute_device="cpu"),
                                       constraints=constraints)
    plan = planner.collective_plan(model, pg=dist.GroupMember.WORLD)
    dmp = DistributedModelParallel(module=model, device=torch.device("cpu"), plan=plan)
    dense_opt = KeyedOptimizerWrapper(dict(in_backward_optimizer_filter(dmp.named_parameters())),
                                      lambda ps: torch.optim.Adam(ps, lr=MLP_LR))

    def kjt_of(cats):
        b = cats.shape[0]
        return KeyedJaggedTensor.from_lengths_sync(keys=names, values=cats.t().reshape(-1).to(torch.int64),
                                                   lengths=torch.ones(b * len(names), dtype=torch.int32))

    import torch.nn.functional as F

    def step(b, _):
        ints, cats, y = b
        dense_opt.zero_grad()
        F.binary_cross_entropy_with_logits(dmp(ints, kjt_of(cats)), y).backward()
        dense_opt.step()

    rate = train(batches, step, a.warmup)
    report("torchrec", rate, role="rank")
    # every rank evaluates (the lookups are collective); rank 0 reports
    dmp.eval()
    got, best = test_auc(planted, lambda ints, cats: dmp(ints, kjt_of(cats)))
    if rank == 0:
        report("torchrec", rate, role="rank", auc=got, best_auc=best)
    dist.destroy_process_group()
