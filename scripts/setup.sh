#!/usr/bin/env bash
# Installs the Debian packages Chorus builds with, if any are missing.
# Idempotent; needs root (or sudo) only when something must be installed.
# Usage: scripts/setup.sh [extra-package ...]
set -euo pipefail

# iproute2: the two-host test builds network namespaces with `ip` (it skips
# where the kernel forbids them). pybind11-dev, python3-dev, python3-numpy:
# the Python package (docs/python.md), for Debian's /usr/bin/python3.
packages=(cmake ninja-build g++ pkg-config libpugixml-dev nlohmann-json3-dev libcli11-dev
          libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libglpk-dev iproute2
          pybind11-dev python3-dev python3-numpy "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root to install ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
