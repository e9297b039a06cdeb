#!/usr/bin/env bash
# The cost of replication: push-only throughput of `psrs bench` on 3 servers and 1
# worker with PS_REPLICAS=0 and PS_REPLICAS=1, alternated for ROUNDS rounds (default
# 5) in one run; prints each round and the medians and their ratio.
#
#   cargo build --release && scripts/bench-replication.sh
#
# SIZE (bytes per key per server, default 65536) and SECONDS (per measurement,
# default 1) can be set; PSRS_BIN overrides target/release/psrs.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PSRS_BIN:-target/release/psrs}
rounds=${ROUNDS:-5}
size=${SIZE:-65536}
secs=${SECONDS_PER_RUN:-1}
declare -A all=([0]="" [1]="")
for i in $(seq "$rounds"); do
  for k in 0 1; do
    g=""
    for _try in 1 2 3; do # a launch can lose its random port to another process
      g=$(PS_REPLICAS=$k PS_HEARTBEAT_INTERVAL=0.5 PS_HEARTBEAT_TIMEOUT=5 \
        scripts/local.sh 3 1 "$bin" bench --modes push-only --sizes "$size" --seconds "$secs" 2>/dev/null \
        | sed -n 's/.*gbps= *\([0-9.]*\).*/\1/p' | head -1) || true
      [ -n "$g" ] && break
    done
    [ -n "$g" ] || { echo "PS_REPLICAS=$k: no figure after 3 launches" >&2; exit 1; }
    echo "round $i PS_REPLICAS=$k push-only size=$size gbps=$g"
    all[$k]+="$g "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m0=$(echo "${all[0]}" | median)
m1=$(echo "${all[1]}" | median)
echo "median gbps: PS_REPLICAS=0 $m0, PS_REPLICAS=1 $m1, ratio (1 replica / none) $(awk -v a="$m1" -v b="$m0" 'BEGIN {printf "%.2f", a / b}')"
