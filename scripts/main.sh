#!/usr/bin/env bash
# The main job: set up, build (release), and verify the example algorithms in
# examples/algorithms, printing the result table; then summarize one of them.
# Usage: scripts/main.sh [extra algorithm files to verify ...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target chorus
chorus=build/release/tools/chorus/chorus
echo
echo "== chorus verify examples/algorithms/*.xml $*"
"$chorus" verify examples/algorithms/*.xml "$@"
echo
echo "== chorus show examples/algorithms/ring_allreduce_4.xml"
"$chorus" show examples/algorithms/ring_allreduce_4.xml
