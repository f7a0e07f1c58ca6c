#!/usr/bin/env bash
# Set up, build and run the tests. Usage: scripts/test.sh [PRESET] [ctest args ...]
# PRESET is one of dev (default), release, asan, tsan (CMakePresets.json).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dev}
shift || true
# The dev preset also renders reports in a real browser (docs/report.md):
# Debian's chromium, its driver and python3-selenium.
if [[ $preset == dev ]]; then
  scripts/setup.sh chromium chromium-driver python3-selenium
else
  scripts/setup.sh
fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
# One test per core at once (ctest would otherwise run them one by one);
# RUN_SERIAL tests still run alone.
ctest --preset "$preset" -j "$(nproc)" --output-on-failure "$@"
