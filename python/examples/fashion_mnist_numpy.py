"""Softmax regression on Fashion-MNIST, written in numpy, trained on psrs.

Run every node with the same command (the scheduler serves the master's tasks, the
servers keep the parameters and apply each pushed gradient at once, the workers train
through the tasks):

    psrs convert --format idx --input train-images-idx3-ubyte.gz \
        --labels train-labels-idx1-ubyte.gz --out train.rio       # and t10k.rio
    scripts/local.sh 2 2 .venv/bin/python python/examples/fashion_mnist_numpy.py \
        --train train.rio --test t10k.rio --epochs 2 --lr 0.025 --batch 64

It is the algorithm of `psrs train --model softmax --mode async` with the same
settings: zero initial parameters (weights ``classes x dim`` row by row, then the
biases), minibatches of the mean cross-entropy gradient, each pushed and applied as
``params -= lr * grad``, the parameters pulled again before every minibatch. Worker 0
prints ``final test accuracy A log-loss L`` (the line `psrs train` prints) once the job
is complete.
"""

import argparse
import sys
import time

import numpy as np
import psrs


def say(line: str) -> None:
    """Prints `line` in one write: the nodes of a local cluster share one output, and
    print()'s separate write of the newline lets another node's line land between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def param_keys(num_params):
    """Keys of the flat parameter vector, spread evenly over the servers' key ranges
    (sorted: the ranges are in key order)."""
    ranges = psrs.server_key_ranges()
    per = -(-num_params // len(ranges))
    parts = []
    for i, (begin, _end) in enumerate(ranges):
        n = max(0, min(per, num_params - i * per))
        parts.append(np.uint64(begin) + np.arange(n, dtype=np.uint64))
    return np.concatenate(parts)


class Softmax:
    """Softmax regression from ``dim`` features to ``classes`` classes over a flat
    float32 parameter vector: W (classes x dim, row-major), then b (classes)."""

    def __init__(self, dim, classes):
        self.dim, self.classes = dim, classes
        self.num_params = classes * dim + classes

    def split(self, params):
        w = params[: self.classes * self.dim].reshape(self.classes, self.dim)
        return w, params[self.classes * self.dim:]

    def probs(self, params, x):
        w, b = self.split(params)
        z = x @ w.T + b
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        return z

    def loss_and_grad(self, params, x, y):
        """Mean loss, correct predictions and the mean gradient on ``(x, y)``."""
        p = self.probs(params, x)
        n = len(y)
        rows = np.arange(n)
        loss = float(-np.log(np.maximum(p[rows, y], 1e-30)).sum()) / n
        correct = int((p.argmax(axis=1) == y).sum())
        p[rows, y] -= 1.0
        grad = np.empty(self.num_params, dtype=np.float32)
        gw, gb = self.split(grad)
        np.matmul(p.T, x, out=gw)
        gw /= n
        gb[:] = p.sum(axis=0) / n
        return loss, correct, grad

    def evaluate(self, params, x, y):
        """(accuracy, mean log-loss) on ``(x, y)``."""
        p = self.probs(params, x)
        rows = np.arange(len(y))
        acc = float((p.argmax(axis=1) == y).mean())
        return acc, float(-np.log(np.maximum(p[rows, y], 1e-7)).mean())


def labels_of(y, classes):
    return np.clip(y, 0, classes - 1).astype(np.int64)


def work(a):
    test = psrs.read_records(a.test) if a.test and psrs.rank() == 0 else None
    model = keys = params = None
    kv = psrs.KVWorker(0, np.float32)
    tasks, started = 0, time.monotonic()
    for task in psrs.tasks(a.train):
        x, y = task.records()
        if model is None:
            # every worker sizes the model alike: --dim, else the data's
            model = Softmax(a.dim or x.shape[1], a.classes)
            keys = param_keys(model.num_params)
            params = np.zeros(model.num_params, dtype=np.float32)
        if x.shape[1] != model.dim:
            raise ValueError(f"task {task.id}: {x.shape[1]} features, the model takes {model.dim}")
        y = labels_of(y, a.classes)
        loss_sum, correct = 0.0, 0
        for s in range(0, len(y), a.batch):
            xb, yb = x[s:s + a.batch], y[s:s + a.batch]
            kv.wait(kv.pull(keys, out=params))
            loss, ok, grad = model.loss_and_grad(params, xb, yb)
            kv.wait(kv.push(keys, grad))
            loss_sum += loss * len(yb)
            correct += ok
        task.report(len(y), loss_sum, correct)
        tasks += 1
    say(f"worker {psrs.node_id()} trained {tasks} tasks in {time.monotonic() - started:.1f} s")
    if test is not None:
        tx, ty = test
        if model is None:
            model = Softmax(a.dim or tx.shape[1], a.classes)
            keys = param_keys(model.num_params)
            params = np.zeros(model.num_params, dtype=np.float32)
        kv.wait(kv.pull(keys, out=params))
        acc, logloss = model.evaluate(params, tx, labels_of(ty, a.classes))
        say(f"final test accuracy {acc:.4f} log-loss {logloss:.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, type=lambda s: s.split(","), help="RecordIO files, comma-separated")
    p.add_argument("--test", help="held-out RecordIO file (worker 0 evaluates on it)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.025)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--dim", type=int, help="input features (default: the data's)")
    p.add_argument("--task-timeout-ms", type=int, default=10000)
    a = p.parse_args()
    if a.batch <= 0 or a.epochs <= 0 or not a.lr > 0:
        sys.exit("--batch, --epochs and --lr must be above 0")
    psrs.start()
    keep = None
    if psrs.role() == "scheduler":
        keep = psrs.Master(epochs=a.epochs, task_timeout_ms=a.task_timeout_ms)
    elif psrs.role() == "server":
        keep = psrs.KVServer(0, "sgd", lr=a.lr)
    else:
        work(a)
    psrs.finalize()
    del keep


if __name__ == "__main__":
    main()
