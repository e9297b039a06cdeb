"""A small CNN on Fashion-MNIST trained with PyTorch through psrs.torch.

Run every node with the same command: the scheduler serves the master's tasks, the
servers keep the parameters and run SGD with momentum, the workers train on the tasks
(a dead worker's task is trained again by another):

    psrs convert --format idx --input train-images-idx3-ubyte.gz \\
        --labels train-labels-idx1-ubyte.gz --out train.rio --per-chunk 1000   # and t10k.rio
    scripts/local.sh 2 2 python python/examples/torch_fashion_mnist.py \\
        --train train.rio --test t10k.rio --mode sync

Worker 0 prints ``final test accuracy A`` once the job is complete. ``--single`` trains
the same model the same way in one plain PyTorch process (``torch.optim.SGD``, no
cluster): with N sync workers each version averages N minibatches of ``--batch``, one
from each of N tasks trained side by side, so the single process takes the data in
groups of N consecutive tasks of ``--task-size`` records (the ``--per-chunk`` of the
conversion) and steps on N minibatches at once, one from each (``--workers N``,
default 2).
"""

import argparse
import resource
import sys
import time

import numpy as np
import psrs
import torch
import torch.nn.functional as F
from torch import nn


class CNN(nn.Module):
    """Two convolutions, two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = nn.Conv2d(8, 16, 5, padding=2)
        self.fc1 = nn.Linear(16 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x.reshape(-1, 1, 28, 28))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def say(line: str) -> None:
    """Prints `line` in one write: the nodes of a local cluster share one output, and
    print()'s separate write of the newline lets another node's line land between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def batches(x, y, size):
    for s in range(0, len(y), size):
        yield torch.from_numpy(x[s:s + size]), torch.from_numpy(y[s:s + size])


def labels_of(y):
    return np.clip(y, 0, 9).astype(np.int64)


def train_batch(model, opt, xb, yb):
    opt.zero_grad()
    out = model(xb)
    loss = F.cross_entropy(out, yb)
    loss.backward()
    opt.step()
    return loss.item() * len(yb), int((out.argmax(1) == yb).sum())


def accuracy(model, path):
    x, y = psrs.read_records(path)
    model.eval()
    with torch.no_grad():
        pred = torch.cat([model(xb).argmax(1) for xb, _ in batches(x, labels_of(y), 1000)])
    model.train()
    return float((pred.numpy() == labels_of(y)).mean())


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def single(a):
    """One plain PyTorch process: the same model, optimizer and passes."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    x, y = psrs.read_records(a.train)
    x, y = torch.from_numpy(x), torch.from_numpy(labels_of(y))
    group = a.task_size * a.workers
    started, seen = time.monotonic(), 0
    for _ in range(a.epochs):
        for g in range(0, len(y), group):
            tasks = [range(t, min(t + a.task_size, len(y))) for t in range(g, min(g + group, len(y)), a.task_size)]
            for s in range(0, a.task_size, a.batch):
                idx = torch.cat([torch.arange(t.start + s, min(t.start + s + a.batch, t.stop))
                                 for t in tasks if t.start + s < t.stop])
                train_batch(model, opt, x[idx], y[idx])
                seen += len(idx)
    secs = time.monotonic() - started
    say(f"single process: {seen} samples in {secs:.1f} s ({seen / secs:.0f} samples/s)")
    say(f"final test accuracy {accuracy(model, a.test):.4f}")


def work(a, pt):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)  # worker 0's initial values are the ones trained
    model = CNN()
    opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=a.lr, momentum=a.momentum, mode=a.mode,
                                  staleness=a.staleness)
    tasks, seen, started = 0, 0, time.monotonic()
    for task in psrs.tasks(a.train):
        x, y = task.records()
        loss_sum, correct = 0.0, 0
        for xb, yb in batches(x, labels_of(y), a.batch):
            l, c = train_batch(model, opt, xb, yb)
            loss_sum += l
            correct += c
        task.report(len(y), loss_sum, correct)
        tasks += 1
        seen += len(y)
    secs = time.monotonic() - started
    me = pt.rank()
    say(f"worker {me} trained {tasks} tasks, {seen} samples in {secs:.1f} s ({seen / secs:.0f} samples/s), "
        f"{opt.rejected} gradients rejected, peak memory {peak_mib():.0f} MiB")
    if me == 0 and a.test:
        opt.pull()  # the others' last steps
        say(f"final test accuracy {accuracy(model, a.test):.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, type=lambda s: s.split(","), help="RecordIO files, comma-separated")
    p.add_argument("--test", help="held-out RecordIO file (worker 0 evaluates on it)")
    p.add_argument("--mode", choices=["sync", "async", "bounded"], default="sync")
    p.add_argument("--staleness", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per process (several workers share a machine's cores; more "
                        "threads than free cores make torch's spinning threads wait on each other)")
    p.add_argument("--single", action="store_true", help="train in this one process, without psrs")
    p.add_argument("--workers", type=int, default=2, help="--single: the sync workers it stands for")
    p.add_argument("--task-size", type=int, default=1000, help="--single: records per task (chunk)")
    a = p.parse_args()
    if a.batch <= 0 or a.epochs <= 0 or not a.lr > 0 or a.workers <= 0 or a.task_size <= 0:
        sys.exit("--batch, --epochs, --lr, --workers and --task-size must be above 0")
    if a.single:
        if len(a.train) != 1 or not a.test:
            sys.exit("--single takes one --train file and a --test file")
        a.train = a.train[0]
        single(a)
        return
    import psrs.torch as pt

    if pt.init(epochs=a.epochs):
        work(a, pt)
    elif "version" in pt.server_stats():
        st = pt.server_stats()
        say(f"server {st['rank']} at version {st['version']}, peak memory {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
