"""psrs.torch against what a user would pick instead, in one run on one machine: the
configurations alternate within each round, for --rounds rounds, and the medians of
their samples/s are printed (python/bench/torch_vs_ddp.sh runs this).

- cnn (the Fashion-MNIST CNN of python/examples/torch_fashion_mnist.py, batch 64 per
  worker): psrs sync and async with 1 and 2 servers and 2 workers, against
  torch.nn.parallel.DistributedDataParallel over gloo with 2 processes, and one
  process alone.
- ctr (python/examples/torch_ctr.py's model, batch 256 per worker, data from the
  planted model with --vocab categories per field): psrs (async, 2 servers, 2 workers)
  against DDP with 2 processes, each holding the whole table as an ordinary
  nn.Embedding (DDP allreduces its dense gradient every step), at the largest table
  DDP can hold here (--ddp-rows, default from the memory available: the table, its
  gradient, Adagrad's state and DDP's gradient bucket in each process, using at most
  half of MemAvailable), and psrs alone at 10**8 rows.

Every process trains on data already in memory (no task queue: the figures are the
training step's), one torch thread per worker process (two processes fill the two
cores here; one process alone uses every core). A run's samples/s is the sum over its
workers of samples trained after --warmup steps divided by the time they took. Peak
memory (ru_maxrss) of every process is printed too.

    python python/bench/torch_vs_ddp.py [--rounds 3] [--only cnn|ctr]
"""

import argparse
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "python" / "examples"
sys.path.insert(0, str(EXAMPLES))


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------- the workloads


def cnn_model():
    from torch_fashion_mnist import CNN

    return CNN()


def cnn_batches(rank, workers, batch, steps):
    """Fashion-MNIST-shaped random batches (the rate does not depend on the pixels)."""
    import torch

    g = torch.Generator().manual_seed(rank)
    x = torch.rand(steps, batch, 784, generator=g)
    y = torch.randint(0, 10, (steps, batch), generator=g)
    return [(x[i], y[i]) for i in range(steps)]


def cnn_step(model, opt, batch):
    import torch.nn.functional as F

    x, y = batch
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def ctr_batches(rank, workers, batch, steps, vocab, rows):
    import numpy as np
    import torch
    from ctr_data import Planted
    from torch_ctr import hashed

    model = Planted(vocab, 1.1, 0.7, 7)
    rng = np.random.default_rng(100 + rank)
    out = []
    for _ in range(steps):
        labels, ints, cats, _ = model.sample(batch, rng)
        out.append((torch.from_numpy(ints.astype(np.float32)), hashed(torch.from_numpy(cats), rows),
                    torch.from_numpy(labels.astype(np.float32))))
    return out


def ctr_step(model, opts, batch):
    import torch.nn.functional as F

    ints, ids, y = batch
    for o in opts:
        o.zero_grad()
    F.binary_cross_entropy_with_logits(model(ints, ids), y).backward()
    for o in opts:
        o.step()


def timed(step, batches, warmup):
    """Runs every batch; samples/s after the warmup."""
    for b in batches[:warmup]:
        step(b)
    start = time.perf_counter()
    n = 0
    for b in batches[warmup:]:
        step(b)
        n += len(b[-1])
    return n / (time.perf_counter() - start)


def report(what, rate, role="worker"):
    # one write(2) of the whole line: the processes of a run share one pipe, and print()
    # writes the text and its newline apart, so two processes' lines could interleave
    line = f"MEASURE {json.dumps({'what': what, 'rate': rate, 'role': role, 'peak_mib': peak_mib()})}\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())


# ---------------------------------------------------------------- the systems


def run_single(a):
    import torch

    torch.manual_seed(1)
    if a.model == "cnn":
        model = cnn_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        rate = timed(lambda b: cnn_step(model, opt, b), cnn_batches(0, 1, a.batch, a.steps + a.warmup), a.warmup)
    else:
        raise SystemExit("--system single: cnn only")
    report("single", rate)


def run_psrs(a):
    import psrs.torch as pt

    if not pt.init():
        report("psrs", 0.0, role="server" if "version" in pt.server_stats() else "scheduler")
        return
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(1)
    r, n = pt.rank(), pt.num_workers()
    if a.model == "cnn":
        model = cnn_model()
        opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=0.05, momentum=0.9, mode=a.mode)
        batches = cnn_batches(r, n, a.batch, a.steps + a.warmup)
        rate = timed(lambda b: cnn_step(model, opt, b), batches, a.warmup)
    else:
        from torch_ctr import CTR

        emb = pt.Embedding(a.rows, 16, optimizer="adagrad", lr=0.05, init_std=0.01)
        model = CTR(emb, 64)
        opt = pt.DistributedOptimizer(model, optimizer="adam", lr=0.002, mode=a.mode)
        batches = ctr_batches(r, n, a.batch, a.steps + a.warmup, a.vocab, a.rows)
        rate = timed(lambda b: ctr_step(model, [opt], b), batches, a.warmup)
    report("psrs", rate)


def ddp_proc(rank, a, port):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if a.model == "cnn":
        model = DDP(cnn_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        rate = timed(lambda b: cnn_step(model, opt, b), cnn_batches(rank, a.procs, a.batch, a.steps + a.warmup),
                     a.warmup)
    else:
        from torch_ctr import CTR

        emb = nn.Embedding(a.rows, 16)
        nn.init.normal_(emb.weight, 0.0, 0.01)
        inner = CTR(emb, 64)
        model = DDP(inner)
        opts = [torch.optim.Adagrad(emb.parameters(), lr=0.05), torch.optim.Adam(inner.mlp.parameters(), lr=0.002)]
        batches = ctr_batches(rank, a.procs, a.batch, a.steps + a.warmup, a.vocab, a.rows)
        rate = timed(lambda b: ctr_step(model, opts, b), batches, a.warmup)
    report("ddp", rate)
    dist.destroy_process_group()


def run_ddp(a):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(ddp_proc, args=(a, port), nprocs=a.procs, join=True)


# ---------------------------------------------------------------- the driver


def measure(cmd, env=None, timeout=1800):
    """Runs cmd; its MEASURE lines (each process's)."""
    e = dict(os.environ, PYTHONUNBUFFERED="1", PSRS_TIMEOUT=str(timeout), **(env or {}))
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout + 60)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return [json.loads(m) for m in re.findall(r"^MEASURE (.*)$", p.stdout, re.M)]


def mem_available():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def configs(a):
    me = [sys.executable, str(Path(__file__).resolve())]
    local = str(ROOT / "scripts" / "local.sh")
    out = []
    if a.only in (None, "cnn"):
        common = ["--model", "cnn", "--steps", str(a.cnn_steps), "--warmup", "20", "--batch", "64"]
        for mode in ("sync", "async"):
            for servers in (1, 2):
                out.append((f"cnn psrs {mode} {servers}s 2w",
                            [local, str(servers), "2", *me, "run", "--system", "psrs", "--mode", mode, *common]))
        out.append(("cnn ddp gloo 2p", [*me, "run", "--system", "ddp", "--procs", "2", *common]))
        out.append(("cnn one process", [*me, "run", "--system", "single", *common]))
    if a.only in (None, "ctr"):
        ddp_rows = a.ddp_rows or max(10**5, int(mem_available() / 2 / (2 * 5 * 64)) // 10**6 * 10**6)
        common = ["--model", "ctr", "--batch", "256", "--vocab", str(a.vocab)]
        out.append((f"ctr psrs async 2s 2w {ddp_rows:.0e} rows",
                    [local, "2", "2", *me, "run", "--system", "psrs", "--mode", "async", "--rows", str(ddp_rows),
                     "--steps", str(a.ctr_steps), "--warmup", "10", *common]))
        out.append((f"ctr ddp gloo 2p {ddp_rows:.0e} rows",
                    [*me, "run", "--system", "ddp", "--procs", "2", "--rows", str(ddp_rows),
                     "--steps", str(a.ddp_ctr_steps), "--warmup", "2", *common]))
        out.append(("ctr psrs async 2s 2w 1e+08 rows",
                    [local, "2", "2", *me, "run", "--system", "psrs", "--mode", "async", "--rows", str(10**8),
                     "--steps", str(a.ctr_steps), "--warmup", "10", *common]))
    return out


def drive(a):
    runs = configs(a)
    rates = {name: [] for name, _ in runs}
    peaks = {name: {} for name, _ in runs}
    for rnd in range(a.rounds):
        order = runs if rnd % 2 == 0 else list(reversed(runs))
        for name, cmd in order:
            got = measure(cmd)
            total = sum(m["rate"] for m in got if m["role"] == "worker")
            rates[name].append(total)
            for m in got:
                peaks[name].setdefault(m["role"], []).append(m["peak_mib"])
            print(f"round {rnd + 1}: {name}: {total:.0f} samples/s", flush=True)
    print(f"\nmedians over {a.rounds} rounds (samples/s, all workers), peak memory per process (MiB, max)")
    print("| configuration | samples/s (median) | rounds | peak MiB per role |")
    print("|---|---|---|---|")
    for name, _ in runs:
        r = rates[name]
        roles = ", ".join(f"{role} {max(v):.0f}" for role, v in sorted(peaks[name].items()))
        print(f"| {name} | {statistics.median(r):.0f} | {' '.join(f'{x:.0f}' for x in r)} | {roles} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd")
    d = sub.add_parser("drive", help="the whole comparison (default)")
    for q in (p, d):
        q.add_argument("--rounds", type=int, default=3)
        q.add_argument("--only", choices=["cnn", "ctr"])
        q.add_argument("--cnn-steps", type=int, default=200)
        q.add_argument("--ctr-steps", type=int, default=300)
        q.add_argument("--ddp-ctr-steps", type=int, default=10)
        q.add_argument("--ddp-rows", type=int, help="table rows for the DDP comparison")
        q.add_argument("--vocab", type=int, default=100_000, help="CTR categories per field")
    r = sub.add_parser("run", help="one process of one configuration")
    r.add_argument("--system", choices=["psrs", "ddp", "single"], required=True)
    r.add_argument("--model", choices=["cnn", "ctr"], required=True)
    r.add_argument("--mode", default="async")
    r.add_argument("--procs", type=int, default=2)
    r.add_argument("--steps", type=int, default=200)
    r.add_argument("--warmup", type=int, default=20)
    r.add_argument("--batch", type=int, default=64)
    r.add_argument("--rows", type=int, default=10**8)
    r.add_argument("--vocab", type=int, default=100_000)
    a = p.parse_args()
    if a.cmd == "run":
        {"psrs": run_psrs, "ddp": run_ddp, "single": run_single}[a.system](a)
    else:
        drive(a)


if __name__ == "__main__":
    main()
