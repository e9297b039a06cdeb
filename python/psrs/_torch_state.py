"""The state psrs.torch keeps per process (whether ``init()`` ran, the optimizer, a
server's statistics), shared by :mod:`psrs.torch` and the training classes it loads on
first use."""

from . import _psrs

_state = {"init": False, "optimizer": None, "server_stats": None}


def _worker_only(what: str):
    """Raises psrs.Error naming `what` unless init() ran and this process is a worker."""
    if not _state["init"]:
        raise _psrs.Error(f"{what}: call psrs.torch.init() first")
    if _psrs.role() != "worker":
        raise _psrs.Error(f"{what}: runs on workers (init() returned False here)")
