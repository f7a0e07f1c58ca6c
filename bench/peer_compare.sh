#!/usr/bin/env bash
# Chorus against OpenMPI and Gloo, side by side on this machine, in one run.
# For every (ranks, collective, size) the three run in turn, REPS times
# (A B C A B C ...: this machine's speed drifts over minutes), and the
# median time of each is kept. All three run one process per rank: Chorus
# over shared memory (`chorus perf --procs`), OpenMPI over its shared memory
# (btl self,vader) at its fair best (below), Gloo over TCP on loopback (its
# only transport here, as PyTorch's CPU jobs run it). Out-of-place calls,
# float32 sum; broadcast from rank 0 (MPI_Bcast is in place by nature).
# Chorus's buffers come from chorusMemAlloc (peers read them in place; set
# CHORUS_PERF_FLAGS=--heap-buffers for heap buffers). COLLS may also name
# sendrecv (chorusSend/chorusRecv around a ring vs MPI_Sendrecv). Gloo's
# columns stay empty for reducescatter and sendrecv (not in gloo_perf).
#
# TRANSPORT=tcp compares the transports between hosts, on loopback: Chorus
# with CHORUS_TRANSPORT=tcp, OpenMPI with btl self,tcp, Gloo as always; and
# for sizes of 1 MiB and more, what the sockets themselves carry both ways
# at once (bench/tcp_stream's bidir, once per repetition, interleaved too):
# columns socket_gbs (per direction) and chorus_frac_socket = Chorus's busbw
# over it (issue 23 asks >= 0.8 for large messages).
#
# Prints CSV: times in us, busbw in GB/s (nccl-tests' formulas), the ratios
# vs_mpi = MPI time / Chorus time and vs_gloo = Gloo time / Chorus time
# (> 1: Chorus is faster), and Chorus's busbw as a fraction of the memcpy
# bandwidth `chorus perf` measured in the same row.
#   bench/peer_compare.sh [BUILD]          # build/release; 2/4/8 ranks; 4K..128M
#   RANKS="2" COLLS="allreduce" SIZES="4096 1048576" REPS=5 bench/peer_compare.sh
# Calls per run: 256 MiB worth, at most MAX_ITERS (20000) for Chorus and
# OpenMPI and at most 200 for Gloo (milliseconds per small call). Small
# calls need many: 4 processes on 2 cores hand the cores over in every call
# (about 2 us per switch here), and over 200 calls (1.4 ms) where the
# scheduler happened to put the processes decided the ratio. 4-process 4 KiB
# alltoall against OpenMPI (2026-11-30): 0.64 over 200 calls, 0.79 - 0.92
# over 50,000, 1.01 over 200,000 (6.59 and 6.68 us).
# Needs openmpi-bin + libopenmpi-dev and libgloo-dev (CMake builds
# bench/mpi_perf and bench/gloo_perf when it finds them); a missing peer's
# columns are empty.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
use_build "${1:-}"
gloo=$build/bench/gloo_perf
colls=${COLLS:-"allreduce allgather reducescatter alltoall broadcast"}
ranks=${RANKS:-"2 4 8"}
sizes=${SIZES:-"4096 16384 65536 262144 1048576 4194304 16777216 67108864 134217728"}
reps=${REPS:-3}
max_iters=${MAX_ITERS:-20000}
# OpenMPI at its fair best here: shared memory only, and glibc told to keep
# freed memory (otherwise every large reduction pays first touch of a fresh
# temporary buffer: ~23 us per 4 KiB page on this machine).
tunables=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
transport=${TRANSPORT:-shm}
case $transport in
  shm) btl=self,vader chorus_env=() ;;
  tcp) btl=self,tcp chorus_env=(CHORUS_TRANSPORT=tcp) ;;
  *) echo "TRANSPORT is shm or tcp, not $transport" >&2; exit 2 ;;
esac
stream=$build/bench/tcp_stream
mpirun_with --mca btl "$btl" -x GLIBC_TUNABLES


echo "collective,ranks,size_bytes,chorus_us,mpi_us,gloo_us,vs_mpi,vs_gloo,chorus_busbw,mpi_busbw,gloo_busbw,chorus_frac_memcpy,memcpy_gbs,socket_gbs,chorus_frac_socket"
for n in $ranks; do
  for c in $colls; do
    for size in $sizes; do
      iters=$(( 268435456 / size )); (( iters > max_iters )) && iters=$max_iters; (( iters < 3 )) && iters=3
      warm=$(( iters / 10 + 1 ))
      giters=$(( iters > 200 ? 200 : iters )) gwarm=$(( giters / 10 + 1 ))
      ct=() mt=() gt=() st=() crow=""
      for ((k = 0; k < reps; ++k)); do
        if [[ $transport == tcp && -x $stream ]] && ((size >= 1048576)); then
          st+=("$("$stream" 0.5 bidir | tail -1 | cut -d, -f4)")
        fi
        row=$(env "${chorus_env[@]}" "$chorus" perf "$c" --procs "$n" -b "$size" -e "$size" -n "$iters" -w "$warm" --csv \
                ${CHORUS_PERF_FLAGS:-} |
              tail -1 | sed 's/^\[0\] //')
        crow=$row
        ct+=("$(cut -d, -f8 <<<"$row")")
        if [[ -x $mpi ]]; then
          mt+=("$(GLIBC_TUNABLES=$tunables "${mpirun[@]}" -np "$n" "$mpi" "$c" "$size" "$size" \
                  "$iters" "$warm" | tail -1 | cut -d, -f8)")
        fi
        if [[ -x $gloo && $c != sendrecv && $c != reducescatter ]]; then  # not in gloo_perf
          gt+=("$("$chorus" launch -n "$n" -- "$gloo" "$c" "$size" "$size" "$giters" "$gwarm" |
                  tail -1 | sed 's/^\[0\] //' | cut -d, -f8)")
        fi
      done
      cmed=$(printf '%s\n' "${ct[@]}" | median)
      mmed=$( ((${#mt[@]})) && printf '%s\n' "${mt[@]}" | median || true)
      gmed=$( ((${#gt[@]})) && printf '%s\n' "${gt[@]}" | median || true)
      smed=$( ((${#st[@]})) && printf '%s\n' "${st[@]}" | median || true)
      # chorus CSV: 2 ranks, 3 size_bytes, 18 memcpy_gbs.
      awk -F, -v c="$c" -v cm="$cmed" -v mm="$mmed" -v gm="$gmed" -v sm="$smed" '{
        n = $2; bytes = $3; mem = $18
        f = (c == "allreduce") ? 2 * (n - 1) / n : (c == "sendrecv" || c == "broadcast") ? 1 : (n - 1) / n
        cb = bytes / cm / 1e3 * f
        mb = (mm != "") ? bytes / mm / 1e3 * f : ""
        gb = (gm != "") ? bytes / gm / 1e3 * f : ""
        printf "%s,%s,%s,%.1f,%s,%s,%s,%s,%.3f,%s,%s,%.3f,%.2f,%s,%s\n", c, n, bytes, cm,
          (mm != "") ? sprintf("%.1f", mm) : "", (gm != "") ? sprintf("%.1f", gm) : "",
          (mm != "") ? sprintf("%.2f", mm / cm) : "", (gm != "") ? sprintf("%.2f", gm / cm) : "",
          cb, (mb != "") ? sprintf("%.3f", mb) : "", (gb != "") ? sprintf("%.3f", gb) : "",
          cb / mem, mem, sm, (sm != "") ? sprintf("%.2f", cb / sm) : "" }' <<<"$crow"
    done
  done
done
