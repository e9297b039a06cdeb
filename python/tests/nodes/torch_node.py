"""psrs.torch nodes for the tests: the same script in every role (scenarios in
torch_work.py, which workers import: the scheduler and servers never load torch)."""

import argparse
import sys

import psrs.torch as pt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", required=True,
                   choices=["exact", "mismatch", "count", "replay", "stale", "options", "hot"])
    p.add_argument("--mode", default="sync")
    p.add_argument("--optimizers", default="sgd")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--train")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--work-dir")
    p.add_argument("--pause-at", type=int, default=0)
    p.add_argument("--resume")
    p.add_argument("--staleness", type=int, default=2)
    p.add_argument("--lags", default="")
    p.add_argument("--closure-rounds", default="")
    p.add_argument("--handshake")
    a = p.parse_args()
    if not pt.init(epochs=a.epochs, work_dir=a.work_dir, checkpoint_every=1, task_timeout_ms=20000):
        st = pt.server_stats()
        if "version" in st:
            print(f"server {st['rank']} version {st['version']} rows {st['stored_rows']}", flush=True)
        return
    import torch
    import torch_work

    torch.set_num_threads(1)
    getattr(torch_work, a.scenario)(a, pt)


if __name__ == "__main__":
    sys.exit(main())
