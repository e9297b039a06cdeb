"""python/examples/fashion_mnist_numpy.py against `psrs train`: both launched with
scripts/local.sh on 2 servers and 2 workers with the same model, passes, learning rate
and batch (the example's algorithm is `psrs train --mode async`'s), on Fashion-MNIST;
their final test accuracies must be within 1 point. Fails (never skips) when
Fashion-MNIST is not installed, like the Rust training tests."""

import re
import sys

from cluster import ROOT, fashion_mnist, psrs_bin, run_logged

EXAMPLE = ROOT / "python" / "examples" / "fashion_mnist_numpy.py"
SETTINGS = ["--epochs", "2", "--lr", "0.025", "--batch", "64"]
LIMIT = 900  # seconds per training run (a debug `psrs train` on a loaded machine takes minutes)


def accuracy(out, name):
    m = re.search(r"^final test accuracy ([0-9.]+)", out, re.M)
    assert m, f"{name}: no accuracy line\n{out[-6000:]}"
    return float(m.group(1))


def test_numpy_example_reaches_psrs_train_accuracy(tmp_path):
    train, test = fashion_mnist(tmp_path, "train"), fashion_mnist(tmp_path, "t10k")
    py_out = run_logged(tmp_path, "python", [sys.executable, str(EXAMPLE), "--train", train, "--test", test, *SETTINGS],
                        LIMIT)
    rs_out = run_logged(tmp_path, "rust", [psrs_bin(), "train", "--model", "softmax", "--mode", "async", *SETTINGS,
                                           "--train", train, "--test", test, "--work-dir", str(tmp_path / "work"),
                                           "--progress-secs", "0"], LIMIT)
    py_acc, rs_acc = accuracy(py_out, "python"), accuracy(rs_out, "psrs train")
    print(f"test accuracy: numpy example {py_acc:.4f}, psrs train {rs_acc:.4f}")
    assert py_acc > 0.78, f"numpy example: accuracy {py_acc}\n{py_out[-6000:]}"
    assert abs(py_acc - rs_acc) <= 0.01, f"numpy example {py_acc} vs psrs train {rs_acc}"
    trained = sum(int(n) for n in re.findall(r"trained (\d+) tasks", py_out))
    assert trained == 120, f"60 tasks x 2 passes, trained {trained}\n{py_out[-6000:]}"
