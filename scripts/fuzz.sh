#!/usr/bin/env bash
# Coverage-guided fuzzing of the wire decoders with cargo-fuzz (libFuzzer), on stable
# (`-s none`: no sanitizer). Targets and directories: fuzz/README.md.
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_TARGETS  space-separated subset (default: all)
# Each run starts from fuzz/seeds/<target> (the kept minimized corpus) and works in
# fuzz/corpus/<target>. A crash stops the script with libFuzzer's report; the input is in
# fuzz/artifacts/<target>/: copy it to fuzz/regressions/<target>/ so `cargo test` replays it.
# The proptest versions of the same targets (random, not coverage-guided) run with
# FUZZ_CASES cases each afterwards (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER="${FUZZ_SECONDS:-60}"
TARGETS="${FUZZ_TARGETS:-message_decoder pslite_message_decoder tcp_frame_reader tls_accept recordio_chunk_reader master_request_decoder}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
(
  cd fuzz
  cargo fuzz build -s none
  for t in $TARGETS; do
    echo "== cargo fuzz $t (${SECONDS_PER}s)"
    mkdir -p "corpus/$t"
    log="artifacts/$t.log"
    mkdir -p artifacts
    rc=0
    cargo fuzz run -s none "$t" "corpus/$t" "seeds/$t" -- -max_total_time="$SECONDS_PER" -rss_limit_mb=2048 >"$log" 2>&1 || rc=$?
    grep -E '^(#[0-9]+ +DONE|Done )' "$log" || true
    if [ "$rc" -ne 0 ]; then
      tail -40 "$log" >&2
      echo "fuzz target $t FAILED (exit $rc): input in fuzz/artifacts/$t/, log $log" >&2
      exit 1
    fi
  done
)
CASES="${FUZZ_CASES:-2000}"
echo "== proptest fuzz tests ($CASES cases each) and kept-input replay"
PROPTEST_CASES="$CASES" cargo test -q -p ps-core --lib fuzz_tests
PROPTEST_CASES="$CASES" cargo test -q -p ps-apps --lib fuzz_tests
