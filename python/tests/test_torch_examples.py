"""The psrs.torch examples, launched with scripts/local.sh on 2 servers and 2 workers:

- python/examples/torch_fashion_mnist.py: the CNN trained sync must land within 1 point
  of the same model trained the same way in one plain PyTorch process (--single), and
  async must learn too; every task of the pass is trained once.
- python/examples/torch_ctr.py on data from python/examples/ctr_data.py (a planted
  model): the test AUC within 0.02 of the planted model's own (the best achievable),
  with a table of 10**8 rows of which the servers store only the rows trained and the
  workers hold only the rows of their batches.

Fails (never skips) when torch or Fashion-MNIST is missing."""

import re
import subprocess
import sys

import pytest

try:
    import torch  # noqa: F401
except ImportError as e:
    pytest.fail(f"the torch package is not installed ({e}): pip install torch (scripts/test.sh installs it)",
                pytrace=False)

from cluster import ROOT, fashion_mnist, psrs_bin, run_logged

EXAMPLES = ROOT / "python" / "examples"
LIMIT = 900  # seconds per run (a loaded machine)


def run(dir, name, cmd, cluster=True):
    return run_logged(dir, name, cmd, LIMIT, cluster)


def number(pattern, out, name):
    m = re.search(pattern, out, re.M)
    assert m, f"{name}: no line matching {pattern!r}\n{out[-6000:]}"
    return float(m.group(1))


def test_fashion_mnist_cnn_sync_matches_one_process(tmp_path):
    train, test = fashion_mnist(tmp_path, "train"), fashion_mnist(tmp_path, "t10k")
    # 2 passes at a learning rate that leaves the last steps small: one run's accuracy
    # then moves about half a point with the order the tasks are trained in
    ex = [sys.executable, str(EXAMPLES / "torch_fashion_mnist.py"), "--train", train, "--test", test,
          "--epochs", "2", "--lr", "0.02"]
    single = number(r"^final test accuracy ([0-9.]+)", run(tmp_path, "single", [*ex, "--single"], cluster=False),
                    "single")
    sync_out = run(tmp_path, "sync", [*ex, "--mode", "sync"])
    sync = number(r"^final test accuracy ([0-9.]+)", sync_out, "sync")
    async_out = run(tmp_path, "async", [*ex, "--mode", "async"])
    asyn = number(r"^final test accuracy ([0-9.]+)", async_out, "async")
    print(f"test accuracy: one process {single:.4f}, psrs sync {sync:.4f}, psrs async {asyn:.4f}")
    assert single > 0.80, f"the single process learned badly: {single}"
    assert abs(sync - single) <= 0.01, f"psrs sync {sync} vs one process {single}\n{sync_out[-4000:]}"
    assert asyn > 0.80, f"psrs async: {asyn}\n{async_out[-4000:]}"
    for out in (sync_out, async_out):
        trained = sum(int(n) for n in re.findall(r"trained (\d+) tasks", out))
        assert trained == 120, f"60 tasks in each of 2 passes, trained {trained}\n{out[-4000:]}"
    assert re.search(r"^worker \d trained .* 0 gradients rejected", sync_out, re.M), sync_out[-4000:]


def test_ctr_model_reaches_the_planted_auc_holding_only_touched_rows(tmp_path):
    data = tmp_path / "ctr"
    subprocess.run([sys.executable, str(EXAMPLES / "ctr_data.py"), "--out", str(data)], check=True,
                   capture_output=True)
    for split, per in (("train", "5000"), ("test", "20000")):
        subprocess.run([psrs_bin(), "convert", "--format", "csv", "--input", str(data / f"{split}.csv"),
                        "--out", str(data / f"{split}.rio"), "--per-chunk", per], check=True, capture_output=True)
    best = float((data / "best_auc.txt").read_text())
    out = run(tmp_path, "ctr", [sys.executable, str(EXAMPLES / "torch_ctr.py"), "--train", str(data / "train.rio"),
                                "--test", str(data / "test.rio"), "--best-auc", str(best)])
    got = number(r"^final test auc ([0-9.]+)", out, "ctr")
    workers = [float(m) for m in re.findall(r"^worker \d: .* peak memory (\d+) MiB", out, re.M)]
    servers = re.findall(r"^server \d: (\d+) rows stored, version \d+, peak memory (\d+) MiB", out, re.M)
    print(f"CTR test AUC {got:.4f}, best {best:.4f}; peak memory: workers {workers} MiB, "
          f"servers {[int(m) for _, m in servers]} MiB, rows stored {[int(r) for r, _ in servers]}")
    assert got >= best - 0.02, f"AUC {got} is more than 0.02 below the best {best}\n{out[-4000:]}"
    assert len(workers) == 2 and len(servers) == 2, out[-4000:]
    table_mib = 10**8 * 16 * 4 / 2**20
    # the 26 fields have 1000 categories each: at most 26000 rows are ever trained
    stored = sum(int(r) for r, _ in servers)
    assert 0 < stored <= 26000, f"{stored} rows stored"
    assert all(0 < int(r) < stored for r, _ in servers), "the rows spread over both servers"
    for mib in workers + [float(m) for _, m in servers]:
        assert mib < table_mib / 4, f"a process peaked at {mib} MiB: it cannot be holding the table"
