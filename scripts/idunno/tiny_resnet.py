"""A tiny stand-in for ResNet-50 in the experiment's smoke run (scripts/idunno-experiment.sh
--smoke): plain Python, no torch. Importing it "builds the model": it sleeps 0.3 s and
hashes for about 0.2 s of CPU, so warming it up takes time like a real model's load.
`classify(paths)` hashes each input file's bytes 100 000 times (CPU work per input, as an
image through a network) and answers a class of 1000 and a probability."""

import hashlib
import time

time.sleep(0.3)
SEED = b"resnet"
for _ in range(100_000):
    SEED = hashlib.sha256(SEED).digest()


def classify(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            h = hashlib.sha256(SEED + f.read()).digest()
        for _ in range(100_000):
            h = hashlib.sha256(h).digest()
        out.append([h[0] * 4 % 1000, h[1] / 255])
    return out
