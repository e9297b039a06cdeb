"""A DLRM-shaped click-through model (Naumov et al., 2019), as torch_ctr.py trains it
through psrs and python/bench/torch_vs_ddp.py trains it with DDP and TorchRec.

- The 13 count features, as ``log1p``, go through the bottom MLP to one vector of the
  embeddings' width.
- Each of the 26 categorical fields looks its category up in one embedding table that
  holds every field's categories (field f's category c is row ``offsets[f] + c``: the
  same rows as 26 tables of the same width and optimizer).
- The dot interaction: the dot products of every pair of the 27 vectors (351).
- The top MLP maps the bottom vector and the dot products to one logit.

DLRM's Criteo-Kaggle configuration is the default: embeddings 16 wide, bottom MLP
13-512-256-64-16, top MLP 367-512-256-1.
"""

import torch
from torch import nn

from ctr_data import CATEGORICAL, NUMERIC, offsets

BOTTOM = (512, 256, 64)
TOP = (512, 256)


def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def sizes(text):
    """``"512-256-64"`` as a tuple of ints (an empty string: no hidden layer)."""
    return tuple(int(x) for x in text.split("-") if x)


class DLRM(nn.Module):
    """``forward(ints, cats)``: counts (n, 13) float, categories (n, 26) int64 (each
    below its field's cardinality) to logits (n,). ``emb`` maps row ids (n, 26) to
    (n, 26, dim): ``psrs.torch.Embedding``, ``nn.Embedding`` or an exported table;
    ``lookup`` replaces the embedding step (TorchRec's sharded collection takes the
    ids in its own layout)."""

    def __init__(self, emb, cards, dim, bottom=BOTTOM, top=TOP):
        super().__init__()
        self.emb = emb
        self.dim = dim
        self.register_buffer("offsets", torch.from_numpy(offsets(cards)), persistent=False)
        self.bottom = mlp([NUMERIC, *bottom, dim], last_relu=True)
        n = CATEGORICAL + 1
        li, lj = torch.triu_indices(n, n, offset=1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top = mlp([dim + len(li), *top, 1], last_relu=False)

    def interact(self, x, e):
        """Bottom vector x (n, dim) and embeddings e (n, 26, dim) to the top MLP's logit."""
        z = torch.cat([x.unsqueeze(1), e], 1)
        dots = torch.bmm(z, z.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, dots], 1)).squeeze(1)

    def forward(self, ints, cats):
        x = self.bottom(torch.log1p(ints))
        return self.interact(x, self.emb(cats + self.offsets))
