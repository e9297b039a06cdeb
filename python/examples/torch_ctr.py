"""A click-through-rate model in the Criteo layout trained with PyTorch through
psrs.torch: the 26 categorical fields hashed into one embedding table of 10**8 rows x 16
on the servers (rows created as they are trained, so no worker or server holds the
table), the 13 count features and the embeddings into a small MLP.

    python python/examples/ctr_data.py --out data          # data from a planted model
    psrs convert --format csv --input data/train.csv --out data/train.rio --per-chunk 5000
    psrs convert --format csv --input data/test.csv --out data/test.rio
    scripts/local.sh 2 2 python python/examples/torch_ctr.py \\
        --train data/train.rio --test data/test.rio --best-auc "$(cat data/best_auc.txt)"

Worker 0 prints ``final test auc A best B`` (B: the planted model's own AUC on the
test rows, the best any model can reach there). Every worker prints its peak memory
and every server its peak memory and the rows it stores, beside the memory the process
had before it joined the cluster (Python with torch loaded).
"""

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import psrs
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ctr_data import CATEGORICAL, NUMERIC, auc  # noqa: E402


def hashed(cats, rows):
    """Row ids of the categorical fields (n, 26): (field, category) hashed into
    ``rows`` rows (int64 arithmetic: categories are below 2**24)."""
    field = torch.arange(CATEGORICAL, dtype=torch.int64)
    h = (cats + 1) * 0x9E3779B1 + field * 0x85EBCA77
    h = h ^ (h >> 29)
    return torch.remainder(h, rows)


class CTR(nn.Module):
    def __init__(self, emb, hidden):
        super().__init__()
        self.emb = emb
        self.dim = emb.embedding_dim
        self.mlp = nn.Sequential(nn.Linear(NUMERIC + CATEGORICAL * self.dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, ints, ids):
        e = self.emb(ids).reshape(len(ids), CATEGORICAL * self.dim)
        return self.mlp(torch.cat([torch.log1p(ints), e], 1)).squeeze(1)


def split(x, y, rows):
    """Features (n, 39) as the model's inputs and labels."""
    x = torch.from_numpy(x)
    ints = x[:, :NUMERIC].clamp(min=0)
    ids = hashed(x[:, NUMERIC:].to(torch.int64), rows)
    return ints, ids, torch.from_numpy(y)


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def evaluate(model, path, rows):
    x, y = psrs.read_records(path)
    ints, ids, labels = split(x, y, rows)
    model.eval()
    with torch.no_grad():
        scores = torch.cat([model(ints[s:s + 4096], ids[s:s + 4096]) for s in range(0, len(labels), 4096)])
    model.train()
    return auc(scores.numpy(), labels.numpy())


def work(a, pt, joined):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    emb = pt.Embedding(a.rows, a.dim, optimizer="adagrad", lr=a.emb_lr, init_std=0.01)
    model = CTR(emb, a.hidden)
    opt = pt.DistributedOptimizer(model, optimizer="adam", lr=a.lr, mode=a.mode, staleness=a.staleness)
    seen, started = 0, time.monotonic()
    for task in psrs.tasks(a.train):
        x, y = task.records()
        ints, ids, labels = split(x, y, a.rows)
        loss_sum = 0.0
        for s in range(0, len(labels), a.batch):
            opt.zero_grad()
            out = model(ints[s:s + a.batch], ids[s:s + a.batch])
            loss = F.binary_cross_entropy_with_logits(out, labels[s:s + a.batch])
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(out)
        task.report(len(labels), loss_sum)
        seen += len(labels)
    secs = time.monotonic() - started
    me = pt.rank()
    print(f"worker {me}: {seen} samples in {secs:.1f} s ({seen / max(secs, 1e-9):.0f} samples/s), "
          f"peak memory {peak_mib():.0f} MiB ({joined:.0f} MiB before it joined)", flush=True)
    if me == 0 and a.test:
        opt.pull()
        got = evaluate(model, a.test, a.rows)
        best = f" best {a.best_auc:.4f}" if a.best_auc else ""
        print(f"final test auc {got:.4f}{best}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, type=lambda s: s.split(","), help="RecordIO files, comma-separated")
    p.add_argument("--test", help="held-out RecordIO file (worker 0 evaluates on it)")
    p.add_argument("--best-auc", type=float, help="the planted model's test AUC, printed beside")
    p.add_argument("--rows", type=int, default=10**8, help="rows of the embedding table")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--mode", choices=["sync", "async", "bounded"], default="async")
    p.add_argument("--staleness", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.002, help="Adam's learning rate (the MLP)")
    p.add_argument("--emb-lr", type=float, default=0.05, help="Adagrad's learning rate (the embeddings)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per worker (several workers share a machine's cores)")
    a = p.parse_args()
    import psrs.torch as pt

    joined = peak_mib()  # this process before it joined (Python, torch, numpy loaded)
    if pt.init(epochs=a.epochs, chunks_per_task=1):
        work(a, pt, joined)
    elif "version" in pt.server_stats():
        st = pt.server_stats()
        print(f"server {st['rank']}: {st['stored_rows'][0]} rows stored, version {st['version']}, "
              f"peak memory {peak_mib():.0f} MiB ({joined:.0f} MiB before it joined)", flush=True)


if __name__ == "__main__":
    main()
