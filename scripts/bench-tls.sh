#!/usr/bin/env bash
# Cost of TLS on the TCP van's links: runs `psrs bench` on a 1-server 1-worker local
# cluster open and with TLS (a CA derived from a cluster secret), over the Unix socket
# (PS_LOCAL_SOCKET=1, the default between nodes of one host) and over loopback TCP
# (PS_LOCAL_SOCKET=0), shared memory off (PS_SHM=0) so every byte crosses the link. The
# configurations alternate within each round; prints per link, mode and size the
# medians of messages/s and Gbps and the TLS/open ratios. Each round also times the
# cipher on its own (`psrs bench --cipher`: AES-128-GCM on one core); from 1 MB, where
# the plaintext link keeps both processes' cores busy, the `ceiling` column is the most
# TLS could reach against plaintext if sealing and opening were its only extra cost:
# 1 / (1 + open_gbps / cipher_gbps), cipher_gbps the slower of seal and open.
#
#   scripts/bench-tls.sh [ROUNDS] [SIZES] [MODES]
#   e.g. scripts/bench-tls.sh 5 256,4096,1048576,16777216 push-only,pull-only
#
# PSRS_TLS_LINKS (default "unix tcp") names the links measured. "shm" adds the
# default between nodes of one host: the Unix socket, with frames from 64 KB through
# shared memory offered inside the link (not encrypted). "net" adds a link between two
# hosts: two network namespaces the script makes, joined by a veth pair whose both ends
# are limited to PSRS_TLS_NET_RATE (tc tbf, default 10gbit), the scheduler and server
# on one, the worker on the other, private addresses 10.78.0.1-2 (needs root, ip and
# tc; everything is removed on exit). On such a link the network, not the CPU, is what
# plaintext runs into.
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
links=${PSRS_TLS_LINKS:-unix tcp}
net=0
if [[ " $links " == *" net "* ]]; then net=1; fi
rate=${PSRS_TLS_NET_RATE:-10gbit}
tmp=$(mktemp -d)
ns_a=psrs-bench-tls-$$-a
ns_b=psrs-bench-tls-$$-b
cleanup() {
  if [ "$net" = 1 ]; then
    ip netns pids "$ns_a" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns pids "$ns_b" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
(umask 077; head -c 32 /dev/urandom | base64 > "$tmp/secret")

if [ "$net" = 1 ]; then
  for t in ip tc; do command -v "$t" >/dev/null || { echo "$0: the net link needs $t (iproute2)" >&2; exit 2; }; done
  ip netns add "$ns_a" && ip netns add "$ns_b" || { echo "$0: the net link needs root (ip netns add)" >&2; exit 2; }
  ip link add veth0 netns "$ns_a" type veth peer name veth0 netns "$ns_b"
  for ns in "$ns_a" "$ns_b"; do
    n=$([ "$ns" = "$ns_a" ] && echo 1 || echo 2)
    ip -n "$ns" addr add "10.78.0.$n/24" dev veth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set veth0 up
    ip netns exec "$ns" tc qdisc add dev veth0 root tbf rate "$rate" burst 4mb latency 10ms
  done
fi

# Runs `psrs bench` (the arguments in `bench`) with the variables given on the two-host
# link: scheduler and server in namespace a, the worker in namespace b; the worker's
# output on stdout. Exits non-zero if a node failed.
run_net() {
  local port=$((20000 + RANDOM % 20000)) pids=() rc=0
  local common=(DMLC_PS_ROOT_URI=10.78.0.1 DMLC_PS_ROOT_PORT=$port DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 "$@")
  ip netns exec "$ns_a" env "${common[@]}" DMLC_ROLE=scheduler DMLC_NODE_HOST=10.78.0.1 "$bin" "${bench[@]}" >/dev/null & pids+=($!)
  ip netns exec "$ns_a" env "${common[@]}" DMLC_ROLE=server DMLC_NODE_HOST=10.78.0.1 "$bin" "${bench[@]}" >/dev/null & pids+=($!)
  ip netns exec "$ns_b" env "${common[@]}" DMLC_ROLE=worker DMLC_NODE_HOST=10.78.0.2 timeout 300 "$bin" "${bench[@]}" || rc=$?
  for p in "${pids[@]}"; do
    if ! timeout 30 tail --pid="$p" -f /dev/null; then kill -9 "$p" 2>/dev/null || true; rc=1; fi
    wait "$p" || rc=$?
  done
  return "$rc"
}

for r in $(seq "$rounds"); do
  "$bin" bench --cipher --seconds 1 | sed 's/= */=/g' |
    awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print "cipher", v["seal_gbps"], v["open_gbps"] }' >> "$tmp/cipher"
  for link in $links; do
    for c in open tls; do
      case $link in
        unix) env=(PS_SHM=0 PS_LOCAL_SOCKET=1) ;;
        shm) env=(PS_SHM=1 PS_LOCAL_SOCKET=1) ;;
        *) env=(PS_SHM=0 PS_LOCAL_SOCKET=0) ;;
      esac
      env+=(DMLC_PS_VAN_TYPE=tcp)
      [ "$c" = tls ] && env+=(PS_SECRET_FILE="$tmp/secret")
      bench=(bench --modes "$modes" --sizes "$sizes" --seconds 1)
      if [ "$link" = net ]; then
        run_net "${env[@]}" 2>"$tmp/err"
      else
        env "${env[@]}" PSRS_TIMEOUT=300 scripts/local.sh 1 1 "$bin" "${bench[@]}" 2>"$tmp/err"
      fi |
        sed 's/= */=/g' | awk -v c="$c" -v l="$link" '/^bench/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          print c, l, v["mode"], v["size"], v["msgs_per_s"], v["gbps"] }' >> "$tmp/all" ||
        { echo "$0: $c $link round $r failed" >&2; tail -5 "$tmp/err" >&2; }
    done
  done
done
echo "TCP van, 1 server 1 worker, PS_SHM=0 but on the shm link, medians of $rounds rounds ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
if [ "$net" = 1 ]; then echo "net: two network namespaces, a veth pair limited to $rate each way"; fi
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
    ceil = (f[3] >= 1048576 && cipher > 0 && (f[1] == "unix" || f[1] == "tcp")) ? sprintf("%.2f", 1 / (1 + og / cipher)) : "-"
    printf "%-5s %-10s %9s %12.0f %12.0f %9.3f %9.3f %8.2f %8s\n", f[1], f[2], f[3], om, tm, og, tg, om ? tm / om : 0, ceil } }' "$tmp/all"
