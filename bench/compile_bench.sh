#!/usr/bin/env bash
# Compile time and peak memory of the Chorus compiler, issue 5's table: ring
# allreduce and all-pairs alltoall at 64..1024 ranks, 1 and 4 instances.
# One process per case (peak memory is per case). Compile only (record +
# compile); the verifier's time is measured separately by adding VERIFY=1.
#   bench/compile_bench.sh [BUILD]        # build/release
set -euo pipefail
build=${1:-build/release}
bin=$build/bench/compile_bench
[[ -x $bin ]] || { echo "build $bin first (cmake --build --preset release)" >&2; exit 2; }
flag=--no-verify
[[ ${VERIFY:-0} == 1 ]] && flag=""
echo "program,ranks,instances,operations,steps,record_ms,compile_ms,verify_ms,peak_mib"
for prog in ${PROGRAMS:-ring_allreduce allpairs_alltoall}; do
  for n in ${RANKS:-64 128 256 512 1024}; do
    for i in ${INSTANCES:-1 4}; do
      "$bin" "$prog" "$n" "$i" $flag
    done
  done
done
