#!/usr/bin/env bash
# Launches a local psrs cluster on 127.0.0.1: one scheduler, NUM_SERVERS servers and
# NUM_WORKERS workers, each running COMMAND with the DMLC_* variables set (like
# ps-lite's tracker/dmlc_local.sh).
#
#   scripts/local.sh NUM_SERVERS NUM_WORKERS COMMAND [ARGS...]
#
# The scheduler gets a free port outside the kernel's ephemeral port range (or
# DMLC_PS_ROOT_PORT if set); PSRS_LAUNCH_LOG=1 prints the port chosen. Exits with the first
# non-zero status of any node (killing the rest), or 124 after PSRS_TIMEOUT seconds
# (default 1800), killing every node. Other PS_* variables pass through.
set -euo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 NUM_SERVERS NUM_WORKERS COMMAND [ARGS...]" >&2
  exit 2
fi
num_servers=$1
num_workers=$2
shift 2
case "$num_servers$num_workers" in
  *[!0-9]*) echo "$0: NUM_SERVERS and NUM_WORKERS must be whole numbers" >&2; exit 2 ;;
esac
timeout_s=${PSRS_TIMEOUT:-1800}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# The scheduler's port comes from outside the kernel's ephemeral range (where the
# other nodes' own listeners and outgoing connections take ports first): below it
# (from 10000), else above it.
read -r eph_lo eph_hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { eph_lo=32768; eph_hi=60999; }
if [ "$eph_lo" -gt 11000 ]; then
  pick_lo=10000; pick_n=$((eph_lo - 10000))
elif [ "$eph_hi" -lt 64535 ]; then
  pick_lo=$((eph_hi + 1)); pick_n=$((65535 - eph_hi))
else
  pick_lo=20000; pick_n=40000 # no room outside it: take the chance
fi
if [ -z "${DMLC_PS_ROOT_PORT:-}" ]; then
  for _ in $(seq 100); do
    p=$((pick_lo + (RANDOM * 32768 + RANDOM) % pick_n))
    if ! port_in_use "$p"; then DMLC_PS_ROOT_PORT=$p; break; fi
  done
fi
: "${DMLC_PS_ROOT_PORT:?could not find a free port}"
export DMLC_PS_ROOT_URI=${DMLC_PS_ROOT_URI:-127.0.0.1}
export DMLC_PS_ROOT_PORT DMLC_NUM_SERVER=$num_servers DMLC_NUM_WORKER=$num_workers
export DMLC_NODE_HOST=${DMLC_NODE_HOST:-127.0.0.1}
if [ "${PSRS_LAUNCH_LOG:-0}" = 1 ]; then echo "$0: scheduler at $DMLC_PS_ROOT_URI:$DMLC_PS_ROOT_PORT" >&2; fi

pids=()
timer=
cleanup() {
  for p in "${pids[@]}" $timer; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
# Nothing survives Ctrl-C or SIGTERM (the nodes and the timer are killed);
# the exit status is 128 + the signal (130 for INT, 143 for TERM).
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

DMLC_ROLE=scheduler "$@" &
pids+=($!)
for _ in $(seq "$num_servers"); do DMLC_ROLE=server "$@" & pids+=($!); done
for _ in $(seq "$num_workers"); do DMLC_ROLE=worker "$@" & pids+=($!); done

sleep "$timeout_s" &
timer=$!

live=("${pids[@]}")
status=0
while [ "${#live[@]}" -gt 0 ]; do
  done_pid=
  set +e
  wait -n -p done_pid "${live[@]}" "$timer"
  rc=$?
  set -e
  if [ "$done_pid" = "$timer" ]; then
    echo "$0: timed out after ${timeout_s}s; killing all nodes" >&2
    status=124
    break
  fi
  next=()
  for p in "${live[@]}"; do [ "$p" = "$done_pid" ] || next+=("$p"); done
  live=("${next[@]+"${next[@]}"}")
  if [ "$rc" -ne 0 ]; then
    echo "$0: a node (pid $done_pid) exited with status $rc; killing the rest" >&2
    status=$rc
    break
  fi
done
kill "$timer" 2>/dev/null || true
exit "$status"
