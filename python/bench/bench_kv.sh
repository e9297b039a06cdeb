#!/usr/bin/env bash
# The Python KVWorker against the Rust KVWorker, side by side in one run (see
# bench_kv.py): a local cluster of SERVERS (default 1) servers and one worker, all
# running bench_kv.py with $PYTHON (default target/py-venv/bin/python, where
# scripts/test.sh installs the package; build it with `maturin develop --release`
# or `pip install ./python`). Arguments go to bench_kv.py (--rounds, --seconds, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$root/target/py-venv/bin/python}
exec "$root/scripts/local.sh" "${SERVERS:-1}" 1 "$python" "$root/python/bench/bench_kv.py" "$@"
