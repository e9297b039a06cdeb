#!/usr/bin/env bash
# Installs the Debian packages psrs's build and tests need, when any is missing:
# g++/make/pkg-config (the vendored libzmq), protoc + the protobuf well-known types (the
# etcd store, cargo feature `etcd`; with libzmq3-dev, ps-lite's build for the tests and
# benchmarks of mixed ps-lite/psrs clusters), Fashion-MNIST (training tests), etcd (the etcd store
# test), python3-venv (the Python package's tests), iproute2/nftables (multi-host tests in
# network namespaces), slurm-wlm/munge (the Slurm launcher test), chromium (the dashboard test, headless),
# openssh-server (the SSH launcher against real sshds), podman/runc/netavark/aardvark-dns/iptables/debootstrap
# (the container image and its tests), openssl (certificates from a CA made outside psrs),
# prometheus (its promtool lints the scheduler's /metrics).
set -euo pipefail
PKGS=(g++ make pkg-config ca-certificates protobuf-compiler libprotobuf-dev libzmq3-dev
  dataset-fashion-mnist etcd-server python3 python3-venv python3-pip iproute2 nftables
  slurm-wlm munge chromium openssh-server openssh-client podman runc netavark aardvark-dns iptables debootstrap openssl prometheus)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "install-deps: not a Debian system; install these yourself: ${missing[*]}" >&2
  exit 1
fi
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
