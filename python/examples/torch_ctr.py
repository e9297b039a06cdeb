"""A DLRM-shaped click-through-rate model in the Criteo layout trained with PyTorch through
psrs.torch: the 26 categorical fields' categories are rows of one embedding table on the
servers (Criteo-Kaggle's 33.8 million rows by default; rows created as they are
trained, so no worker holds the table), the 13 count features go through the bottom
MLP, and the top MLP reads the dot products of every pair of vectors (python/examples/
dlrm.py).

    python python/examples/ctr_data.py --out data --rows 2000000     # planted model
    psrs convert --format csv --input data/train.csv --out data/train.rio --per-chunk 20000
    psrs convert --format csv --input data/test.csv --out data/test.rio
    scripts/local.sh 2 2 python python/examples/torch_ctr.py --train data/train.rio \\
        --test data/test.rio --cardinalities data/cardinalities.txt \\
        --best-auc "$(cat data/best_auc.txt)" --export ctr.pt2

Worker 0 prints ``final test auc A best B`` (B: the planted model's own AUC on the
test rows, the best any model can reach there). With ``--export``, worker 0 writes
the trained model (its dense parameters and the embedding rows the servers store) as a
torch.export program that a jobs cluster's inference job serves
(``psrs job submit infer --torch ctr.pt2 --data data/test.rio``): it takes the
records' 39 features and returns the logits of [no click, click]. Every worker prints
its samples/s and peak memory (and with ``--hot-cache-rows`` its cache's hits and
pulls), every server its peak memory and the rows it stores.
"""

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import psrs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ctr_data import NUMERIC, auc, cardinalities  # noqa: E402

BOTTOM, TOP = "512-256-64", "512-256"  # dlrm.py's (imported on workers only: servers load no torch)


def say(line: str) -> None:
    """Prints `line` in one write: the nodes of a local cluster share one output, and
    print()'s separate write of the newline lets another node's line land between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def split(x, y):
    """Records (n, 39) as the model's inputs (counts, categories) and the labels."""
    import torch

    x = torch.from_numpy(x)
    return x[:, :NUMERIC].clamp(min=0), x[:, NUMERIC:].to(torch.int64), torch.from_numpy(y)


def serving(model):
    """The trained model as an inference job calls it: records (n, 39) float32 to the
    logits of [no click, click] (n, 2), whose softmax is the click probability."""
    import torch
    from torch import nn

    class Serve(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            logit = self.model(x[:, :NUMERIC].clamp(min=0), x[:, NUMERIC:].to(torch.int64))
            return torch.stack([torch.zeros_like(logit), logit], 1)

    return Serve()


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scores(model, ints, cats, batch=8192):
    import torch

    model.eval()
    with torch.no_grad():
        out = torch.cat([model(ints[s:s + batch], cats[s:s + batch]) for s in range(0, len(ints), batch)])
    model.train()
    return out


def batches(ints, cats, labels, size):
    return [(ints[s:s + size], cats[s:s + size], labels[s:s + size]) for s in range(0, len(labels), size)]


def work(a, pt, cards, joined):
    import torch
    import torch.nn.functional as F
    from dlrm import DLRM, sizes

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    emb = pt.Embedding(max(sum(cards), a.table_rows), a.dim, optimizer=a.emb_optimizer, lr=a.emb_lr, init_std=a.init_std,
                       admit_after=a.admit_after, expire_after=a.expire_after, fp16_wire=a.fp16_wire,
                       hot_cache_rows=a.hot_cache_rows, hot_cache_staleness=a.hot_cache_staleness)
    model = DLRM(emb, cards, a.dim, sizes(a.bottom), sizes(a.top))
    opt = pt.DistributedOptimizer(model, optimizer="adam", lr=a.lr, mode=a.mode, staleness=a.staleness,
                                  overlap=a.overlap and a.mode != "sync")
    prefetch = a.prefetch and a.mode != "sync"
    seen, started = 0, time.monotonic()
    for task in psrs.tasks(a.train):
        x, y = task.records()
        todo = batches(*split(x, y), a.batch)
        loss_sum = 0.0
        for i, (ints, cats, labels) in enumerate(todo):
            if prefetch and i + 1 < len(todo):
                emb.prefetch(todo[i + 1][1] + model.offsets)  # looked up while this batch computes
            opt.zero_grad()
            out = model(ints, cats)
            loss = F.binary_cross_entropy_with_logits(out, labels)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(out)
        task.report(len(y), loss_sum)
        seen += len(y)
    opt.synchronize()
    secs = time.monotonic() - started
    me = pt.rank()
    say(f"worker {me}: {seen} samples in {secs:.1f} s ({seen / max(secs, 1e-9):.0f} samples/s), "
        f"peak memory {peak_mib():.0f} MiB ({joined:.0f} MiB before it joined)")
    if emb.hot_cache_stats is not None:
        st = emb.hot_cache_stats
        say(f"worker {me}: hot-row cache {st['hits']} hits {st['pulls']} pulls {st['rows']} rows "
            f"{st['evictions']} evictions")
    pt.barrier()  # every worker's gradients are in
    if me != 0:
        return
    opt.pull()
    if a.test:
        ints, cats, labels = split(*psrs.read_records(a.test))
        logits = scores(model, ints, cats)
        got = auc(logits.numpy(), labels.numpy())
        best = f" best {a.best_auc:.4f}" if a.best_auc else ""
        say(f"final test auc {got:.6f}{best}")
        if a.test_scores:
            np.save(a.test_scores, torch.sigmoid(logits).numpy())
    if a.export:
        example = torch.zeros(4, NUMERIC + len(cards))
        rows = pt.export(serving(model), a.export, (example,))
        say(f"exported {a.export}: {rows} embedding rows")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, type=lambda s: s.split(","), help="RecordIO files, comma-separated")
    p.add_argument("--test", help="held-out RecordIO file (worker 0 evaluates on it)")
    p.add_argument("--best-auc", type=float, help="the planted model's test AUC, printed beside")
    p.add_argument("--cardinalities", help="categories per field: a file (ctr_data.py's cardinalities.txt) "
                   "or a comma-separated list (default: Criteo-Kaggle's, times --scale)")
    p.add_argument("--scale", type=float, default=1.0, help="Criteo-Kaggle's cardinalities times this")
    p.add_argument("--table-rows", type=int, default=0,
                   help="rows of the embedding table if more than the cardinalities' sum (up to 2**40): "
                        "the servers still store only the rows trained")
    p.add_argument("--dim", type=int, default=16, help="embedding width")
    p.add_argument("--bottom", default=BOTTOM, help="hidden widths of the bottom MLP")
    p.add_argument("--top", default=TOP, help="hidden widths of the top MLP")
    p.add_argument("--mode", choices=["sync", "async", "bounded"], default="async")
    p.add_argument("--staleness", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--lr", type=float, default=0.001, help="Adam's learning rate (the MLPs)")
    p.add_argument("--emb-optimizer", choices=["adagrad", "adam", "sgd"], default="adagrad")
    p.add_argument("--emb-lr", type=float, default=0.05, help="the embeddings' learning rate")
    p.add_argument("--init-std", type=float, default=0.01, help="deviation of the rows' initial values")
    p.add_argument("--admit-after", type=int, default=1, help="rows created once seen in this many steps")
    p.add_argument("--expire-after", type=int, default=0, help="rows dropped after this many steps untouched")
    p.add_argument("--fp16-wire", action="store_true", help="rows and their gradients travel as float16")
    p.add_argument("--hot-cache-rows", type=int, default=0,
                   help="each worker caches this many of its most looked-up rows (0: no cache)")
    p.add_argument("--hot-cache-staleness", type=int, default=4,
                   help="a cached row is served for this many steps after its pull")
    p.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                   help="look each batch's rows up when it starts (async and bounded prefetch the next one's)")
    p.add_argument("--export", help="worker 0 writes the trained model here (a torch.export .pt2 program)")
    p.add_argument("--test-scores", help="worker 0 writes the test rows' click probabilities here (.npy)")
    p.add_argument("--no-overlap", dest="overlap", action="store_false",
                   help="async and bounded steps wait for their push (default: it runs while the next batch computes)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per worker (several workers share a machine's cores)")
    a = p.parse_args()
    if a.cardinalities:
        text = Path(a.cardinalities).read_text() if Path(a.cardinalities).exists() else a.cardinalities
        cards = [int(c) for c in text.replace("\n", "").split(",") if c]
    else:
        cards = cardinalities(a.scale)
    import psrs.torch as pt

    joined = peak_mib()  # this process before it joined (Python, torch, numpy loaded)
    if pt.init(epochs=a.epochs, chunks_per_task=1):
        work(a, pt, cards, joined)
    elif "version" in pt.server_stats():
        st = pt.server_stats()
        say(f"server {st['rank']}: {st['stored_rows'][0]} rows stored, version {st['version']}, "
            f"peak memory {peak_mib():.0f} MiB ({joined:.0f} MiB before it joined)")


if __name__ == "__main__":
    main()
