#!/usr/bin/env bash
# Scheduler failover figures: seconds from kill -9 of the
# active scheduler to training progress again on a standby, with the embedded election
# and with etcd's (PS_HEARTBEAT_TIMEOUT=1 in both), measured in one run: ROUNDS rounds
# (default 3), each running tests/standby.rs's two tests one after the other (two kills
# each), alternating which goes first; prints every kill and the median per election.
#
#   scripts/failover-figures.sh
#   ROUNDS=5 scripts/failover-figures.sh
#
# Needs Fashion-MNIST and etcd (scripts/install-deps.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
embedded=standbys_take_over_from_killed_schedulers
etcd=etcd_elects_the_standbys_that_take_over
cargo test --features etcd --test standby --no-run
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  order="$embedded $etcd"
  if [ $((r % 2)) -eq 0 ]; then order="$etcd $embedded"; fi
  for t in $order; do
    cargo test -q --features etcd --test standby "$t" -- --exact --nocapture 2>&1 |
      grep -E "scheduler killed twice|panicked" | tee -a "$out"
  done
done
for e in "embedded election" "etcd election"; do
  grep "^$e:" "$out" | grep -oE '[0-9.]+ s (and|after)' | grep -oE '^[0-9.]+' | sort -g |
    awk -v e="$e" '{v[NR]=$1} END {
      if (NR == 0) { print e ": no kills measured"; exit 1 }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "%s: kill -9 to progress again, median %.2f s over %d kills (min %.2f, max %.2f)\n", e, m, NR, v[1], v[NR]
    }'
done
