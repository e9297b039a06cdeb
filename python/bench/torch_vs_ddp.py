"""psrs.torch against what a user would pick instead, in one run on one machine: the
configurations alternate within each round (the order reversed every other round), for
--rounds rounds, and the medians of their samples/s are printed beside the test AUC
and every process's peak memory by role (python/bench/torch_vs_ddp.sh runs this).

- ctr: python/examples/dlrm.py's DLRM (embeddings 16 wide, bottom MLP 13-512-256-64-16,
  dot interaction, top MLP 367-512-256-1) over Criteo-Kaggle's 26 cardinalities (33.8M
  rows; --scale shrinks them) with Zipf-distributed categories from
  python/examples/ctr_data.py's planted model, --batch per worker, --samples per
  worker; Adagrad on the rows, Adam on the MLPs (python/bench/ctr_systems.py):
  - psrs, 2 servers and 2 workers: async (the next batch's rows prefetched while this
    one computes, the push in flight meanwhile) and sync, and async with the same rows
    in a table of 10^9 (the servers' memory follows the rows trained);
  - DDP over gloo with 2 processes, the table an nn.Embedding(sparse=True): gloo
    allreduces only the rows of the batches (the comparison that counts);
  - TorchRec (torchrec with fbgemm-gpu-cpu) with 2 processes: 26 tables sharded
    table-wise (its planner offers no row-wise sharding on CPU), FBGEMM's fused
    Adagrad (run with $TORCHREC_PYTHON: fbgemm-gpu-cpu is built for one torch
    release, which need not be the one psrs's venv has);
  - one process (every core's torch threads, both workers' samples);
  - 2 processes alone: each trains the DDP rank's model on its own batches with
    nothing communicated (no process group): DDP's arithmetic without its allreduce,
    the rate DDP would reach were its communication free;
  - 2 processes that run only the MLPs' and the interaction's forward and backward
    on embeddings already in memory (no lookup, no optimizer, nothing communicated):
    a bound on every configuration's rate with this model on this machine;
  - footnote: DDP with a dense nn.Embedding (the whole table's gradient allreduced
    every step), --dense-steps steps only;
  - with --ablations: psrs async without overlap and prefetch, psrs async and sync
    with float16 rows on the wire (sync is deterministic: its AUC against the float32
    run's is float16's cost alone), and psrs async and sync with a cache of each
    worker's --hot-cache-rows hottest rows served for up to --hot-cache-staleness
    steps (the share of the rows looked up that the cache served is printed).
- cnn: the Fashion-MNIST CNN of python/examples/torch_fashion_mnist.py, batch 64 per
  worker: psrs sync and async with 1 and 2 servers and 2 workers, DDP (gloo, 2
  processes), one process.

Every process trains on data already in memory, drawn before the clock starts (the
figures are the training step's), one torch thread per worker process. A run's
samples/s is the sum over its workers of the samples trained after --warmup steps
divided by the time they took; its AUC is rank 0's on 100 000 test rows after all
samples were trained (the planted model's own AUC beside it). Each configuration's
line says the share of the machine's CPU time the hypervisor stole while it ran
(/proc/stat's steal): on a virtual machine, cores shared with other machines slow
most what waits on another core (an allreduce, a round trip, torch's own threads).

    python python/bench/torch_vs_ddp.py [--rounds 3] [--only cnn|ctr] [--scale 0.01]
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
sys.path.insert(0, str(ROOT / "python" / "examples"))
sys.path.insert(0, str(HERE))


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(what, rate, role="worker", **extra):
    """One MEASURE line: this process's rate, role and peak memory (and AUCs)."""
    # one write(2) of the whole line: the processes of a run share one pipe, and print()
    # writes the text and its newline apart, so two processes' lines could interleave
    d = {"what": what, "rate": rate, "role": role, "peak_mib": peak_mib(), **extra}
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), f"MEASURE {json.dumps(d)}\n".encode())


# ---------------------------------------------------------------- the CNN


def cnn_model():
    from torch_fashion_mnist import CNN

    return CNN()


def cnn_batches(rank, batch, steps):
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


def cnn_rate(model, opt, batches, warmup):
    from ctr_systems import train

    return train(batches, lambda b, _: cnn_step(model, opt, b), warmup)


def run_cnn(a):
    if a.system == "psrs":  # the scheduler and servers load no torch
        import psrs.torch as pt

        if not pt.init():
            report("psrs", 0.0, role="server" if "version" in pt.server_stats() else "scheduler")
            return
    import torch

    torch.manual_seed(1)
    if a.system == "single":
        model = cnn_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        report("single", cnn_rate(model, opt, cnn_batches(0, a.batch, a.steps + a.warmup), a.warmup), "process")
    elif a.system == "psrs":
        torch.set_num_threads(1)
        model = cnn_model()
        opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=0.05, momentum=0.9, mode=a.mode)
        report("psrs", cnn_rate(model, opt, cnn_batches(pt.rank(), a.batch, a.steps + a.warmup), a.warmup))
    else:
        spawn(cnn_ddp, a)


def cnn_ddp(rank, a, port):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = DDP(cnn_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    report("ddp", cnn_rate(model, opt, cnn_batches(rank, a.batch, a.steps + a.warmup), a.warmup), "rank")
    dist.destroy_process_group()


# ---------------------------------------------------------------- the CTR model


def run_ctr(a):
    import ctr_systems as cs

    if a.system == "psrs":
        cs.run_psrs(a, report)
    elif a.system == "single":
        cs.run_single(a, report)
    else:  # one process per rank
        run = {"ddp": cs.run_ddp, "alone": cs.run_alone, "bound": cs.run_bound, "torchrec": cs.run_torchrec}
        fn = run[a.system]
        spawn(lambda rank, a, port: fn(a, report, rank, port), a)


def spawn(fn, a):
    """Runs fn(rank, a, port) in --procs processes (torch.multiprocessing)."""
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_entry, args=(fn, a, port), nprocs=a.procs, join=True, start_method="fork")


def _entry(rank, fn, a, port):
    fn(rank, a, port)


# ---------------------------------------------------------------- the driver


def cpu_times():
    """The machine's CPU time so far (/proc/stat's first line: user, nice, system,
    idle, iowait, irq, softirq, steal), or None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def steal_share(before, after):
    """The share of the CPU time between two cpu_times() that the hypervisor gave
    other machines (steal): a virtual machine's cores are not all its own."""
    if before is None or after is None:
        return None
    d = [b - a for a, b in zip(before, after)]
    return d[7] / max(sum(d), 1)


def measure(cmd, timeout):
    """Runs cmd; its MEASURE lines (each process's), or the error that stopped it."""
    e = dict(os.environ, PYTHONUNBUFFERED="1", PSRS_TIMEOUT=str(timeout))
    try:
        p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        return [], f"no end after {timeout + 60} s"
    got = [json.loads(m) for m in re.findall(r"^MEASURE (.*)$", p.stdout, re.M)]
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.search(r"Error|error:", ln)]
        return got, (errors or lines or [f"exit {p.returncode}"])[-1].strip()
    return got, None


def configs(a):
    me = [sys.executable, str(Path(__file__).resolve()), "run"]
    local = [str(ROOT / "scripts" / "local.sh")]
    out = []
    if a.only in (None, "cnn"):
        common = ["--model", "cnn", "--steps", str(a.cnn_steps), "--warmup", "20", "--batch", "64"]
        for mode in ("sync", "async"):
            for servers in (1, 2):
                out.append((f"cnn psrs {mode} {servers}s 2w",
                            [*local, str(servers), "2", *me, "--system", "psrs", "--mode", mode, *common]))
        out.append(("cnn ddp gloo 2p", [*me, "--system", "ddp", *common]))
        out.append(("cnn one process", [*me, "--system", "single", *common]))
    if a.only in (None, "ctr"):
        common = ["--model", "ctr", "--scale", str(a.scale), "--samples", str(a.samples), "--batch", str(a.batch),
                  "--warmup", str(a.warmup), "--bottom", a.bottom, "--top", a.top]
        out.append(("ctr psrs async 2s 2w",
                    [*local, "2", "2", *me, "--system", "psrs", "--mode", "async", *common]))
        out.append(("ctr psrs sync 2s 2w",
                    [*local, "2", "2", *me, "--system", "psrs", "--mode", "sync", *common]))
        out.append(("ctr psrs async 2s 2w, a 10^9-row table",
                    [*local, "2", "2", *me, "--system", "psrs", "--mode", "async", "--table-rows", str(10**9),
                     *common]))
        if a.ablations:
            out.append(("ctr psrs async 2s 2w, no overlap, no prefetch",
                        [*local, "2", "2", *me, "--system", "psrs", "--mode", "async", "--no-overlap", *common]))
            out.append(("ctr psrs async 2s 2w, float16 rows",
                        [*local, "2", "2", *me, "--system", "psrs", "--mode", "async", "--fp16", *common]))
            out.append(("ctr psrs sync 2s 2w, float16 rows",
                        [*local, "2", "2", *me, "--system", "psrs", "--mode", "sync", "--fp16", *common]))
            cache = ["--hot-cache-rows", str(a.hot_cache_rows), "--hot-cache-staleness", str(a.hot_cache_staleness)]
            for mode in ("async", "sync"):
                out.append((f"ctr psrs {mode} 2s 2w, hot-row cache",
                            [*local, "2", "2", *me, "--system", "psrs", "--mode", mode, *cache, *common]))
        out.append(("ctr ddp gloo 2p, sparse nn.Embedding", [*me, "--system", "ddp", *common]))
        rec = os.environ.get("TORCHREC_PYTHON", str(ROOT / "target" / "py-venv-torchrec" / "bin" / "python"))
        out.append(("ctr torchrec 2p, table-wise", [rec, *me[1:], "--system", "torchrec", *common]))
        out.append(("ctr one process", [*me, "--system", "single", *common]))
        out.append(("ctr 2 processes alone, nothing communicated",
                    [*me, "--system", "alone", *common]))
        out.append(("ctr 2 processes, the MLPs' forward and backward only",
                    [*me, "--system", "bound", *common]))
    if a.only in (None, "ctr") and a.dense_steps > 0:
        dense = ["--model", "ctr", "--scale", str(a.scale), "--samples", str(a.batch * (a.dense_steps + 1)),
                 "--batch", str(a.batch), "--warmup", "1", "--bottom", a.bottom, "--top", a.top]
        out.append(("ctr ddp gloo 2p, dense nn.Embedding (footnote)",
                    [*me, "--system", "ddp", "--dense-grad", *dense]))
    return out


def drive(a):
    runs = configs(a)
    if a.match:
        runs = [(name, cmd) for name, cmd in runs if re.search(a.match, name)]
        if not runs:
            sys.exit(f"--match {a.match!r}: no configuration's name matches")
    rates = {name: [] for name, _ in runs}
    aucs = {name: [] for name, _ in runs}
    peaks = {name: {} for name, _ in runs}
    served = {name: [] for name, _ in runs}  # the share of the rows a hot-row cache served
    steal = {name: [] for name, _ in runs}  # the share of the CPU time stolen meanwhile
    failed = {}
    best = []
    for rnd in range(a.rounds):
        order = runs if rnd % 2 == 0 else list(reversed(runs))
        for name, cmd in order:
            if name in failed:
                continue
            started, cpu = time.monotonic(), cpu_times()
            got, err = measure(cmd, a.timeout)
            stolen = steal_share(cpu, cpu_times())
            if stolen is not None:
                steal[name].append(stolen)
            if err is not None:
                failed[name] = err
                print(f"round {rnd + 1}: {name}: failed: {err}", flush=True)
                continue
            final = [m for m in got if "auc" in m]
            total = sum(m["rate"] for m in got if m["role"] in ("worker", "rank", "process") and "auc" not in m)
            rates[name].append(total)
            for m in final:
                aucs[name].append(m["auc"])
                best.append(m["best_auc"])
            for m in got:
                if "auc" not in m:
                    peaks[name].setdefault(m["role"], []).append(m["peak_mib"])
            hits = sum(m.get("cache_hits", 0) for m in got if "auc" not in m)
            pulls = sum(m.get("cache_pulls", 0) for m in got if "auc" not in m)
            if hits + pulls:
                served[name].append(hits / (hits + pulls))
            shown = f", test AUC {final[0]['auc']:.4f}" if final else ""
            stole = f", {100 * stolen:.0f}% of the CPU stolen" if stolen is not None else ""
            print(f"round {rnd + 1}: {name}: {total:.0f} samples/s{shown} ({time.monotonic() - started:.0f} s"
                  f"{stole})", flush=True)
    print(f"\nmedians over {a.rounds} rounds (samples/s, all workers); test AUC after every sample (median); "
          "peak memory per process (MiB, max over the rounds)")
    if best:
        print(f"planted model's test AUC (the best reachable): {statistics.median(best):.4f}")
    print("| configuration | samples/s (median) | rounds | test AUC | peak MiB per process, by role "
          "| CPU stolen by the host, per round |")
    print("|---|---|---|---|---|---|")
    for name, _ in runs:
        if name in failed:
            print(f"| {name} | not run | | | {failed[name]} | |")
            continue
        r = rates[name]
        auc = f"{statistics.median(aucs[name]):.4f}" if aucs[name] else "-"
        roles = ", ".join(f"{role} {max(v):.0f}" for role, v in sorted(peaks[name].items()))
        stole = " ".join(f"{100 * x:.0f}%" for x in steal[name]) or "-"
        print(f"| {name} | {statistics.median(r):.0f} | {' '.join(f'{x:.0f}' for x in r)} | {auc} | {roles} "
              f"| {stole} |")
    for name, _ in runs:
        if served[name]:
            print(f"{name}: the cache served {100 * statistics.median(served[name]):.1f}% of the rows looked up "
                  f"(median over {len(served[name])} rounds)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd")
    d = sub.add_parser("drive", help="the whole comparison (default)")
    for q in (p, d):
        q.add_argument("--rounds", type=int, default=3)
        q.add_argument("--only", choices=["cnn", "ctr"])
        q.add_argument("--cnn-steps", type=int, default=200)
        q.add_argument("--scale", type=float, default=1.0, help="Criteo-Kaggle's cardinalities times this")
        q.add_argument("--samples", type=int, default=500_000, help="CTR samples per worker")
        q.add_argument("--batch", type=int, default=512, help="CTR batch per worker")
        q.add_argument("--warmup", type=int, default=20, help="CTR steps before the clock starts")
        q.add_argument("--bottom", default="512-256-64", help="hidden widths of the bottom MLP")
        q.add_argument("--top", default="512-256", help="hidden widths of the top MLP")
        q.add_argument("--dense-steps", type=int, default=5,
                       help="steps of the dense-gradient DDP footnote (0: not run)")
        q.add_argument("--timeout", type=int, default=3600, help="seconds a configuration may take")
        q.add_argument("--ablations", action="store_true",
                       help="also psrs async without overlap and prefetch, with float16 rows (async and sync) "
                            "and with a hot-row cache (async and sync)")
        q.add_argument("--hot-cache-rows", type=int, default=100_000,
                       help="the ablations' hot-row cache: rows per worker")
        q.add_argument("--hot-cache-staleness", type=int, default=4,
                       help="the ablations' hot-row cache: steps a cached row is served after its pull")
        q.add_argument("--match", metavar="REGEX",
                       help="run only the configurations whose name (as the table prints it) this regular "
                            "expression finds, e.g. 'psrs (a)?sync 2s 2w(, hot-row cache)?$' with --ablations")
    r = sub.add_parser("run", help="one process of one configuration")
    r.add_argument("--system", choices=["psrs", "ddp", "single", "torchrec", "alone", "bound"], required=True)
    r.add_argument("--model", choices=["cnn", "ctr"], required=True)
    r.add_argument("--mode", default="async")
    r.add_argument("--procs", type=int, default=2)
    r.add_argument("--steps", type=int, default=200)
    r.add_argument("--warmup", type=int, default=20)
    r.add_argument("--batch", type=int, default=64)
    r.add_argument("--scale", type=float, default=1.0)
    r.add_argument("--samples", type=int, default=500_000)
    r.add_argument("--bottom", default="512-256-64")
    r.add_argument("--top", default="512-256")
    r.add_argument("--dense-grad", action="store_true")
    r.add_argument("--no-overlap", action="store_true")
    r.add_argument("--fp16", action="store_true")
    r.add_argument("--hot-cache-rows", type=int, default=0, help="psrs: a cache of each worker's hottest rows")
    r.add_argument("--hot-cache-staleness", type=int, default=4)
    r.add_argument("--table-rows", type=int, default=0, help="psrs: the table's rows, if more than the fields'")
    a = p.parse_args()
    if a.cmd == "run":
        (run_cnn if a.model == "cnn" else run_ctr)(a)
    else:
        drive(a)


if __name__ == "__main__":
    main()
