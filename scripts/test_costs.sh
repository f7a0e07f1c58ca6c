#!/usr/bin/env bash
# Writes tests/test_costs.txt from the last ctest run of a build tree
# (default build/dev): each test over a second with its time, longest first,
# only tests that still exist. tests/CMakeLists.txt seeds a fresh tree's
# ctest cost file with it, so ctest -j starts the longest tests first.
# Usage: scripts/test_costs.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
data=$build/Testing/Temporary/CTestCostData.txt
[[ -f $data ]] || { echo "no $data: run ctest there first" >&2; exit 1; }
names=$(ctest --test-dir "$build" -N | sed -n 's/^ *Test *#[0-9]*: //p' | awk '{print $1}')
{
  echo "# Seconds each test took in a dev build (2 cores), longest first: ctest starts"
  echo "# the longest first when it knows them, and a clean tree does not."
  echo "# tests/CMakeLists.txt seeds ctest's cost file with these; regenerate with"
  echo "# scripts/test_costs.sh after a full dev run."
  awk 'NR == FNR { ok[$1] = 1; next } NF == 3 && $3 > 1.0 && ok[$1] { printf "%s 1 %.1f\n", $1, $3 }' \
    <(echo "$names") "$data" | sort -k3 -rn
} > tests/test_costs.txt
echo "tests/test_costs.txt: $(grep -vc '^#' tests/test_costs.txt) tests"
