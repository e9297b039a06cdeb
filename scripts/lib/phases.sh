# Phases of a test script that run whatever an earlier one returned, then a summary.
# Sourced by scripts/test.sh (and its own test, tests/test_script.rs).
#
#   phase NAME COMMAND...   runs COMMAND, records passed/FAILED and its seconds
#   skipped NAME WHY        records a phase that cannot run on this machine
#   summary                 prints the table; returns 1 if any phase failed

# Each phase's start is printed with the seconds since the script began (CI's budget) and
# the disk space left (CI's machine has less than a developer's).
step() { echo "== ${PHASES_SCRIPT:-test}: $* (at ${SECONDS} s, $(df -h --output=avail . | tail -1 | tr -d ' ') free)" >&2; }
PHASE_RESULTS=()
PHASE_FAILED=0
phase() {
  local name=$1
  shift
  step "$name"
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  local took=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    PHASE_RESULTS+=("$(printf '%-8s %6d s  %s' passed "$took" "$name")")
  else
    PHASE_RESULTS+=("$(printf '%-8s %6d s  %s (exit %d)' FAILED "$took" "$name" "$rc")")
    PHASE_FAILED=1
  fi
  return 0
}
skipped() {
  echo "SKIPPED: $1: $2" >&2
  PHASE_RESULTS+=("$(printf '%-8s %6s    %s (%s)' skipped - "$1" "$2")")
}
summary() {
  echo "== ${PHASES_SCRIPT:-test}: summary (${SECONDS} s in all)" >&2
  printf '%s\n' "${PHASE_RESULTS[@]}" >&2
  if [ "$PHASE_FAILED" -ne 0 ]; then
    echo "== ${PHASES_SCRIPT:-test}: FAILED (a phase above failed)" >&2
    return 1
  fi
  echo "== ${PHASES_SCRIPT:-test}: every phase passed" >&2
}
