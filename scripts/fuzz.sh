#!/usr/bin/env bash
# Fuzz-style runs of the wire decoders: the message decoder, the TCP frame reader, the
# sealed-record reader and handshake (ps-core), the RecordIO chunk reader and the
# master's request decoder (ps-apps). Each is a proptest over arbitrary bytes; here
# with many cases (FUZZ_CASES, default 20000: about a minute for the RecordIO reader,
# which writes a file per case, under a second for the others). Random inputs, not
# coverage-guided (cargo-fuzz would need nightly and a libFuzzer build). A failing input is shrunk, printed, and saved by proptest under
# */proptest-regressions/: commit that file, and every later `cargo test` replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
CASES="${FUZZ_CASES:-20000}"
for t in message_decoder tcp_frame_reader sealed_reader_and_handshake; do
  echo "== ps-core fuzz_tests::$t ($CASES cases)"
  PROPTEST_CASES="$CASES" cargo test -q -p ps-core --lib "fuzz_tests::$t"
done
for t in recordio_chunk_reader master_request_decoder; do
  echo "== ps-apps fuzz_tests::$t ($CASES cases)"
  PROPTEST_CASES="$CASES" cargo test -q -p ps-apps --lib "fuzz_tests::$t"
done
