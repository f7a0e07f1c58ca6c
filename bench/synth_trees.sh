#!/usr/bin/env bash
# Forest generation time (optimum + switch splitting + tree packing) per
# topology of issue 7's table, each under a time limit.
#   bench/synth_trees.sh [BUILD_DIR] [LIMIT_SECONDS]
set -u
build=${1:-build/release}
limit=${2:-600}
echo "topology,ranks,pieces,trees,maxflows,seconds,digest"
for t in dgx-a100 dgx-a100:2 dgx-a100:4 dgx-a100:8 dgx-a100:16 dgx-h100 dgx-h100:2 dgx-h100:4 \
         dgx-h100:8 dgx-h100:16 mi250:2 mi250:4 torus:8 fattree:8:8; do
  timeout "$limit" "$build/bench/synth_bench" --trees "$t" || echo "$t,,,,,>$limit (stopped)"
done
