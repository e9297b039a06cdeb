#!/usr/bin/env bash
# IDunno's experiment on a psrs jobs cluster: ResNet-50 (batch 4) over random
# 224x224 JPEGs and ALBERT-base (batch 8) over random sentences, both run by the workers'
# Python runners (scripts/idunno/idunno_resnet.py, idunno_albert.py: random weights,
# nothing downloaded), on 10 workers and three scheduler candidates, in local then global
# fair-time mode. Prints the figures beside IDunno's (seconds per query, the split each
# mode chose and the ideal one, the query-rate gap over time, second job to first query,
# worker and scheduler kill -9 to recovery) and writes them to $WORK/figures.json.
# Takes 15-30 minutes; the inputs are made once under $WORK/inputs.
#
#   scripts/idunno-experiment.sh [--seconds 120] [--worker-kills 3] [--modes local,global] ...
#
# PSRS_BIN picks the psrs binary (default: build target/release/psrs). The workers' Python is $PSRS_PYTHON, else target/py-venv/bin/python (scripts/test.sh
# makes it), else python3; it needs torch, torchvision, transformers, pillow and numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PSRS_PYTHON:-target/py-venv/bin/python}
[ -x "$PY" ] || PY=python3
PY="$(cd "$(dirname "$(command -v "$PY")")" && pwd)/$(basename "$PY")"
for m in torch torchvision transformers PIL numpy; do
  "$PY" -c "import $m" 2>/dev/null || {
    echo "idunno-experiment: $PY cannot import $m: pip install torch torchvision transformers pillow numpy," \
      "or set PSRS_PYTHON to a Python that has them" >&2
    exit 1
  }
done
# PSRS_BIN: a psrs binary to use instead of building the release one
BIN=${PSRS_BIN:-target/release/psrs}
[ -n "${PSRS_BIN:-}" ] || cargo build --release --quiet --bin psrs
WORK=${WORK:-target/idunno}
mkdir -p "$WORK"
echo "idunno-experiment: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run; Python $PY" >&2
"$PY" scripts/idunno/experiment.py --psrs "$BIN" --python "$PY" --work-dir "$WORK" \
  --json "$WORK/figures.json" "$@"
echo "idunno-experiment: load average $(cut -d' ' -f1-3 /proc/loadavg) after the run" >&2
