"""A tiny stand-in for ALBERT in the experiment's smoke run (scripts/idunno-experiment.sh
--smoke): plain Python, no torch. Importing it "builds the model": it sleeps 0.5 s and
hashes for about 0.2 s of CPU, so warming it up takes time like a real model's load.
`classify(paths)` hashes each sentence file 60 000 times per input (CPU work per input)
and answers a class of 2 and a probability."""

import hashlib
import time

time.sleep(0.5)
SEED = b"albert"
for _ in range(100_000):
    SEED = hashlib.sha256(SEED).digest()


def classify(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            h = hashlib.sha256(SEED + f.read()).digest()
        for _ in range(60_000):
            h = hashlib.sha256(h).digest()
        out.append([h[0] % 2, h[1] / 255])
    return out
