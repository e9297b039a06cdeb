#!/usr/bin/env bash
# How fast local clusters start: launches `psrs connect` clusters with scripts/local.sh
# and reports, per shape and van, the scheduler's time from its own start to the start
# barrier passed (every node joined; it includes launching the other processes) and
# the slowest node's, as medians and maxima over the rounds. Configurations are
# alternated within each round. The ZMQ van refuses a cluster secret, so "secret"
# runs use the TCP van only.
#
#   scripts/bench-join.sh [ROUNDS] [SHAPES]      e.g. scripts/bench-join.sh 5 "2x2 32x96"
#
# PSRS_BIN (default target/release/psrs) is the binary measured; PSRS_JOIN_CONFIGS
# (default "zmq tcp tcp+secret") the configurations.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shapes=${2:-"2x2 32x96"}
bin=${PSRS_BIN:-target/release/psrs}
[ -x "$bin" ] || { echo "$0: no $bin (cargo build --release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(umask 077; head -c 32 /dev/urandom | base64 > "$tmp/secret")
configs=${PSRS_JOIN_CONFIGS:-"zmq tcp tcp+secret"}

run() { # shape config -> "scheduler_ms max_ms"
  local s=${1%x*} w=${1#*x} van=${2%+*} env=()
  [ "$2" = tcp+secret ] && env=(PS_SECRET_FILE="$tmp/secret")
  env "${env[@]}" DMLC_PS_VAN_TYPE="$van" PSRS_TIMEOUT=120 scripts/local.sh "$s" "$w" "$bin" connect \
    2>"$tmp/err" | awk '/^connected/ { ms = $(NF-1); if ($2 == "scheduler") sch = ms; if (ms > max) max = ms }
      END { if (sch == "") exit 1; print sch, max }' || { echo "$0: $1 $2 failed" >&2; tail -5 "$tmp/err" >&2; echo "NaN NaN"; }
}

for r in $(seq "$rounds"); do
  for shape in $shapes; do
    for c in $configs; do
      echo "$shape $c $(run "$shape" "$c")" >> "$tmp/all"
    done
  done
done
echo "start barrier, ms ($rounds rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-7s %-11s %14s %14s %14s %14s\n' shape van "sched median" "sched max" "slowest median" "slowest max"
for shape in $shapes; do
  for c in $configs; do
    awk -v s="$shape" -v c="$c" 'BEGIN { n = 0 } $1 == s && $2 == c { a[n] = $3; b[n] = $4; n++ }
      function med(x, n,   i, j, t) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
        return n % 2 ? x[int(n / 2)] : (x[n / 2 - 1] + x[n / 2]) / 2 }
      function mx(x, n,   i, m) { m = x[0]; for (i = 1; i < n; i++) if (x[i] > m) m = x[i]; return m }
      END { l = s; sub("x", "+", l); printf "%-7s %-11s %14.1f %14.1f %14.1f %14.1f\n", "1+" l, c, med(a, n), mx(a, n), med(b, n), mx(b, n) }' "$tmp/all"
  done
done
