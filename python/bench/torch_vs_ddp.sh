#!/usr/bin/env bash
# psrs.torch against DistributedDataParallel (gloo) and one process, side by side in
# one run: the configurations alternate within each round, medians of samples/s over
# the rounds (see torch_vs_ddp.py). $PYTHON (default target/py-venv/bin/python, where
# scripts/test.sh installs the package and torch; or build it with `maturin develop
# --release`). Arguments go to torch_vs_ddp.py (--rounds, --only cnn|ctr, --ddp-rows).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$root/target/py-venv/bin/python}
exec "$python" "$root/python/bench/torch_vs_ddp.py" drive "$@"
