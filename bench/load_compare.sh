#!/usr/bin/env bash
# Chorus and OpenMPI per call with busy cores beside them (issue 44: "with 2
# busy cores beside the job, Chorus's p99 per call no worse than 2x
# OpenMPI's"). For BUSY = 0, 1 and 2 processes each spinning a core (a shell
# loop, as a build or another job would), every (ranks, collective, size)
# runs Chorus (`chorus perf --procs N --percentiles`, over shared memory)
# and OpenMPI (bench/mpi_perf ... percentiles, btl self,vader, malloc tuned
# as in bench/peer_compare.sh) in turn, REPS times (interleaved: A B A B).
# Each run times every call on rank 0; its median and 99th percentile are
# kept, and the median of each over the repetitions is printed.
# Out-of-place calls, float32 sum.
#   bench/load_compare.sh [BUILD]        # build/release; 2 and 4 ranks
#   BUSY="2" RANKS="2" COLLS="allreduce" SIZES="4096" REPS=5 bench/load_compare.sh
# Prints CSV: busy,collective,ranks,size_bytes,calls,chorus_p50_us,
# chorus_p99_us,mpi_p50_us,mpi_p99_us,p99_ratio (Chorus's p99 / OpenMPI's:
# the goal is <= 2), p50_ratio.
# Needs openmpi-bin + libopenmpi-dev (CMake builds bench/mpi_perf when it
# finds them); without them the MPI columns are empty.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
use_build "${1:-}"
busy_counts=${BUSY:-"0 1 2"}
ranks=${RANKS:-"2 4"}
colls=${COLLS:-"allreduce allgather reducescatter alltoall"}
sizes=${SIZES:-"4096 65536 1048576"}
reps=${REPS:-3}
tunables=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
mpirun_with --mca btl self,vader -x GLIBC_TUNABLES

spinners=()
stop_spinners() {
  ((${#spinners[@]})) && kill "${spinners[@]}" 2>/dev/null && { wait "${spinners[@]}" 2>/dev/null || true; }
  spinners=()
  return 0
}
trap stop_spinners EXIT

echo "busy,collective,ranks,size_bytes,calls,chorus_p50_us,chorus_p99_us,mpi_p50_us,mpi_p99_us,p99_ratio,p50_ratio"
for busy in $busy_counts; do
  for ((b = 0; b < busy; ++b)); do
    (while :; do :; done) &
    spinners+=($!)
  done
  for n in $ranks; do
    for c in $colls; do
      for size in $sizes; do
        # Enough calls for a 99th percentile (at least 200), about 64 MiB moved.
        calls=$((67108864 / size))
        ((calls > 2000)) && calls=2000
        ((calls < 200)) && calls=200
        warm=$((calls / 10 + 1))
        c50=() c99=() m50=() m99=()
        for ((k = 0; k < reps; ++k)); do
          # chorus CSV: 19 oop_p50_us, 20 oop_p99_us.
          row=$("$chorus" perf "$c" --procs "$n" -b "$size" -e "$size" -n "$calls" -w "$warm" \
                  --csv --percentiles | tail -1 | sed 's/^\[0\] //')
          c50+=("$(cut -d, -f19 <<<"$row")")
          c99+=("$(cut -d, -f20 <<<"$row")")
          if [[ -x $mpi ]]; then
            # mpi_perf CSV: 14 oop p50, 15 oop p99.
            row=$(GLIBC_TUNABLES=$tunables "${mpirun[@]}" -np "$n" "$mpi" "$c" "$size" "$size" \
                    "$calls" "$warm" percentiles | tail -1)
            m50+=("$(cut -d, -f14 <<<"$row")")
            m99+=("$(cut -d, -f15 <<<"$row")")
          fi
        done
        cp50=$(printf '%s\n' "${c50[@]}" | median)
        cp99=$(printf '%s\n' "${c99[@]}" | median)
        mp50=$( ((${#m50[@]})) && printf '%s\n' "${m50[@]}" | median || true)
        mp99=$( ((${#m99[@]})) && printf '%s\n' "${m99[@]}" | median || true)
        awk -v b="$busy" -v c="$c" -v n="$n" -v s="$size" -v k="$calls" -v c50="$cp50" \
            -v c99="$cp99" -v m50="$mp50" -v m99="$mp99" 'BEGIN {
          printf "%s,%s,%s,%s,%s,%.1f,%.1f,%s,%s,%s,%s\n", b, c, n, s, k, c50, c99,
            (m50 != "") ? sprintf("%.1f", m50) : "", (m99 != "") ? sprintf("%.1f", m99) : "",
            (m99 != "") ? sprintf("%.2f", c99 / m99) : "", (m50 != "") ? sprintf("%.2f", c50 / m50) : "" }'
      done
    done
  done
  stop_spinners
done
