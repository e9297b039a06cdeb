"""psrs from Python: this process as a node of a psrs parameter-server cluster.

Start every process with the DMLC_* variables (``scripts/local.sh N M python x.py``);
``start()`` joins the cluster as the role DMLC_ROLE names. Workers push and pull numpy
arrays by sorted uint64 keys (:class:`KVWorker`); servers keep them
(:class:`KVServer`); the scheduler can serve the master's tasks (:class:`Master`),
which workers train on with ``for task in tasks(files): ...``.

Waits release the GIL and can be interrupted with Ctrl-C. Bad input raises
``ValueError``; cluster failures raise :class:`Error`.
"""

from typing import Iterator, Sequence, Union
import os

from ._psrs import (  # noqa: F401
    ALL_GROUP,
    SCHEDULER,
    SERVER_GROUP,
    WORKER_GROUP,
    Error,
    KVServer,
    KVWorker,
    Master,
    ReqMeta,
    Task,
    TaskClient,
    barrier,
    finalize,
    is_recovery,
    node_id,
    num_servers,
    num_workers,
    rank,
    read_records,
    role,
    server_key_ranges,
    start,
)

__all__ = [
    "ALL_GROUP", "SCHEDULER", "SERVER_GROUP", "WORKER_GROUP", "Error", "KVServer",
    "KVWorker", "Master", "ReqMeta", "Task", "TaskClient", "barrier", "finalize",
    "is_recovery", "node_id", "num_servers", "num_workers", "rank", "read_records", "role",
    "server_key_ranges", "start",
    "tasks",
]


_client = None  # one connection to the master per process, shared by tasks() loops


def tasks(train: Union[str, Sequence[str]], patience: float = 120.0) -> Iterator[Task]:
    """Yields the master's tasks for this worker until the job is complete.

    ``train``: the RecordIO file(s) of the dataset (reported to the master; the first
    report of the job counts). A task is reported finished when the loop body returns
    for it (with the statistics given to ``task.report(...)``), and failed (handed out
    again, up to the master's retry limit) if the body raises or the loop is left with
    ``break``; a later ``tasks()`` loop goes on with the job. ``task.records()`` gives
    its examples as numpy arrays.
    """
    global _client
    files = [os.fspath(train)] if isinstance(train, (str, os.PathLike)) else [os.fspath(f) for f in train]
    if _client is None:
        _client = TaskClient(files, patience)
    client = _client
    finished = None
    while True:
        task = client.next_task(finished)
        if task is None:
            return
        done = False
        try:
            yield task
            done = True
        finally:
            if not done:
                # the body raised, or the loop was left: give the task back
                try:
                    client.fail(task)
                except Exception:  # the cluster may be going down with us
                    pass
        finished = task
