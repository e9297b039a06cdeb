#!/usr/bin/env bash
# The Python packages that the Python tests, psrs.torch, the inference jobs' runners and
# the IDunno experiment need, from PyPI, into a virtualenv (default target/py-venv; the
# first argument names another). torch brings its CUDA libraries (about 2.8 GB of wheels,
# 5.8 GB installed; psrs runs them on CPU). The wheels are downloaded once, then
# installed one large wheel at a time, each deleted as soon as it is unpacked: pip's
# one-command install keeps every downloaded wheel until the end beside the unpacked
# files (8.6 GB at its peak), which filled a CI machine's disk. When every package is
# already installed and consistent, nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-target/py-venv}
pkgs=(maturin numpy pytest kubernetes-validate torch torchvision transformers pillow)

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
if "${pip[@]}" show "${pkgs[@]}" >/dev/null 2>&1 && "${pip[@]}" check >/dev/null 2>&1; then
  echo "install-python: ${pkgs[*]} already in $venv" >&2
  exit 0
fi
"${pip[@]}" install --no-cache-dir --upgrade pip
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
"${pip[@]}" download --no-cache-dir -d "$dl" "${pkgs[@]}"
echo "install-python: $(ls "$dl" | wc -l) packages ($(du -sh "$dl" | cut -f1)) into $venv" >&2
# the large files one at a time (largest first), then the rest together
while read -r size file; do
  if [ "$size" -lt $((50 * 1024 * 1024)) ]; then break; fi
  "${pip[@]}" install --no-cache-dir --no-deps "$dl/$file"
  rm -f "$dl/$file"
done < <(cd "$dl" && stat -c '%s %n' -- * | sort -rn)
rest=("$dl"/*)
if [ -e "${rest[0]}" ]; then
  "${pip[@]}" install --no-cache-dir --no-deps "${rest[@]}"
fi
# every requirement of every package is installed
"${pip[@]}" check
