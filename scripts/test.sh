#!/usr/bin/env bash
# Set up, build and run the tests. Usage: scripts/test.sh [PRESET] [ctest args ...]
# PRESET is one of dev (default), release, asan, tsan (CMakePresets.json).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dev}
shift || true
scripts/setup.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" --output-on-failure "$@"
