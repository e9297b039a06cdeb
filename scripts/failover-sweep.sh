#!/usr/bin/env bash
# Training failover at many moments: runs tests/train_failover.rs with N moments per kind
# of node (default 15: a worker, a server and the scheduler each killed with SIGKILL at
# N shares of the job's tasks spread over (0.1, 0.9), and replaced), a fault-free run
# opening every round. Each run is checked (task counts exact, accuracy within 1 point,
# wall time within the slowest fault-free run + heartbeat timeout + 1 s) and printed;
# the last lines give recovery (seconds from the kill to the master's next finished
# task after the death was handled) and job wall time as median and maximum per kind.
#
#   scripts/failover-sweep.sh          # 15 moments per kind (about 60 runs)
#   MOMENTS=10 scripts/failover-sweep.sh
#   PSRS_FAILOVER_SEED=123 scripts/failover-sweep.sh    # the same moments again
#   PSRS_FAILOVER_AT=worker:0.42 scripts/failover-sweep.sh   # one moment
#
# Needs Fashion-MNIST (apt-get install dataset-fashion-mnist).
set -euo pipefail
cd "$(dirname "$0")/.."
export PSRS_FAILOVER_MOMENTS=${MOMENTS:-15}
cargo test --release --test train_failover -- --include-ignored --test-threads 1 --nocapture 2>&1 |
  grep -E "^(failover moments|replaying|round|fault-free|worker|server|scheduler|summary|test result)|panicked|assert"
