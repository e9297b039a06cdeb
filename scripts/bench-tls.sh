#!/usr/bin/env bash
# Cost of TLS on the TCP van's links: runs `psrs bench` on a 1-server 1-worker local
# cluster open and with TLS (a CA derived from a cluster secret), over the Unix socket
# (PS_LOCAL_SOCKET=1, the default between nodes of one host) and over loopback TCP
# (PS_LOCAL_SOCKET=0), shared memory off (PS_SHM=0) so every byte crosses the link. The
# four configurations alternate within each round; prints per link, mode and size the
# medians of messages/s and Gbps and the TLS/open ratios. Each round also times the
# cipher on its own (`psrs bench --cipher`: AES-128-GCM on one core); from 1 MB, where
# the plaintext link keeps both processes' cores busy, the `ceiling` column is the most
# TLS could reach against plaintext if sealing and opening were its only extra cost:
# 1 / (1 + open_gbps / cipher_gbps), cipher_gbps the slower of seal and open.
#
#   scripts/bench-tls.sh [ROUNDS] [SIZES] [MODES]
#   e.g. scripts/bench-tls.sh 5 256,4096,1048576,16777216 push-only,pull-only
#
# Start-up with and without TLS: PSRS_JOIN_CONFIGS="tcp tcp+secret" scripts/bench-join.sh 5 "2x2 8x16".
# PSRS_BIN (default target/release/psrs) is the binary measured.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
sizes=${2:-256,4096,1048576,16777216}
modes=${3:-push-only,pull-only}
bin=${PSRS_BIN:-target/release/psrs}
[ -x "$bin" ] || { echo "$0: no $bin (cargo build --release)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 32 /dev/urandom | base64 > "$tmp/secret"

for r in $(seq "$rounds"); do
  "$bin" bench --cipher --seconds 1 | sed 's/= */=/g' |
    awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print "cipher", v["seal_gbps"], v["open_gbps"] }' >> "$tmp/cipher"
  for link in unix tcp; do
    for c in open tls; do
      env=(PS_SHM=0 PS_LOCAL_SOCKET=$([ "$link" = unix ] && echo 1 || echo 0))
      [ "$c" = tls ] && env+=(PS_SECRET_FILE="$tmp/secret")
      env "${env[@]}" DMLC_PS_VAN_TYPE=tcp PSRS_TIMEOUT=300 scripts/local.sh 1 1 "$bin" bench \
        --modes "$modes" --sizes "$sizes" --seconds 1 2>"$tmp/err" |
        sed 's/= */=/g' | awk -v c="$c" -v l="$link" '/^bench/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          print c, l, v["mode"], v["size"], v["msgs_per_s"], v["gbps"] }' >> "$tmp/all" ||
        { echo "$0: $c $link round $r failed" >&2; tail -5 "$tmp/err" >&2; }
    done
  done
done
echo "TCP van, 1 server 1 worker, PS_SHM=0, medians of $rounds rounds ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
cipher=$(awk '{ s[n + 0] = $2; o[n + 0] = $3; n++ }
  function med(a, n,   i, j, t) { for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2 }
  END { sm = med(s, n); om = med(o, n); printf "%.3f %.3f %.3f", sm, om, (sm < om ? sm : om) }' "$tmp/cipher")
read -r seal open slower <<< "$cipher"
echo "cipher (AES-128-GCM, one core, 16 KiB records): seal $seal Gbps, open $open Gbps"
printf '%-5s %-10s %9s %12s %12s %9s %9s %8s %8s\n' link mode size open_msg/s tls_msg/s open_gbps tls_gbps tls/open ceiling
awk -v cipher="$slower" '{ k = $2 " " $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[m++] = k }
       x[$1, k, n[$1, k]++] = $5; g[$1, k, ng[$1, k]++] = $6 }
  function med(arr, cnts, c, k,   i, j, t, a, cnt) { cnt = cnts[c, k]; if (!cnt) return 0
    for (i = 0; i < cnt; i++) a[i] = arr[c, k, i]
    for (i = 0; i < cnt; i++) for (j = i + 1; j < cnt; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return cnt % 2 ? a[int(cnt / 2)] : (a[cnt / 2 - 1] + a[cnt / 2]) / 2 }
  END { for (i = 0; i < m; i++) { k = order[i]; split(k, f, " ")
    om = med(x, n, "open", k); tm = med(x, n, "tls", k); og = med(g, ng, "open", k); tg = med(g, ng, "tls", k)
    ceil = (f[3] >= 1048576 && cipher > 0) ? sprintf("%.2f", 1 / (1 + og / cipher)) : "-"
    printf "%-5s %-10s %9s %12.0f %12.0f %9.3f %9.3f %8.2f %8s\n", f[1], f[2], f[3], om, tm, og, tg, om ? tm / om : 0, ceil } }' "$tmp/all"
