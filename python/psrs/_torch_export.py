"""A model trained through psrs.torch as a plain PyTorch module and as a torch.export
program: each :class:`psrs.torch.Embedding` becomes a :class:`StoredEmbedding` holding
the rows the servers store (every row updated at least once), and computing any other
row's initial values as the servers do (normal(0, ``init_std``) from the table's seed
and the row id: splitmix64 and Box-Muller, the arithmetic of the servers'
``initial_row``), so it answers every id as the servers would."""

import copy
import math
from typing import Tuple

import torch
from torch import nn

from ._torch_train import Embedding

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _signed(c: int) -> int:
    """A 64-bit constant as the int64 with its bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 values (as uint64 bits)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def _mix64(x: torch.Tensor) -> torch.Tensor:
    """splitmix64's finalizer on int64 tensors (wrapping arithmetic, uint64 bits)."""
    z = x + _signed(_GOLDEN)
    z = (z ^ _shr(z, 30)) * _signed(_M1)
    z = (z ^ _shr(z, 27)) * _signed(_M2)
    return z ^ _shr(z, 31)


def initial_rows(seed: int, ids: torch.Tensor, std: float, dim: int) -> torch.Tensor:
    """The initial values of rows ``ids`` (int64, 1-d) of a table with this seed: (n, dim)
    float32, equal to the servers' ``initial_row``."""
    if std == 0.0:
        return torch.zeros(ids.shape[0], dim, dtype=torch.float32)
    state = _mix64(_mix64(ids) ^ _signed(seed & ((1 << 64) - 1)))
    cols = []
    for _ in range((dim + 1) // 2):
        state = state + _signed(_GOLDEN)
        u1 = (_shr(_mix64(state), 11).to(torch.float64) + 1.0) / 2.0**53
        state = state + _signed(_GOLDEN)
        u2 = (_shr(_mix64(state), 11).to(torch.float64) + 1.0) / 2.0**53
        r = torch.sqrt(-2.0 * torch.log(u1)) * std
        a = (2 * math.pi) * u2
        cols.append(r * torch.cos(a))
        cols.append(r * torch.sin(a))
    return torch.stack(cols[:dim], 1).to(torch.float32)


class StoredEmbedding(nn.Module):
    """An embedding table as the servers held it: the stored rows (``ids`` sorted,
    ``rows``) and every other row's initial values. ``forward`` as
    :class:`psrs.torch.Embedding`'s (a ``mode`` bags the last dimension)."""

    def __init__(self, ids: torch.Tensor, rows: torch.Tensor, num_embeddings: int, seed: int, init_std: float,
                 mode=None):
        super().__init__()
        order = torch.argsort(ids)
        ids, rows = ids[order], rows[order]
        if len(ids) == 0:  # a row no id matches keeps the lookups' shapes
            ids, rows = torch.tensor([-1]), torch.zeros(1, rows.shape[1])
        self.register_buffer("ids", ids.to(torch.int64))
        self.register_buffer("rows", rows.to(torch.float32).contiguous())
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(rows.shape[1])
        # the servers hold init_std as float32
        self.seed, self.init_std, self.mode = int(seed), torch.tensor(init_std, dtype=torch.float32).item(), mode

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1).to(torch.int64)
        at = torch.searchsorted(self.ids, flat).clamp(max=self.ids.shape[0] - 1)
        hit = (self.ids[at] == flat).unsqueeze(1)
        init = initial_rows(self.seed, flat, self.init_std, self.embedding_dim)
        out = torch.where(hit, self.rows[at], init)
        if self.mode is None:
            return out.reshape(ids.shape + (self.embedding_dim,))
        bags = out.reshape(ids.shape + (self.embedding_dim,))
        return bags.sum(-2) if self.mode == "sum" else bags.mean(-2)


def _stored(m: Embedding) -> StoredEmbedding:
    ids, rows = m._opt._tables.dump(m._index)
    seed = m._opt._seeds[m._index]
    return StoredEmbedding(torch.from_numpy(ids.astype("int64")), torch.from_numpy(rows), m.num_embeddings, seed,
                           m.init_std, m.mode)


def exported(module: nn.Module) -> Tuple[nn.Module, int]:
    """A copy of ``module`` with each psrs Embedding replaced by a StoredEmbedding (its
    rows read from the servers; call it on one worker once training is over, after
    ``DistributedOptimizer.pull()``), and the number of rows it holds."""
    swaps = []
    for name, m in module.named_modules():
        if isinstance(m, Embedding):
            if m._opt is None:
                raise ValueError(f"embedding {name} is not part of a model given to a DistributedOptimizer")
            parent = module.get_submodule(name.rpartition(".")[0]) if "." in name else module
            swaps.append((parent, name.rpartition(".")[2], m, _stored(m)))
    if not swaps and isinstance(module, Embedding):
        raise ValueError("export the model that holds the Embedding, not the Embedding itself")
    for parent, attr, _, stored in swaps:
        setattr(parent, attr, stored)
    try:
        out = copy.deepcopy(module)
    finally:
        for parent, attr, m, _ in swaps:
            setattr(parent, attr, m)
    return out, sum(int((s.ids >= 0).sum()) for _, _, _, s in swaps)


def export(module: nn.Module, path, example_inputs: tuple) -> int:
    """Writes ``module`` (holding trained psrs Embeddings) as a torch.export program
    (``torch.export.save``, a .pt2 file; the first dimension of every input dynamic,
    as an inference job's batches are): its dense parameters and the rows the servers
    store. Returns the number of embedding rows written."""
    plain, rows = exported(module)
    plain.eval()
    dims = tuple({0: torch.export.Dim.DYNAMIC} for _ in example_inputs)
    with torch.no_grad():
        program = torch.export.export(plain, tuple(example_inputs), dynamic_shapes=dims)
    torch.export.save(program, path)
    return rows
