#!/usr/bin/env bash
# Cost of a cluster secret on the TCP van: runs `psrs bench` on a 1-server 1-worker
# local cluster open, authenticated only (PS_ENCRYPT=0) and encrypted, alternating the
# three within each round, and prints per mode and size the median Gbps of each and the
# ratios to the open link.
#
#   scripts/bench-encryption.sh [ROUNDS] [SIZES] [MODES]
#   e.g. scripts/bench-encryption.sh 5 65536,1048576 push-only,pull-only
#
# PSRS_BIN (default target/release/psrs) is the binary measured.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
sizes=${2:-4096,65536,1048576}
modes=${3:-push-only,pull-only}
bin=${PSRS_BIN:-target/release/psrs}
[ -x "$bin" ] || { echo "$0: no $bin (cargo build --release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 32 /dev/urandom | base64 > "$tmp/secret"

for r in $(seq "$rounds"); do
  for c in open auth encrypted; do
    env=()
    case $c in
      auth) env=(PS_SECRET_FILE="$tmp/secret" PS_ENCRYPT=0) ;;
      encrypted) env=(PS_SECRET_FILE="$tmp/secret") ;;
    esac
    env "${env[@]}" DMLC_PS_VAN_TYPE=tcp PSRS_TIMEOUT=300 scripts/local.sh 1 1 "$bin" bench \
      --modes "$modes" --sizes "$sizes" --seconds 1 2>"$tmp/err" |
      sed 's/= */=/g' | awk -v c="$c" '/^bench/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        print c, v["mode"], v["size"], v["gbps"] }' >> "$tmp/all" ||
      { echo "$0: $c round $r failed" >&2; tail -5 "$tmp/err" >&2; }
  done
done
echo "TCP van, 1 server 1 worker, Gbps medians of $rounds rounds ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-10s %9s %8s %8s %10s %11s %11s\n' mode size open auth encrypted auth/open enc/open
awk '{ k = $2 " " $3; if (!(k in seen)) { seen[k] = 1; order[m++] = k } x[$1, k, n[$1, k]++] = $4 }
  function med(c, k,   i, j, t, a, cnt) { cnt = n[c, k]; if (!cnt) return 0
    for (i = 0; i < cnt; i++) a[i] = x[c, k, i]
    for (i = 0; i < cnt; i++) for (j = i + 1; j < cnt; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return cnt % 2 ? a[int(cnt / 2)] : (a[cnt / 2 - 1] + a[cnt / 2]) / 2 }
  END { for (i = 0; i < m; i++) { k = order[i]; split(k, f, " "); o = med("open", k); a = med("auth", k); e = med("encrypted", k)
    printf "%-10s %9s %8.3f %8.3f %10.3f %11.2f %11.2f\n", f[1], f[2], o, a, e, o ? a / o : 0, o ? e / o : 0 } }' "$tmp/all"
