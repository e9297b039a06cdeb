#!/usr/bin/env bash
# IDunno's experiment on a psrs jobs cluster: ResNet-50 (batch 4) over random
# 224x224 JPEGs and ALBERT-base (batch 8) over random sentences, both run by the workers'
# Python runners (scripts/idunno/idunno_resnet.py, idunno_albert.py: random weights,
# nothing downloaded), on 10 workers and three scheduler candidates, in local then global
# fair-time mode. Prints the figures beside IDunno's (the second job's submission to its
# first query, the warm-up of its model on every worker and its cost, seconds per query,
# the split each mode chose and the ideal one, the query-rate gap over 30 s windows and
# over 10 s rates, worker and scheduler kill -9 to recovery), writes them to
# $WORK/figures.json (`results` per mode) and fails naming any figure that is missing or
# out of range.
#
#   scripts/idunno-experiment.sh            the full run: 25-35 minutes
#   scripts/idunno-experiment.sh --quick    the same phases, shorter windows, one kill of
#                                           each: about 6 minutes on 2 cores
#   scripts/idunno-experiment.sh --smoke    tiny stand-in models (plain Python, no torch)
#                                           on 4 workers: about 2 minutes (CI)
#   ... [--seconds 120] [--worker-kills 3] [--modes local,global] ...
#
# PSRS_BIN picks the psrs binary (default: build target/release/psrs). The workers' Python
# is $PSRS_PYTHON, else target/py-venv/bin/python (scripts/install-python.sh makes it),
# else python3; the real models need torch, torchvision, transformers, pillow and numpy,
# the smoke run only python3.
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=0
for a in "$@"; do [ "$a" = --smoke ] && smoke=1; done
if [ "$smoke" = 1 ]; then
  PY=${PSRS_PYTHON:-python3}
else
  PY=${PSRS_PYTHON:-target/py-venv/bin/python}
  [ -x "$PY" ] || PY=python3
fi
PY="$(cd "$(dirname "$(command -v "$PY")")" && pwd)/$(basename "$PY")"
if [ "$smoke" = 0 ]; then
  for m in torch torchvision transformers PIL numpy; do
    "$PY" -c "import $m" 2>/dev/null || {
      echo "idunno-experiment: $PY cannot import $m: scripts/install-python.sh target/py-venv," \
        "or set PSRS_PYTHON to a Python that has torch, torchvision, transformers, pillow and numpy" >&2
      exit 1
    }
  done
fi
# PSRS_BIN: a psrs binary to use instead of building the release one
BIN=${PSRS_BIN:-target/release/psrs}
[ -n "${PSRS_BIN:-}" ] || cargo build --release --quiet --bin psrs
WORK=${WORK:-target/idunno}
[ "$smoke" = 0 ] || WORK=${WORK%/}-smoke
mkdir -p "$WORK"
echo "idunno-experiment: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run; Python $PY" >&2
"$PY" scripts/idunno/experiment.py --psrs "$BIN" --python "$PY" --work-dir "$WORK" \
  --json "$WORK/figures.json" "$@"
echo "idunno-experiment: load average $(cut -d' ' -f1-3 /proc/loadavg) after the run; figures in $WORK/figures.json" >&2
