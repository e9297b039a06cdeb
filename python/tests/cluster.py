"""Test harness: a local psrs cluster of real processes on 127.0.0.1.

Every node's command is given per role (a Python script, or the psrs binary for Rust
nodes); output goes to files; a hard time limit kills every process, each by its pid.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from ports import free_port  # noqa: E402,F401  (scripts/lib/ports.py; the tests import it from here)


def psrs_bin() -> str:
    """The psrs binary (an absolute path): $PSRS_BIN, else target/{release,debug}/psrs
    (newest)."""
    if os.environ.get("PSRS_BIN"):
        return os.path.abspath(os.environ["PSRS_BIN"])
    found = [ROOT / "target" / p / "psrs" for p in ("release", "debug")]
    found = [p for p in found if p.exists()]
    if not found:
        raise RuntimeError("no psrs binary: run `cargo build` (or set PSRS_BIN)")
    return str(max(found, key=lambda p: p.stat().st_mtime))




def py(script: str, *args: str) -> list:
    """The command running tests/nodes/SCRIPT with this interpreter."""
    return [sys.executable, str(HERE / "nodes" / script), *args]


class Node:
    def __init__(self, role, cmd, env, out_dir, name):
        self.role = role
        self.name = name
        self.out = out_dir / f"{name}.out"
        self.err = out_dir / f"{name}.err"
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen(cmd, env=env, stdout=o, stderr=e, stdin=subprocess.DEVNULL)

    @property
    def pid(self):
        return self.proc.pid

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Cluster:
    """A scheduler, servers and workers, each with its own command."""

    def __init__(self, tmp_path, servers, workers, limit=120.0, env=None):
        self.servers, self.workers = servers, workers
        self.dir = Path(tmp_path)
        self.port = free_port()
        self.deadline = time.monotonic() + limit
        self.nodes = []
        self.env = dict(os.environ)
        self.env.update(
            DMLC_PS_ROOT_URI="127.0.0.1",
            DMLC_PS_ROOT_PORT=str(self.port),
            DMLC_NUM_SERVER=str(servers),
            DMLC_NUM_WORKER=str(workers),
            DMLC_NODE_HOST="127.0.0.1",
            PYTHONUNBUFFERED="1",
        )
        self.env.update(env or {})

    def spawn(self, role, cmd, env=None):
        e = dict(self.env, DMLC_ROLE=role)
        e.update(env or {})
        n = Node(role, cmd, e, self.dir, f"{role}{sum(x.role == role for x in self.nodes)}")
        self.nodes.append(n)
        return n

    def start(self, scheduler, server, worker):
        """Starts every node: the commands per role."""
        self.spawn("scheduler", scheduler)
        for _ in range(self.servers):
            self.spawn("server", server)
        for _ in range(self.workers):
            self.spawn("worker", worker)
        return self

    def role(self, role):
        return [n for n in self.nodes if n.role == role]

    def wait_until(self, pred, what):
        while not pred():
            if time.monotonic() > self.deadline:
                self.kill_all()
                raise AssertionError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.02)

    def wait(self, nodes=None):
        """Waits for `nodes` (default all) to exit; their exit codes. Kills every node
        and fails at the time limit."""
        nodes = nodes if nodes is not None else self.nodes
        self.wait_until(lambda: all(n.proc.poll() is not None for n in nodes), "the nodes to exit")
        return [n.proc.returncode for n in nodes]

    def kill_all(self):
        for n in self.nodes:
            n.kill()

    def logs(self) -> str:
        return "\n".join(
            f"--- {n.name} (pid {n.pid}, exit {n.proc.poll()})\n{n.stdout()}{n.stderr()[-4000:]}"
            for n in self.nodes
        )

    def assert_ok(self, nodes=None):
        codes = self.wait(nodes)
        assert all(c == 0 for c in codes), f"exit codes {codes}\n{self.logs()}"


def fashion_mnist(dir, split) -> str:
    """Fashion-MNIST's `split` ("train" or "t10k") converted to RecordIO in `dir`, 1000
    records per chunk; fails (never skips) when the dataset is not installed."""
    images = FASHION_MNIST / f"{split}-images-idx3-ubyte.gz"
    if not images.exists():
        pytest.fail(f"{FASHION_MNIST} is absent: apt-get install dataset-fashion-mnist "
                    "(scripts/install-deps.sh does)")
    out = Path(dir) / f"{split}.rio"
    subprocess.run(
        [psrs_bin(), "convert", "--format", "idx", "--per-chunk", "1000", "--input", str(images),
         "--labels", str(FASHION_MNIST / f"{split}-labels-idx1-ubyte.gz"), "--out", str(out)],
        check=True, capture_output=True,
    )
    return str(out)


def run_logged(dir, name, cmd, limit, cluster=True) -> str:
    """Runs `scripts/local.sh 2 2 CMD` (which kills every node it started when it ends
    or times out), or with `cluster=False` CMD alone, for at most `limit` seconds; its
    output (also in DIR/NAME.log), after checking it exited 0."""
    log = Path(dir) / f"{name}.log"
    env = dict(os.environ, PSRS_TIMEOUT=str(limit), PYTHONUNBUFFERED="1")
    full = [str(ROOT / "scripts" / "local.sh"), "2", "2", *cmd] if cluster else list(cmd)
    with open(log, "wb") as f:
        p = subprocess.Popen(full, env=env, cwd=dir, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            rc = p.wait(timeout=limit + 30)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)  # local.sh kills its nodes by pid
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            rc = "killed"
    out = log.read_text(errors="replace")
    assert rc == 0, f"{name}: exited {rc}\n{out[-6000:]}"
    return out
