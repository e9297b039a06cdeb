#!/usr/bin/env bash
# Trains a model on Fashion-MNIST with a local psrs cluster (1 scheduler, 2 servers,
# 2 workers on 127.0.0.1), then evaluates the saved model on the test set.
#
#   scripts/train-fashion-mnist.sh            # the MLP (30-100 s on 2 cores, by load; see docs/benchmarks.md)
#   MODEL=softmax scripts/train-fashion-mnist.sh
#
# Variables: MODEL (mlp|softmax), EPOCHS, LR_DECAY (per pass, default 0.9), WORK
# (output directory, default ./psrs-fashion-mnist), SERVERS, WORKERS, STATS (address
# for the live dashboard, default 127.0.0.1:0 = a free port, printed at start).
set -euo pipefail
cd "$(dirname "$0")/.."

DATA=/usr/share/datasets/fashion-mnist
if [ ! -f "$DATA/train-images-idx3-ubyte.gz" ]; then
  echo "Fashion-MNIST is not installed; installing Debian's dataset-fashion-mnist package" >&2
  SUDO=
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq dataset-fashion-mnist >/dev/null || {
    echo "could not install dataset-fashion-mnist; install it, or put the IDX files in $DATA" >&2
    exit 1
  }
fi

MODEL=${MODEL:-mlp}
WORK=${WORK:-psrs-fashion-mnist}
SERVERS=${SERVERS:-2}
WORKERS=${WORKERS:-2}
case "$MODEL" in
  mlp) HP=(--model mlp --hidden 128 --lr 0.05 --momentum 0.9 --batch 64 --epochs "${EPOCHS:-15}") ;;
  softmax) HP=(--model softmax --lr 0.05 --momentum 0.9 --batch 64 --epochs "${EPOCHS:-10}") ;;
  *) echo "MODEL must be mlp or softmax" >&2; exit 2 ;;
esac
HP+=(--lr-decay "${LR_DECAY:-0.9}")

cargo build --release --quiet
PSRS=target/release/psrs
mkdir -p "$WORK"
for split in train t10k; do
  out="$WORK/$split.rio"
  [ -f "$out" ] || $PSRS convert --format idx --input "$DATA/$split-images-idx3-ubyte.gz" \
    --labels "$DATA/$split-labels-idx1-ubyte.gz" --out "$out" --per-chunk 2000
done

rm -rf "$WORK/job"   # a fresh job (a restarted scheduler would resume from here)
export PS_HEARTBEAT_INTERVAL=${PS_HEARTBEAT_INTERVAL:-1} PS_HEARTBEAT_TIMEOUT=${PS_HEARTBEAT_TIMEOUT:-5}
scripts/local.sh "$SERVERS" "$WORKERS" $PSRS train --train "$WORK/train.rio" --test "$WORK/t10k.rio" \
  "${HP[@]}" --work-dir "$WORK/job" --out "$WORK/$MODEL.model" --stats-addr "${STATS:-127.0.0.1:0}"
$PSRS eval --model "$WORK/$MODEL.model" --data "$WORK/t10k.rio"
