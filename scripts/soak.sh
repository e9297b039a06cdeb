#!/usr/bin/env bash
# Soak: the multi-process tests (every integration test under tests/ that runs without
# root) N times in a row while two busy loops take both cores, as on a user's machine
# that is doing other work; then every test that failed at least once, with its
# failure rate. A test that fails only under load is a race the quiet CI machine hides.
#
#   scripts/soak.sh N                  every integration test, N rounds
#   scripts/soak.sh N --test limits    only these test binaries (cargo's --test flags)
#   SOAK_BUSY=0 scripts/soak.sh N      without the busy loops
#
# Each round's full output is kept in target/soak/round-K.log. Exits non-zero if any
# test failed in any round.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-}
if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/soak.sh N [--test NAME ...]   (N: rounds, at least 1)" >&2
  exit 2
fi
shift
sel=("$@")
[ ${#sel[@]} -gt 0 ] || sel=(--test '*')
F=(--workspace --all-features)
out=target/soak
mkdir -p "$out"
rm -f "$out"/round-*.log

busy=()
stop_busy() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null; done
  busy=()
}
trap stop_busy EXIT
if [ "${SOAK_BUSY:-1}" != 0 ]; then
  for _ in 1 2; do
    bash -c 'while :; do :; done' &
    busy+=($!)
  done
  echo "soak: two busy loops (pids ${busy[*]}) load the cores" >&2
fi

# built once before the rounds, so a round's time is the tests' own
cargo test "${F[@]}" --no-run "${sel[@]}" >/dev/null 2>&1 || cargo test "${F[@]}" --no-run "${sel[@]}" || exit 1
for ((k = 1; k <= n; k++)); do
  t0=$SECONDS
  cargo test "${F[@]}" --no-fail-fast "${sel[@]}" >"$out/round-$k.log" 2>&1
  echo "soak: round $k of $n: exit $?, $((SECONDS - t0)) s, $(grep -c '\.\.\. FAILED$' "$out/round-$k.log") failed" >&2
done
stop_busy

# "Running tests/x.rs (...)" names the binary; "test NAME ... ok|FAILED" each result
awk -v rounds="$n" '
  /^ *Running / { bin = $2; sub(/^tests\//, "", bin); sub(/\.rs$/, "", bin); next }
  /^test .* \.\.\. (ok|FAILED)$/ {
    name = bin "::" $2
    runs[name]++
    if ($NF == "FAILED") fails[name]++
  }
  END {
    total = 0; flaky = 0
    for (t in runs) total++
    for (t in fails) {
      flaky++
      printf "FLAKY  %3d of %3d runs failed (%5.1f%%)  %s\n", fails[t], runs[t], 100 * fails[t] / runs[t], t
    }
    printf "soak: %d tests, %d rounds, %d failed at least once\n", total, rounds, flaky
    exit flaky > 0
  }' "$out"/round-*.log
