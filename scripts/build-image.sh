#!/usr/bin/env bash
# Builds the psrs container image with podman, from Debian's packages only (no image
# registry): a base root file system made by `debootstrap --variant=minbase` of this
# host's Debian release (python3, numpy, tini, CA certificates), imported once as
# localhost/psrs-base:CODENAME and kept; then deploy/image/Containerfile adds the psrs
# binary (stripped) and the Python package.
#
#   scripts/build-image.sh [--tag NAME] [--binary PATH] [--wheel PATH]
#
# --tag      the image's name (default localhost/psrs:latest)
# --binary   the psrs binary to put in (default: `cargo build --release` builds it)
# --wheel    the Python package's wheel (default: `pip wheel ./python` builds it)
#
# Needs root, podman, buildah's storage, debootstrap (scripts/install-deps.sh installs
# them). PSRS_DEBIAN_MIRROR overrides the mirror (default: the one apt uses here).
# CONTAINERS_CONF defaults to deploy/image/containers.conf (runc, cgroupfs).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=localhost/psrs:latest
bin=
wheel=
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --binary) bin=$2; shift 2 ;;
    --wheel) wheel=$2; shift 2 ;;
    *) echo "build-image.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for t in podman debootstrap; do
  command -v "$t" >/dev/null || { echo "build-image.sh: $t is missing: scripts/install-deps.sh installs it" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "build-image.sh: debootstrap needs root" >&2; exit 1; }
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/deploy/image/containers.conf}
mkdir -p target/image
# one build at a time (tests may ask for the image at once)
exec 9>target/image/lock
flock 9

codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?/etc/os-release names no Debian release}")
base=localhost/psrs-base:$codename
if ! podman image exists "$base"; then
  mirror=${PSRS_DEBIAN_MIRROR:-}
  if [ -z "$mirror" ]; then
    # the first plain (not -security) Debian source apt uses here
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs: *//p' | grep -v security | head -n1 || true)
    [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1 || true)
  fi
  [ -n "$mirror" ] || { echo "build-image.sh: no Debian mirror found in apt's sources: set PSRS_DEBIAN_MIRROR" >&2; exit 1; }
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  echo "build-image.sh: debootstrap $codename from $mirror (once; kept as $base)" >&2
  debootstrap --variant=minbase --include=python3,python3-numpy,tini,ca-certificates \
    "$codename" "$root/fs" "$mirror" >"$root/debootstrap.log" 2>&1 ||
    { tail -n 20 "$root/debootstrap.log" >&2; echo "build-image.sh: debootstrap failed" >&2; exit 1; }
  rm -rf "$root"/fs/var/cache/apt/archives/*.deb "$root"/fs/var/lib/apt/lists/* \
    "$root"/fs/usr/share/doc/* "$root"/fs/usr/share/man/* "$root"/fs/usr/share/locale/*
  tar -C "$root/fs" -c . | podman import --change 'CMD ["/bin/sh"]' - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
fi

if [ -z "$bin" ]; then
  cargo build --release --bin psrs
  bin=target/release/psrs
fi
[ -x "$bin" ] || { echo "build-image.sh: --binary $bin is not an executable" >&2; exit 1; }
if [ -z "$wheel" ]; then
  rm -rf target/image/wheels
  python3 -m pip wheel -q --no-deps -w target/image/wheels ./python
  wheel=$(ls target/image/wheels/psrs-*.whl)
fi
[ -f "$wheel" ] || { echo "build-image.sh: --wheel $wheel is not a file" >&2; exit 1; }

ctx=target/image/context
rm -rf "$ctx"
mkdir -p "$ctx/python"
strip -o "$ctx/psrs" "$bin" 2>/dev/null || cp "$bin" "$ctx/psrs"
# a wheel is a zip of what goes into site-packages (this one has no scripts or data)
python3 -m zipfile -e "$wheel" "$ctx/python"
podman build -q --build-arg BASE="$base" -t "$tag" -f deploy/image/Containerfile "$ctx" >/dev/null
echo "build-image.sh: built $tag" >&2
