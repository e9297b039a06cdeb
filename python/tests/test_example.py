"""python/examples/fashion_mnist_numpy.py against `psrs train`: both launched with
scripts/local.sh on 2 servers and 2 workers with the same model, passes, learning rate
and batch (the example's algorithm is `psrs train --mode async`'s), on Fashion-MNIST;
their final test accuracies must be within 1 point. Fails (never skips) when
Fashion-MNIST is not installed, like the Rust training tests."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cluster import ROOT, psrs_bin

DATA = Path("/usr/share/datasets/fashion-mnist")
EXAMPLE = ROOT / "python" / "examples" / "fashion_mnist_numpy.py"
SETTINGS = ["--epochs", "2", "--lr", "0.025", "--batch", "64"]
LIMIT = 900  # seconds per training run (a debug `psrs train` on a loaded machine takes minutes)


def convert(dir, split):
    if not (DATA / f"{split}-images-idx3-ubyte.gz").exists():
        pytest.fail(f"{DATA} is absent: apt-get install dataset-fashion-mnist (scripts/install-deps.sh does)")
    out = dir / f"{split}.rio"
    subprocess.run(
        [psrs_bin(), "convert", "--format", "idx", "--per-chunk", "1000",
         "--input", str(DATA / f"{split}-images-idx3-ubyte.gz"),
         "--labels", str(DATA / f"{split}-labels-idx1-ubyte.gz"), "--out", str(out)],
        check=True, capture_output=True,
    )
    return str(out)


def local(dir, name, cmd):
    """Runs `scripts/local.sh 2 2 CMD` (which kills every node it started when it
    ends or times out); its output, after checking it exited 0."""
    log = dir / f"{name}.log"
    env = dict(os.environ, PSRS_TIMEOUT=str(LIMIT), PYTHONUNBUFFERED="1")
    with open(log, "wb") as f:
        p = subprocess.Popen([str(ROOT / "scripts" / "local.sh"), "2", "2", *cmd], env=env, cwd=dir,
                             stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            rc = p.wait(timeout=LIMIT + 30)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)  # local.sh kills its nodes by pid
            p.wait(timeout=30)
            rc = "killed"
    out = log.read_text(errors="replace")
    assert rc == 0, f"{name}: local.sh exited {rc}\n{out[-6000:]}"
    return out


def accuracy(out, name):
    m = re.search(r"^final test accuracy ([0-9.]+)", out, re.M)
    assert m, f"{name}: no accuracy line\n{out[-6000:]}"
    return float(m.group(1))


def test_numpy_example_reaches_psrs_train_accuracy(tmp_path):
    train, test = convert(tmp_path, "train"), convert(tmp_path, "t10k")
    py_out = local(tmp_path, "python", [sys.executable, str(EXAMPLE), "--train", train, "--test", test, *SETTINGS])
    rs_out = local(tmp_path, "rust", [psrs_bin(), "train", "--model", "softmax", "--mode", "async", *SETTINGS,
                                      "--train", train, "--test", test, "--work-dir", str(tmp_path / "work"),
                                      "--progress-secs", "0"])
    py_acc, rs_acc = accuracy(py_out, "python"), accuracy(rs_out, "psrs train")
    print(f"test accuracy: numpy example {py_acc:.4f}, psrs train {rs_acc:.4f}")
    assert py_acc > 0.78, f"numpy example: accuracy {py_acc}\n{py_out[-6000:]}"
    assert abs(py_acc - rs_acc) <= 0.01, f"numpy example {py_acc} vs psrs train {rs_acc}"
    trained = sum(int(n) for n in re.findall(r"trained (\d+) tasks", py_out))
    assert trained == 120, f"60 tasks x 2 passes, trained {trained}\n{py_out[-6000:]}"
