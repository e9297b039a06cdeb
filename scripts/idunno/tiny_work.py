"""What the experiment's tiny stand-in models do (tiny_resnet.py, tiny_albert.py; plain
Python, no torch): building one sleeps and hashes for a moment, as a real model's load
takes time; a query hashes each input file's bytes many times (CPU work per input) and
answers a class and a probability."""

import hashlib
import time


def build(name, sleep_s):
    """A model's "weights": a seed, after `sleep_s` s of sleep and ~0.05 s of hashing."""
    time.sleep(sleep_s)
    seed = name.encode()
    for _ in range(100_000):
        seed = hashlib.sha256(seed).digest()
    return seed


def classify(seed, rounds, classes, paths):
    """Each file hashed `rounds` times: its class (of `classes`) and a probability."""
    out = []
    for p in paths:
        with open(p, "rb") as f:
            h = hashlib.sha256(seed + f.read()).digest()
        for _ in range(rounds):
            h = hashlib.sha256(h).digest()
        out.append([int.from_bytes(h[:2], "little") % classes, h[2] / 255])
    return out
