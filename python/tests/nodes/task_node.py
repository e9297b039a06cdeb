"""The master's tasks from Python. Scheduler: psrs.Master; servers: a sum KVServer;
workers: `for task in psrs.tasks(...)`, checking each task's records, pushing their
count, and printing `start ID` / `done ID EPOCH N SUM` around each task's body.
--raise-first: worker rank 0 raises in its first task, catches it outside the loop and
goes on with a new loop (the task must be handed out again)."""

import argparse
import time

import numpy as np
import psrs


def work(a):
    kv = psrs.KVWorker(0)
    first = a.raise_first and psrs.rank() == 0
    while True:
        try:
            for task in psrs.tasks(a.train):
                print(f"start {task.id}", flush=True)
                feats, labels = task.records()
                n = len(labels)
                assert feats.shape == (n, 3) and feats.dtype == np.float32, feats.shape
                # the CSV rows are (i % 3, i, i / 2, 1)
                assert np.array_equal(labels, feats[:, 0] % 3), "labels do not match features"
                assert np.array_equal(feats[:, 1], feats[:, 0] / 2)
                if first:
                    first = False
                    raise RuntimeError(f"raised in task {task.id}")
                kv.wait(kv.push(np.array([task.epoch], dtype=np.uint64), np.array([n], np.float32)))
                time.sleep(a.sleep)
                task.report(n, loss_sum=0.5 * n, correct=n // 2)
                print(f"done {task.id} {task.epoch} {n} {int(feats[:, 0].sum())}", flush=True)
            return
        except RuntimeError as e:
            print(e, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--raise-first", action="store_true")
    a = p.parse_args()
    psrs.start()
    keep = None
    if psrs.role() == "scheduler":
        keep = psrs.Master(epochs=a.epochs, task_timeout_ms=20000, max_retries=3)
    elif psrs.role() == "server":
        keep = psrs.KVServer(0, "sum")
    else:
        work(a)
        print(f"worker {psrs.rank()} finished", flush=True)
    psrs.finalize()
    del keep


if __name__ == "__main__":
    main()
