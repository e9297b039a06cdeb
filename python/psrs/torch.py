"""PyTorch training through psrs: a model's parameters and embedding tables live on the
parameter servers, which also run its optimizer.

The same script runs in every role (launch it with ``scripts/local.sh``, Slurm, ...)::

    import psrs, psrs.torch as pt

    if pt.init(epochs=2):                       # the scheduler and servers serve here
        model = Net()                           # and get False once the job is done
        opt = pt.DistributedOptimizer(model, optimizer="sgd", lr=0.05, momentum=0.9)
        for task in psrs.tasks(train_files):    # the master's tasks: retried elsewhere
            x, y = task.records()               # if this worker dies
            for xb, yb in batches(x, y):
                opt.zero_grad()
                loss_fn(model(torch.from_numpy(xb)), yb).backward()
                opt.step()                      # push gradients, pull new values

- The dense parameters (every trainable ``nn.Parameter``, flattened) are cut into one
  block per server. Worker 0's initial values are what every worker starts from.
- :class:`Embedding` rows live on the servers, created as they are trained; a batch
  pulls only its unique rows, so a table can be far larger than a worker's memory.
- The optimizer (``"sgd"`` with momentum, ``"adagrad"``, ``"adam"``, torch's
  arithmetic) runs on the servers with its per-value state, which is checkpointed,
  replicated (``PS_REPLICAS``) and restored with the rest of the server's state.
- ``mode="sync"`` trains on model versions exactly as ``psrs train --mode sync``: each
  version applies the mean of one gradient per live worker, a gradient computed on an
  older version is rejected (recomputed when ``step`` is given a closure, else
  dropped), and ``step()`` returns once the version it contributed to is applied.
  ``"async"`` applies every gradient at once; ``"bounded"`` rejects gradients more than
  ``staleness`` versions old.

Training done, :func:`export` writes the model (its dense parameters and the rows the
servers store) as a torch.export program, which an inference job of a jobs cluster
serves; :func:`exported` gives it as a plain ``nn.Module``.

Bad input raises ``ValueError`` (``IndexError`` for ids out of range) with one line
naming the problem; cluster failures raise :class:`psrs.Error`.

``init()`` and the other functions need no PyTorch (a scheduler or server process
need not load it); :class:`Embedding` and :class:`DistributedOptimizer` import it.
"""

import atexit
import os
from typing import Dict, Optional

from . import _psrs
from ._torch_state import _state, _worker_only

__all__ = ["init", "rank", "num_workers", "barrier", "server_stats", "Embedding", "DistributedOptimizer",
           "export", "exported"]



def init(epochs: int = 1, chunks_per_task: int = 1, task_timeout_ms: int = 10000, max_retries: int = 3,
         work_dir: Optional[str] = None, checkpoint_every: int = 20, stats_addr: Optional[str] = None) -> bool:
    """Joins the cluster as the role the ``DMLC_*`` / ``PS_*`` variables (or Slurm's)
    name. On a worker it returns ``True`` at once. On the scheduler (which serves the
    master's tasks for ``psrs.tasks()``: ``epochs`` passes, ``chunks_per_task``, a task
    retried after ``task_timeout_ms`` at least, given up after ``max_retries``) and on
    the servers (the parameter tables) it serves until every worker is done, then
    returns ``False``.

    ``work_dir``: the master's state (a restarted scheduler resumes it) and the
    servers' checkpoints, every ``checkpoint_every`` versions (a replacement server
    restores its own). ``stats_addr``: the scheduler's statistics endpoint. Once per
    process: a second call raises ``psrs.Error``.
    """
    if _state["init"]:
        raise _psrs.Error("psrs.torch.init() was called already: once per process")
    _state["init"] = True
    _psrs.start()
    wd = os.fspath(work_dir) if work_dir is not None else None
    stats = _psrs.serve(epochs=epochs, chunks_per_task=chunks_per_task, task_timeout_ms=task_timeout_ms,
                        max_retries=max_retries, work_dir=wd, checkpoint_every=checkpoint_every,
                        stats_addr=stats_addr)
    if stats is None:
        atexit.register(_shutdown)
        return True
    _state["server_stats"] = stats
    return False


def _shutdown():
    """At exit of a worker: its step in flight is done, no sync version waits for it
    any more; leave the cluster."""
    opt = _state["optimizer"]
    if opt is not None:
        try:
            opt.synchronize()
        except Exception:  # the cluster may be gone already
            pass
        try:
            opt._tables.idle()
        except Exception:  # the cluster may be gone already
            pass
    try:
        _psrs.role()
    except _psrs.Error:
        return  # finalized already
    _psrs.finalize()


def rank() -> int:
    """This worker's rank, from 0."""
    _worker_only("psrs.torch.rank()")
    return _psrs.rank()


def num_workers() -> int:
    """Workers in the cluster."""
    return _psrs.num_workers()


def barrier() -> None:
    """Waits until every live worker reached this barrier."""
    _worker_only("psrs.torch.barrier()")
    _psrs.barrier(_psrs.WORKER_GROUP)


def server_stats() -> Optional[Dict]:
    """After ``init()`` returned False: on a server, its ``rank`` and its own key
    range's ``version`` and ``stored_rows`` (per embedding table); on the scheduler an
    empty dict. None on workers."""
    return _state["server_stats"]


def __getattr__(name):
    """Embedding, DistributedOptimizer, export and exported, which need torch, load on
    first use."""
    if name in ("Embedding", "DistributedOptimizer"):
        from . import _torch_train

        return getattr(_torch_train, name)
    if name in ("export", "exported"):
        from . import _torch_export

        return getattr(_torch_export, name)
    raise AttributeError(f"module 'psrs.torch' has no attribute {name!r}")
