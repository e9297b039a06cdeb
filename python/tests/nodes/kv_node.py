"""psrs kv-test from Python: servers keep sums; each worker pushes the same values
REPEAT times, waits for the other workers, pulls, and checks that each value is exactly
REPEAT x WORKERS x what it pushed. With --edge-cases also: empty and single-key
requests, push_pull, pull into `out`, unsorted keys and mismatched lengths refused with
ValueError, and (Python servers) the "sgd" handle (lr 0.5) on app 2, a callable float64
handle on app 1, whose exception reaches the worker as psrs.Error, and slow requests
(cmd 8) showing that a wait lets other threads run and that Ctrl-C interrupts it.
--rust-servers: the servers are `psrs kv-test`, so only app 0 is checked."""

import argparse
import os
import signal
import threading
import time

import numpy as np
import psrs

U64_MAX = 2**64 - 1
SLOW = 1.5  # seconds a cmd-8 request takes on a Python server


def callable_handle():
    store = {}

    def handle(meta, keys, vals):
        if meta.cmd == 7:
            raise RuntimeError("cmd 7 is not supported")
        if meta.cmd == 8:
            time.sleep(SLOW)  # a slow answer, for the waits' checks
        if meta.push:
            for k, v in zip(keys.tolist(), vals.tolist()):
                store[k] = store.get(k, 0.0) + v
        if meta.pull:
            return np.array([store.get(k, 0.0) for k in keys.tolist()], dtype=np.float64)
        return None

    return handle


def check(cond, what):
    if not cond:
        raise SystemExit(f"kv-test failed: {what}")


def worker(a):
    me = psrs.node_id()
    kv = psrs.KVWorker(0, np.float32)
    n = a.keys
    keys = np.arange(n, dtype=np.uint64) * np.uint64(U64_MAX // n)
    lens = (1 + np.arange(n) % 3).astype(np.int32) if a.uneven else None
    total = int(lens.sum()) if a.uneven else n
    vals = (np.arange(total) % 100 + 1).astype(np.float32)
    ts = [kv.push(keys, vals, lens) for _ in range(a.repeat)]
    for t in ts:
        kv.wait(t)
    psrs.barrier(psrs.WORKER_GROUP)
    got, got_lens = kv.pull_result(kv.pull(keys), with_lens=True)
    times = a.repeat * psrs.num_workers()
    check(got.dtype == np.float32 and got.shape == vals.shape, f"pulled {got.shape} {got.dtype}")
    if a.uneven:
        check(np.array_equal(got_lens, lens), "pulled lengths differ from the pushed ones")
    bad = np.flatnonzero(got != vals * times)
    check(bad.size == 0, f"value {bad[:1]}: expected {vals[bad[:1]] * times} got {got[bad[:1]]}")
    out = np.full(total, -1.0, dtype=np.float32)
    t = kv.pull(keys, out=out)
    kv.wait(t)
    check(np.array_equal(out, vals * times), "pull into out differs")
    print(f"kv-test ok: worker {me} checked {total} values = {times} x pushed", flush=True)
    if a.edge_cases:
        edge_cases(kv, a)
        print(f"kv-test edge cases ok: worker {me}", flush=True)


def edge_cases(kv, a):
    empty_k = np.array([], dtype=np.uint64)
    kv.wait(kv.push(empty_k, np.array([], dtype=np.float32)))
    check(kv.pull_result(kv.pull(empty_k)).size == 0, "empty pull returned values")
    key = np.array([U64_MAX - 1 - os.getpid()], dtype=np.uint64)
    kv.wait(kv.push(key, [2.5]))
    check(kv.pull_result(kv.pull(key)).tolist() == [2.5], "single key")
    o = np.zeros(1, dtype=np.float32)
    kv.wait(kv.push_pull(key, np.array([1.0], dtype=np.float32), out=o))
    check(o.tolist() == [3.5], f"push_pull gave {o}")
    # a non-contiguous view and a list are converted, not refused
    two = np.array([U64_MAX - 3 - 2 * os.getpid(), U64_MAX - 2 - 2 * os.getpid()], dtype=np.uint64)
    kv.wait(kv.push(two, np.arange(4, dtype=np.float32)[::2]))
    check(kv.pull_result(kv.pull(list(map(int, two)))).tolist() == [0.0, 2.0], "strided push")
    for what, call in [
        ("unsorted keys", lambda: kv.push(np.array([5, 3], dtype=np.uint64), np.ones(2, np.float32))),
        ("3 values for 2 keys", lambda: kv.push(np.array([1, 2], dtype=np.uint64), np.ones(3, np.float32))),
        ("lens not adding up", lambda: kv.push(np.array([1, 2], dtype=np.uint64), np.ones(3, np.float32), [1, 1])),
        ("unsorted pull", lambda: kv.pull(np.array([9, 9], dtype=np.uint64))),
    ]:
        try:
            call()
        except ValueError as e:
            print(f"{what} refused: {e}", flush=True)
        else:
            raise SystemExit(f"kv-test failed: {what} accepted")
    try:
        kv.wait(12345)
    except psrs.Error as e:
        print(f"unknown request refused: {e}", flush=True)
    else:
        raise SystemExit("kv-test failed: wait on an unknown request")
    if a.rust_servers:
        return
    kv64 = psrs.KVWorker(1, dtype=np.float64)
    ks = np.array([10, U64_MAX - 10], dtype=np.uint64)
    kv64.wait(kv64.push(ks, np.array([0.25, 1e300])))
    psrs.barrier(psrs.WORKER_GROUP)
    got = kv64.pull_result(kv64.pull(ks))
    w = psrs.num_workers()
    check(got.dtype == np.float64 and got.tolist() == [0.25 * w, 1e300 * w], f"callable handle: {got}")
    sgd = psrs.KVWorker(2)
    sgd.wait(sgd.push(ks, np.array([2.0, -4.0], dtype=np.float32)))
    psrs.barrier(psrs.WORKER_GROUP)
    got = sgd.pull_result(sgd.pull(ks))
    check(got.tolist() == [-1.0 * w, 2.0 * w], f"sgd handle (lr 0.5): {got}")
    print(f"sgd handle ok: {got.tolist()}", flush=True)
    try:
        kv64.wait(kv64.pull(ks, cmd=7))
    except psrs.Error as e:
        check("cmd 7 is not supported" in str(e), f"error text: {e}")
        print(f"handle error reached the worker: {e}", flush=True)
    else:
        raise SystemExit("kv-test failed: a raising handle did not fail the request")
    slow_waits(kv64, ks)


def slow_waits(kv, keys):
    """Waits on requests the server answers after SLOW seconds: other Python threads
    run meanwhile (the GIL is released), and Ctrl-C (SIGINT) interrupts the wait with
    KeyboardInterrupt, leaving the request pending (a second wait completes it)."""
    ticks, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    ts = kv.pull(keys, cmd=8)
    t = threading.Thread(target=spin)
    t.start()
    before = ticks[0]
    kv.wait(ts)
    ran = ticks[0] - before
    stop.set()
    t.join()
    # with the GIL held through the wait, the thread could not have run at all
    check(ran >= 10, f"another thread ran {ran} times during a {SLOW} s wait")
    print(f"another thread ran during a wait ({ran} times)", flush=True)
    # Python keeps SIGINT ignored when it started so (a background job of a
    # non-interactive shell): Ctrl-C's usual handler, whatever launched this node
    signal.signal(signal.SIGINT, signal.default_int_handler)
    ts = kv.pull(keys, cmd=8)
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        kv.wait(ts)
    except KeyboardInterrupt:
        print("Ctrl-C interrupted a wait", flush=True)
    else:
        raise SystemExit(f"kv-test failed: SIGINT did not interrupt a {SLOW} s wait")
    finally:
        timer.join()
    got = kv.pull_result(ts)  # still pending: completes
    check(got.size == len(keys), f"the interrupted pull gave {got}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--uneven", action="store_true")
    p.add_argument("--edge-cases", action="store_true")
    p.add_argument("--rust-servers", action="store_true")
    a = p.parse_args()
    psrs.start()
    role = psrs.role()
    servers = []
    if role == "server":
        servers = [psrs.KVServer(0, "sum"), psrs.KVServer(1, callable_handle(), dtype="float64"),
                   psrs.KVServer(2, "sgd", lr=0.5)]
    elif role == "worker":
        worker(a)
    psrs.finalize()
    del servers


if __name__ == "__main__":
    main()
