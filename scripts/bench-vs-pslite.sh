#!/usr/bin/env bash
# Side-by-side small-message benchmark: alternates ps-lite's driver
# (../shared/bench/pslite_bench.cc), psrs's ZMQ van and psrs's TCP van in the same run,
# ROUNDS rounds, and prints each figure's median and the ratio psrs / ps-lite
# (msgs/s: > 1 = psrs better; latency in us: < 1 = psrs better).
#
#   PSLITE_BENCH=/path/to/pslite_bench scripts/bench-vs-pslite.sh [ROUNDS]
#
# PSLITE_BENCH is a pslite_bench binary built against a ps-lite checkout as
# ../shared/bench/README.md says (this repository builds no ps-lite code). Without it
# the script says so and exits 0. Knobs: MODES (push-only,pull-only,latency), SIZES
# (256,4096), SHAPES ("1x1 2x2": servers x workers), BENCH_SECONDS (1), INFLIGHT (16),
# SPIN_US (unset; N adds a column "tcp+spin": the TCP van with PS_SPIN_US=N, and every
# psrs figure then also shows the worker's CPU use in percent of a core), NO_SHM (unset;
# 1 adds a column "tcp-noshm": the TCP van with PS_SHM=0, co-located nodes' large
# values over their socket instead of shared memory), NET (unset; 1 adds a column
# "tcp-net": the TCP van with PS_SHM=0 PS_LOCAL_SOCKET=0, co-located nodes over
# loopback TCP as nodes on different hosts talk; the "tcp" column, the default, uses
# Unix sockets and shared memory between nodes of one host).
# Needs target/release/psrs (cargo build --release). Print `uptime` with the figures:
# on a loaded machine only ratios from one run mean anything.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${PSLITE_BENCH:-}" ] || [ ! -x "${PSLITE_BENCH}" ]; then
  echo "bench-vs-pslite: PSLITE_BENCH is not set to a pslite_bench binary (see ../shared/bench/README.md); nothing compared"
  exit 0
fi
psrs=target/release/psrs
[ -x "$psrs" ] || { echo "bench-vs-pslite: build $psrs first (cargo build --release)" >&2; exit 2; }

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
