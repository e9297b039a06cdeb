"""Click-through data in the Criteo layout from a planted model, so the best achievable
AUC is known.

Each row is ``label, I1..I13, C1..C26`` (CSV): 13 count features and 26 categorical
fields. Field f has ``cardinalities[f]`` categories, by default the 26 of Criteo's
Kaggle set (3 to 10 131 227; 33.8 million in all); ``--scale`` shrinks them for
development and CI. A field's values are category numbers below its cardinality
(exact as float32: below 2**24), drawn from a Zipf distribution (a few categories are
most of the traffic, as in Criteo's logs; the popularity ranks map to category numbers
by a bijection of the field). The click probability is planted:

    logit = bias + sum_f w_f[c_f] + sum_{f<g} <v_f[c_f], v_g[c_g]> + sum_j u_j log1p(I_j)
    label ~ Bernoulli(sigmoid(logit))

with per-category weights ``w_f[c] ~ normal(0, sigma^2 / (1 + rank(c) / 5))`` and
factors ``v_f[c]`` (``--factors`` wide) of deviation ``tau / (1 + rank(c) / 5)^(1/4)``:
the popular categories carry most of the signal, and the pairwise term is what a
factorization or DLRM's dot interaction learns. Weights are a hash of (field, rank),
so no table of 33.8 million weights is ever built. The AUC of the true probability on
the test rows is the best any model can reach on them; it is written to
``OUT/best_auc.txt`` (and printed).

    python python/examples/ctr_data.py --out DIR --rows 200000 --test-rows 20000 --scale 0.001
    psrs convert --format csv --input DIR/train.csv --out DIR/train.rio --per-chunk 5000
    psrs convert --format csv --input DIR/test.csv --out DIR/test.rio
"""

import argparse
from pathlib import Path

import numpy as np

NUMERIC, CATEGORICAL = 13, 26
# Categories per field of Criteo's Kaggle display-advertising set (C1..C26)
CRITEO_KAGGLE = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
                 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
DECAY = 5.0  # a category of popularity rank r has weights of deviation sigma / sqrt(1 + r / DECAY)
HEAD = 1 << 16  # the weights of each field's most popular categories are kept in memory
CTR = 0.25  # the click rate (Criteo-Kaggle's: 0.256)


def cardinalities(scale=1.0):
    """Criteo-Kaggle's cardinalities times ``scale`` (each at least 2, at most its own)."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale={scale}: must be in (0, 1]")
    return [min(c, max(2, round(c * scale))) for c in CRITEO_KAGGLE]


def offsets(cards):
    """Each field's first row in one table holding every field's categories."""
    return np.concatenate([[0], np.cumsum(cards)[:-1]]).astype(np.int64)


def auc(scores, labels):
    """Area under the ROC curve (ties counted half)."""
    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return 0.5
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    # the average rank (from 1) of each distinct score
    ends = np.cumsum(counts)
    avg = ends - (counts - 1) / 2.0
    ranks = avg[inverse]
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _mix(x):
    """splitmix64's finalizer over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _normals(keys, k, salt):
    """``k`` standard normals per uint64 key (Box-Muller over hashed 32-bit uniforms):
    (n, k) float32."""
    base = _mix(keys ^ np.uint64(salt))
    out = np.empty((len(keys), k), dtype=np.float32)
    with np.errstate(over="ignore"):
        for j in range(0, k, 2):
            h = _mix(base + np.uint64(j + 1))
            u1 = ((h >> np.uint64(32)).astype(np.float64) + 1.0) / 2.0**32
            u2 = (h & np.uint64(0xFFFFFFFF)).astype(np.float64) / 2.0**32
            r = np.sqrt(-2.0 * np.log(u1))
            out[:, j] = r * np.cos(2 * np.pi * u2)
            if j + 1 < k:
                out[:, j + 1] = r * np.sin(2 * np.pi * u2)
    return out


class Planted:
    """The planted model: per field a Zipf popularity over its categories, a bijection
    from popularity ranks to category numbers, and hashed weights by rank."""

    def __init__(self, cards=None, zipf=1.1, sigma=0.5, tau=0.12, factors=4, seed=7, decay=DECAY):
        self.cards = np.array(cards if cards is not None else CRITEO_KAGGLE, dtype=np.int64)
        if len(self.cards) != CATEGORICAL or (self.cards < 1).any() or (self.cards >= 1 << 24).any():
            raise ValueError("26 cardinalities from 1 to 2**24 - 1 are needed")
        if zipf <= 1.0:
            raise ValueError(f"zipf={zipf}: the exponent must be above 1")
        rng = np.random.default_rng(seed)
        self.zipf, self.sigma, self.tau, self.factors, self.seed, self.decay = zipf, sigma, tau, factors, seed, decay
        # rank r of field f is category (a_f * r + b_f) mod n_f, a_f coprime to n_f
        self.a = np.empty(CATEGORICAL, dtype=np.int64)
        self.b = np.empty(CATEGORICAL, dtype=np.int64)
        for f, n in enumerate(self.cards):
            n = int(n)
            a = int(rng.integers(1, max(2, n)))
            while np.gcd(a, n) != 1:
                a = a % n + 1
            self.a[f], self.b[f] = a, int(rng.integers(0, n))
        self.u = rng.normal(0.0, 0.15, size=NUMERIC)
        self.mu = rng.uniform(0.5, 3.0, size=NUMERIC)
        # the weights of each field's HEAD most popular categories, kept (most draws)
        self.head = [self.weights(f, np.arange(min(int(n), HEAD))) for f, n in enumerate(self.cards)]
        # the bias that makes the click rate CTR (bisection on a fixed sample)
        self.bias = 0.0
        _, _, _, logit = self.draw(20_000, np.random.default_rng(seed + 99))
        lo, hi = -20.0, 20.0
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.mean(1 / (1 + np.exp(-(logit + mid)))) < CTR else (lo, mid)
        self.bias = (lo + hi) / 2

    def ranks(self, f, u):
        """Zipf popularity ranks (from 0) of field f for uniforms u: the inverse of the
        continuous Zipf CDF on [1, n + 1), floored."""
        n, s = float(self.cards[f]), self.zipf
        tail = (n + 1.0) ** (1.0 - s)
        x = (1.0 - u * (1.0 - tail)) ** (1.0 / (1.0 - s))
        return np.clip(np.floor(x).astype(np.int64) - 1, 0, int(self.cards[f]) - 1)

    def weights(self, f, ranks):
        """The weight and the factors of field f's categories of these ranks."""
        keys = (np.uint64(f) << np.uint64(40)) | ranks.astype(np.uint64)
        z = _normals(keys, 1 + self.factors, self.seed)
        shrink = 1.0 + ranks / self.decay
        w = z[:, 0] * (self.sigma / np.sqrt(shrink))
        v = z[:, 1:] * (self.tau / shrink[:, None] ** 0.25)
        return w.astype(np.float32), v.astype(np.float32)

    def draw(self, n, rng):
        """``n`` rows' counts, ranks, categories and logits."""
        ints = np.floor(np.exp(rng.normal(self.mu, 1.0, size=(n, NUMERIC)))).astype(np.int64)
        cats = np.empty((n, CATEGORICAL), dtype=np.int64)
        ranks = np.empty((n, CATEGORICAL), dtype=np.int64)
        logit = np.full(n, self.bias) + np.log1p(ints) @ self.u
        vsum = np.zeros((n, self.factors))
        vsq = np.zeros(n)
        for f in range(CATEGORICAL):
            r = self.ranks(f, rng.random(n))
            ranks[:, f] = r
            cats[:, f] = (self.a[f] * r + self.b[f]) % self.cards[f]
            w = np.empty(n, dtype=np.float32)
            v = np.empty((n, self.factors), dtype=np.float32)
            if hasattr(self, "head"):
                hw, hv = self.head[f]
                inside = r < len(hw)
                w[inside], v[inside] = hw[r[inside]], hv[r[inside]]
            else:
                inside = np.zeros(n, dtype=bool)
            w[~inside], v[~inside] = self.weights(f, r[~inside])
            logit += w
            vsum += v
            vsq += (v * v).sum(1)
        logit += 0.5 * ((vsum * vsum).sum(1) - vsq)  # sum over pairs f < g of <v_f, v_g>
        return ints, ranks, cats, logit

    def sample(self, n, rng):
        """``n`` rows: labels (n,), counts (n, 13), categories (n, 26), click probabilities."""
        ints, _, cats, logit = self.draw(n, rng)
        p = 1.0 / (1.0 + np.exp(-logit))
        labels = (rng.random(n) < p).astype(np.int64)
        return labels, ints, cats, p


def write_csv(path, labels, ints, cats):
    table = np.concatenate([labels[:, None], ints, cats], axis=1)
    with open(path, "w") as f:
        for s in range(0, len(table), 100_000):
            np.savetxt(f, table[s:s + 100_000], fmt="%d", delimiter=",")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--test-rows", type=int, default=20_000)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="cardinalities times this (1: Criteo-Kaggle's 33.8M categories; 0.001 for CI)")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the categories (above 1)")
    ap.add_argument("--sigma", type=float, default=0.5, help="deviation of the most popular categories' weights")
    ap.add_argument("--tau", type=float, default=0.12, help="deviation of the most popular categories' factors")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    cards = cardinalities(a.scale)
    model = Planted(cards, a.zipf, a.sigma, a.tau, seed=a.seed)
    (a.out / "cardinalities.txt").write_text(",".join(map(str, cards)) + "\n")
    rng = np.random.default_rng(a.seed + 1)
    for name, n in (("train", a.rows), ("test", a.test_rows)):
        labels, ints, cats, p = model.sample(n, rng)
        write_csv(a.out / f"{name}.csv", labels, ints, cats)
        if name == "test":
            best = auc(p, labels)
            (a.out / "best_auc.txt").write_text(f"{best:.6f}\n")
            print(f"{n} test rows, click rate {labels.mean():.3f}, best achievable AUC {best:.4f}")
        else:
            print(f"{n} training rows over {sum(cards)} categories, click rate {labels.mean():.3f}")


if __name__ == "__main__":
    main()
