#!/usr/bin/env bash
# The PyTorch backend's job (CI runs it after the others): installs Debian's
# python3-torch and libtorch-dev (about 190 MB, so only here) and openmpi-bin
# (the mpirun launch test), builds the backend in the given preset (default
# dev) and runs the tests labelled torch (tests/python/test_torch.py).
# Usage: scripts/torch_check.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dev}
scripts/setup.sh python3-torch libtorch-dev openmpi-bin
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target chorus chorus_python chorus_torch
ctest --preset "$preset" -L torch --output-on-failure
