"""Torch tensors through psrs.KVWorker: servers keep sums ("sum" handle); the worker
pushes CPU tensors and checks which went out without a copy (psrs._psrs._conversions()
does not move) and which were converted once, and pulls into a tensor."""

import numpy as np
import psrs
import torch
from psrs import _psrs


def check(cond, what):
    if not cond:
        raise SystemExit(f"torch-kv check failed: {what}")


def work():
    kv = psrs.KVWorker(0, np.float32)
    keys = np.array([1, 2, 3, 4], dtype=np.uint64) * np.uint64(2**62 - 1)
    cases = [
        ("contiguous float32", torch.arange(8, dtype=torch.float32), 0),
        ("requires_grad", torch.ones(8, requires_grad=True), 0),
        ("a contiguous slice", torch.arange(16, dtype=torch.float32)[8:], 0),
        ("strided", torch.arange(16, dtype=torch.float32)[::2], 1),
        ("float64", torch.arange(8, dtype=torch.float64), 1),
    ]
    total = np.zeros(8, np.float32)
    for what, t, copies in cases:
        before = _psrs._conversions()
        kv.wait(kv.push(keys, t))
        got = _psrs._conversions() - before
        check(got == copies, f"{what}: {got} conversions, {copies} expected")
        total += t.detach().numpy().astype(np.float32)
        print(f"{what}: {'no copy' if got == 0 else 'converted once'}", flush=True)
    before = _psrs._conversions()
    kv.wait(kv.push(torch.from_numpy(keys.astype(np.int64)), torch.ones(8)))
    check(_psrs._conversions() - before == 1, "int64 tensor keys are converted once")
    total += 1
    out = torch.zeros(8)
    kv.wait(kv.pull(keys, out=out))
    check(np.array_equal(out.numpy(), total), f"pulled into a tensor: {out} vs {total}")
    try:
        kv.push(keys, torch.ones(8, dtype=torch.bfloat16))
        check(False, "a bfloat16 tensor was taken")
    except ValueError as e:
        print(f"refused: {e}", flush=True)
    print("torch kv ok", flush=True)


def main():
    psrs.start()
    keep = None
    if psrs.role() == "server":
        keep = psrs.KVServer(0, "sum")
    elif psrs.role() == "worker":
        work()
    psrs.finalize()
    del keep


if __name__ == "__main__":
    main()
