"""psrs.torch's classes that need PyTorch: :class:`Embedding` and
:class:`DistributedOptimizer` (see psrs.torch for the whole picture)."""

from typing import Callable, List, Optional, Tuple

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as e:  # the message is the point
    raise ImportError(f"psrs.torch needs PyTorch (the torch package): pip install torch ({e})") from e

from . import _psrs
from ._torch_state import _state, _worker_only

def _optimizer_settings(name: str, lr: float, momentum: float, weight_decay: float,
                        betas: Tuple[float, float], eps: Optional[float]) -> dict:
    if not isinstance(name, str):
        raise ValueError(f"optimizer={name!r}: \"sgd\", \"adagrad\" or \"adam\"")
    d = {"name": name, "lr": float(lr), "weight_decay": float(weight_decay)}
    if name == "sgd":
        d["momentum"] = float(momentum)
    elif momentum:
        raise ValueError(f"momentum={momentum}: only optimizer=\"sgd\" takes a momentum")
    if name == "adam":
        d["betas"] = (float(betas[0]), float(betas[1]))
    if eps is not None:
        d["eps"] = float(eps)
    return d


class Embedding(nn.Module):
    """An embedding table whose rows live on the servers (``nn.Embedding`` /
    ``nn.EmbeddingBag`` with ``mode="sum"|"mean"`` over the last dimension).

    ``forward(ids)`` takes integer ids of any shape (int64; other integer types are
    converted) and pulls only the batch's unique rows; it returns
    ``ids.shape + (embedding_dim,)``, or with a ``mode`` the bags over the last
    dimension (``ids.shape[:-1] + (embedding_dim,)``). A row is created on the
    servers when it is first trained, with values normal(0, ``init_std``), so
    ``num_embeddings`` can be 10**9. When the module is part of the model given to a
    :class:`DistributedOptimizer`, its ``step()`` pushes the rows' gradients, and the
    servers apply this table's own optimizer settings to them, as torch applies its
    optimizers to ``nn.Embedding(sparse=True)``: rows without a gradient in a step do
    not move; ``"adagrad"`` is ``torch.optim.Adagrad``, ``"adam"``
    ``torch.optim.SparseAdam`` (the table's step count), ``"sgd"`` with momentum keeps
    a velocity per row applied in the row's steps only.

    ``admit_after``: a row is created only once it had gradients in this many steps
    (until then it reads as its initial values and its gradients are dropped).
    ``expire_after``: a row not updated in this many steps is dropped (0: never).
    ``fp16_wire``: rows and their gradients travel as float16 (half the bytes;
    float16's 11 significant bits), the servers keep float32.

    ``prefetch(ids)`` starts looking up the rows of a later batch while this one
    computes; the ``forward`` given equal ids takes them (in async and bounded modes:
    rows another step updates meanwhile are one step older); ``prefetch_hits`` counts
    the forwards that did.

    ``hot_cache_rows=N`` (0: none) keeps this worker's ``N`` most looked-up rows in a
    cache, each served for ``hot_cache_staleness=S`` steps after the step it was
    pulled in, then pulled again: a row read is the servers' value from at most ``S``
    of this worker's steps before (its own gradients still go to the servers every
    step and are not applied to the cached copy). ``S=0`` serves nothing from it.
    ``hot_cache_stats``: rows served from it (``hits``), rows pulled through it
    (``pulls``), rows held (``rows``), rows replaced by hotter ones (``evictions``).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, optimizer: str = "adagrad", lr: float = 0.01,
                 init_std: float = 0.01, mode: Optional[str] = None, momentum: float = 0.0,
                 weight_decay: float = 0.0, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: Optional[float] = None, seed: Optional[int] = None, admit_after: int = 1,
                 expire_after: int = 0, fp16_wire: bool = False, hot_cache_rows: int = 0,
                 hot_cache_staleness: int = 4):
        super().__init__()
        if int(num_embeddings) != num_embeddings or num_embeddings <= 0:
            raise ValueError(f"num_embeddings={num_embeddings}: a positive integer is needed")
        if int(embedding_dim) != embedding_dim or embedding_dim <= 0:
            raise ValueError(f"embedding_dim={embedding_dim}: a positive integer is needed")
        if mode not in (None, "sum", "mean"):
            raise ValueError(f"mode={mode!r}: None, \"sum\" or \"mean\"")
        if not init_std >= 0:
            raise ValueError(f"init_std={init_std}: must be >= 0")
        if int(admit_after) != admit_after or admit_after < 1:
            raise ValueError(f"admit_after={admit_after}: an integer >= 1 is needed (1: rows created at once)")
        if int(expire_after) != expire_after or expire_after < 0:
            raise ValueError(f"expire_after={expire_after}: an integer >= 0 is needed (0: rows never expire)")
        if int(hot_cache_rows) != hot_cache_rows or hot_cache_rows < 0:
            raise ValueError(f"hot_cache_rows={hot_cache_rows}: an integer >= 0 is needed (0: no cache)")
        if int(hot_cache_staleness) != hot_cache_staleness or hot_cache_staleness < 0:
            raise ValueError(f"hot_cache_staleness={hot_cache_staleness}: an integer >= 0 is needed (steps)")
        self.hot_cache_rows = int(hot_cache_rows)
        self.hot_cache_staleness = int(hot_cache_staleness)
        self.admit_after = int(admit_after)
        self.expire_after = int(expire_after)
        self.fp16_wire = bool(fp16_wire)
        self._prefetched = []  # (ids, unique ids, inverse, pending lookup), oldest first
        self.prefetch_hits = 0  # forwards that took prefetched rows
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        self.mode = mode
        self.init_std = float(init_std)
        self.seed = seed
        self.optimizer_settings = _optimizer_settings(optimizer, lr, momentum, weight_decay, betas, eps)
        self._opt = None  # the DistributedOptimizer it belongs to
        self._index = None  # its table index there

    def extra_repr(self) -> str:
        bag = f", mode={self.mode!r}" if self.mode else ""
        return (f"{self.num_embeddings}, {self.embedding_dim}{bag}, "
                f"optimizer={self.optimizer_settings['name']!r}, lr={self.optimizer_settings['lr']}")

    @property
    def hot_cache_stats(self) -> Optional[dict]:
        """The hot-row cache's counts: ``hits`` (rows served from it), ``pulls`` (rows
        pulled from the servers through it), ``rows`` (held now), ``evictions`` (rows
        replaced by hotter ones); None without a cache or before the optimizer."""
        if self._opt is None:
            return None
        got = self._opt._tables.hot_cache_stats(self._index)
        return None if got is None else dict(zip(("hits", "pulls", "rows", "evictions"), got))

    def _ids(self, ids: torch.Tensor) -> torch.Tensor:
        """The ids flattened (int64, CPU), checked."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"Embedding ids: a torch.LongTensor is needed, got {type(ids).__name__}")
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise ValueError(f"Embedding ids: an integer tensor (torch.int64) is needed, got {ids.dtype}")
        if self._opt is None:
            raise _psrs.Error("this Embedding is not part of a model given to psrs.torch.DistributedOptimizer")
        if self.mode is not None and ids.dim() == 0:
            raise ValueError(f"Embedding ids: mode={self.mode!r} bags the last dimension; a 0-d tensor has none")
        flat = ids.detach().reshape(-1)
        if flat.device.type != "cpu":
            flat = flat.cpu()
        flat = flat.to(torch.int64)
        if flat.numel() > 0:
            lo, hi = int(flat.min()), int(flat.max())
            if lo < 0 or hi >= self.num_embeddings:
                bad = lo if lo < 0 else hi
                raise IndexError(f"Embedding ids out of range: {bad} is not in [0, {self.num_embeddings})")
        return flat

    def prefetch(self, ids: torch.Tensor) -> None:
        """Starts looking up the rows of ``ids`` (a later batch's) in the background;
        a later ``forward`` given equal ids uses them instead of looking up. The two
        latest prefetches are kept (the next batch's while this one computes)."""
        flat = self._ids(ids)
        uniq, inverse = torch.unique(flat, return_inverse=True)
        pending = self._opt._tables.lookup_start(self._index, uniq.numpy())
        self._prefetched = self._prefetched[-1:] + [(flat, uniq, inverse, pending)]

    def _take_prefetched(self, flat: torch.Tensor):
        """The prefetch of exactly these ids, taken from the kept ones (or None)."""
        for i, ahead in enumerate(self._prefetched):
            if ahead[0].shape == flat.shape and torch.equal(ahead[0], flat):
                return self._prefetched.pop(i)
        return None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = self._ids(ids)
        dim = self.embedding_dim
        ahead = self._take_prefetched(flat)
        if ahead is not None:
            _, uniq, inverse, pending = ahead
            keys, order, rows = self._opt._tables.lookup_finish(pending, uniq.numpy())
            self.prefetch_hits += 1
        else:
            uniq, inverse = torch.unique(flat, return_inverse=True)
            keys, order, rows = self._opt._tables.lookup(self._index, uniq.numpy())
        weight = torch.from_numpy(rows)
        if self.training and torch.is_grad_enabled():
            weight.requires_grad_(True)
            self._opt._lookups.append((self._index, keys, weight))
        idx = torch.from_numpy(order)[inverse]
        if self.mode is None:
            out = F.embedding(idx, weight).reshape(*ids.shape, dim)
        else:
            bag = ids.shape[-1]
            out = F.embedding_bag(idx.reshape(-1, bag), weight, mode=self.mode).reshape(*ids.shape[:-1], dim)
        return out.to(ids.device) if ids.device.type != "cpu" else out


class DistributedOptimizer:
    """Trains ``model`` through the servers, as a ``torch.optim`` optimizer would.

    Its trainable dense parameters are flattened into one buffer (each parameter and
    its ``.grad`` become views into it), declared to the servers by worker 0 with its
    initial values and pulled by every worker, so all start from worker 0's values.
    Another worker's model must match worker 0's (names, shapes, embedding tables and
    settings), else ``ValueError`` names the difference. Its :class:`Embedding`
    modules' rows are trained with their own optimizer settings.

    ``optimizer``: ``"sgd"`` (``momentum``), ``"adagrad"`` or ``"adam"`` (``betas``),
    with ``lr``, ``weight_decay`` and ``eps`` as in ``torch.optim``. ``mode``:
    ``"sync"``, ``"async"`` or ``"bounded"`` (``staleness``). Under sync a version that
    still lacks a live worker's gradient ``sync_timeout_ms`` after its first one is
    applied without it. A request the servers do not answer within ``timeout`` seconds
    raises ``psrs.Error``. One per process.

    ``overlap=True`` (async and bounded modes): ``step()`` returns once the gradients
    are copied, and their push and the pull of the new dense values run while the
    next batch computes (lookups go on meanwhile); the values pulled are installed at
    the next ``step()`` (so the dense values a step computes on are one step older),
    ``pull()`` or ``synchronize()``.
    """

    def __init__(self, model: nn.Module, optimizer: str = "sgd", lr: float = 0.01, momentum: float = 0.0,
                 mode: str = "sync", staleness: int = 4, weight_decay: float = 0.0,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: Optional[float] = None,
                 sync_timeout_ms: int = 10000, max_rejections: int = 20, timeout: float = 120.0,
                 overlap: bool = False):
        _worker_only("psrs.torch.DistributedOptimizer")
        if _state["optimizer"] is not None:
            raise _psrs.Error("psrs.torch.DistributedOptimizer: one per process (the servers hold one model)")
        if not isinstance(model, nn.Module):
            raise ValueError(f"model: an nn.Module is needed, got {type(model).__name__}")
        if mode not in ("sync", "async", "bounded"):
            raise ValueError(f"mode={mode!r}: \"sync\", \"async\" or \"bounded\"")
        if max_rejections < 1:
            raise ValueError(f"max_rejections={max_rejections}: must be at least 1")
        if overlap and mode == "sync":
            raise ValueError("overlap=True: async and bounded modes only (a sync step waits for its version)")
        self.overlap = bool(overlap)
        self.model = model
        self.mode = mode
        self.max_rejections = int(max_rejections)
        self.rejected = 0  # gradients the servers rejected (each server counts once)
        self._lookups: List[Tuple[int, object, torch.Tensor]] = []
        self._embeddings = [m for _, m in model.named_modules() if isinstance(m, Embedding)]
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        for n, p in named:
            if p.dtype != torch.float32:
                raise ValueError(f"parameter {n} is {p.dtype}: psrs.torch trains float32 parameters (model.float())")
            if p.device.type != "cpu":
                raise ValueError(f"parameter {n} is on {p.device}: psrs.torch trains CPU parameters")
        total = sum(p.numel() for _, p in named)
        self._flat = torch.empty(total, dtype=torch.float32)
        self._grad = torch.zeros(total, dtype=torch.float32)
        self._params = []
        at = 0
        with torch.no_grad():
            for _, p in named:
                n = p.numel()
                self._flat[at:at + n].copy_(p.detach().reshape(-1))
                p.data = self._flat[at:at + n].view_as(p)
                p.grad = self._grad[at:at + n].view_as(p)
                self._params.append((p, at, n))
                at += n
        tables = []
        self._seeds = []  # each table's seed (its initial rows), for an export
        for i, (name, m) in enumerate((n, m) for n, m in model.named_modules() if isinstance(m, Embedding)):
            if m._opt is not None:
                raise _psrs.Error(f"embedding {name} belongs to another DistributedOptimizer")
            tables.append({"name": name, "rows": m.num_embeddings, "dim": m.embedding_dim,
                           "optimizer": m.optimizer_settings, "init_std": m.init_std,
                           "seed": i if m.seed is None else int(m.seed), "admit_after": m.admit_after,
                           "expire_after": m.expire_after, "fp16_wire": m.fp16_wire})
            self._seeds.append(tables[-1]["seed"])
        self._tables = _psrs.Tables(
            self._flat.numpy(), [(n, list(p.shape)) for n, p in named],
            _optimizer_settings(optimizer, lr, momentum, weight_decay, betas, eps),
            mode=mode, staleness=int(staleness), sync_timeout_ms=int(sync_timeout_ms), tables=tables,
            timeout=float(timeout))
        if _psrs.rank() == 0:
            self._tables.declare()
        else:
            self._tables.join(timeout)
        self._tables.pull()
        for i, m in enumerate(self._embeddings):
            m._opt, m._index = self, i
            if m.hot_cache_rows > 0:
                self._tables.set_hot_cache(i, m.hot_cache_rows, m.hot_cache_staleness)
        _state["optimizer"] = self

    @property
    def versions(self) -> List[int]:
        """Per server: the model version of the dense values held."""
        return self._tables.versions

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zeroes the dense gradients (kept as views of one buffer: ``set_to_none`` is
        ignored) and forgets the gradients of earlier lookups."""
        self._grad.zero_()
        for p, at, n in self._params:
            if p.grad is None or p.grad.data_ptr() != self._grad[at:].data_ptr():
                p.grad = self._grad[at:at + n].view_as(p)
        for _, _, w in self._lookups:
            w.grad = None

    def _gather_grads(self) -> None:
        """Gradients the user replaced (``model.zero_grad()`` sets them to None, and
        backward then makes new tensors) go back into the buffer."""
        for p, at, n in self._params:
            g = p.grad
            view = self._grad[at:at + n]
            if g is None:
                view.zero_()
            elif g.data_ptr() != view.data_ptr():
                view.copy_(g.detach().reshape(-1))
            else:
                continue
            p.grad = view.view_as(p)

    def step(self, closure: Optional[Callable[[], torch.Tensor]] = None):
        """Pushes the gradients (dense, and the rows of this step's lookups) to the
        servers and pulls the new dense values into the model; returns the closure's
        loss (None without one).

        With ``closure`` (which zeroes the gradients, computes the loss, calls
        ``backward()`` and returns the loss, as for ``torch.optim``), gradients a
        server rejected (computed on a version it left) are recomputed on the new
        values and pushed again, up to ``max_rejections`` times (then ``psrs.Error``).
        Without, they are dropped (counted in ``rejected``) and training goes on from
        the new values."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.overlap and closure is None:
            self._gather_grads()
            rows = [(t, k, w.grad.numpy()) for t, k, w in self._lookups if w.grad is not None]
            # the previous step's acceptance: this one's is known at the next
            accepted = self._tables.step(self._grad.numpy(), rows, None, False)
            self._lookups.clear()
            self.rejected += sum(1 for ok in accepted if not ok)
            return loss
        self.synchronize()
        send = None
        for _ in range(self.max_rejections):
            self._gather_grads()
            rows = [(t, k, w.grad.numpy()) for t, k, w in self._lookups if w.grad is not None]
            accepted = self._tables.step(self._grad.numpy(), rows, send)
            self._lookups.clear()
            tried = send if send is not None else [True] * len(accepted)
            rejected = [s for s, ok in enumerate(accepted) if tried[s] and not ok]
            if not rejected:
                return loss
            self.rejected += len(rejected)
            if closure is None:
                return loss
            send = [s in rejected for s in range(len(accepted))]
            with torch.enable_grad():
                loss = closure()
        raise _psrs.Error(f"the servers rejected this step's gradients {self.max_rejections} times in a row")

    def synchronize(self) -> None:
        """Waits for the step still in flight (``overlap=True``) and installs the dense
        values it pulled."""
        accepted = self._tables.synchronize()
        if accepted is not None:
            self.rejected += sum(1 for ok in accepted if not ok)

    def pull(self) -> None:
        """Pulls the servers' current dense values into the model (e.g. before
        evaluating: other workers trained since this one's last step)."""
        self.synchronize()
        self._tables.pull()
