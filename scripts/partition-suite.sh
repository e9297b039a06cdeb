#!/usr/bin/env bash
# Partitions of real processes (tests/partition.rs, as root): runs each fault shape N
# times at each fault length and prints, per shape and length, the pass rate and the
# seconds from the cut to the standby acting and from the heal to the normal rate of
# finished tasks (median and maximum over the runs that measured them).
#
#   scripts/partition-suite.sh SHAPE|all N
#   scripts/partition-suite.sh all 20                 # every shape, 20 runs per length
#   SECS="6" scripts/partition-suite.sh flapping 5    # one length only
#
# Shapes: active-minority, standby-minority, server-alone, one-way, flapping,
# sigstop. Lengths (seconds the fault lasts; for flapping: the link is up a sixth
# of it between its 10 cuts of 1 s): 3, 6 and 12 by default, and for sigstop also
# 1.6 (twice the 0.8 s lease). A failed run's output is kept under
# target/partition-suite/ (every run's with PSRS_PARTITION_LOGS=1, which also prints
# the processes' logs of a passing run). Needs root, iproute2, nftables and Fashion-MNIST
# (scripts/install-deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ]; then
  echo "usage: scripts/partition-suite.sh SHAPE|all N" >&2
  exit 2
fi
declare -A TEST=(
  [active-minority]=the_active_scheduler_cut_off_with_a_minority
  [standby-minority]=the_standby_cut_off_with_a_minority
  [server-alone]=a_server_cut_off_alone
  [one-way]=nothing_the_active_scheduler_sends_arrives
  [flapping]=a_flapping_link_to_the_active_schedulers_side
  [sigstop]=the_active_scheduler_stopped
)
ORDER="active-minority standby-minority server-alone one-way flapping sigstop"
if [ "$1" = all ]; then
  shapes=$ORDER
elif [ -n "${TEST[$1]:-}" ]; then
  shapes=$1
else
  echo "unknown shape '$1' (one of: $ORDER, all)" >&2
  exit 2
fi
runs=$2
if [ "$(id -u)" -ne 0 ]; then
  echo "the partition suite needs root (network namespaces, nftables)" >&2
  exit 2
fi
# one build, then the test binary runs each time
bin=$(cargo test --workspace --all-features --test partition --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*partition-[^"]*\)".*/\1/p' | tail -1)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "cannot build tests/partition.rs" >&2
  exit 1
fi
keep=target/partition-suite
mkdir -p "$keep"

# median and maximum of the numbers on stdin ("-" when none)
stats() {
  sort -g | awk '{v[NR]=$1} END {
    if (NR == 0) { printf "-"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "median %.2f s, max %.2f s (%d runs)", m, v[NR], NR
  }'
}

summary=()
for shape in $shapes; do
  lengths=${SECS:-3 6 12}
  if [ "$shape" = sigstop ] && [ -z "${SECS:-}" ]; then lengths="1.6 $lengths"; fi
  for secs in $lengths; do
    out=$(mktemp)
    pass=0
    for i in $(seq 1 "$runs"); do
      log="$keep/$shape-$secs-$i.log"
      if PSRS_PARTITION_SECS=$secs timeout 900 "$bin" --ignored --exact "${TEST[$shape]}" --nocapture >"$log" 2>&1; then
        pass=$((pass + 1))
        grep -h "^partition " "$log" | tee -a "$out"
        [ "${PSRS_PARTITION_LOGS:-0}" = 1 ] || rm -f "$log"
      else
        echo "partition $shape $secs s: run $i FAILED (output in $log)"
      fi
    done
    takeover=$(grep -o 'cut->takeover [0-9][0-9.]*' "$out" | awk '{print $2}' | stats)
    normal=$(grep -o 'heal->normal [0-9][0-9.]*' "$out" | awk '{print $2}' | stats)
    summary+=("$shape $secs s: passed $pass of $runs; cut->takeover $takeover; heal->normal $normal")
    rm -f "$out"
  done
done
echo
printf '%s\n' "${summary[@]}"
