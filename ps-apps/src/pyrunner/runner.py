"""psrs's inference runner: one long-lived Python process per cluster worker.

The worker starts it (`python -c`, with this source in PSRS_RUNNER_SOURCE), sends
requests on its stdin and reads replies on the stdout it was started with; whatever
the user's code prints goes to stderr (the worker's log). A frame is a 4-byte
little-endian length of the rest, a 4-byte little-endian length of a JSON header, the
header, then binary data.

Requests (header "op"):
  load    {job, torch | runner [, pythonpath], threads}: drop the previous job's model,
          load this one (a torch.export program with torch.export.load, a TorchScript
          file with torch.jit.load, or import module:function)
  forward {rows, cols} + float32 [rows, cols]: the torch model's logits,
          answered as {rows, cols} + float32 [rows, classes]
  call    {inputs: "paths", paths} or {inputs: "bytes", lens} + the bytes: the user's
          function over the list of inputs, answered as {outputs: [[field, ...], ...]}
Every reply has "ok"; a request that raises is answered {"ok": false, "error": "Type:
message"} and the runner goes on. It exits when its stdin closes.
"""

import gc
import importlib
import json
import math
import os
import struct
import sys
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


class State:
    """The model of the job this runner works on (one at a time)."""

    def __init__(self):
        self.job = None
        self.model = None
        self.fn = None
        self.module = None  # the user's module, when this job's load imported it
        self.path = None

    def unload(self):
        self.job = self.model = self.fn = None
        if self.module:
            # a later job importing the same module gets a fresh one (its module-level
            # model built again), and this one's memory is freed
            for name in [m for m in sys.modules if m == self.module or m.startswith(self.module + ".")]:
                del sys.modules[name]
            self.module = None
        if self.path and self.path in sys.path:
            sys.path.remove(self.path)
        self.path = None
        gc.collect()


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


def load(st, h):
    st.unload()
    threads = int(h.get("threads") or 1)
    if h.get("torch"):
        import torch  # noqa: F401  (set_threads sets its threads)

        set_threads(threads)
        st.model = load_torch(h["torch"])
    else:
        spec = h["runner"]
        module, _, name = spec.partition(":")
        if h.get("pythonpath"):
            st.path = h["pythonpath"]
            sys.path.insert(0, st.path)
        importlib.invalidate_caches()
        if module not in sys.modules:  # a module imported before (torch, the stdlib) is left alone
            st.module = module
        mod = importlib.import_module(module)
        fn = getattr(mod, name, None)
        if not callable(fn):
            raise AttributeError(f"module {module!r} has no function {name!r}")
        st.fn = fn
        set_threads(threads)
    st.job = h["job"]
    return {"ok": True}, b""


def to_bytes_le(t):
    """A float32 tensor's bytes, little-endian."""
    try:
        return t.numpy().astype("<f4", copy=False).tobytes()
    except (ImportError, RuntimeError, TypeError):
        flat = t.reshape(-1).tolist()
        return struct.pack(f"<{len(flat)}f", *flat)


def forward(st, h, tail):
    import torch

    if st.model is None:
        raise RuntimeError("no torch model loaded")
    rows, cols = int(h["rows"]), int(h["cols"])
    if len(tail) != rows * cols * 4:
        raise ValueError(f"{len(tail)} bytes for a float32 batch [{rows}, {cols}]")
    # the worker sends little-endian float32, the byte order of the machines psrs runs on
    x = torch.frombuffer(bytearray(tail), dtype=torch.float32).reshape(rows, cols)
    with torch.inference_mode():
        y = st.model(x)
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


def call(st, h, tail):
    if st.fn is None:
        raise RuntimeError("no function loaded")
    if h["inputs"] == "paths":
        inputs = list(h["paths"])
    else:
        inputs, at = [], 0
        for n in h["lens"]:
            inputs.append(tail[at : at + n])
            at += n
    out = st.fn(inputs)
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
    ops = {"load": load, "forward": forward, "call": call}
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
            op = ops.get(h.get("op"))
            if op is None:
                raise ValueError(f"unknown request {h.get('op')!r}")
            reply, data = op(st, h, tail) if op is not load else op(st, h)
        except Exception as e:  # the user's code raised: this request fails, the runner goes on
            traceback.print_exc()
            if h.get("op") == "load":
                st.unload()
            reply, data = {"ok": False, "error": one_line(e)}, b""
        try:
            write_frame(out, reply, data)
        except OSError:
            return  # the worker is gone


main()
