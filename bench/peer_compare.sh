#!/usr/bin/env bash
# Chorus against OpenMPI, side by side and interleaved (one size of one, then
# the same size of the other), because this machine's speed drifts over
# minutes. Prints CSV: times in us, busbw in GB/s, speedup = MPI time /
# Chorus time (> 1: Chorus is faster), and Chorus's busbw as a fraction of
# the memcpy bandwidth `chorus perf` measured in the same row.
#   bench/peer_compare.sh                   # build/release, 2/4/8 ranks, 4K..256M
#   RANKS="2" COLLS="allreduce" MAX=67108864 bench/peer_compare.sh
#   PROCS=1 bench/peer_compare.sh           # Chorus ranks as processes (shared memory), like MPI's
# Needs openmpi-bin and libopenmpi-dev (bench/mpi_perf is built when CMake finds MPI).
set -euo pipefail
build=${1:-build/release}
chorus=$build/tools/chorus/chorus
mpi=$build/bench/mpi_perf
[[ -x $chorus && -x $mpi ]] || { echo "build $chorus and $mpi first (cmake --preset release)" >&2; exit 2; }
colls=${COLLS:-"allreduce allgather reducescatter alltoall"}
ranks=${RANKS:-"2 4 8"}
min=${MIN:-4096}
max=${MAX:-268435456}
# OpenMPI at its fair best here: shared memory only, and glibc told to keep
# freed memory (otherwise every large reduction pays first touch of a fresh
# temporary buffer: ~23 us per 4 KiB page on this machine).
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
mpirun=(mpirun --oversubscribe --mca btl self,vader -x GLIBC_TUNABLES -np)
[[ $(id -u) -eq 0 ]] && mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x GLIBC_TUNABLES -np)

echo "collective,ranks,size_bytes,chorus_oop_us,mpi_oop_us,oop_speedup,chorus_ip_us,mpi_ip_us,ip_speedup,chorus_oop_busbw,mpi_oop_busbw,chorus_ip_busbw,mpi_ip_busbw,chorus_oop_frac_memcpy,memcpy_gbs"
for n in $ranks; do
  for c in $colls; do
    size=$min
    while (( size <= max )); do
      iters=$(( 268435456 / size )); (( iters > 200 )) && iters=200; (( iters < 3 )) && iters=3
 ranksFlag=--ranks; [[ ${PROCS:-0} == 1 ]] && ranksFlag=--procs
      crow=$(GLIBC_TUNABLES= "$chorus" perf "$c" $ranksFlag "$n" -b "$size" -e "$size" -n "$iters" -w 5 --csv | tail -1 | sed 's/^\[0\] //')
      mrow=$("${mpirun[@]}" "$n" "$mpi" "$c" "$size" "$size" "$iters" 5 | tail -1)
      # Fields 1-7 of both: collective,ranks,size,count,type,redop,root. Then
      # chorus: 8 oop_us,9 algbw,10 busbw,11 frac,12 wrong,13 ip_us,14,15 busbw,16,17,18 memcpy;
      # mpi:    8 oop_us,9 algbw,10 busbw,11 ip_us,12 algbw,13 busbw.
      awk -F, -v c="$crow" 'BEGIN { split(c, a, ",") } {
        printf "%s,%s,%s,%.1f,%.1f,%.2f,%.1f,%.1f,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.2f\n",
          a[1], a[2], a[3], a[8], $8, $8 / a[8], a[13], $11, $11 / a[13],
          a[10], $10, a[15], $13, a[11], a[18] }' <<<"$mrow"
      size=$(( size * 4 ))
    done
  done
done
