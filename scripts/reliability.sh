#!/usr/bin/env bash
# CI's reliability job (docs/testing.md "Soak" and "Fault injection"), on
# the release build: a checked soak over thread ranks (built-ins, the
# production files, synthesized schedules), processes over shared memory and
# processes over TCP; then seeded fault injections on one host and between
# two network-namespace hosts (skipped where namespaces cannot be made).
# Usage: scripts/reliability.sh [CALLS] [INJECTIONS]   (default 4000 and 50)
# The full runs the docs quote: scripts/reliability.sh 100000 1000
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-4000}
injections=${2:-50}
scripts/setup.sh
cmake --preset release > /dev/null
cmake --build --preset release --target chorus
B=$PWD/build/release/tools/chorus/chorus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== synthesized schedules for the soak (DGX-1, 8 ranks)"
$B synth allgather --topo dgx1 -o "$work/synth_allgather_dgx1.xml" | tail -1
$B synth reducescatter --topo dgx1 -o "$work/synth_reducescatter_dgx1.xml" | tail -1
production=../shared/msccl-algorithms/ndv4
[[ -d $production ]] || { echo "no $production"; exit 1; }

echo "== soak: $calls calls on 8 thread ranks (built-ins, $production, synthesized)"
$B soak --ranks 8 --calls "$calls" --max-bytes 256K --seed 11 --algo "$production" --algo "$work" |
  grep -v '^# [0-9]* calls'
echo "== soak: $calls calls on 4 processes, shared memory"
CHORUS_TRANSPORT=shm $B soak --procs 4 --calls "$calls" --max-bytes 256K --seed 12 |
  grep -v '^\[.\] # [0-9]* calls'
echo "== soak: $calls calls on 4 processes, TCP"
CHORUS_TRANSPORT=tcp $B soak --procs 4 --calls "$calls" --max-bytes 256K --seed 13 |
  grep -v '^\[.\] # [0-9]* calls'

echo "== fault injection: $injections on one host"
bench/fault_inject.sh "$injections" 1 --chorus "$B" | tail -25
echo "== fault injection: $((injections / 5)) between two network-namespace hosts"
rc=0
bench/fault_inject.sh "$((injections / 5))" 100001 --netns --chorus "$B" | tail -25 || rc=$?
if ((rc != 0 && rc != 77)); then exit "$rc"; fi
echo "== reliability: all passed"
