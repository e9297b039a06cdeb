#!/usr/bin/env bash
# Shared memory against loopback TCP on the TCP van: runs `psrs bench` on a 1-server
# 1-worker local cluster with PS_SHM=1 and PS_SHM=0 PS_LOCAL_SOCKET=0 (loopback TCP),
# alternating the two within each
# round, and prints per mode and size the median Gbps of each (with the range over the
# rounds), the ratio of the medians, and the load average before and after.
#
#   scripts/bench-shm.sh [ROUNDS] [SIZES] [MODES]
#   e.g. scripts/bench-shm.sh 5 1048576,16777216 push-only,pull-only
#
# PSRS_BIN (default target/release/psrs) is the binary measured; SECONDS_PER (default
# 1) the seconds per figure; SHM_ENV extra variables for the shared-memory runs only
# (e.g. SHM_ENV="PS_SHM_MIN_BYTES=16384"). Each shared-memory run must report frames
# moved through shared memory (the nodes' traffic line), else the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
sizes=${2:-1048576,16777216}
modes=${3:-push-only,pull-only}
bin=${PSRS_BIN:-target/release/psrs}
secs=${SECONDS_PER:-1}
[ -x "$bin" ] || { echo "$0: no $bin (cargo build --release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

for r in $(seq "$rounds"); do
  for c in shm tcp; do
    env=(PS_SHM=0 PS_LOCAL_SOCKET=0) # loopback TCP, as between hosts
    # shellcheck disable=SC2206
    [ "$c" = shm ] && env=(PS_SHM=1 ${SHM_ENV:-})
    env "${env[@]}" DMLC_PS_VAN_TYPE=tcp PSRS_TIMEOUT=300 scripts/local.sh 1 1 "$bin" bench \
      --modes "$modes" --sizes "$sizes" --seconds "$secs" >"$tmp/out" 2>"$tmp/err" ||
      { echo "$0: $c round $r failed" >&2; tail -5 "$tmp/err" >&2; continue; }
    sed 's/= */=/g' "$tmp/out" | awk -v c="$c" '/^bench worker/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print c, v["mode"], v["size"], v["gbps"] }' >> "$tmp/all"
    frames=$(grep -o 'shm sent [0-9]* frames' "$tmp/err" | awk '{ s += $3 } END { print s + 0 }')
    echo "$c round $r: $frames frames through shared memory" >> "$tmp/used"
    if [ "$c" = shm ] && [ "$frames" = 0 ]; then echo "$0: shm round $r moved nothing through shared memory" >&2; fi
    if [ "$c" = tcp ] && [ "$frames" != 0 ]; then echo "$0: PS_SHM=0 round $r used shared memory" >&2; fi
  done
done
echo "TCP van, 1 server 1 worker, PS_SHM=1 vs PS_SHM=0 PS_LOCAL_SOCKET=0 (loopback TCP), Gbps: median (min-max) of $rounds rounds"
echo "$(nproc) cores, load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)${SHM_ENV:+, shm runs with $SHM_ENV}"
printf '%-10s %9s %24s %24s %7s\n' mode size shm tcp shm/tcp
awk '{ k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[m++] = k } x[$1, k, n[$1, k]++] = $4 }
  function sorted(c, k, a,   i, j, t, cnt) { cnt = n[c, k]
    for (i = 0; i < cnt; i++) a[i] = x[c, k, i]
    for (i = 0; i < cnt; i++) for (j = i + 1; j < cnt; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return cnt }
  function med(c, k,   a, cnt) { cnt = sorted(c, k, a); if (!cnt) return 0
    return cnt % 2 ? a[int(cnt / 2)] : (a[cnt / 2 - 1] + a[cnt / 2]) / 2 }
  function span(c, k,   a, cnt) { cnt = sorted(c, k, a); if (!cnt) return "-"
    return sprintf("%.1f (%.1f-%.1f)", med(c, k), a[0], a[cnt - 1]) }
  END { for (i = 0; i < m; i++) { k = order[i]; split(k, f, " "); s = med("shm", k); t = med("tcp", k)
    printf "%-10s %9s %24s %24s %7.2f\n", f[1], f[2], span("shm", k), span("tcp", k), t ? s / t : 0 } }' "$tmp/all"
echo "per round, all rounds: shm/tcp Gbps"
awk '{ x[$1, $2 " " $3, c[$1, $2 " " $3]++] = $4; k[$2 " " $3] = 1 }
  END { for (kk in k) { line = kk ":"; for (i = 0; i < c["shm", kk]; i++) line = line " " x["shm", kk, i] "/" x["tcp", kk, i]; print line } }' "$tmp/all" | sort
cat "$tmp/used"
