"""psrs's inference runner: one long-lived Python process per cluster worker.

The worker starts it (`python -c`, with this source in PSRS_RUNNER_SOURCE), sends
requests on its stdin and reads replies on the stdout it was started with; whatever
the user's code prints goes to stderr (the worker's log). A frame is a 4-byte
little-endian length of the rest, a 4-byte little-endian length of a JSON header, the
header, then binary data.

It holds several jobs' models at once, each built by a loader thread while the main
thread goes on answering requests (so a job's model is warmed while the runner serves
another job's queries). Requests (header "op"):
  preload {modules}: import these modules on the loader thread (libraries every model
          uses, e.g. torch), before any model queued after them; answered at once
  warm    {job, torch | runner [, pythonpath], threads}: queue this job's model (a
          torch.export program, loaded with torch.export.load, a TorchScript file with
          torch.jit.load, or import module:function) for the loader thread and answer at once (a model already held or loading is kept;
          one that failed is tried again)
  load    the same, answered once the model is ready (or its load failed)
  drop    {job}: forget this job's model (one still loading is dropped when it ends)
  status  {}: every model held, as {job, state: loading | ready | failed, error,
          bytes, rss_growth, load_s, cpu_s, ready_ago_ms}, and the process's "rss"
  forward {job, rows, cols} + float32 [rows, cols]: the job's torch model's
          logits, answered as {rows, cols} + float32 [rows, classes]
  call    {job, inputs: "paths", paths} or {job, inputs: "bytes", lens} + the bytes: the
          job's function over the list of inputs, answered as {outputs: [[field, ...]]}
Every reply has "ok"; a request that raises is answered {"ok": false, "error": "Type:
message"} and the runner goes on. It exits when its stdin closes.
"""

import gc
import importlib
import json
import math
import os
import queue
import struct
import sys
import threading
import time
import traceback

MAX_FRAME = 1 << 30


def read_exact(f, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            if buf:
                raise EOFError("the worker closed the stream inside a frame")
            return None
        buf += chunk
    return bytes(buf)


def read_frame(f):
    head = read_exact(f, 4)
    if head is None:
        return None
    (rest,) = struct.unpack("<I", head)
    if rest < 4 or rest > MAX_FRAME:
        raise EOFError(f"a frame of {rest} bytes")
    body = read_exact(f, rest)
    if body is None:
        raise EOFError("the worker closed the stream inside a frame")
    (hlen,) = struct.unpack("<I", body[:4])
    if hlen > rest - 4:
        raise EOFError(f"a header of {hlen} bytes in a frame of {rest}")
    return json.loads(body[4 : 4 + hlen]), body[4 + hlen :]


def write_frame(f, header, tail=b""):
    h = json.dumps(header).encode()
    f.write(struct.pack("<II", 4 + len(h) + len(tail), len(h)) + h)
    if tail:
        f.write(tail)
    f.flush()


def rss():
    """The process's resident memory, bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def set_threads(n):
    torch = sys.modules.get("torch")
    if torch is not None and n > 0:
        torch.set_num_threads(n)


def is_exported_program(path):
    """True if `path` is a torch.export archive (torch.export.save: a zip whose
    entries hold an `archive_format` file), False for TorchScript's zip."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return any(n.rsplit("/", 1)[-1] == "archive_format" for n in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def load_torch(path):
    """The model in `path`, ready to call: a torch.export program (.pt2, its module)
    or a TorchScript file (in eval mode)."""
    import torch

    if is_exported_program(path):
        return torch.export.load(path).module()
    model = torch.jit.load(path, map_location="cpu")
    model.eval()
    return model


def spec_of(h):
    """What identifies a model in a request: a job asked twice for the same model keeps it."""
    return (h.get("torch"), h.get("runner"), h.get("pythonpath"))


class Built:
    """A model as its load left it: a torch module (a torch.export program's or
    TorchScript) or the user's function, the objects holding its memory, and the
    sys.path entry its function needs."""

    def __init__(self, model=None, fn=None, holds=(), path=None):
        self.model, self.fn, self.holds, self.path = model, fn, list(holds), path


IMPORT = threading.Lock()  # sys.path and sys.modules are changed by one load at a time


def build(h):
    """Loads the model a `warm`/`load` request names (load_torch, or a fresh import of
    module:function) and returns it as a Built; raises what the user's code raised."""
    threads = int(h.get("threads") or 1)
    if h.get("torch"):
        import torch  # noqa: F401  (set_threads sets its threads)

        set_threads(threads)
        model = load_torch(h["torch"])
        return Built(model=model, holds=[model])
    module, _, name = h["runner"].partition(":")
    path = h.get("pythonpath") or None
    with IMPORT:
        if path:
            sys.path.insert(0, path)
        try:
            importlib.invalidate_caches()
            fresh = module not in sys.modules  # torch, the stdlib: imported once, left alone
            mod = importlib.import_module(module)
            if fresh:
                # each job gets its own copy of the module (its module-level model built
                # for it): the next job importing the same name imports it afresh
                for m in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
                    del sys.modules[m]
        except BaseException:
            if path:
                sys.path.remove(path)
            raise
    fn = getattr(mod, name, None)
    if not callable(fn):
        release(Built(path=path))
        raise AttributeError(f"module {module!r} has no function {name!r}")
    set_threads(threads)
    holds = list(vars(mod).values())
    holds += [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if c.cell_contents is not None]
    return Built(fn=fn, holds=holds, path=path)  # path stays on sys.path while it is held


def release(b):
    """Takes a dropped model's directory off sys.path (without the import lock: a drop
    must not wait for another model's import)."""
    if b is not None and b.path:
        try:
            sys.path.remove(b.path)
        except ValueError:
            pass


def held_bytes(objs):
    """Bytes of the tensors (torch modules' parameters and buffers, tensors, numpy arrays)
    among `objs`, each storage counted once."""
    torch = sys.modules.get("torch")
    seen, total = set(), 0

    def tensor(t):
        nonlocal total
        key = (t.data_ptr(), t.numel())
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()

    for o in objs:
        try:
            if torch is not None and isinstance(o, torch.nn.Module):
                for t in list(o.parameters()) + list(o.buffers()):
                    tensor(t)
            elif torch is not None and isinstance(o, torch.Tensor):
                tensor(o)
            elif type(o).__name__ == "ndarray" and isinstance(getattr(o, "nbytes", None), int):
                if id(o) not in seen:
                    seen.add(id(o))
                    total += o.nbytes
        except Exception:  # a user's object that does not answer as it claims
            continue
    return total


class Model:
    """One job's model: queued, loading, ready or failed; built by the loader thread."""

    def __init__(self, job, h):
        self.job, self.h, self.spec = job, h, spec_of(h)
        self.state, self.error, self.built = "loading", None, None
        self.bytes = self.rss_growth = 0
        self.load_s = self.cpu_s = 0.0
        self.ready_at = None
        self.dropped = False
        self.done = threading.Event()

    def status(self, now):
        s = {"job": self.job, "state": self.state, "error": self.error, "bytes": self.bytes,
             "rss_growth": self.rss_growth, "load_s": round(self.load_s, 4), "cpu_s": round(self.cpu_s, 4)}
        if self.ready_at is not None:
            s["ready_ago_ms"] = max(0, int((now - self.ready_at) * 1000))
        return s


class State:
    """The models this runner holds, by job, and the loader thread's queue."""

    def __init__(self):
        self.models = {}
        self.lock = threading.Lock()
        self.todo = queue.Queue()
        threading.Thread(target=self.loader, name="psrs-loader", daemon=True).start()

    def loader(self):
        while True:
            m = self.todo.get()
            if isinstance(m, list):  # modules to preload
                for name in m:
                    try:
                        importlib.import_module(name)
                    except BaseException:  # a missing library fails the models that need it, later
                        traceback.print_exc()
                continue
            if m.dropped:
                m.done.set()
                continue
            t0, c0, r0 = time.monotonic(), time.thread_time(), rss()
            built, error = None, None
            try:
                built = build(m.h)
            except BaseException as e:  # the user's code raised (or exited): this load failed
                traceback.print_exc()
                error = one_line(e)
            took, cpu, grew = time.monotonic() - t0, time.thread_time() - c0, rss() - r0
            size = held_bytes(built.holds) if built else 0
            with self.lock:
                m.load_s, m.cpu_s, m.rss_growth = took, cpu, grew
                if built is not None:
                    built.holds = []  # counted; the model and function keep what they use
                if m.dropped:
                    release(built)
                elif error is not None:
                    m.state, m.error = "failed", error
                else:
                    m.built, m.bytes = built, size if size > 0 else max(grew, 0)
                    m.state, m.ready_at = "ready", time.monotonic()
            m.done.set()

    def warm(self, h):
        job = int(h["job"])
        with self.lock:
            m = self.models.get(job)
            if m is not None and m.spec == spec_of(h) and m.state != "failed":
                return m
            if m is not None:
                self.forget(m)
            m = self.models[job] = Model(job, h)
        self.todo.put(m)
        return m

    def forget(self, m):
        """Drops `m` (the lock held): freed now if built, when its load ends if loading."""
        m.dropped = True
        self.models.pop(m.job, None)
        release(m.built)
        m.built = None

    def ready(self, job):
        with self.lock:
            m = self.models.get(job)
        if m is None:
            raise RuntimeError(f"job {job}'s model is not loaded in this runner")
        if m.state != "ready":
            why = f": {m.error}" if m.error else ""
            raise RuntimeError(f"job {job}'s model is not ready ({m.state}{why})")
        return m.built


def op_preload(st, h, tail):
    st.todo.put([str(x) for x in h["modules"]])
    return {"ok": True}, b""


def op_warm(st, h, tail):
    st.warm(h)
    return {"ok": True}, b""


def op_load(st, h, tail):
    m = st.warm(h)
    m.done.wait()
    if m.state == "failed":
        return {"ok": False, "error": m.error}, b""
    if m.state != "ready":
        return {"ok": False, "error": "RuntimeError: the model was dropped while it loaded"}, b""
    return {"ok": True}, b""


def op_drop(st, h, tail):
    with st.lock:
        m = st.models.get(int(h["job"]))
        if m is not None:
            st.forget(m)
    gc.collect()
    return {"ok": True}, b""


def op_status(st, h, tail):
    now = time.monotonic()
    with st.lock:
        models = [m.status(now) for m in sorted(st.models.values(), key=lambda m: m.job)]
    return {"ok": True, "models": models, "rss": rss()}, b""


def to_bytes_le(t):
    """A float32 tensor's bytes, little-endian."""
    try:
        return t.numpy().astype("<f4", copy=False).tobytes()
    except (ImportError, RuntimeError, TypeError):
        flat = t.reshape(-1).tolist()
        return struct.pack(f"<{len(flat)}f", *flat)


def op_forward(st, h, tail):
    import torch

    b = st.ready(int(h["job"]))
    if b.model is None:
        raise RuntimeError("no torch model loaded for this job")
    rows, cols = int(h["rows"]), int(h["cols"])
    if len(tail) != rows * cols * 4:
        raise ValueError(f"{len(tail)} bytes for a float32 batch [{rows}, {cols}]")
    # the worker sends little-endian float32, the byte order of the machines psrs runs on
    x = torch.frombuffer(bytearray(tail), dtype=torch.float32).reshape(rows, cols)
    with torch.inference_mode():
        y = b.model(x)
    if isinstance(y, (tuple, list)) and y:
        y = y[0]
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"the model returned {type(y).__name__}, not a tensor of logits [N, classes]")
    shape = list(y.shape)
    if y.dim() != 2:
        raise ValueError(f"the model returned shape {shape}: it must return logits [N, classes]")
    y = y.detach().to(torch.float32).contiguous()
    return {"ok": True, "rows": shape[0], "cols": shape[1]}, to_bytes_le(y)


def scalar(v, i):
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    item = getattr(v, "item", None)  # numpy and torch scalars
    if item is not None and getattr(v, "ndim", 0) == 0:
        return scalar(item(), i)
    raise TypeError(f"output {i} holds a {type(v).__name__}: return a string, a number or a list of them")


def fields(v, i):
    tolist = getattr(v, "tolist", None)  # numpy arrays and tensors
    if tolist is not None and getattr(v, "ndim", 0) >= 1:
        v = tolist()
    if isinstance(v, (list, tuple)):
        return [scalar(x, i) for x in v]
    return [scalar(v, i)]


def op_call(st, h, tail):
    b = st.ready(int(h["job"]))
    if b.fn is None:
        raise RuntimeError("no function loaded for this job")
    if h["inputs"] == "paths":
        inputs = list(h["paths"])
    else:
        inputs, at = [], 0
        for n in h["lens"]:
            inputs.append(tail[at : at + n])
            at += n
    out = b.fn(inputs)
    if out is None or isinstance(out, (str, bytes, dict)):
        kind = type(out).__name__
        raise TypeError(f"the function returned a {kind}: it must return a list, one output per input")
    out = list(out)
    return {"ok": True, "outputs": [fields(v, i) for i, v in enumerate(out)]}, b""


def one_line(e):
    text = f"{type(e).__name__}: {e}".strip()
    return text.splitlines()[0] if text else type(e).__name__


def die_with_the_worker():
    """Linux: the kernel kills this process when the worker that started it ends (a
    function busy for an hour would otherwise only notice at its next read)."""
    parent = os.getppid()
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the worker ended before the request above
        os._exit(1)


OPS = {"preload": op_preload, "warm": op_warm, "load": op_load, "drop": op_drop, "status": op_status, "forward": op_forward, "call": op_call}


def main():
    die_with_the_worker()
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the user's prints go to stderr, never into the protocol
    sys.stdout = sys.stderr
    st = State()
    try:
        write_frame(out, {"ok": True, "pid": os.getpid(), "python": sys.version.split()[0]})
    except OSError:
        return
    while True:
        try:
            frame = read_frame(inp)
        except EOFError as e:
            print(f"psrs runner: {e}", file=sys.stderr)
            return
        if frame is None:
            return
        h, tail = frame
        try:
            op = OPS.get(h.get("op"))
            if op is None:
                raise ValueError(f"unknown request {h.get('op')!r}")
            reply, data = op(st, h, tail)
        except Exception as e:  # the user's code raised: this request fails, the runner goes on
            traceback.print_exc()
            reply, data = {"ok": False, "error": one_line(e)}, b""
        try:
            write_frame(out, reply, data)
        except OSError:
            return  # the worker is gone


main()
