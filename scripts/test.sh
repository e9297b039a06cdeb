#!/usr/bin/env bash
# Every test of psrs, as the README's test command and CI run them: installs the Debian
# packages the tests need when any is missing (scripts/install-deps.sh) and an S3 server
# for tests (s3s-fs, into target/tools), then the workspace's tests (tests/pslite.rs
# builds ps-lite's library into target/ps-lite first, once), ps-lite's own test
# programs against psrs where their sources are, 3000 seeds of the deterministic
# simulator (psrs simulate), IDunno's experiment with tiny models, the root-only tests
# (network namespaces, Slurm, the SSH launcher against real sshds), the multi-process
# tests again over the ZMQ transport and with TLS, the Python package's tests (pytest in
# a virtualenv under target/), the Kubernetes manifests' validation, and (root) the
# container image with clusters of containers under podman.
#
# Every phase runs even when an earlier one failed, so one run shows every failure; the
# script ends with a table of the phases (passed, failed or skipped, and the seconds
# each took) and exits non-zero if any failed. A test that cannot run here is listed as
# ignored or skipped, never as passed.
#
#   scripts/test.sh              every phase
#   scripts/test.sh --soak N     the multi-process tests N times under two busy loops,
#                                then each flaky test with its failure rate (scripts/soak.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--soak" ]; then
  shift
  exec scripts/soak.sh "$@"
fi
if [ $# -gt 0 ]; then
  echo "usage: scripts/test.sh [--soak N [TEST...]]" >&2
  exit 2
fi

PHASES_SCRIPT=scripts/test.sh
. scripts/lib/phases.sh

phase "install-deps" scripts/install-deps.sh

# Everything is built once, with every feature (the etcd master store and election):
# each cargo call below names the whole workspace with the same features (features
# unify across the members as in the first build), so none rebuilds the workspace. The etcd
# tests start their own etcd server (Debian's etcd-server).
F=(--workspace --all-features)
# A real S3-compatible server for tests/object_store.rs (s3s-fs, an S3 API over a
# directory), built once into target/tools; unoptimised (a test server: it builds in
# half the time).
if [ ! -x target/tools/bin/s3s-fs ]; then
  phase "cargo install s3s-fs" cargo install --quiet --debug --locked s3s-fs@0.14.1 --features binary --root target/tools
fi
phase "workspace tests: build" cargo test "${F[@]}" --no-run
# every test binary runs even after one fails, so one run shows every failure
phase "workspace tests: run" cargo test "${F[@]}" --no-fail-fast

# ps-lite's own test programs (test_connection, test_simple_app, test_kv_app,
# test_kv_app_multi_workers), unmodified, as the workers of psrs clusters: the ignored
# tests of tests/pslite.rs, run where the programs' sources are (a full checkout of
# ps-lite as PSLITE_SRC, or shared/peers/ps-lite beside this checkout if it has
# tests/*.cc). The workspace tests above ran ps-lite's library in every role under
# psrs's own program against ps-lite's API, which needs only the library's source.
. scripts/lib/pslite.sh
# (word splitting of the program list is meant)
# shellcheck disable=SC2086
if src=$(pslite_source) && pslite_has_programs "$src" $PSLITE_TEST_PROGRAMS; then
  phase "ps-lite's test programs" cargo test "${F[@]}" --test pslite -- --ignored
else
  skipped "ps-lite's test programs" "needs ps-lite's test programs' sources (PSLITE_SRC or shared/peers/ps-lite/tests/*.cc)"
fi

# The deterministic simulator: whole clusters under a seeded network and clock with
# partitions, losses and crashes, invariants checked after every step (a failing seed
# prints the command that replays it). The binary the workspace tests built (the test
# profile, optimised).
phase "simulator seeds" target/debug/psrs simulate --seeds 3000

# IDunno's experiment as CI keeps it working: every phase of scripts/idunno-experiment.sh
# (two jobs on shared workers, the second job's model warmed on every worker, fair time
# in local and global mode, a worker and the active scheduler killed) with tiny
# stand-in models in plain Python on 4 workers; it fails naming any figure of its
# figures.json that is missing or out of range (about 2 minutes). The binary the
# workspace tests built.
phase "IDunno experiment (smoke)" env PSRS_BIN=target/debug/psrs scripts/idunno-experiment.sh --smoke

# Multi-host tests in network namespaces and the Slurm test need root; a plain
# `cargo test` lists them as ignored.
SUDO=()
ROOT=1
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO=(sudo -E env "PATH=$PATH"); else ROOT=0; fi
fi
root_tests() {
  local rc=0
  for t in multihost slurm ssh_launch; do
    "${SUDO[@]}" cargo test "${F[@]}" --test "$t" -- --ignored || rc=1
  done
  return $rc
}
if [ "$ROOT" = 1 ]; then
  phase "root-only tests" root_tests
else
  skipped "root-only tests" "tests/multihost.rs, slurm.rs and ssh_launch.rs need root (run as root or with sudo)"
fi

# The multi-process tests of the layers the transport serves directly, again over the
# ZMQ transport (ps-lite's; the default is the TCP van): cluster (start, barriers,
# malformed input), failure (a node's death and replacement) and kv. Training, jobs and
# the failover sweep are logic above the transport and run once (CI's time budget).
phase "ZMQ van" env DMLC_PS_VAN_TYPE=zmq cargo test "${F[@]}" --no-fail-fast --test cluster --test failure --test kv
# The multi-process KV, cluster and 64-node launcher tests again with a cluster secret: every
# link runs mutual TLS 1.3 with certificates each node issues itself from a CA derived from
# the secret (the tests' cluster helper hands PSRS_TEST_SECRET to every node as its
# PS_SECRET_FILE). tests/intruder runs a cluster with `psrs certs` certificates.
phase "TCP van with TLS (a cluster secret)" env DMLC_PS_VAN_TYPE=tcp PSRS_TEST_SECRET=ci-cluster-secret-0123456789 \
  cargo test "${F[@]}" --no-fail-fast --test kv --test cluster --test launcher

# The Python package: built with maturin (from PyPI) into a virtualenv, then its tests
# (real clusters of Python and Rust nodes) with pytest; "no tests collected" (exit 5)
# fails like any other failure. scripts/install-python.sh installs torch, torchvision,
# transformers and pillow (PyPI; torch with its CUDA libraries, run on CPU) for
# psrs.torch, the inference jobs' Python runners and the IDunno experiment.
# PSRS_CI_FREE_DISK=1 (set by .ci/run) frees what later steps do not need first.
python_package() {
  # the wheel first (pip fetches maturin into its own build environment), one wheel,
  # installed here and put into the container image below
  python3 -m venv target/py-venv || return 1
  rm -rf target/wheels
  # (optimisation level 1: it builds in about half the time of level 3, and the tests'
  # work is in the servers and in torch, not in the binding)
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 target/py-venv/bin/pip wheel -q --disable-pip-version-check --no-deps \
    -w target/wheels ./python || return 1
  if [ "${PSRS_CI_FREE_DISK:-0}" = 1 ]; then
    # CI's fresh machine: the Python crate's build and the test binaries that already ran
    # are dropped before torch (5.8 GB) comes in; cargo relinks any a later step runs
    rm -rf python/target
    find target/debug/deps -maxdepth 1 -type f -perm -u+x ! -name '*.so' ! -name 'psrs-*' -delete
  fi
  scripts/install-python.sh target/py-venv || return 1
  target/py-venv/bin/pip install -q --force-reinstall --no-deps target/wheels/psrs-*.whl || return 1
  # the binary the workspace tests built (the test profile) runs the Python tests' servers
  local rc=0
  PSRS_BIN=target/debug/psrs target/py-venv/bin/python -m pytest python/tests -q -rs || rc=$?
  if [ "$rc" -eq 5 ]; then echo "pytest collected no tests" >&2; fi
  return $rc
}
phase "Python package" python_package

# The Kubernetes manifests: rendered from deploy/k8s/render.py, valid against the API
# schemas (kubernetes-validate, installed above).
phase "Kubernetes manifests" cargo test "${F[@]}" --test k8s_manifest -- --ignored
# The container image (built once from the debug binary and the wheel above; its Debian
# base is made by debootstrap once per machine) and clusters of containers under podman.
containers() {
  local wheel
  wheel=$(ls target/wheels/psrs-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] || { echo "no wheel in target/wheels: the Python phase failed before building it" >&2; return 1; }
  PSRS_WHEEL=$wheel "${SUDO[@]}" cargo test "${F[@]}" --test containers -- --ignored
}
if [ "$ROOT" = 1 ]; then
  phase "container image and podman clusters" containers
else
  skipped "container image and podman clusters" "tests/containers.rs needs root (run as root or with sudo)"
fi

summary
