"""Click-through data in the Criteo layout from a planted model, so the best achievable
AUC is known.

Each row is ``label, I1..I13, C1..C26`` (CSV): 13 count features and 26 categorical
fields, whose values are category numbers (below 2**24, exact as float32) drawn from
a Zipf distribution per field (a few categories are most of the traffic, as in
Criteo's logs). The click probability is planted:

    logit = bias + sum_f w_f[C_f] + sum_j u_j * log1p(I_j),   label ~ Bernoulli(sigmoid(logit))

with per-category weights ``w_f[c] ~ normal(0, sigma / sqrt(1 + rank(c) / 5))`` (rank:
the category's popularity, from 0): the popular categories carry most of the signal,
so a few hundred thousand rows suffice to learn it. The AUC of that true probability
on the test rows is the best any model can reach on them; it is written to
``OUT/best_auc.txt`` (and printed).

    python python/examples/ctr_data.py --out DIR --rows 200000 --test-rows 20000
    psrs convert --format csv --input DIR/train.csv --out DIR/train.rio --per-chunk 5000
    psrs convert --format csv --input DIR/test.csv --out DIR/test.rio
"""

import argparse
from pathlib import Path

import numpy as np

NUMERIC, CATEGORICAL = 13, 26
DECAY = 5.0  # a category of popularity rank r has weights of deviation sigma / sqrt(1 + r / DECAY)


def auc(scores, labels):
    """Area under the ROC curve (ties counted half)."""
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order].astype(bool)
    # average ranks of tied scores
    ranks = np.empty(len(s), dtype=np.float64)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return 0.5
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


class Planted:
    """The planted model: vocabularies, Zipf weights per field, category weights."""

    def __init__(self, vocab, zipf, sigma, seed):
        rng = np.random.default_rng(seed)
        self.vocab = vocab
        ranks = np.arange(1, vocab + 1, dtype=np.float64)
        p = ranks ** -zipf
        self.cdf = np.cumsum(p / p.sum())
        # each field maps popularity ranks to its own category numbers
        self.perm = [rng.permutation(vocab) for _ in range(CATEGORICAL)]
        # weights by popularity rank, then moved to the category numbers
        scale = sigma / np.sqrt(1.0 + np.arange(vocab) / DECAY)
        w = rng.normal(0.0, 1.0, size=(CATEGORICAL, vocab)) * scale
        self.w = np.empty_like(w)
        for f in range(CATEGORICAL):
            self.w[f][self.perm[f]] = w[f]
        self.u = rng.normal(0.0, 0.15, size=NUMERIC)
        self.mu = rng.uniform(0.5, 3.0, size=NUMERIC)
        self.bias = -1.2

    def sample(self, n, rng):
        ints = np.floor(np.exp(rng.normal(self.mu, 1.0, size=(n, NUMERIC)))).astype(np.int64)
        cats = np.empty((n, CATEGORICAL), dtype=np.int64)
        logit = np.full(n, self.bias)
        for f in range(CATEGORICAL):
            r = np.searchsorted(self.cdf, rng.random(n), side="right").clip(0, self.vocab - 1)
            cats[:, f] = self.perm[f][r]
            logit += self.w[f][cats[:, f]]
        logit += np.log1p(ints) @ self.u
        p = 1.0 / (1.0 + np.exp(-logit))
        labels = (rng.random(n) < p).astype(np.int64)
        return labels, ints, cats, p


def write_csv(path, labels, ints, cats):
    table = np.concatenate([labels[:, None], ints, cats], axis=1)
    np.savetxt(path, table, fmt="%d", delimiter=",")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--test-rows", type=int, default=20_000)
    ap.add_argument("--vocab", type=int, default=1000, help="categories per field")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the categories")
    ap.add_argument("--sigma", type=float, default=0.7, help="deviation of the most popular categories' weights")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    if a.vocab >= 1 << 24:
        ap.error("--vocab must be below 2**24 (categories travel as float32)")
    a.out.mkdir(parents=True, exist_ok=True)
    model = Planted(a.vocab, a.zipf, a.sigma, a.seed)
    rng = np.random.default_rng(a.seed + 1)
    for name, n in (("train", a.rows), ("test", a.test_rows)):
        labels, ints, cats, p = model.sample(n, rng)
        write_csv(a.out / f"{name}.csv", labels, ints, cats)
        if name == "test":
            best = auc(p, labels)
            (a.out / "best_auc.txt").write_text(f"{best:.6f}\n")
            print(f"{n} test rows, click rate {labels.mean():.3f}, best achievable AUC {best:.4f}")
        else:
            print(f"{n} training rows, click rate {labels.mean():.3f}")


if __name__ == "__main__":
    main()
