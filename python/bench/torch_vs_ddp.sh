#!/usr/bin/env bash
# psrs.torch against DistributedDataParallel (gloo) with a sparse embedding, TorchRec and
# one process, side by side in one run: the configurations alternate within each round,
# medians of samples/s over the rounds, the test AUC after every sample and each
# process's peak memory by role (see torch_vs_ddp.py). $PYTHON (default
# target/py-venv/bin/python, where scripts/test.sh installs the package and torch; or
# build it with `maturin build --release` and pip-install the wheel); $TORCHREC_PYTHON
# (default target/py-venv-torchrec/bin/python) a Python with torchrec and
# fbgemm-gpu-cpu and the torch they are built for (docs/benchmarks.md says how to make
# it; without it the TorchRec row says why it did not run). Arguments go to
# torch_vs_ddp.py (--rounds, --only cnn|ctr, --scale, --samples, --batch, --ablations,
# --hot-cache-rows, --hot-cache-staleness, --match REGEX: only the configurations it names).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$root/target/py-venv/bin/python}
exec "$python" "$root/python/bench/torch_vs_ddp.py" drive "$@"
