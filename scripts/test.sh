#!/usr/bin/env bash
# Every test of psrs, as the README's test command and CI run them: installs the Debian
# packages the tests need when any is missing (scripts/install-deps.sh) and an S3 server
# for tests (s3s-fs, into target/tools), then the workspace's tests, 3000 seeds of the
# deterministic simulator (psrs simulate), the root-only tests
# (network namespaces, Slurm, the SSH launcher against real sshds), the multi-process
# tests again over the ZMQ transport, the etcd store and election against a real etcd, the Python
# package's tests (pytest in a virtualenv under target/), the Kubernetes manifests'
# validation, and (root) the container image with clusters of containers under podman. Any failure fails the script;
# a test that cannot run here is listed as ignored, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start is printed with the seconds since the script began (CI's budget) and
# the disk space left (CI's machine has less than a developer's).
step() { echo "== scripts/test.sh: $* (at ${SECONDS} s, $(df -h --output=avail . | tail -1 | tr -d ' ') free)" >&2; }
step "install-deps"
scripts/install-deps.sh

# Everything is built once, with every feature (the etcd master store and election):
# each cargo call below names the whole workspace with the same features (features
# unify across the members as in the first build), so none rebuilds the workspace. The etcd
# tests start their own etcd server (Debian's etcd-server).
F="--workspace --all-features"
# A real S3-compatible server for tests/object_store.rs (s3s-fs, an S3 API over a
# directory), built once into target/tools; unoptimised (a test server: it builds in
# half the time).
if [ ! -x target/tools/bin/s3s-fs ]; then
  step "cargo install s3s-fs"
  cargo install --quiet --debug --locked s3s-fs@0.14.1 --features binary --root target/tools
fi
step "workspace tests: build"
cargo test $F --no-run
step "workspace tests: run"
# every test binary runs even after one fails, so one run shows every failure
cargo test $F --no-fail-fast

# The deterministic simulator: whole clusters under a seeded network and clock with
# partitions, losses and crashes, invariants checked after every step (a failing seed
# prints the command that replays it). The binary the workspace tests built (the test
# profile, optimised).
step "simulator seeds"
target/debug/psrs simulate --seeds 3000

# Multi-host tests in network namespaces and the Slurm test need root; a plain
# `cargo test` lists them as ignored.
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo -E env PATH=$PATH"; else SUDO=none; fi
fi
if [ "$SUDO" = none ]; then
  echo "SKIPPED: tests/multihost.rs and tests/slurm.rs need root (run as root or with sudo)" >&2
else
  step "root-only tests"
  $SUDO cargo test $F --test multihost -- --ignored
  $SUDO cargo test $F --test slurm -- --ignored
  $SUDO cargo test $F --test ssh_launch -- --ignored
fi

# The multi-process tests of the layers the transport serves directly, again over the
# ZMQ transport (ps-lite's; the default is the TCP van): cluster (start, barriers,
# malformed input), failure (a node's death and replacement) and kv. Training, jobs and
# the failover sweep are logic above the transport and run once (CI's time budget).
step "ZMQ van"
DMLC_PS_VAN_TYPE=zmq cargo test $F --test cluster --test failure --test kv
# The multi-process KV, cluster and 64-node launcher tests again with a cluster secret: every
# link runs mutual TLS 1.3 with certificates each node issues itself from a CA derived from
# the secret (the tests' cluster helper hands PSRS_TEST_SECRET to every node as its
# PS_SECRET_FILE). tests/intruder runs a cluster with `psrs certs` certificates.
step "TCP van with TLS (a cluster secret)"
DMLC_PS_VAN_TYPE=tcp PSRS_TEST_SECRET=ci-cluster-secret-0123456789 cargo test $F --test kv --test cluster \
  --test launcher

# The Python package: built with maturin (from PyPI) into a virtualenv, then its tests
# (real clusters of Python and Rust nodes) with pytest; "no tests collected" (exit 5)
# fails like any other failure. scripts/install-python.sh installs torch, torchvision,
# transformers and pillow (PyPI; torch with its CUDA libraries, run on CPU) for
# psrs.torch, the inference jobs' Python runners and the IDunno experiment.
# PSRS_CI_FREE_DISK=1 (set by .ci/run) frees what later steps do not need first.
step "Python package"
# the wheel first (pip fetches maturin into its own build environment), one wheel,
# installed here and put into the container image below
python3 -m venv target/py-venv
rm -rf target/wheels
# (optimisation level 1: it builds in about half the time of level 3, and the tests'
# work is in the servers and in torch, not in the binding)
CARGO_PROFILE_RELEASE_OPT_LEVEL=1 target/py-venv/bin/pip wheel -q --disable-pip-version-check --no-deps -w target/wheels ./python
if [ "${PSRS_CI_FREE_DISK:-0}" = 1 ]; then
  # CI's fresh machine: the Python crate's build and the test binaries that already ran
  # are dropped before torch (5.8 GB) comes in; cargo relinks any a later step runs
  rm -rf python/target
  find target/debug/deps -maxdepth 1 -type f -perm -u+x ! -name '*.so' ! -name 'psrs-*' -delete
fi
scripts/install-python.sh target/py-venv
target/py-venv/bin/pip install -q --force-reinstall --no-deps target/wheels/psrs-*.whl
# the binary the workspace tests built (the test profile) runs the Python tests' servers
rc=0
PSRS_BIN=target/debug/psrs target/py-venv/bin/python -m pytest python/tests -q -rs || rc=$?
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests" >&2; fi
[ "$rc" -eq 0 ] || { step "done (exit $rc)"; exit "$rc"; }

# The Kubernetes manifests: rendered from deploy/k8s/render.py, valid against the API
# schemas (kubernetes-validate, installed above).
step "Kubernetes manifests"
cargo test $F --test k8s_manifest -- --ignored
# The container image (built once from the debug binary and the wheel above; its Debian
# base is made by debootstrap once per machine) and clusters of containers under podman.
if [ "$SUDO" = none ]; then
  echo "SKIPPED: tests/containers.rs needs root (run as root or with sudo)" >&2
else
  step "container image and podman clusters"
  PSRS_WHEEL=$(ls target/wheels/psrs-*.whl) $SUDO cargo test $F --test containers -- --ignored
fi
step "done (exit 0)"
