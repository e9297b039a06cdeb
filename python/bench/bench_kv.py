"""Python KVWorker against ps-core's Rust KVWorker, side by side in one run.

Run by bench/bench_kv.sh (every node runs this script under scripts/local.sh). Servers
serve apps 0 and 1 with the built-in "sum" handle; the worker times the same loops
with the Python KVWorker (app 0) and with the Rust KVWorker in this same process
(app 1, psrs._psrs.RustBench), alternating which goes first, for --rounds rounds, and
prints each round and the medians:

- push and pull of --keys float32 keys (spread over the key space), one request at a
  time (the Python pull fills a preallocated ``out``);
- push-only requests of --small-bytes bytes per server, --inflight outstanding.

Besides the figures it prints the worker process's CPU time per request (all its
threads: the caller, the transport's and the customer's), for where the time goes.
"""

import argparse
import statistics
import time
from collections import deque

import numpy as np
import psrs
from psrs._psrs import RustBench

U64_MAX = 2**64 - 1


def py_loop(send, wait, inflight, seconds):
    """The Rust side's loop (python/src/bench.rs) in Python."""
    q = deque()
    ops = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        if len(q) < inflight and time.perf_counter() < end:
            q.append(send())
            continue
        if not q:
            break
        wait(q.popleft())
        ops += 1
    return ops, time.perf_counter() - start


def cases(a):
    n = a.keys
    big_keys = np.arange(n, dtype=np.uint64) * np.uint64(U64_MAX // n)
    big_vals = np.ones(n, dtype=np.float32)
    out = np.empty(n, dtype=np.float32)
    per = a.small_bytes // 4
    small_keys = np.array([b + 1 for b, _ in psrs.server_key_ranges()], dtype=np.uint64)
    small_vals = np.ones(per * len(small_keys), dtype=np.float32)
    # (name, unit, python loop, rust args)
    return [
        (f"push {n} f32 keys", "ms", lambda kv, s: py_loop(lambda: kv.push(big_keys, big_vals), kv.wait, 1, s),
         ("push", big_keys, big_vals, 1)),
        (f"pull {n} f32 keys", "ms", lambda kv, s: py_loop(lambda: kv.pull(big_keys, out=out), kv.wait, 1, s),
         ("pull", big_keys, big_vals, 1)),
        (f"push {a.small_bytes} B x{a.inflight}", "msgs/s",
         lambda kv, s: py_loop(lambda: kv.push(small_keys, small_vals), kv.wait, a.inflight, s),
         ("push", small_keys, small_vals, a.inflight)),
    ]


def figure(unit, ops, secs):
    return secs * 1e3 / max(ops, 1) if unit == "ms" else ops / secs


def worker(a):
    kv, rs = psrs.KVWorker(0, np.float32), RustBench(1)
    todo = cases(a)
    for _, _, py_run, rust in todo:  # store the keys on the servers, warm up
        py_run(kv, 0.2)
        rs.run(rust[0], rust[1], rust[2], rust[3], 0.2)
    got = {(name, side): [] for name, *_ in todo for side in ("python", "rust")}
    cpu_of = {k: [] for k in got}  # the worker process's CPU time (all its threads)
    for r in range(a.rounds):
        for name, unit, py_run, rust in todo:
            sides = ["python", "rust"] if r % 2 == 0 else ["rust", "python"]
            for side in sides:
                cpu = time.process_time()
                ops, secs = py_run(kv, a.seconds) if side == "python" else rs.run(*rust, a.seconds)
                cpu_us = (time.process_time() - cpu) * 1e6 / max(ops, 1)
                got[(name, side)].append(figure(unit, ops, secs))
                cpu_of[(name, side)].append(cpu_us)
                print(f"round {r} {name:<24} {side:<6} {figure(unit, ops, secs):>10.2f} {unit} ({ops} requests, "
                      f"worker CPU {cpu_us:.1f} us per request)", flush=True)
    print(f"\nmedians of {a.rounds} rounds, {psrs.num_servers()} server(s), 1 worker:")
    print(f"{'':<24} {'python':>15} {'rust':>15} {'python/rust time':>17}   worker CPU us/request python, rust")
    for name, unit, *_ in todo:
        p, r = statistics.median(got[(name, "python")]), statistics.median(got[(name, "rust")])
        ratio = p / r if unit == "ms" else r / p
        pc, rc = statistics.median(cpu_of[(name, "python")]), statistics.median(cpu_of[(name, "rust")])
        print(f"{name:<24} {p:>8.2f} {unit:<6} {r:>8.2f} {unit:<6} {ratio:>16.2f}x   {pc:.1f}, {rc:.1f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--small-bytes", type=int, default=256)
    p.add_argument("--inflight", type=int, default=16)
    p.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    psrs.start()
    keep = []
    if psrs.role() == "server":
        keep = [psrs.KVServer(0, "sum"), psrs.KVServer(1, "sum")]
    elif psrs.role() == "worker":
        if psrs.num_workers() != 1:
            raise SystemExit("bench_kv.py: run it with one worker")
        worker(a)
    psrs.finalize()
    del keep


if __name__ == "__main__":
    main()
