#!/usr/bin/env bash
# psrs side by side with ps-lite, both sides alternated within each of ROUNDS rounds in
# one run, medians over the rounds:
#
# 1. "small": small messages. ps-lite's driver (../shared/bench/pslite_bench.cc),
#    psrs's ZMQ van and psrs's TCP van; each figure's median and the ratio psrs /
#    ps-lite (msgs/s: > 1 = psrs better; latency in us: < 1 = psrs better).
# 2. "kvapp": ps-lite's own benchmark program, tests/test_kv_app_benchmark (a worker
#    pushes 10M float keys once, then pulls them), unmodified, as the worker of three
#    clusters on ps-lite's wire: ps-lite's scheduler and servers running that program
#    (whose server stores nothing and answers pulls with zeros), ps-lite's running
#    test_kv_app (KVServerDefaultHandle: sums), and psrs's (`psrs kv-test`: sums).
#    The ratio is ps-lite's sums over psrs's, in time (> 1 = psrs faster).
#
#   scripts/bench-vs-pslite.sh [ROUNDS]
#
# One command for a new user: without PSLITE_BENCH (a pslite_bench binary), it builds
# ps-lite's library into target/ps-lite from its source (PSLITE_SRC, else
# shared/peers/ps-lite beside an ancestor directory of this checkout; the tests' build,
# tests/pslite.rs, makes the same directory) and pslite_bench from PSLITE_BENCH_SRC
# (else shared/bench/pslite_bench.cc beside an ancestor), which needs Debian's g++ make
# protobuf-compiler libprotobuf-dev libzmq3-dev (scripts/install-deps.sh); and it builds
# target/release/psrs if missing. The "kvapp" part runs ps-lite's test programs
# test_kv_app_benchmark and test_kv_app, built into target/ps-lite/tests from their
# sources, which a full checkout of ps-lite has (PSLITE_SRC) and the copy beside CI's
# checkout has not: without them the part says so in one line and is left out (the
# script then fails only if PARTS named it).
# Knobs: PARTS ("small kvapp"), MODES (push-only,pull-only,latency), SIZES (256,4096),
# SHAPES ("1x1 2x2": servers x workers), KVAPP_SHAPES ("1x1"), BENCH_SECONDS (1),
# INFLIGHT (16), SPIN_US (unset; N adds a column "tcp+spin": the TCP van with
# PS_SPIN_US=N, and every psrs figure then also shows the worker's CPU use in percent
# of a core), NO_SHM (unset; 1 adds a column "tcp-noshm": the TCP van with PS_SHM=0,
# co-located nodes' large values over their socket instead of shared memory), NET
# (unset; 1 adds a column "tcp-net": the TCP van with PS_SHM=0 PS_LOCAL_SOCKET=0,
# co-located nodes over loopback TCP as nodes on different hosts talk; the "tcp"
# column, the default, uses Unix sockets and shared memory between nodes of one
# host), PSRS_BIN (target/release/psrs). Print `uptime` with the figures: on a loaded machine only ratios from one run
# mean anything.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "bench-vs-pslite: $*" >&2; exit 2; }
. scripts/lib/pslite.sh
# the first ancestor directory of this checkout holding $1
find_up() {
  local d=$PWD
  while [ "$d" != / ]; do
    d=$(dirname "$d")
    if [ -e "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  return 1
}
pslite=target/ps-lite
# ps-lite's library and headers in $pslite (as tests/common/pslite.rs builds them)
build_library() {
  [ -f "$pslite/build/libps.a" ] && return 0
  local missing=() pair
  for pair in g++:g++ make:make protobuf-compiler:protoc; do
    command -v "${pair#*:}" >/dev/null || missing+=("${pair%%:*}")
  done
  [ -f /usr/include/google/protobuf/message_lite.h ] || missing+=(libprotobuf-dev)
  [ -f /usr/include/zmq.h ] || missing+=(libzmq3-dev)
  [ ${#missing[@]} -eq 0 ] || die "cannot build ps-lite: the Debian packages ${missing[*]} are missing (scripts/install-deps.sh installs them)"
  local src
  src=$(pslite_source) && [ -f "$src/Makefile" ] ||
    die "ps-lite's source is not found: set PSLITE_SRC to a checkout of github.com/dmlc/ps-lite (commit 15b8adf), or PSLITE_BENCH to a built pslite_bench"
  echo "bench-vs-pslite: building ps-lite's library from $src into $pslite"
  local tmp=$pslite.build-$$
  rm -rf "$tmp"
  cp -r "$src" "$tmp" && chmod -R u+w "$tmp"
  make -C "$tmp" -j2 ps DEPS_PATH=/usr >"$tmp.log" 2>&1 || { tail -20 "$tmp.log" >&2; die "building ps-lite failed (log: $tmp.log)"; }
  if [ -f "$pslite/build/libps.a" ]; then rm -rf "$tmp"; else rm -rf "$pslite"; mv "$tmp" "$pslite"; fi
  rm -f "$tmp.log"
}
# compiles C++ program $1 against ps-lite's library into $2 (optimised as ps-lite's
# Makefile builds its programs)
compile() {
  g++ -std=c++11 -O3 -isystem "$pslite/include" -isystem "$pslite/src" "$1" "$pslite/build/libps.a" \
    -lprotobuf-lite -lzmq -pthread -o "$2.tmp-$$" && mv "$2.tmp-$$" "$2"
}
build_pslite_bench() {
  build_library
  local bsrc=${PSLITE_BENCH_SRC:-$(find_up shared/bench/pslite_bench.cc || true)}
  [ -n "$bsrc" ] && [ -f "$bsrc" ] || die "pslite_bench.cc is not found: set PSLITE_BENCH_SRC (or PSLITE_BENCH to a built pslite_bench)"
  if [ ! -x "$pslite/pslite_bench" ] || [ "$bsrc" -nt "$pslite/pslite_bench" ]; then
    compile "$bsrc" "$pslite/pslite_bench" || die "building pslite_bench failed"
  fi
  PSLITE_BENCH=$pslite/pslite_bench
}
# ps-lite's test programs the kvapp part runs, in $pslite/tests, built where their
# sources are; without them, one line saying so, and returns 1
kvapp_programs() {
  local p lacking=() src
  for p in test_kv_app_benchmark test_kv_app; do
    [ -x "$pslite/tests/$p" ] || lacking+=("$p")
  done
  [ ${#lacking[@]} -eq 0 ] && return 0
  if ! src=$(pslite_source) || ! pslite_has_programs "$src" "${lacking[@]}"; then
    echo "bench-vs-pslite: kvapp part not run: it needs ps-lite's test programs' sources (tests/test_kv_app_benchmark.cc, tests/test_kv_app.cc), which the source found (${src:-none}) lacks; set PSLITE_SRC to a full checkout of github.com/dmlc/ps-lite (commit 15b8adf)" >&2
    return 1
  fi
  build_library
  mkdir -p "$pslite/tests"
  for p in "${lacking[@]}"; do
    echo "bench-vs-pslite: building ps-lite's $p from $src"
    compile "$src/tests/$p.cc" "$pslite/tests/$p" || die "building $p failed"
  done
}

parts=${PARTS:-small kvapp}
if [[ " $parts " == *" small "* ]]; then
  if [ -z "${PSLITE_BENCH:-}" ]; then
    build_pslite_bench
  fi
  [ -x "$PSLITE_BENCH" ] || die "PSLITE_BENCH=$PSLITE_BENCH is not an executable pslite_bench"
fi
kvapp_ok=0
if [[ " $parts " == *" kvapp "* ]] && kvapp_programs; then kvapp_ok=1; fi
psrs=${PSRS_BIN:-target/release/psrs}
if [ ! -x "$psrs" ]; then
  echo "bench-vs-pslite: building $psrs (cargo build --release)"
  cargo build --release --bin psrs
fi

rounds=${1:-3}
modes=${MODES:-push-only,pull-only,latency}
sizes=${SIZES:-256,4096}
shapes=${SHAPES:-1x1 2x2}
secs=${BENCH_SECONDS:-1}
inflight=${INFLIGHT:-16}
systems="pslite zmq tcp${SPIN_US:+ tcp+spin}${NO_SHM:+ tcp-noshm}${NET:+ tcp-net}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export PSRS_TIMEOUT=${PSRS_TIMEOUT:-120}

# one line "system shape mode size msgs_per_s us_per_op" per worker per figure
run() { # system shape mode size
  local sys=$1 shape=$2 mode=$3 size=$4 s=${2%x*} w=${2#*x}
  case $sys in
    pslite) scripts/local.sh "$s" "$w" "$PSLITE_BENCH" "$mode" "$size" "$secs" "$inflight" ;;
    zmq|tcp) DMLC_PS_VAN_TYPE=$sys scripts/local.sh "$s" "$w" "$psrs" bench --modes "$mode" \
      --sizes "$size" --seconds "$secs" --inflight "$inflight" ;;
    tcp-noshm) DMLC_PS_VAN_TYPE=tcp PS_SHM=0 scripts/local.sh "$s" "$w" "$psrs" bench --modes "$mode" \
      --sizes "$size" --seconds "$secs" --inflight "$inflight" ;;
    tcp-net) DMLC_PS_VAN_TYPE=tcp PS_SHM=0 PS_LOCAL_SOCKET=0 scripts/local.sh "$s" "$w" "$psrs" bench \
      --modes "$mode" --sizes "$size" --seconds "$secs" --inflight "$inflight" ;;
    tcp+spin) DMLC_PS_VAN_TYPE=tcp PS_SPIN_US=$SPIN_US scripts/local.sh "$s" "$w" "$psrs" bench --modes "$mode" \
      --sizes "$size" --seconds "$secs" --inflight "$inflight" ;;
  esac 2>/dev/null | grep -E '^(bench|pslite) .*msgs_per_s' |
    sed -E 's/.*msgs_per_s= *([0-9.]+).*us_per_op= *([0-9.]+)( cpu_pct=([0-9]+))?.*/\1 \2 \4/' |
    sed "s/^/$sys $shape $mode $size /" >>"$out/all" || echo "bench-vs-pslite: $sys $shape $mode $size failed" >&2
}

echo "load before: $(uptime)"
small() {
for r in $(seq "$rounds"); do
  for shape in $shapes; do
    for mode in ${modes//,/ }; do
      for size in ${sizes//,/ }; do
        for sys in $systems; do run "$sys" "$shape" "$mode" "$size"; done
      done
    done
  done
  echo "round $r done: $(uptime)"
done

# per figure: the median over rounds of the workers' summed msgs/s (mean us/op)
python3 - "$out/all" $systems <<'EOF'
import sys, statistics, collections
runs = collections.defaultdict(list)
cpus = collections.defaultdict(list)
for line in open(sys.argv[1]):
    sys_, shape, mode, size, mps, us, *cpu = line.split()
    runs[(sys_, shape, mode, size)].append((float(mps), float(us)))
    if cpu:
        cpus[(sys_, shape, mode, size)].append(float(cpu[0]))
psrs = [s for s in sys.argv[2:] if s != "pslite"]
def med(key, workers):
    vals = runs.get(key, [])
    # consecutive `workers` lines belong to one run
    per_run = [vals[i:i + workers] for i in range(0, len(vals), workers)]
    if not per_run:
        return None
    if key[2] == "latency":
        return statistics.median(sum(u for _, u in r) / len(r) for r in per_run)
    return statistics.median(sum(m for m, _ in r) for r in per_run)
figs = sorted({k[1:] for k in runs})
head = "".join(f" {s:>10} {'ratio':>6} {'cpu%':>5}" for s in psrs)
print(f"{'shape':5} {'mode':10} {'size':>6} {'ps-lite':>10}{head}")
for shape, mode, size in figs:
    w = int(shape.split("x")[1])
    p = med(("pslite", shape, mode, size), w)
    unit = "us" if mode == "latency" else "msg/s"
    def ratio(x):
        if not x or not p:
            return "-"
        return f"{(p / x if mode == 'latency' else x / p):.2f}"
    fmt = lambda x: "-" if x is None else f"{x:.0f}" if unit == "msg/s" else f"{x:.1f}"
    cols = ""
    for s in psrs:
        x = med((s, shape, mode, size), w)
        c = cpus.get((s, shape, mode, size))
        cols += f" {fmt(x):>10} {ratio(x):>6} {(f'{statistics.median(c):.0f}' if c else '-'):>5}"
    print(f"{shape:5} {mode:10} {size:>6} {fmt(p):>10}{cols}  ({unit}; ratio > 1 = psrs better; cpu% = a worker's median CPU use)")
EOF
}

# ps-lite's test_kv_app_benchmark as the worker; scheduler and servers per system
kvapp_run() { # system shape
  local sys=$1 s=${2%x*} w=${2#*x} t=$pslite/tests
  # the worker runs ps-lite's benchmark ($0 of the wrapper), the other roles the rest
  local wrap='if [ "$DMLC_ROLE" = worker ]; then exec "$0"; else exec "$@"; fi'
  local others
  case $sys in
    pslite-empty) others=("$t/test_kv_app_benchmark") ;;
    pslite-sum) others=("$t/test_kv_app") ;;
    psrs-sum) others=("$psrs" kv-test) ;;
  esac
  DMLC_PS_VAN_TYPE=zmq PS_SECRET_FILE= scripts/local.sh "$s" "$w" sh -c "$wrap" "$t/test_kv_app_benchmark" "${others[@]}" 2>&1 |
    sed -n -E 's/.*(Push|Pull) average time cost: ([0-9.]+)ms.*/\1 \2/p' |
    sed "s/^/$sys $2 /" >>"$out/kv" || echo "bench-vs-pslite: $sys $2 failed" >&2
}

kvapp() {
  local kshapes=${KVAPP_SHAPES:-1x1}
  : >"$out/kv"
  for r in $(seq "$rounds"); do
    for shape in $kshapes; do
      for sys in pslite-empty pslite-sum psrs-sum; do kvapp_run "$sys" "$shape"; done
    done
    echo "kvapp round $r done: $(uptime)"
  done
  python3 - "$out/kv" <<'EOF'
import sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    sys_, shape, phase, ms = line.split()
    runs[(sys_, shape, phase)].append(float(ms))
print("ps-lite's test_kv_app_benchmark (10M float keys per worker, one push then one pull), median ms per worker")
print(f"{'shape':5} {'phase':5} {'ps-lite no store':>16} {'ps-lite sums':>12} {'psrs sums':>10} {'ratio':>6}")
for shape in sorted({k[1] for k in runs}):
    for phase in ("Push", "Pull"):
        m = {s: (statistics.median(runs[(s, shape, phase)]) if runs.get((s, shape, phase)) else None)
             for s in ("pslite-empty", "pslite-sum", "psrs-sum")}
        f = lambda x: "-" if x is None else f"{x:.0f}"
        r = "-" if not m["pslite-sum"] or not m["psrs-sum"] else f"{m['pslite-sum'] / m['psrs-sum']:.2f}"
        print(f"{shape:5} {phase.lower():5} {f(m['pslite-empty']):>16} {f(m['pslite-sum']):>12} {f(m['psrs-sum']):>10} {r:>6}  (ratio: ps-lite sums / psrs sums, > 1 = psrs faster)")
EOF
}

status=0
if [[ " $parts " == *" small "* ]]; then small; fi
if [ "$kvapp_ok" = 1 ]; then
  kvapp || status=1
elif [[ " $parts " == *" kvapp "* ]] && [ -n "${PARTS:-}" ]; then
  status=1
fi
echo "load after: $(uptime)"
exit "$status"
