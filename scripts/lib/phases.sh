# Phases of a test script that run whatever an earlier one returned, then a summary.
# Sourced by scripts/test.sh (and its own test, tests/test_script.rs).
#
#   phase NAME COMMAND...   runs COMMAND, records passed/FAILED and its seconds
#   skipped NAME WHY        records a phase that cannot run on this machine
#   summary                 prints the table, then the last lines of each failed phase's
#                           output; returns 1 if any phase failed
#
# Each phase's output (stdout and stderr, both to stderr) is also kept in
# $PHASE_LOG_DIR (default target/test-logs/NN-NAME.log): a long run's failure is then
# told again at the end, where a reader of a truncated log (CI keeps the tail) sees it.

# Each phase's start is printed with the seconds since the script began (CI's budget) and
# the disk space left (CI's machine has less than a developer's).
step() { echo "== ${PHASES_SCRIPT:-test}: $* (at ${SECONDS} s, $(df -h --output=avail . | tail -1 | tr -d ' ') free)" >&2; }
PHASE_RESULTS=()
PHASE_FAILED=0
PHASE_FAILED_LOGS=()
# How many lines of a failed phase's output the summary repeats.
PHASE_TAIL_LINES=${PHASE_TAIL_LINES:-40}
phase() {
  local name=$1
  shift
  step "$name"
  local dir=${PHASE_LOG_DIR:-target/test-logs}
  mkdir -p "$dir"
  local log
  log="$dir/$(printf '%02d' "${#PHASE_RESULTS[@]}")-$(echo "$name" | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//').log"
  local t0=$SECONDS rc=0
  # the command's status, through the pipe to tee
  { "$@"; echo $? >"$log.rc"; } 2>&1 | tee "$log" >&2
  rc=$(cat "$log.rc" 2>/dev/null || echo 1)
  rm -f "$log.rc"
  local took=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    PHASE_RESULTS+=("$(printf '%-8s %6d s  %s' passed "$took" "$name")")
  else
    PHASE_RESULTS+=("$(printf '%-8s %6d s  %s (exit %d)' FAILED "$took" "$name" "$rc")")
    PHASE_FAILED=1
    PHASE_FAILED_LOGS+=("$name|$log")
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
    local entry
    for entry in "${PHASE_FAILED_LOGS[@]}"; do
      echo "== ${PHASES_SCRIPT:-test}: the last $PHASE_TAIL_LINES lines of '${entry%%|*}' (all of it in ${entry#*|})" >&2
      tail -n "$PHASE_TAIL_LINES" "${entry#*|}" >&2
    done
    echo "== ${PHASES_SCRIPT:-test}: FAILED (a phase above failed)" >&2
    return 1
  fi
  echo "== ${PHASES_SCRIPT:-test}: every phase passed" >&2
}
