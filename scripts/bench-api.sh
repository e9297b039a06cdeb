#!/usr/bin/env bash
# The jobs API's HTTP server side by side: the build of BASE (default 67dd3fe, the
# tiny_http server) and this tree's, alternately, ROUNDS rounds, each on a fresh
# `psrs cluster` (a scheduler and one worker on 127.0.0.1). Per build and round, this
# tree's `psrs bench-api` measures GET /jobs with 1 and 64 honest clients (requests/s,
# p50/p99 latency), then one honest client's latency and the scheduler's resident
# memory during a header flood (FLOOD_CONNS connections each sending a header line of
# up to 64 MB) and during SLOW_CONNS slow connections (a byte every 2 s, reopened when
# closed). Prints every line, then the medians per build and measurement.
#
#   scripts/bench-api.sh                      # plain HTTP, as the README's cluster
#   SECURE=1 scripts/bench-api.sh             # a cluster secret: HTTPS, the attackers anonymous
#   ROUNDS=1 SECS=2 SLOW_CONNS=100 scripts/bench-api.sh   # a smoke test
#   MODES="load" ROUNDS=7 scripts/bench-api.sh            # throughput only
#
# OLD=path/to/psrs skips building BASE (built once into target/bench-api-base/);
# NEW=path/to/psrs (default PSRS_BIN, else target/release/psrs, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-67dd3fe}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
SECURE=${SECURE:-0}
FLOOD_CONNS=${FLOOD_CONNS:-4}
SLOW_CONNS=${SLOW_CONNS:-1000}
MODES=${MODES:-load header-flood slow}
NEW=${NEW:-${PSRS_BIN:-target/release/psrs}}
OLD=${OLD:-}

if [ -z "$OLD" ]; then
  OLD=target/bench-api-base/release/psrs
  if [ ! -x "$OLD" ]; then
    src=target/bench-api-base/src
    rm -rf "$src" && mkdir -p "$src"
    git archive "$BASE" | tar -x -C "$src"
    echo "bench-api: building $BASE into target/bench-api-base (once)" >&2
    (cd "$src" && cargo build --release --bin psrs --target-dir ..)
  fi
fi
[ -x "$NEW" ] || cargo build --release --bin psrs
OLD=$(realpath "$OLD")
NEW=$(realpath "$NEW")
# 1000 slow connections need as many descriptors in the scheduler and in the client
ulimit -n 8192

tmp=$(mktemp -d)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$tmp"' EXIT

# a free port below the kernel's ephemeral range (scripts/lib/ports.py says why)
free_port() { python3 "$(dirname "$0")/lib/ports.py"; }

secret_env=()
if [ "$SECURE" = 1 ]; then
  (umask 077 && head -c 32 /dev/urandom | base64 > "$tmp/secret")
  secret_env=(PS_SECRET_FILE="$tmp/secret")
fi

# start_cluster BIN NAME: a scheduler and a worker; sets SPID and API
start_cluster() {
  local bin=$1 name=$2 port http
  port=$(free_port)
  http=$(free_port)
  mkdir -p "$tmp/$name"
  local common=(DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT="$port" DMLC_NUM_SERVER=0 DMLC_NUM_WORKER=1
    DMLC_NODE_HOST=127.0.0.1 DMLC_PS_VAN_TYPE=tcp "${secret_env[@]}")
  local args=(cluster --stats-addr "127.0.0.1:$http" --work-dir "$tmp/$name/work")
  env "${common[@]}" DMLC_ROLE=scheduler "$bin" "${args[@]}" > "$tmp/$name/scheduler.log" 2>&1 &
  SPID=$!
  pids+=("$SPID")
  env "${common[@]}" DMLC_ROLE=worker "$bin" "${args[@]}" > "$tmp/$name/worker.log" 2>&1 &
  pids+=("$!")
  API="http://127.0.0.1:$http"
  for _ in $(seq 300); do
    if env "${secret_env[@]}" "$NEW" job --api "$API" list > /dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  echo "bench-api: the $name cluster's API never came up" >&2
  tail -n 20 "$tmp/$name/scheduler.log" >&2
  exit 1
}

bench() { env "${secret_env[@]}" "$NEW" bench-api --api "$API" --pid "$SPID" --secs "$SECS" "$@" | tee -a "$tmp/results"; }

for r in $(seq "$ROUNDS"); do
  order=(old new)
  [ $((r % 2)) -eq 0 ] && order=(new old)
  for which in "${order[@]}"; do
    bin=$OLD
    [ "$which" = new ] && bin=$NEW
    start_cluster "$bin" "$which-$r"
    for m in $MODES; do
      case $m in
        load)
          bench --label "$which" --clients 1
          bench --label "$which" --clients 64
          ;;
        header-flood) bench --label "$which" --clients 1 --mode header-flood --conns "$FLOOD_CONNS" ;;
        slow) bench --label "$which" --clients 1 --mode slow --conns "$SLOW_CONNS" ;;
        *) echo "bench-api: unknown mode $m (load, header-flood, slow)" >&2; exit 2 ;;
      esac
    done
    stop_all
  done
done

echo
echo "medians over $ROUNDS round(s), SECURE=$SECURE, $(nproc) CPUs, $(date -u +%Y-%m-%d):"
python3 - "$tmp/results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    key = (f["mode"], int(f["clients"]), f["label"])
    rows.setdefault(key, []).append(f)
cols = ["req_per_s", "p50_ms", "p99_ms", "errors", "rss_max_mb"]
print(f"{'mode':<12} {'clients':>7} {'build':<5} " + " ".join(f"{c:>11}" for c in cols))
for key in sorted(rows):
    med = [statistics.median(float(f[c]) for f in rows[key]) for c in cols]
    print(f"{key[0]:<12} {key[1]:>7} {key[2]:<5} " + " ".join(f"{m:>11.3f}" for m in med))
EOF
