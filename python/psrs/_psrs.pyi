"""Type stubs of the native module psrs._psrs (re-exported by the psrs package)."""

from os import PathLike
from typing import Callable, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

SCHEDULER: int
"""The scheduler's node id (1); also its group id."""
SERVER_GROUP: int
"""The group of every server (2)."""
WORKER_GROUP: int
"""The group of every worker (4)."""
ALL_GROUP: int
"""Every node (7)."""

class Error(Exception):
    """A cluster failure: a node not reachable, a server refusing a request (its reason
    in the message), no reply in time, the master unreachable."""

def start() -> None:
    """Joins the cluster as the role DMLC_ROLE names (DMLC_PS_ROOT_URI/PORT: the
    scheduler; DMLC_NUM_SERVER / DMLC_NUM_WORKER: the cluster's size): registers, waits
    for the node table and for every node to start. Once per process. Raises Error if
    the variables are wrong or the scheduler does not answer in time."""

def finalize() -> None:
    """Leaves the cluster: waits until every live node called finalize(), then stops.
    Objects created after start() should not be used afterwards."""

def barrier(group: int = ...) -> None:
    """Waits until every live node of ``group`` (a sum of SCHEDULER, SERVER_GROUP,
    WORKER_GROUP; default ALL_GROUP) reaches the barrier. ValueError for a bad group."""

def rank() -> int:
    """This node's rank within its role, from 0."""

def node_id() -> int:
    """This node's id: scheduler 1, server rank r 8 + 2r, worker rank r 9 + 2r."""

def role() -> str:
    """"scheduler", "server" or "worker"."""

def num_workers() -> int:
    """Workers in the cluster."""

def num_servers() -> int:
    """Servers in the cluster."""

def is_recovery() -> bool:
    """Whether this node took over the id of a node declared dead."""

def server_key_ranges(num_servers: Optional[int] = None) -> list[Tuple[int, int]]:
    """Each server rank's key range ``(begin, end)``, end exclusive (the last range
    also holds 2**64 - 1), for ``num_servers`` servers (default: this cluster's)."""

def read_records(path: Union[str, PathLike[str]]) -> Tuple[Union[npt.NDArray[np.float32], Tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.float32]]], npt.NDArray[np.float32]]:
    """Every example of the RecordIO file ``path`` (a path, or an ``s3://`` or
    ``http(s)://`` URL) as ``(features, labels)``, laid out
    like ``Task.records()`` (e.g. a held-out set to evaluate on). Needs no cluster.
    Raises Error for an unreadable or corrupt file, ValueError for dense records of
    different lengths."""

_Keys = Union[npt.NDArray[np.uint64], Sequence[int]]
_Vals = Union[npt.NDArray[np.floating], Sequence[float]]
_Lens = Union[npt.NDArray[np.int32], Sequence[int], None]

class KVWorker:
    """A KV worker of app ``app_id`` carrying values of ``dtype`` (float32 or float64).

    Keys are a sorted, unique uint64 array; each server owns a contiguous range of the
    key space and gets the keys in its range. Without ``lens`` every key has
    ``len(vals) // len(keys)`` values; with ``lens``, key i has ``lens[i]``.

    Every call returns a timestamp at once. A C-contiguous values array of the worker's
    dtype (and a uint64 keys array) is sent without a copy: do not change it until
    ``wait(ts)`` returned. Other inputs are converted once. Unsorted keys or values
    that do not fit raise ValueError before anything is sent.
    """

    def __init__(self, app_id: int = 0, dtype: npt.DTypeLike = None) -> None:
        """A worker for the servers of app ``app_id`` (dtype default float32). Needs
        start()."""
    @property
    def dtype(self) -> str:
        """The value dtype's name."""
    def push(self, keys: _Keys, vals: _Vals, lens: _Lens = None, cmd: int = 0) -> int:
        """Sends ``vals`` of ``keys`` to the servers; returns the request's timestamp."""
    def pull(self, keys: _Keys, out: Optional[npt.NDArray[np.floating]] = None, cmd: int = 0) -> int:
        """Asks for the values of ``keys``; returns the timestamp. With ``out`` (a
        C-contiguous writeable array of the worker's dtype), ``wait(ts)`` writes the
        values into it; else ``pull_result(ts)`` returns them."""
    def push_pull(
        self,
        keys: _Keys,
        vals: _Vals,
        lens: _Lens = None,
        out: Optional[npt.NDArray[np.floating]] = None,
        cmd: int = 0,
    ) -> int:
        """Pushes, and pulls the values after the push, in one round trip."""
    def wait(self, ts: int) -> None:
        """Waits until request ``ts`` completed (a pull with ``out``: the values are in
        it; a pull without: pull_result(ts) returns them). Releases the GIL;
        KeyboardInterrupt leaves the request pending (wait again). Raises Error if a
        server refused the request or a pull came back short."""
    def pull_result(self, ts: int, with_lens: bool = False) -> Union[npt.NDArray[np.floating], Tuple[npt.NDArray[np.floating], npt.NDArray[np.int32]]]:
        """Waits for pull ``ts`` and returns its values in key order (the ``out``
        array if one was given); with ``with_lens``, ``(values, lens)`` with each key's
        number of values."""

class ReqMeta:
    """A request's header, as a Python server handle sees it."""

    cmd: int
    """Application command sent with the request."""
    push: bool
    """The request carries values to apply."""
    pull: bool
    """The request wants values back."""
    sender: int
    """The requesting worker's node id."""
    timestamp: int
    """The request's timestamp (unique per worker)."""
    version: int
    """Application-defined version sent with the request."""
    lens: Optional[npt.NDArray[np.int32]]
    """Values per key; None when every key has the same number."""

_Handle = Callable[
    [ReqMeta, npt.NDArray[np.uint64], npt.NDArray[np.floating]],
    Union[None, npt.ArrayLike, Tuple[npt.ArrayLike, npt.ArrayLike]],
]

class KVServer:
    """A KV server of app ``app_id`` serving this server node's key range.

    ``handle``: "sum" (a push adds into the stored values; a pull returns them, zeros
    for unknown keys), "sgd" (stored -= lr * pushed), or a callable
    ``handle(meta, keys, vals)`` called for every valid request on the receiving
    thread with the GIL held (keep it short): ``vals`` are the pushed values (empty
    for a pull); return None for a push, the values of ``keys`` (or ``(vals, lens)``)
    for a pull. If it raises, the worker's wait raises Error with its message.
    Requests with unsorted keys or keys outside the range never reach it.
    """

    def __init__(
        self,
        app_id: int = 0,
        handle: Union[str, _Handle, None] = None,
        dtype: npt.DTypeLike = None,
        lr: float = 0.1,
    ) -> None:
        """Serves app ``app_id`` (handle default "sum", dtype default float32, ``lr``
        for "sgd"). Needs start()."""
    @property
    def key_range(self) -> Optional[Tuple[int, int]]:
        """``(begin, end)`` of this server's keys (end exclusive); None once closed."""
    def close(self) -> None:
        """Stops serving."""

class Task:
    """A task of the master: some chunks of the dataset, in pass ``epoch``."""

    @property
    def id(self) -> int:
        """Unique over the job."""
    @property
    def epoch(self) -> int:
        """The pass over the data, from 0."""
    @property
    def chunks(self) -> list[Tuple[str, int]]:
        """(path, chunk number) of each chunk."""
    def report(self, examples: int, loss_sum: float = 0.0, correct: int = 0) -> None:
        """Statistics sent with the task when it is reported finished (the
        scheduler's progress lines and stats endpoint show them)."""
    def records(self) -> Tuple[Union[npt.NDArray[np.float32], Tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.float32]]], npt.NDArray[np.float32]]:
        """The task's examples as ``(features, labels)``: dense features as a float32
        array of shape (n, dim), sparse ones as a CSR triple (indptr, indices,
        values); labels float32 of shape (n,). Raises Error for an unreadable file."""

class TaskClient:
    """A worker's connection to the master; ``psrs.tasks()`` drives it."""

    def __init__(self, train: Sequence[str], patience: float = 120.0) -> None:
        """Reports the dataset ``train`` (RecordIO files) to the master; keeps asking
        an unreachable master for ``patience`` seconds."""
    def next_task(self, finished: Optional[Task] = None) -> Optional[Task]:
        """Reports ``finished`` done and returns the next task (waiting while there
        is none yet); None when the job is complete."""
    def fail(self, task: Task) -> None:
        """Reports ``task`` failed; the master hands it out again."""

class Master:
    """The master on the scheduler node: cuts the dataset the workers report into
    tasks of ``chunks_per_task`` RecordIO chunks, runs ``epochs`` passes, times a task
    out after ``timeout_multiplier`` x the average task time (at least
    ``task_timeout_ms``), retries it up to ``max_retries`` times, and requeues a dead
    worker's tasks at once. State is kept in memory, or saved in ``work_dir`` (a
    restarted scheduler resumes it). ``stats_addr`` serves the statistics pages."""

    def __init__(
        self,
        epochs: int = 1,
        chunks_per_task: int = 1,
        task_timeout_ms: int = 10000,
        max_retries: int = 3,
        timeout_multiplier: float = 4.0,
        work_dir: Union[str, PathLike[str], None] = None,
        stats_addr: Optional[str] = None,
    ) -> None:
        """Starts serving; needs start() on the scheduler. ValueError for bad
        settings."""
    def close(self) -> None:
        """Stops serving tasks."""

class RustBench:
    """Benchmark aid (python/bench/bench_kv.py), not part of the package's API: a Rust
    float32 KV worker of one app in this process, timing the loops the benchmark times
    with :class:`KVWorker`."""

    def __init__(self, app_id: int) -> None:
        """A Rust worker of app ``app_id``. Needs start()."""
    def run(self, mode: str, keys: _Keys, vals: _Vals, inflight: int, seconds: float) -> Tuple[int, float]:
        """Pushes ``vals`` of ``keys`` (mode "push") or pulls ``keys`` ("pull"),
        ``inflight`` requests outstanding, for ``seconds``, without the GIL;
        ``(requests completed, seconds taken)``."""

def serve(
    epochs: int = 1,
    chunks_per_task: int = 1,
    task_timeout_ms: int = 10000,
    max_retries: int = 3,
    work_dir: Union[str, PathLike[str], None] = None,
    checkpoint_every: int = 20,
    stats_addr: Optional[str] = None,
) -> Optional[dict]:
    """What ``psrs.torch.init()`` does after start(): on a worker returns None at once;
    on the scheduler serves the master's tasks (as :class:`Master`), on a server the
    parameter tables (checkpoints in ``work_dir/checkpoints`` every
    ``checkpoint_every`` versions), until every node finalized; then returns a dict
    (a server's: ``rank``, ``version``, ``stored_rows`` per table)."""

class Tables:
    """A worker's connection to the parameter tables of one model (psrs.torch's
    DistributedOptimizer drives it): the flattened dense ``values`` (a C-contiguous,
    writeable float32 array that pulls write into), the dense ``params`` as (name,
    shape), their ``optimizer`` settings (a dict: ``name`` "sgd" / "adagrad" / "adam",
    ``lr``, ``momentum``, ``weight_decay``, ``betas``, ``eps``,
    ``initial_accumulator_value``), the update ``mode`` ("sync", "async", "bounded"
    with ``staleness``; sync applies a version without a live worker's gradient
    ``sync_timeout_ms`` after its first one), the embedding ``tables`` (dicts:
    ``name``, ``rows``, ``dim``, ``optimizer``, ``init_std``, ``seed``, and optionally
    ``admit_after``, ``expire_after``, ``fp16_wire``). A request not
    answered within ``timeout`` seconds raises Error. Waits release the GIL; Ctrl-C
    raises KeyboardInterrupt."""

    def __init__(
        self,
        values: npt.NDArray[np.float32],
        params: Sequence[Tuple[str, Sequence[int]]],
        optimizer: dict,
        mode: str = "sync",
        staleness: int = 4,
        sync_timeout_ms: int = 10000,
        tables: Sequence[dict] = ...,
        timeout: float = 120.0,
        app_id: int = 0,
    ) -> None:
        """Needs start() on a worker. ValueError for bad settings."""
    def declare(self) -> None:
        """Declares the model to every server with the current values (worker 0's
        initial values). ValueError if a server holds another model."""
    def join(self, patience: float = 120.0) -> None:
        """Waits until the model is declared; ValueError naming how this worker's
        model differs from the declared one."""
    def pull(self) -> None:
        """Pulls the servers' current dense values into ``values``."""
    def lookup(self, table: int, ids: npt.NDArray[np.int64], cached: bool = True) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Rows ``ids`` (unique) of table ``table``: ``(keys, order, rows)``, the keys
        sorted, ``rows[order[i]]`` being row ``ids[i]``. With a hot-row cache its fresh
        rows are served from it unless ``cached`` is False."""
    def lookup_start(self, table: int, ids: npt.NDArray[np.int64]) -> "PendingLookup":
        """Starts looking up rows ``ids`` (unique) on a thread of its own (a prefetch)."""
    def lookup_finish(self, pending: "PendingLookup", ids: npt.NDArray[np.int64]) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Waits for a ``lookup_start``; its answer as ``lookup`` gives it (looked up
        again here if the prefetch failed)."""
    def dump(self, table: int) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        """Every row of table ``table`` the servers store: ids (in no order) and rows."""
    def step(self, dense_grad: _Vals, rows: Sequence[Tuple[int, _Keys, _Vals]] = ..., send: Optional[Sequence[bool]] = None, wait: bool = True) -> list[bool]:
        """Pushes the dense gradient and the rows' ``(table, keys, grads)`` to the
        servers (those ``send`` names), then pulls the new dense values (under sync
        once the version pushed to is applied); per server whether it took them.
        ``wait=False``: copies the gradients, runs the push and pull on a thread of
        their own and returns the acceptance of the step that was in flight before."""
    def set_hot_cache(self, table: int, rows: int, staleness: int) -> None:
        """Gives table ``table`` a cache of its ``rows`` most looked-up rows on this
        worker, each served for ``staleness`` steps after the step it was pulled in."""
    def hot_cache_stats(self, table: int) -> Optional[Tuple[int, int, int, int]]:
        """``(hits, pulls, rows, evictions)`` of table ``table``'s hot-row cache, or None."""
    def synchronize(self) -> Optional[list[bool]]:
        """Waits for the step in flight (``wait=False``) and installs the values it
        pulled; its acceptance, or None if none was in flight."""
    def idle(self) -> None:
        """Tells the servers this worker holds no task (sync versions stop waiting
        for it until its next step)."""
    @property
    def versions(self) -> list[int]:
        """Per server: the version of the dense values last pulled."""

class PendingLookup:
    """A lookup started by ``Tables.lookup_start``."""
